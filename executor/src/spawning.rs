//! The spawn path: where a new coroutine goes ([`RuntimeShared::place`], by
//! the [`Placement`] policy) and how its job gets there
//! ([`RuntimeShared::submit`]: straight onto the local queue when spawned
//! on its own executor, else through the target's inbox).
//!
//! # Invariants
//!
//! * A spawn increments `live` *before* checking `closed` (both `SeqCst`):
//!   the spawn side of the shutdown invariant stated in `runtime/mod.rs`.
//! * Coroutines spawned from inside a coroutine are accepted even while
//!   closing: their parent is live, so shutdown is still waiting.
//! * A job is never handed to an executor that has exited: the spawner's
//!   `live` increment and `exited` load pair with the exiting executor's
//!   (see `ExecutorShared::exited`).

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::SpawnError;
use crate::executor::Local;
use crate::inbox::SpawnNode;
use crate::job::{Job, Launch, Start};
use crate::join::join_error;
use crate::join::{CancelFlag, HoldsSlot, JoinError, JoinHandle, JoinSlot, SpawnInfo};
use crate::panic::{drop_closure, drop_payload};
use crate::placement::Placement;
use crate::shared::RuntimeShared;
use crate::task::TaskHeader;

/// What a spawn says beyond its closure: where it was called, and a
/// builder's name and stack size. A plain spawn's are a pointer and two
/// zeros: no allocation.
pub(crate) struct SpawnOptions {
    pub(crate) at: &'static Location<'static>,
    pub(crate) name: Option<Box<str>>,
    /// Usable stack bytes; 0 for the runtime's size.
    pub(crate) stack_size: usize,
}

impl SpawnOptions {
    /// A plain spawn called at `at`.
    pub(crate) fn at(at: &'static Location<'static>) -> Self {
        SpawnOptions {
            at,
            name: None,
            stack_size: 0,
        }
    }
}

impl RuntimeShared {
    /// The executor for a spawn placed by policy, and whether the job may be
    /// stolen (a local spawn under [`Placement::Local`]).
    pub(crate) fn place(&self) -> (usize, bool) {
        let n = self.executors.len();
        match self.placement {
            Placement::Local => match Local::current() {
                Some(l) if std::ptr::eq(l.runtime.as_ref(), self) && l.in_coroutine() => {
                    (l.shared.index, true)
                }
                _ => (self.home_of_this_thread(), true),
            },
            // Relaxed: only distinctness of turns matters, not ordering.
            Placement::RoundRobin => (self.next.fetch_add(1, Ordering::Relaxed) % n, false),
            Placement::LeastLoaded => {
                let mut best = 0;
                let mut best_load = usize::MAX;
                for (i, e) in self.executors.iter().enumerate() {
                    // Relaxed: a load estimate; staleness only skews balance.
                    let load = e.live.load(Ordering::Relaxed);
                    if load < best_load {
                        best = i;
                        best_load = load;
                        if load == 0 {
                            break;
                        }
                    }
                }
                (best, false)
            }
        }
    }

    /// The executor a plain thread spawns onto under [`Placement::Local`]:
    /// chosen round-robin at the thread's first spawn on this runtime, then
    /// kept, so that the coroutines a thread spawns share an executor (their
    /// hand-offs are local, as Go's goroutines spawned from one P are)
    /// until idle executors steal some.
    fn home_of_this_thread(&self) -> usize {
        thread_local! {
            /// (runtime, executor) of the last runtime this thread spawned on.
            static HOME: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
        }
        let me = self as *const RuntimeShared as usize;
        HOME.with(|home| {
            let (runtime, cpe) = home.get();
            // (A runtime freed and another built at its address may have
            // fewer executors.)
            if runtime == me && cpe < self.executors.len() {
                return cpe;
            }
            // Relaxed: only distinctness of turns matters, not ordering.
            let cpe = self.next.fetch_add(1, Ordering::Relaxed) % self.executors.len();
            home.set((me, cpe));
            cpe
        })
    }

    /// A new coroutine id, unique in this runtime.
    pub(crate) fn next_id(&self) -> u64 {
        // Relaxed: only distinctness matters, not ordering.
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The first of `n` new coroutine ids, unique in this runtime: `n`
    /// consecutive ids from it are ours.
    pub(crate) fn next_ids(&self, n: usize) -> u64 {
        // Relaxed: as in `next_id`.
        self.next_id.fetch_add(n as u64, Ordering::Relaxed)
    }

    /// A handle on a coroutine that was never run because the runtime is
    /// shut down (for the spawns that report that through the handle).
    pub(crate) fn refused_handle<T: Send + 'static>(&self, options: SpawnOptions) -> JoinHandle<T> {
        let (completer, handle) = JoinSlot::pair_with(SpawnInfo {
            id: self.next_id(),
            at: options.at,
            name: options.name,
            stack_size: options.stack_size,
        });
        completer.complete(Err(JoinError::shut_down()));
        handle
    }

