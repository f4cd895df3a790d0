//! A dump of a runtime's live coroutines ([`Runtime::dump`]): who they
//! are, where they run, what they wait on and how much stack they used.
//!
//! # How it is taken
//!
//! Only an executor may read its task table, and only between the
//! coroutines it runs (no migration, no lock). So a dump is a request to
//! every executor, delivered like a spawn through its inbox (a
//! [`DumpRequest`] job, which the executor serves in its loop instead of
//! starting a coroutine) and answered by a message on a channel. A busy
//! executor answers at its next pass through the loop; a parked one is
//! woken for it and parks again. No executor stops for longer than it takes
//! to write its own part, and none waits for another. An executor that does
//! not answer within [`ANSWER_PATIENCE`] (a coroutine on it runs without
//! ever suspending) is named in the dump instead.
//!
//! What each part says of a coroutine is read from its task on its own
//! executor thread, while it is suspended: its spawn info (id, name, site),
//! whether it is parked (its wake state), what its last park said it waits
//! on (`TaskHeader::waiting`), and its stack's high-water mark (`mincore` over its
//! stack: see `high_water` in `stack/size.rs`).
//!
//! The dump sees an executor only as a [`DumpSite`] (its index and its
//! part); the executor's `Local` implements it, handing
//! [`executor_part`] the pieces of itself a part is read from.
//!
//! [`Runtime::dump`]: crate::Runtime::dump

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use swco_channel::mpsc;
use swco_wait::hook::{Op, WaitingOn};

use crate::inbox::SpawnNode;
use crate::job::{Job, Launch, Start};
use crate::join::SpawnInfo;
use crate::queues::TaskTable;
use crate::shared::{ExecutorShared, RuntimeShared};

/// How long a dump waits for the executors' answers.
pub(crate) const ANSWER_PATIENCE: Duration = Duration::from_secs(1);

/// What a coroutine is doing, as a dump saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CoroutineState {
    /// Ready to run (it yielded, or was woken), or running.
    Runnable,
    /// Parked, waiting to be woken (see [`CoroutineDump::waiting_on`]).
    Parked,
    /// Parked, and also woken at a deadline (a timed operation, a sleep).
    ParkedUntilDeadline,
    /// Spawned, and not started yet.
    NotStarted,
}

impl fmt::Display for CoroutineState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CoroutineState::Runnable => "runnable",
            CoroutineState::Parked => "parked",
            CoroutineState::ParkedUntilDeadline => "parked with a deadline",
            CoroutineState::NotStarted => "not started",
        })
    }
}

/// One coroutine in a [`RuntimeDump`].
#[derive(Debug, Clone)]
pub struct CoroutineDump {
    id: u64,
    name: Option<Arc<str>>,
    cpe: usize,
    state: CoroutineState,
    waiting_on: Arc<str>,
    spawned_at: Arc<str>,
    stack_high_water: usize,
}

impl CoroutineDump {
    /// Its id (as [`JoinHandle::id`](crate::JoinHandle::id)).
    #[must_use]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The name its spawn gave it, if any.
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The executor it lives on.
    #[must_use]
    pub fn cpe(&self) -> usize {
        self.cpe
    }

    /// What it is doing.
    #[must_use]
    pub fn state(&self) -> CoroutineState {
        self.state
    }

    /// What it waits on, if parked (empty otherwise): the operation
    /// (`send`, `recv`, `select`, `join`, `sleep`…) and, for a channel, its
    /// mode, protocol, capacity and where it was made, as in
    /// `recv on mpmc channel (cas, capacity 0) made at src/main.rs:7`.
    #[must_use]
    pub fn waiting_on(&self) -> &str {
        &self.waiting_on
    }

    /// Where it was spawned, as `file:line`.
    #[must_use]
    pub fn spawned_at(&self) -> &str {
        &self.spawned_at
    }

    /// How deep its stack has been used, in bytes, at page granularity
    /// (0 if not started). A stack reused from its executor's pool counts
    /// the pages its earlier coroutines touched too, so this is an upper
    /// bound for the coroutine itself.
    #[must_use]
    pub fn stack_high_water(&self) -> usize {
        self.stack_high_water
    }
}

