//! One CPE executor: an OS thread running coroutines from its runnable queue.
//!
//! Each executor has
//! * a [`RunQueue`] of coroutines ready to run (slot numbers),
//! * a [`TaskTable`]: every live coroutine, indexed by slot. The ones not
//!   on the run queue and not running are parked (a blocked coroutine
//!   stays in its slot; there is no separate wait queue); a wake finds its
//!   coroutine there by slot in O(1),
//! * an [`Inbox`](crate::inbox::Inbox) through which other threads hand it
//!   new coroutines and wakes,
//! * a timer heap for parked coroutines with a deadline,
//! * a [`StackPool`] of free coroutine stacks.
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

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Wake;
use std::time::Instant;

use crate::sync::Parker;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use crossbeam_deque::{Steal, Worker};

use crate::inbox::InboxQueue;
use crate::job::{Cancelled, Job, Start};
use crate::panic::report_escaped_panic;
use crate::queues::{RunQueue, TaskTable};
use crate::shared::{bump, ExecutorShared, RuntimeShared, StopMode};
use crate::stack::{self, StackPool};
use crate::task::{Suspend, Task, TaskHeader};

/// How long an executor with nothing to run watches its inbox before it
/// parks its thread.
const IDLE_GRACE: std::time::Duration = std::time::Duration::from_micros(20);

// The `Wake` impl of `TaskHeader` (task.rs) lives here, with the run queue
// it schedules onto.
impl Wake for TaskHeader {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    #[inline]
    fn wake_by_ref(self: &Arc<Self>) {
        if self.state.notify() {
            schedule(&self.home, self.slot);
        }
    }
}

/// Puts a woken coroutine on its home run queue: directly if we are on the
/// home executor thread (no lock, no allocation), else through its inbox.
fn schedule(home: &Arc<ExecutorShared>, slot: usize) {
    if let Some(local) = Local::current() {
        if std::ptr::eq(Arc::as_ptr(&local.shared), Arc::as_ptr(home)) {
            // Woken by its own executor: it runs next (depth-first hand-off);
            // whatever was next goes to the back of the queue.
            if let Some(previous) = local.run_next.replace(Some(slot)) {
                local.run_queue.borrow_mut().0.push_back(previous);
            }
            bump(&local.shared.counters.wakes, 1);
            return;
        }
    }
    home.inbox.push_wake(slot);
}

/// The executor's thread-confined state.
pub(crate) struct Local {
    pub(crate) shared: Arc<ExecutorShared>,
    pub(crate) runtime: Arc<RuntimeShared>,
    run_queue: RefCell<RunQueue>,
    tasks: RefCell<TaskTable>,
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
    /// Non-zero while code runs that must not suspend the coroutine (a panic
    /// hook): blocking there parks the OS thread instead.
    no_suspend: Cell<u32>,
    /// Whether a refused spawn (no stack) was already reported on stderr.
    refusal_reported: Cell<bool>,
    /// The slot to run before the run queue: a coroutine just woken by
    /// another coroutine of this executor (a depth-first hand-off).
    run_next: Cell<Option<usize>>,
    /// Runs taken from `run_next` in a row, bounded by [`RUN_NEXT_BUDGET`]
    /// so a ping-pong pair cannot starve the run queue.
    run_next_streak: Cell<u32>,
    /// Jobs spawned here by this executor's coroutines, not started yet:
    /// newest first (depth-first); idle executors steal the oldest.
    spawns: Worker<Job>,
    /// Jobs placed here from outside or pinned (`spawn_on`), not started
    /// yet: in arrival order, never stolen.
    placed: RefCell<VecDeque<Job>>,
    /// Scheduling decisions so far, for the periodic fairness checks.
    ticks: Cell<u32>,
    /// Mirror of `shared.idle` as this thread last set it.
    idle: Cell<bool>,
    /// When the stack pool next gives back the memory of stacks that sat
    /// unused since the last time (every [`stack::TRIM_PERIOD`]).
    next_trim: Cell<Instant>,
}

/// Hand-offs through `run_next` in a row before the run queue gets a turn.
const RUN_NEXT_BUDGET: u32 = 16;

/// Every this many scheduling decisions, jobs waiting to start are served
/// oldest first, before started coroutines and newer jobs.
const FAIRNESS_PERIOD: u32 = 61;