    /// Spawns `f` on executor `cpe`. `from_coroutine` spawns are accepted
    /// while closing (see the module invariants).
    pub(crate) fn submit<F, T>(
        &self,
        cpe: usize,
        f: F,
        from_coroutine: bool,
        stealable: bool,
        options: SpawnOptions,
    ) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let cpe = self.admit(cpe, from_coroutine)?;
        let custom_stack = options.stack_size != 0;
        let spawned = Arc::new(Spawned {
            node: SpawnNode::new(),
            slot: JoinSlot::new(SpawnInfo {
                id: self.next_id(),
                at: options.at,
                name: options.name,
                stack_size: options.stack_size,
            }),
            f: UnsafeCell::new(Some(f)),
        });
        let handle = JoinHandle::new(spawned.clone());
        let body: Arc<dyn Launch> = spawned;
        self.hand_over(cpe, Job::new(body, stealable, custom_stack, cpe));
        Ok(handle.with_cpe(cpe))
    }

    /// Counts a new coroutine for executor `cpe` (in the runtime's and the
    /// executor's `live`) and returns the executor its job must go to:
    /// `cpe`, or the spawning coroutine's own executor if `cpe` has exited
    /// (a cancelling shutdown let it go). `from_coroutine` spawns are
    /// accepted while closing (see the module invariants). The caller
    /// hands the job over with [`hand_over`](Self::hand_over).
    pub(crate) fn admit(&self, cpe: usize, from_coroutine: bool) -> Result<usize, SpawnError> {
        let Some(mut exec) = self.executors.get(cpe) else {
            return Err(SpawnError::OutOfRange {
                cpe,
                executors: self.executors.len(),
            });
        };
        let mut cpe = cpe;
        // SeqCst (both): the Dekker pair with shutdown's closed/live.
        self.live.fetch_add(1, Ordering::SeqCst);
        if !from_coroutine && self.closed.load(Ordering::SeqCst) {
            self.finished_one();
            return Err(SpawnError::ShutDown);
        }
        // SeqCst: the Dekker pair with an exiting executor's `exited` store
        // and `live` load (see `ExecutorShared::exited`).
        exec.live.fetch_add(1, Ordering::SeqCst);
        if exec.exited.load(Ordering::SeqCst) {
            // A cancelling shutdown let that executor go. Only a coroutine
            // can still spawn then (`closed` refuses the others); its own
            // executor is alive, since it runs the spawner, and starts the
            // job as cancelled.
            // Relaxed: a load estimate, as below.
            exec.live.fetch_sub(1, Ordering::Relaxed);
            let own = Local::current()
                .filter(|l| std::ptr::eq(l.runtime.as_ref(), self) && l.in_coroutine());
            let Some(own) = own else {
                self.finished_one();
                return Err(SpawnError::ShutDown);
            };
            exec = &self.executors[own.shared.index];
            cpe = own.shared.index;
            // Relaxed: a load estimate for placement and reports.
            exec.live.fetch_add(1, Ordering::Relaxed);
        }
        Ok(cpe)
    }

    /// Hands `job`, counted on executor `cpe` by [`admit`](Self::admit),
    /// to that executor: straight onto its queue when called on it, else
    /// through its inbox.
    pub(crate) fn hand_over(&self, cpe: usize, job: Job) {
        match Local::current() {
            // Same executor, from inside it: no inbox, no lock.
            Some(local)
                if local.shared.index == cpe && std::ptr::eq(local.runtime.as_ref(), self) =>
            {
                local.start(job)
            }
            _ => self.executors[cpe].push_spawn(job),
        }
    }
}

/// A spawned coroutine's one allocation: its join slot (with what the
/// spawn said about it), and its closure until the executor takes it. The
/// join handle holds it as the slot (as `dyn HoldsSlot`), the job as the
/// body (as `dyn Launch`).
struct Spawned<F, T> {
    /// The job's cell in an inbox, when it is handed to another executor.
    node: SpawnNode<Job>,
    slot: JoinSlot<T>,
    /// Taken once, by [`Launch::launch`]; only the job reaches it.
    f: UnsafeCell<Option<F>>,
}