impl fmt::Display for CoroutineDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.id)?;
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        write!(f, " [{}", self.state)?;
        if !self.waiting_on.is_empty() {
            write!(f, ": {}", self.waiting_on)?;
        }
        write!(f, "] spawned at {}", self.spawned_at)?;
        if self.stack_high_water > 0 {
            write!(
                f,
                ", stack {} KiB used",
                self.stack_high_water.div_ceil(1024)
            )?;
        }
        Ok(())
    }
}

/// A snapshot of a runtime's live coroutines, from [`Runtime::dump`]:
/// one entry per coroutine, and a [`Display`](fmt::Display) that prints
/// one line per coroutine, grouped by executor, like a Go goroutine dump.
///
/// [`Runtime::dump`]: crate::Runtime::dump
#[derive(Debug, Clone)]
pub struct RuntimeDump {
    coroutines: Vec<CoroutineDump>,
    executors: usize,
    /// Executors that did not answer in time.
    unanswered: Vec<usize>,
    /// Unstarted coroutines that could only be counted, by executor.
    uncounted: Vec<(usize, usize)>,
    took: Duration,
}

impl RuntimeDump {
    /// The coroutines, by executor, then by id.
    #[must_use]
    pub fn coroutines(&self) -> &[CoroutineDump] {
        &self.coroutines
    }

    /// The deepest stack use among them, in bytes.
    #[must_use]
    pub fn max_stack_high_water(&self) -> usize {
        self.coroutines
            .iter()
            .map(|c| c.stack_high_water)
            .max()
            .unwrap_or(0)
    }

    /// Executors that did not answer within a second (a coroutine on each
    /// runs without suspending); their coroutines are missing.
    #[must_use]
    pub fn unanswered(&self) -> &[usize] {
        &self.unanswered
    }

    /// How long taking the dump took.
    #[must_use]
    pub fn took(&self) -> Duration {
        self.took
    }
}

impl fmt::Display for RuntimeDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let uncounted: usize = self.uncounted.iter().map(|&(_, n)| n).sum();
        writeln!(
            f,
            "swco runtime: {} on {} (dump taken in {:?})",
            count(self.coroutines.len() + uncounted, "live coroutine"),
            count(self.executors, "executor"),
            self.took
        )?;
        let mut rest = &self.coroutines[..];
        for cpe in 0..self.executors {
            let here = rest.iter().take_while(|c| c.cpe == cpe).count();
            let (mine, after) = rest.split_at(here);
            rest = after;
            let extra = self
                .uncounted
                .iter()
                .find(|&&(e, _)| e == cpe)
                .map_or(0, |&(_, n)| n);
            if self.unanswered.contains(&cpe) {
                writeln!(
                    f,
                    "\nexecutor {cpe} (swco-cpe-{cpe}): did not answer within {ANSWER_PATIENCE:?} \
                     (a coroutine there runs without suspending)"
                )?;
                continue;
            }
            if mine.is_empty() && extra == 0 {
                continue;
            }
            writeln!(
                f,
                "\nexecutor {cpe} (swco-cpe-{cpe}): {}",
                count(mine.len() + extra, "coroutine")
            )?;
            for c in mine {
                writeln!(f, "  {c}")?;
            }
            if extra > 0 {
                writeln!(f, "  and {extra} spawned here, not started yet")?;
            }
        }
        Ok(())
    }
}

/// `n` and `what`, plural unless `n` is 1.
pub(crate) fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// One executor's answer.
pub(crate) struct ExecutorPart {
    cpe: usize,
    coroutines: Vec<CoroutineDump>,
    /// Unstarted jobs it could only count (its local spawn deque).
    uncounted: usize,
}

/// The executor as a dump sees it (the executor's `Local` implements it).
pub(crate) trait DumpSite: 'static {
    /// Its index.
    fn index(&self) -> usize;
    /// Its part of a dump (see [`executor_part`]). Called by the executor
    /// loop between coroutines (no task is running, every one is
    /// suspended in its slot).
    fn dump_part(&self) -> ExecutorPart;
}