/// What the executor runs next.
enum Runnable {
    /// A started coroutine, by slot.
    Slot(usize),
    /// A job to start.
    Job(Job),
}

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

    /// Suspends the running coroutine. When it is resumed by a cancelling
    /// shutdown, this unwinds (with [`Cancelled`]) instead of returning.
    ///
    /// # Panics
    ///
    /// If the running coroutine may not suspend (see [`Local::can_suspend`]);
    /// callers check first.
    pub(crate) fn suspend(&self, why: Suspend) {
        assert!(self.can_suspend(), "swco: suspend outside a coroutine");
        let yielder = self.yielder.get();
        // SAFETY: `yielder` is the running coroutine's Yielder: set when the
        // coroutine started (or restored before resuming it), it lives on
        // that coroutine's stack, which is the stack we are on now; and we
        // are on that stack, not on a foreign one (`no_suspend` is zero:
        // `on_executor_stack` is only entered with it raised).
        unsafe { (*yielder).suspend(why) };
        self.raise_cancel();
    }

    /// Raises [`Cancelled`] in the running coroutine if a cancelling shutdown
    /// wants it gone and it has not been dealt with yet.
    ///
    /// Not while the coroutine is already unwinding (a `Drop` that blocks
    /// during a panic): a second panic there would abort the process. The
    /// panic count is per thread, so `thread::panicking` may also be true
    /// because *another* coroutine of this executor is parked mid-unwind;
    /// then this coroutine is left to run and tried again later
    /// ([`Local::kick_cancel`]).
    fn raise_cancel(&self) {
        if !self.cancelling.get() || std::thread::panicking() {
            return;
        }
        let Some(header) = self.running_header() else {
            return;
        };
        // Relaxed: only this thread touches the flag.
        if !header.cancel_raised.swap(true, Ordering::Relaxed) {
            std::panic::resume_unwind(Box::new(Cancelled));
        }
    }

    /// Runs `f` with suspension forbidden: a channel operation or join that
    /// blocks inside parks the OS thread, as on a plain thread.
    pub(crate) fn without_suspending<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Allow<'a>(&'a Cell<u32>);
        impl Drop for Allow<'_> {
            fn drop(&mut self) {
                self.0.set(self.0.get() - 1);
            }
        }
        self.no_suspend.set(self.no_suspend.get() + 1);
        let _allow = Allow(&self.no_suspend);
        f()
    }

    /// Runs `f` on the executor thread's own stack (the one that resumed the
    /// running coroutine), then returns to the coroutine.
    pub(crate) fn on_executor_stack(&self, f: impl FnOnce()) {
        let yielder = self.yielder.get();
        if yielder.is_null() {
            return f();
        }
        /// corosensei asks for `Send` so a Yielder reference cannot reach
        /// another thread; `on_parent_stack` switches stacks, not threads.
        struct SameThread<F>(F);
        // SAFETY: the closure runs on this very OS thread (only the stack
        // changes) and carries no reference to the Yielder.
        unsafe impl<F> Send for SameThread<F> {}
        let f = SameThread(f);
        // SAFETY: as in `suspend`: a non-null yielder is the running
        // coroutine's, alive on the stack we are on.
        unsafe { &*yielder }.on_parent_stack(move || {
            let f = f;
            (f.0)()
        });
    }

    /// Queues `job`, which holds no stack until it first runs. A stealable
    /// job (placed by [`Placement::Local`](crate::Placement::Local)) joins
    /// the local spawns: the newest starts first (depth-first), and idle
    /// executors may steal the oldest. Others (pinned, or placed by another
    /// policy) start in arrival order, here.
    pub(crate) fn start(&self, job: Job) {
        if !job.stealable() {
            return self.placed.borrow_mut().push_back(job);
        }
        self.spawns.push(job);
        // More than the one we are about to run next: worth an idle hand.
        if self.spawns.len() > 1 {
            self.runtime.offer_work(self.shared.index);
        }
    }

    /// Gives `job` a stack and a coroutine, and runs it.
    fn launch(&self, job: Job) {
        let counted_on = job.counted_on();
        if counted_on != self.shared.index {
            // A stolen job: its count moves here as it starts. Relaxed,
            // both: the victim cannot exit before this (its count still
            // includes the job), and we are running, not exiting.
            self.shared.live.fetch_add(1, Ordering::Relaxed);
            self.runtime.executor_shared()[counted_on]
                .live
                .fetch_sub(1, Ordering::Relaxed);
        }
        let taken = self.pool.borrow_mut().take();
        let stack = match taken {
            Ok((stack, fresh)) => {
                bump(&self.shared.counters.stacks_mapped, u64::from(fresh));
                stack
            }
            Err(e) => {
                // Out of address space or memory: refuse this coroutine, but
                // keep the executor up. Its join handle says why; stderr says
                // it once per executor, for coroutines nobody joins.
                let why = format!(
                    "executor swco-cpe-{} cannot map a coroutine stack of {} bytes: {e}",
                    self.shared.index,
                    self.pool.borrow().stack_size()
                );
                if !self.refusal_reported.replace(true) {
                    eprintln!("swco: {why}; such spawns are refused (JoinError::is_refused)");
                }
                // The job catches whatever its closure's `Drop` does; it runs
                // here, on the executor's stack, where blocking parks the
                // thread.
                job.run(Start::Refuse(why));
                bump(&self.shared.counters.spawned, 1);
                self.finished_one();
                return;
            }
        };
        let slot = self.tasks.borrow_mut().reserve();
        let header = Arc::new(TaskHeader::new(slot, self.shared.clone()));
        let guard = stack::guard_low(&stack);
        let co = Coroutine::with_stack(stack, move |yielder: &Yielder<(), Suspend>, ()| {
            let mut start = Start::Run;
            if let Some(local) = Local::current() {
                local.yielder.set(yielder);
                if local.cancelling.get() {
                    // Cancelled before it ever ran: only drop the closure.
                    if let Some(header) = local.running_header() {
                        // Relaxed: only this thread touches the flag.
                        header.cancel_raised.store(true, Ordering::Relaxed);
                    }
                    start = Start::Cancel;
                }
            }
            // The job catches its closure's panics and those of the `Drop`s
            // it runs. This is the last line: nothing may unwind out of a
            // coroutine into the executor loop, or the executor dies.
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| job.run(start))) {
                report_escaped_panic(payload);
            }
            // A cancellation that a rendezvous receive put off, in a
            // coroutine that then finished without suspending: nothing is
            // left to cancel, and it must not go on in the next coroutine.
            swco_channel::hook::discard_deferred_unwind();
        });
        self.tasks.borrow_mut().put(
            slot,
            Box::new(Task {
                co,
                header,
                yielder: std::ptr::null(),
                guard,
                timer_seq: 0,
            }),
        );
        bump(&self.shared.counters.spawned, 1);
        self.run_task(slot);
    }

    /// The header of the coroutine being resumed, if any.
    pub(crate) fn running_header(&self) -> Option<&Arc<TaskHeader>> {
        // SAFETY: a non-null `running` points at the header of the task being
        // resumed, alive in its wait-queue slot for the whole resume.
        unsafe { self.running.get().as_ref() }
    }

    /// Takes whatever other threads handed over. The common case, nothing
    /// pending, is one relaxed load, inlined into the run loop.
    #[inline]
    fn drain_inbox(&self) {
        if self.shared.inbox.is_pending() {
            self.drain_inbox_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn drain_inbox_slow(&self) {
        let mut spare = self.spare.borrow_mut();
        if !self.shared.inbox.drain_into(&mut spare) {
            return;
        }
        if !spare.wakes.is_empty() {
            bump(&self.shared.counters.wakes, spare.wakes.len() as u64);
            self.run_queue.borrow_mut().0.extend(spare.wakes.drain(..));
        }
        let mut jobs = std::mem::take(&mut spare.spawns);
        drop(spare);
        for job in jobs.drain(..) {
            self.start(job);
        }
        // Hand the (empty, still allocated) buffer back for the next swap.
        self.spare.borrow_mut().spawns = jobs;
    }

    /// Every [`stack::TRIM_PERIOD`], gives back the memory of the free
    /// stacks that nobody used during the whole period (see `stack/slab.rs`).
    fn trim_stacks_if_due(&self) {
        let now = Instant::now();
        if now < self.next_trim.get() {
            return;
        }
        self.next_trim.set(now + stack::TRIM_PERIOD);
        let released = self.pool.borrow_mut().trim();
        bump(&self.shared.counters.stacks_released, released as u64);
    }

    fn fire_timers(&self) {
        let mut timers = self.timers.borrow_mut();
        if timers.is_empty() {
            return;
        }
        let mut table = self.tasks.borrow_mut();
        // Entries of coroutines woken before their deadline stay in the heap
        // (no removal from the middle of a heap); drop them in bulk once
        // they are the majority, so frequent timed waits with long timeouts
        // do not grow the heap without bound.
        let stale = self.stale_timers.get();
        if stale > 64 && stale * 2 > timers.len() {
            timers.retain(|Reverse((_, seq, slot))| {
                table.get(*slot).is_some_and(|t| t.timer_seq == *seq)
            });
            self.stale_timers.set(0);
        }
        let now = Instant::now();
        while let Some(&Reverse((deadline, seq, slot))) = timers.peek() {
            if deadline > now {
                break;
            }
            timers.pop();
            match table.get_mut(slot) {
                Some(task) if task.timer_seq == seq => {
                    task.timer_seq = 0;
                    if task.header.state.expire() {
                        self.run_queue.borrow_mut().0.push_back(slot);
                        bump(&self.shared.counters.wakes, 1);
                    }
                }
                _ => self
                    .stale_timers
                    .set(self.stale_timers.get().saturating_sub(1)),
            }
        }
    }

    fn run_task(&self, slot: usize) {
        let ptr = self.tasks.borrow().ptr(slot);
        if ptr.is_null() {
            debug_assert!(false, "run queue named an empty slot");
            return;
        }
        // SAFETY: a non-null slot points at a live task owned by the wait
        // queue. It stays in its slot, alive and unaliased, until this
        // function takes it out below: only the executor loop (this thread,
        // between resumes) reaches a task through its slot, and code run by
        // the resume touches other slots only (see `TaskTable`).
        let task = unsafe { &mut *ptr };
        if task.timer_seq != 0 {
            // Woken before its deadline: its heap entry is now stale.
            task.timer_seq = 0;
            self.stale_timers.set(self.stale_timers.get() + 1);
        }
        self.running.set(&task.header);
        self.yielder.set(task.yielder);
        stack::set_running_guard(task.guard);
        bump(&self.shared.counters.switches, 1);
        let result = task.co.resume(());
        stack::set_running_guard(0);
        task.yielder = self.yielder.replace(std::ptr::null());
        self.running.set(std::ptr::null());
        match result {
            CoroutineResult::Yield(Suspend::Yield) => {
                self.run_queue.borrow_mut().0.push_back(slot);
            }
            CoroutineResult::Yield(Suspend::Park(deadline)) => {
                bump(&self.shared.counters.blocks, 1);
                if let Some(d) = deadline {
                    let seq = self.next_timer_seq.get() + 1;
                    self.next_timer_seq.set(seq);
                    self.timers.borrow_mut().push(Reverse((d, seq, slot)));
                    task.timer_seq = seq;
                }
            }
            CoroutineResult::Return(()) => {
                let task = self.tasks.borrow_mut().take(slot);
                let Some(task) = task else {
                    unreachable!("the finished task left its slot")
                };
                let stack = task.co.into_stack();
                self.pool.borrow_mut().give_back(stack);
                self.tasks.borrow_mut().release(slot);
                self.finished_one();
            }
        }
    }

    fn finished_one(&self) {
        self.finished_while_cancelling.set(true);
        bump(&self.shared.counters.finished, 1);
        // Relaxed: a load figure for placement and reports; the runtime-wide
        // count below is what shutdown synchronises on.
        self.shared.live.fetch_sub(1, Ordering::Relaxed);
        self.runtime.finished_one();
    }

    fn run(&self, parker: &Parker) {
        let mut since_timers = 0u32;
        loop {
            self.drain_inbox();
            // A cancelling shutdown takes effect before the next resume, not
            // after the run queue drains: coroutines that keep yielding are
            // unwound at their next suspension, ones not started yet never
            // run. Relaxed first look (the common case, no shutdown, is one
            // load of a line nobody writes); Acquire pairs with
            // request_stop's Release.
            if self.shared.stop_mode(Ordering::Relaxed) == StopMode::Cancel
                && !self.cancelling.get()
                && self.shared.stop_mode(Ordering::Acquire) == StopMode::Cancel
            {
                self.cancelling.set(true);
                self.kick_cancel();
            }
            if self.idle.get() {
                self.set_idle(false);
            }
            // Timers are checked when idle, and every 64 runs so a busy
            // executor does not starve a timed-out waiter.
            let mut next = None;
            if since_timers < 64 {
                next = self.next_runnable();
            }
            if next.is_none() {
                since_timers = 0;
                self.fire_timers();
                self.trim_stacks_if_due();
                next = self.next_runnable().or_else(|| self.steal());
            }
            if let Some(runnable) = next {
                match runnable {
                    Runnable::Slot(slot) => self.run_task(slot),
                    Runnable::Job(job) => self.launch(job),
                }
                since_timers += 1;
                continue;
            }
            // Nothing runnable: other executors may offer us work.
            self.set_idle(true);
            // Acquire: pairs with request_stop's Release.
            match self.shared.stop_mode(Ordering::Acquire) {
                StopMode::Stop | StopMode::Cancel
                    if self.shared.live.load(Ordering::Relaxed) == 0 =>
                {
                    // SeqCst (both): the Dekker pair with `submit`'s `live`
                    // increment and `exited` load: either the spawner sees
                    // us gone and places its job elsewhere, or we see its
                    // job and stay.
                    self.shared.exited.store(true, Ordering::SeqCst);
                    if self.shared.live.load(Ordering::SeqCst) != 0 {
                        self.shared.exited.store(false, Ordering::SeqCst);
                        continue;
                    }
                    self.set_idle(false);
                    return;
                }
                // Coroutines left are parked in a `Drop` that blocks during
                // their unwinding (they run it to the end when woken), or
                // were passed over by `raise_cancel`: try those again once
                // something has finished.
                StopMode::Cancel if self.finished_while_cancelling.get() => {
                    self.kick_cancel();
                    continue;
                }
                StopMode::Run | StopMode::Stop | StopMode::Cancel => {}
            }
            // A short grace period before parking. Waking a parked thread
            // costs tens of microseconds on an idle virtual machine (its vCPU
            // has halted), while a peer on another executor often answers
            // within a few. The grace is bounded and short, so on a busy
            // machine it costs at most that much of the core per idle spell.
            // Then the inbox's sleep protocol: one CAS marks it `SLEEPING`
            // unless a push came in since the last look (then drain, not
            // park), and the push that clears the mark unparks us (see
            // `inbox.rs`).
            if self.idle_grace() {
                continue;
            }
            let mut earliest = self.timers.borrow().peek().map(|Reverse((d, _, _))| *d);
            if self.pool.borrow().holds_spare_memory() {
                // Wake up for the next trim: an idle executor gives its
                // unused stacks' memory back too.
                let trim = self.next_trim.get();
                earliest = Some(earliest.map_or(trim, |t| t.min(trim)));
            }
            if self.shared.inbox.park(parker, earliest) {
                bump(&self.shared.counters.parks, 1);
            }
        }
    }

    /// Whether this executor has nothing to run but the running coroutine:
    /// no hand-off, no job, no runnable coroutine, nothing in the inbox. A
    /// hint (another executor may push to the inbox right after).
    pub(crate) fn nothing_else_to_run(&self) -> bool {
        self.run_next.get().is_none()
            && self.run_queue.borrow().0.is_empty()
            && self.spawns.is_empty()
            && self.placed.borrow().is_empty()
            && !self.shared.inbox.is_pending()
    }

    /// The next coroutine to resume or job to start, in this order: the
    /// `run_next` hand-off (within its budget); jobs waiting to start —
    /// the newest local spawn first, so a tree of coroutines unfolds
    /// depth-first, then placed jobs in arrival order; then started
    /// coroutines, in FIFO order. Every [`FAIRNESS_PERIOD`] decisions the
    /// oldest of each goes first instead, so neither a stream of spawns nor
    /// coroutines that keep yielding starve the rest.
    fn next_runnable(&self) -> Option<Runnable> {
        let tick = self.ticks.get().wrapping_add(1);
        self.ticks.set(tick);
        if tick % FAIRNESS_PERIOD == 0 {
            if let Some(slot) = self.run_queue.borrow_mut().0.pop_front() {
                return Some(Runnable::Slot(slot));
            }
            if let Some(job) = self.placed.borrow_mut().pop_front() {
                return Some(Runnable::Job(job));
            }
            if let Some(job) = self.shared.stealer.steal().success() {
                return Some(Runnable::Job(job));
            }
        }
        if let Some(slot) = self.run_next.take() {
            let streak = self.run_next_streak.get();
            if streak < RUN_NEXT_BUDGET {
                self.run_next_streak.set(streak + 1);
                return Some(Runnable::Slot(slot));
            }
            self.run_queue.borrow_mut().0.push_back(slot);
        }
        self.run_next_streak.set(0);
        if let Some(job) = self.spawns.pop() {
            return Some(Runnable::Job(job));
        }
        if let Some(job) = self.placed.borrow_mut().pop_front() {
            return Some(Runnable::Job(job));
        }
        self.run_queue
            .borrow_mut()
            .0
            .pop_front()
            .map(Runnable::Slot)
    }

    /// Takes unstarted jobs from another executor's local spawns (a batch,
    /// oldest first), starting from the next executor round. Started
    /// coroutines never move: only jobs that hold no stack yet do.
    fn steal(&self) -> Option<Runnable> {
        let all = self.runtime.executor_shared();
        let n = all.len();
        for k in 1..n {
            let victim = &all[(self.shared.index + k) % n];
            let job = loop {
                match victim.stealer.steal_batch_and_pop(&self.spawns) {
                    Steal::Success(job) => break Some(job),
                    Steal::Empty => break None,
                    Steal::Retry => std::hint::spin_loop(),
                }
            };
            if let Some(job) = job {
                // The `live` counts move job by job, in `launch`: counting
                // the batch here raced with thieves of our own deque.
                return Some(Runnable::Job(job));
            }
        }
        None
    }

    /// Publishes whether this executor has nothing to run.
    fn set_idle(&self, idle: bool) {
        self.idle.set(idle);
        // Relaxed: a hint for `offer_work`; see `ExecutorShared::idle`.
        self.shared.idle.store(idle, Ordering::Relaxed);
    }

    /// Cancelling shutdown: makes every parked coroutine not yet cancelled
    /// runnable, winning its `WAITING -> RUNNING` transition like a wake (so
    /// no waker can schedule it a second time); it unwinds when resumed
    /// (`raise_cancel`). Coroutines already runnable unwind when they run;
    /// ones not yet started only drop their closure.
    fn kick_cancel(&self) {
        self.finished_while_cancelling.set(false);
        let table = self.tasks.borrow();
        let mut run_queue = self.run_queue.borrow_mut();
        for slot in 0..table.slot_count() {
            let Some(task) = table.get(slot) else {
                continue;
            };
            // Relaxed: only this thread touches the flag.
            if !task.header.cancel_raised.load(Ordering::Relaxed) && task.header.state.expire() {
                run_queue.0.push_back(slot);
                bump(&self.shared.counters.wakes, 1);
            }
        }
    }

    /// Watches the inbox for up to [`IDLE_GRACE`]; `true` if something
    /// arrived.
    fn idle_grace(&self) -> bool {
        let start = Instant::now();
        loop {
            for _ in 0..64 {
                if self.shared.inbox.is_pending() {
                    return true;
                }
                std::hint::spin_loop();
            }
            if start.elapsed() >= IDLE_GRACE {
                return self.shared.inbox.is_pending();
            }
        }
    }

    /// The executor is exiting: nothing is live here any more. A task still
    /// in the task table would be a bookkeeping bug; it is leaked rather
    /// than dropped, because dropping a suspended corosensei coroutine
    /// unwinds it from outside, where a blocking `Drop` cannot suspend.
    fn leak_leftovers(&self) {
        let mut table = self.tasks.borrow_mut();
        while let Some(task) = table.take_any() {
            eprintln!(
                "swco: executor swco-cpe-{} exits with a live coroutine; it is leaked",
                self.shared.index
            );
            std::mem::forget(task);
        }
        self.run_queue.borrow_mut().0.clear();
        self.run_next.set(None);
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
        no_suspend: Cell::new(0),
        refusal_reported: Cell::new(false),
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
        idle: Cell::new(false),
        next_trim: Cell::new(Instant::now() + stack::TRIM_PERIOD),
    };
    CURRENT.with(|c| c.set(&local));
    let park = install_park(&local);
    local.run(&parker);
    local.leak_leftovers();
    drop(park);
    CURRENT.with(|c| c.set(std::ptr::null()));
}