// SAFETY: `f` is touched only by `launch`, which runs at most once (its
// contract) on whichever thread owns the job, and by `Drop`, which has the
// allocation to itself; `node` is `Sync` itself (and used only by the
// job's owner and the inbox drain); a shared reference elsewhere (the join
// handle's) reaches only `slot`, which is `Sync` itself. So `F` needs only
// `Send`.
unsafe impl<F: Send, T: Send> Sync for Spawned<F, T> {}

impl<F, T> HoldsSlot<T> for Spawned<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn slot(&self) -> &JoinSlot<T> {
        &self.slot
    }
}

impl<F, T> Spawned<F, T> {
    /// Registers the running coroutine's waker in the join slot, for a
    /// cancel to wake; `false` if a cancel came first.
    fn start_running(&self) -> bool {
        let runner: *const std::task::Waker = Local::current()
            .and_then(Local::running_header)
            .and_then(|h| h.lent.as_deref())
            .map_or(std::ptr::null(), |w| w);
        // SAFETY: the lent waker lives in the coroutine's task header, which
        // outlives the coroutine's run, and so its completion of the slot
        // (at the end of `launch`, on the coroutine).
        unsafe { self.slot.start_running(runner) }
    }
}

impl<F, T> Launch for Spawned<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn spawn_node(&self, _member: u32) -> NonNull<SpawnNode<Job>> {
        NonNull::from(&self.node)
    }

    fn info(&self, _member: u32) -> &SpawnInfo {
        self.slot.info()
    }

    unsafe fn launch(self: Arc<Self>, _member: u32, start: Start) {
        // SAFETY: launched at most once (the trait's contract), and nothing
        // else reaches `f` while the allocation is shared (see the `Sync`
        // impl), so this is the one access to the cell.
        let Some(f) = (unsafe { (*self.f.get()).take() }) else {
            return;
        };
        let result = match start {
            Start::Run if self.start_running() => {
                let _shown = ShownInfo::show(self.slot.info(), Some(self.slot.cancel_flag()));
                catch_unwind(AssertUnwindSafe(f)).map_err(join_error)
            }
            // Cancelled through its handle before it started: as a
            // cancelling shutdown would, drop the closure only, and never
            // raise `Cancelled` in a `Drop` that blocks.
            Start::Run | Start::Cancel => {
                if let Some(h) = Local::current().and_then(Local::running_header) {
                    // Relaxed: only the home executor thread touches it.
                    h.cancel_raised.store(true, Ordering::Relaxed);
                }
                drop_closure(f);
                Err(JoinError::cancelled())
            }
            Start::Refuse(why) => {
                drop_closure(f);
                Err(JoinError::refused(why))
            }
        };
        // If the handle is gone (detached), the last reference is ours and
        // dropping it drops the result here: its `Drop` must not take the
        // executor down.
        if let Err(payload) = catch_unwind(AssertUnwindSafe(move || {
            self.slot.complete(result);
            drop(self);
        })) {
            eprintln!(
                "swco: dropping a detached coroutine's result panicked; the executor carries on"
            );
            drop_payload(payload);
        }
    }
}

/// Shows a coroutine's [`SpawnInfo`] (and its cancel flag, if it has a
/// join handle to cancel it through) in its task header (for
/// `current_name`) while its closure runs: set when made, cleared when
/// dropped, both inside the launch that holds the allocation the info lies
/// in, so the header never points at freed memory.
pub(crate) struct ShownInfo {
    /// The running coroutine's header; `None` off a coroutine.
    header: Option<&'static TaskHeader>,
}

impl ShownInfo {
    pub(crate) fn show(info: &SpawnInfo, cancel: Option<&CancelFlag>) -> Self {
        // The header lives (in its task, behind an `Arc`) until the
        // coroutine has returned, after this launch; the `'static` is the
        // executor's `Local`'s (see `Local::current`).
        let header = Local::current()
            .and_then(Local::running_header)
            .map(|h| &**h);
        if let Some(h) = header {
            // Relaxed: only the home executor thread reads it.
            h.info
                .store((info as *const SpawnInfo).cast_mut(), Ordering::Relaxed);
            let flag: *const CancelFlag = cancel.map_or(std::ptr::null(), |c| c);
            h.cancel.store(flag.cast_mut(), Ordering::Relaxed);
        }
        ShownInfo { header }
    }
}

impl Drop for ShownInfo {
    fn drop(&mut self) {
        if let Some(h) = self.header {
            // Relaxed: as above.
            h.info.store(std::ptr::null_mut(), Ordering::Relaxed);
            h.cancel.store(std::ptr::null_mut(), Ordering::Relaxed);
        }
    }
}
