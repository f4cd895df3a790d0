//! One CPE executor: an OS thread running coroutines from its runnable queue.
//!
//! Each executor has
//! * a [`RunQueue`] of coroutines ready to run (slot numbers), and a
//!   `run_next` slot before it for depth-first hand-offs (`schedule.rs`),
//! * a [`TaskTable`]: every live coroutine, indexed by slot. The ones not
//!   on the run queue and not running are parked (a blocked coroutine
//!   stays in its slot; there is no separate wait queue); a wake finds its
//!   coroutine there by slot in O(1),
//! * an [`Inbox`](crate::inbox::Inbox) through which other threads hand it
//!   new coroutines and wakes,
//! * a timer heap for parked coroutines with a deadline (`timers.rs`),
//! * a [`StackPool`] of free coroutine stacks.
//!
//! The executor's thread-confined state, [`Local`], is defined here; its
//! behaviour is split by concern:
//!
//! | file | what it does |
//! |---|---|
//! | `lifecycle.rs` | a coroutine's life: queued as a job, given a stack and started, resumed, suspended, finished |
//! | `schedule.rs` | what runs next: local and remote wakes, the `run_next` hand-off and its budget, fairness, stealing |
//! | `timers.rs` | deadlines of parked coroutines |
//! | `run_loop.rs` | the loop itself: draining, running, idling, parking, stopping and cancelling |
//! | `recording.rs` | the trace hooks, when the runtime records a trace (`trace.rs`) |
//!
//! # Invariants
//!
//! * A slot is on the run queue at most once: it is pushed only by a yield, by
//!   a spawn, or by whoever wins the `WAITING -> RUNNING` transition of its
//!   [`WakeState`](crate::wake::WakeState) (see `wake.rs`), and each of
//!   those happens once per suspension.
//! * The executor loop holds no `RefCell` borrow while a coroutine runs, so
//!   code inside a coroutine (spawn, local wakes) can borrow the queues.
//! * `CURRENT` points at this thread's [`Local`] for exactly as long as the
//!   executor runs; `Local::running` points at the running task's header (and
//!   `Local::yielder` at its yielder) only while that task is resumed.
//! * An executor parks only after it has seen its inbox empty; a hand-off
//!   is never slept through (the protocol and its proof obligations are in
//!   `inbox.rs`).
//! * No migration: a started coroutine is resumed and dropped only here;
//!   only jobs that hold no stack yet move between executors (stealing).

mod lifecycle;
mod recording;
mod run_loop;
mod schedule;
mod timers;

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use crate::sync::Parker;
use corosensei::Yielder;
use crossbeam_deque::Worker;

use crate::dump::{self, DumpSite, ExecutorPart};
use crate::inbox::InboxQueue;
use crate::job::Job;
use crate::panic_hook::PanicSite;
use crate::park::ParkSite;
use crate::queues::{RunQueue, TaskTable};
use crate::shared::{ExecutorShared, RuntimeShared};
use crate::stack::{self, StackPool};
use crate::task::{Suspend, TaskHeader};