/// Executor `shared`'s part of a dump: every task in its table `tasks`,
/// the jobs `placed` there, and a count of the `unstarted` ones it can
/// only count (its local spawn deque). Called by the executor loop between
/// coroutines, with no task running.
pub(crate) fn executor_part<'a>(
    shared: &ExecutorShared,
    tasks: &TaskTable,
    placed: impl Iterator<Item = &'a Job>,
    unstarted: usize,
) -> ExecutorPart {
    let cpe = shared.index;
    let mut coroutines = Vec::new();
    let mut stacks = Vec::new();
    // Many coroutines share a descriptor (they wait on one channel) and
    // a spawn site: each is formatted once.
    let mut texts = Texts::default();
    for slot in 0..tasks.slot_count() {
        let Some(task) = tasks.get(slot) else {
            continue;
        };
        let header = &task.header;
        // Relaxed: only this thread writes it.
        let info = header.info.load(Ordering::Relaxed);
        // SAFETY: a non-null `info` points into the job body of this
        // suspended coroutine, which its launch holds (and clears the
        // pointer before letting go, `ShownInfo`), on this thread.
        let info = unsafe { info.as_ref() };
        let (state, waiting_on) = if header.state.is_waiting() {
            let state = if task.timer_seq != 0 {
                CoroutineState::ParkedUntilDeadline
            } else {
                CoroutineState::Parked
            };
            // SAFETY: parked, on its executor thread, between
            // resumes (we are the executor loop).
            (state, texts.waiting(unsafe { header.waiting.get() }))
        } else {
            (CoroutineState::Runnable, texts.empty.clone())
        };
        stacks.push((task.guard + crate::stack::page_size(), header.parked.top()));
        coroutines.push(CoroutineDump {
            id: info.map_or(0, |i| i.id),
            name: info.and_then(|i| i.name.as_deref().map(Arc::from)),
            cpe,
            state,
            waiting_on,
            spawned_at: info.map_or_else(|| Arc::from("?"), |i| texts.site(i)),
            stack_high_water: 0,
        });
    }
    let mut marks = vec![0; stacks.len()];
    crate::stack::high_waters(&stacks, &mut marks);
    for (c, mark) in coroutines.iter_mut().zip(marks) {
        c.stack_high_water = mark;
    }
    for job in placed {
        if let Some(info) = job.info() {
            coroutines.push(not_started(info, cpe, &mut texts));
        }
    }
    coroutines.sort_unstable_by_key(|c| c.id);
    let deepest = coroutines.iter().map(|c| c.stack_high_water).max();
    crate::shared::raise(
        &shared.counters.stack_high_water,
        deepest.unwrap_or(0) as u64,
    );
    ExecutorPart {
        cpe,
        coroutines,
        uncounted: unstarted,
    }
}

/// Texts a dump part formats once and shares among its coroutines.
#[derive(Default)]
struct Texts {
    empty: Arc<str>,
    /// By descriptor (its data and table addresses).
    waiting: HashMap<(usize, Op), Arc<str>>,
    /// By spawn site.
    sites: HashMap<usize, Arc<str>>,
}

impl Texts {
    fn waiting(&mut self, on: WaitingOn<'_>) -> Arc<str> {
        self.waiting
            .entry(on.identity())
            .or_insert_with(|| Arc::from(on.to_string()))
            .clone()
    }

    fn site(&mut self, info: &SpawnInfo) -> Arc<str> {
        let key = info.at as *const std::panic::Location<'static> as usize;
        self.sites
            .entry(key)
            .or_insert_with(|| Arc::from(info.site()))
            .clone()
    }
}

fn not_started(info: &SpawnInfo, cpe: usize, texts: &mut Texts) -> CoroutineDump {
    CoroutineDump {
        id: info.id,
        name: info.name.as_deref().map(Arc::from),
        cpe,
        state: CoroutineState::NotStarted,
        waiting_on: texts.empty.clone(),
        spawned_at: texts.site(info),
        stack_high_water: 0,
    }
}