/// The executor's thread-confined state.
pub(crate) struct Local {
    pub(crate) shared: Arc<ExecutorShared>,
    pub(crate) runtime: Arc<RuntimeShared>,
    run_queue: RefCell<RunQueue>,
    pub(crate) tasks: RefCell<TaskTable>,
    timers: RefCell<BinaryHeap<Reverse<(Instant, u64, usize)>>>,
    next_timer_seq: Cell<u64>,
    /// Heap entries whose coroutine was woken before the deadline.
    stale_timers: Cell<usize>,
    pool: RefCell<StackPool>,
    /// Drained inbox buffers, kept to swap with the inbox's (no allocation).
    spare: RefCell<InboxQueue<Job>>,
    /// The running task's header, or null.
    running: Cell<*const Arc<TaskHeader>>,
    /// The running task's yielder, or null.
    yielder: Cell<*const Yielder<(), Suspend>>,
    /// Set once a cancelling shutdown reached this executor: every coroutine
    /// still here is unwound at its next resumption.
    cancelling: Cell<bool>,
    /// Coroutines that finished since the last [`Local::kick_cancel`].
    finished_while_cancelling: Cell<bool>,
    /// Coroutines whose cancel through their join handle `raise_cancel`
    /// passed over because the thread was panicking: woken again once it
    /// is not (`Local::retry_cancels`).
    cancel_retry: RefCell<Vec<Arc<TaskHeader>>>,
    /// `cancel_retry` is not empty: the one flag each resume tests.
    cancel_retry_pending: Cell<bool>,
    /// Non-zero while code runs that must not suspend the coroutine (a panic
    /// hook): blocking there parks the OS thread instead.
    no_suspend: Cell<u32>,
    /// Whether a refused spawn (no stack) was already reported on stderr.
    refusal_reported: Cell<bool>,
    /// The slot to run before the run queue: a coroutine just woken by
    /// another coroutine of this executor (a depth-first hand-off).
    run_next: Cell<Option<usize>>,
    /// Runs taken from `run_next` in a row, bounded by [`RUN_NEXT_BUDGET`](schedule::RUN_NEXT_BUDGET)
    /// so a ping-pong pair cannot starve the run queue.
    run_next_streak: Cell<u32>,
    /// Jobs spawned here by this executor's coroutines, not started yet:
    /// newest first (depth-first); idle executors steal the oldest.
    pub(crate) spawns: Worker<Job>,
    /// Jobs placed here from outside or pinned (`spawn_on`), not started
    /// yet: in arrival order, never stolen.
    pub(crate) placed: RefCell<VecDeque<Job>>,
    /// Scheduling decisions so far, for the periodic fairness checks.
    ticks: Cell<u32>,
    /// Set while a coroutine runs inside another's park (a direct
    /// hand-off, `Local::park_running`): that one must not hand off again.
    /// Always set while tracing: no direct hand-offs then.
    nested: Cell<bool>,
    /// Headers of finished coroutines that nothing else referenced, kept
    /// for the next ones (at most [`SPARE_HEADERS`]): a spawn then
    /// allocates no header and moves no count on `shared`.
    spare_headers: RefCell<Vec<Arc<TaskHeader>>>,
    /// Mirror of `shared.idle` as this thread last set it.
    idle: Cell<bool>,
    /// The progress this executor watches over a stall (it was the last
    /// to go idle), and since when: kept across the parks of one stall.
    watch: Cell<Option<(u64, Instant)>>,
    /// When the stack pool next gives back the memory of stacks that sat
    /// unused since the last time (every [`stack::TRIM_PERIOD`]).
    next_trim: Cell<Instant>,
    /// This executor's trace recording, if the runtime records one
    /// (`trace.rs`): with tracing off, the hooks test this and nothing else.
    pub(crate) trace: Option<Box<crate::trace::Recorder>>,
    /// `trace.is_some()`, tested by the hooks: a byte compared in place
    /// costs one instruction less than loading and testing the pointer.
    tracing: bool,
}

/// How many finished coroutines' headers an executor keeps for reuse.
const SPARE_HEADERS: usize = 256;

thread_local! {
    static CURRENT: Cell<*const Local> = const { Cell::new(std::ptr::null()) };
}

impl Local {
    /// This thread's executor, if it is an executor thread.
    #[inline]
    pub(crate) fn current() -> Option<&'static Local> {
        let ptr = CURRENT.with(Cell::get);
        // SAFETY: CURRENT is non-null only while `run_executor` is running on
        // this thread, with the Local alive in its frame; it is reset before
        // that Local is dropped, and all code that can observe the reference
        // (coroutines, wakers called on this thread) runs inside that window.
        // The 'static is wider than the truth, but the reference never leaves
        // this thread and every use of it (the executor loop, coroutines,
        // wakers and hooks running on this thread) ends before the Local is
        // dropped: coroutines are finished or unwound first.
        unsafe { ptr.as_ref() }
    }

    /// Whether a coroutine of this executor is running on this thread.
    #[inline]
    pub(crate) fn in_coroutine(&self) -> bool {
        !self.running.get().is_null()
    }

    /// Whether a coroutine of this executor is running and may suspend
    /// (it is not inside a panic hook).
    #[inline]
    pub(crate) fn can_suspend(&self) -> bool {
        self.in_coroutine() && self.no_suspend.get() == 0
    }

    /// The header of the coroutine being resumed, if any.
    pub(crate) fn running_header(&self) -> Option<&Arc<TaskHeader>> {
        // SAFETY: a non-null `running` points at the header of the task being
        // resumed, alive in its wait-queue slot for the whole resume.
        unsafe { self.running.get().as_ref() }
    }
}

/// The park hook's view of the executor (`park.rs`): each call goes to the
/// method of the same name, directly (the hook is generic over it).
impl ParkSite for Local {
    #[inline]
    fn can_suspend(&self) -> bool {
        Local::can_suspend(self)
    }

    #[inline]
    fn running_header(&self) -> Option<&Arc<TaskHeader>> {
        Local::running_header(self)
    }

    #[inline]
    fn park_running(&self) {
        Local::park_running(self);
    }

    #[inline]
    fn suspend(&self, why: Suspend) {
        Local::suspend(self, why);
    }

    #[inline]
    fn raise_cancel(&self) {
        Local::raise_cancel(self);
    }

    #[inline]
    fn nothing_else_to_run(&self) -> bool {
        Local::nothing_else_to_run(self)
    }
}

/// The panic hook's view of the executor (`panic_hook.rs`).
impl PanicSite for Local {
    fn current_in_coroutine() -> Option<&'static Local> {
        Local::current().filter(|l| l.in_coroutine())
    }

    fn without_suspending(&self, f: impl FnOnce()) {
        Local::without_suspending(self, f);
    }

    fn on_executor_stack(&self, f: impl FnOnce()) {
        Local::on_executor_stack(self, f);
    }
}

/// The dump's view of the executor (`dump.rs`): its index, and its part
/// read off its task table and queues.
impl DumpSite for Local {
    fn index(&self) -> usize {
        self.shared.index
    }

    fn dump_part(&self) -> ExecutorPart {
        dump::executor_part(
            &self.shared,
            &self.tasks.borrow(),
            self.placed.borrow().iter(),
            self.spawns.len(),
        )
    }
}

/// Body of executor thread `shared.index`.
///
/// `install_park` installs this thread's park hook for the `Local` (see
/// `park.rs`) once `CURRENT` points at it; dropping what it returns
/// uninstalls the hook, before `CURRENT` is reset and the `Local` dropped.
pub(crate) fn run_executor<H>(
    shared: Arc<ExecutorShared>,
    runtime: Arc<RuntimeShared>,
    parker: Parker,
    stacks: stack::StackConfig,
    install_park: impl FnOnce(&Local) -> H,
) {
    let _alt_stack = stack::prepare_thread(shared.index, stacks.size());
    let trace = runtime.trace.as_ref().map(|t| t.recorder(shared.index));
    let local = Local {
        shared: shared.clone(),
        runtime,
        run_queue: RefCell::default(),
        tasks: RefCell::default(),
        timers: RefCell::default(),
        next_timer_seq: Cell::new(0),
        stale_timers: Cell::new(0),
        pool: RefCell::new(StackPool::new(stacks)),
        spare: RefCell::default(),
        running: Cell::new(std::ptr::null()),
        yielder: Cell::new(std::ptr::null()),
        cancelling: Cell::new(false),
        finished_while_cancelling: Cell::new(false),
        cancel_retry: RefCell::new(Vec::new()),
        cancel_retry_pending: Cell::new(false),
        no_suspend: Cell::new(0),
        refusal_reported: Cell::new(false),
        spare_headers: RefCell::new(Vec::new()),
        run_next: Cell::new(None),
        run_next_streak: Cell::new(0),
        spawns: shared
            .worker
            .lock()
            .unwrap()
            .take()
            .expect("an executor's deque is taken once"),
        placed: RefCell::default(),
        ticks: Cell::new(0),
        // While tracing there are no direct hand-offs, as if every run
        // were nested: runs start and end in the loop, where the trace
        // hook is, and a hand-off's run needs no hook of its own.
        nested: Cell::new(trace.is_some()),
        tracing: trace.is_some(),
        idle: Cell::new(false),
        next_trim: Cell::new(Instant::now() + stack::TRIM_PERIOD),
        watch: Cell::new(None),
        trace,
    };
    CURRENT.with(|c| c.set(&local));
    let park = install_park(&local);
    local.run(&parker);
    local.hand_in_trace();
    local.leak_leftovers();
    drop(park);
    CURRENT.with(|c| c.set(std::ptr::null()));
}