/// A request for one executor's part of a dump, travelling through its
/// inbox as a job (in one allocation with its inbox node, like a spawn).
///
/// `E` is the executor type it is served by (`Local`), which the request
/// finds behind the `&dyn Any` the loop serves it with.
pub(crate) struct DumpRequest<E> {
    node: SpawnNode<Job>,
    info: SpawnInfo,
    reply: mpsc::Sender<ExecutorPart>,
    /// Holds no `E`: only names the type to look for.
    site: PhantomData<fn(&E)>,
}

// SAFETY: `node` is `Sync` itself and used only by the job's owner and the
// inbox drain; `info` is read-only; the sender is `Sync` (many producers);
// `site` holds nothing.
unsafe impl<E> Sync for DumpRequest<E> {}

impl<E: DumpSite> Launch for DumpRequest<E> {
    fn spawn_node(&self, _member: u32) -> NonNull<SpawnNode<Job>> {
        NonNull::from(&self.node)
    }

    fn info(&self, _member: u32) -> &SpawnInfo {
        &self.info
    }

    /// Never started as a coroutine; dropped unserved (its executor gone),
    /// it answers nothing, and the dump names the executor.
    unsafe fn launch(self: Arc<Self>, _member: u32, _start: Start) {}

    fn serve(&self, executor: &dyn std::any::Any) {
        let Some(local) = executor.downcast_ref::<E>() else {
            debug_assert!(false, "a dump request served by something not an executor");
            return;
        };
        // Never blocks: the channel has room for every executor's answer,
        // and a dump that gave up waiting is simply gone.
        let _ = self.reply.try_send(local.dump_part());
    }
}

impl RuntimeShared {
    /// Takes a dump. `own`: the executor loop taking it (a stall report),
    /// which writes its own part instead of asking itself.
    /// `E` is the executor type (`Local`), which serves the requests.
    pub(crate) fn dump<E: DumpSite>(&self, own: Option<&E>) -> RuntimeDump {
        let start = Instant::now();
        let n = self.executors.len();
        let (reply, answers) = mpsc::bounded::<ExecutorPart>(n);
        let mut parts: Vec<Option<ExecutorPart>> = (0..n).map(|_| None).collect();
        let mut asked = 0;
        for e in &self.executors {
            if own.is_some_and(|l| l.index() == e.index) {
                continue;
            }
            // SeqCst: as a spawn's check (`submit`); a request to an
            // executor that left would never be served.
            if e.exited.load(Ordering::SeqCst) {
                continue;
            }
            let request: Arc<dyn Launch> = Arc::new(DumpRequest::<E> {
                node: SpawnNode::new(),
                info: SpawnInfo::runtime(),
                reply: reply.clone(),
                site: PhantomData,
            });
            e.push_spawn(Job::request(request, e.index));
            asked += 1;
        }
        drop(reply);
        if let Some(local) = own {
            let part = local.dump_part();
            let cpe = part.cpe;
            parts[cpe] = Some(part);
        }
        let deadline = start + ANSWER_PATIENCE;
        for _ in 0..asked {
            let left = deadline.saturating_duration_since(Instant::now());
            match answers.recv_timeout(left) {
                Ok(part) => {
                    let cpe = part.cpe;
                    parts[cpe] = Some(part);
                }
                Err(_) => break,
            }
        }
        let mut coroutines = Vec::new();
        let mut unanswered = Vec::new();
        let mut uncounted = Vec::new();
        for (cpe, part) in parts.into_iter().enumerate() {
            match part {
                Some(part) => {
                    coroutines.extend(part.coroutines);
                    if part.uncounted > 0 {
                        uncounted.push((cpe, part.uncounted));
                    }
                }
                // An executor that exited has nothing live.
                None if self.executors[cpe].exited.load(Ordering::SeqCst) => {}
                None => unanswered.push(cpe),
            }
        }
        RuntimeDump {
            coroutines,
            executors: n,
            unanswered,
            uncounted,
            took: start.elapsed(),
        }
    }
}
