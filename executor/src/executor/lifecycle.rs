//! A coroutine's life on its executor: queued as a [`Job`] that holds no
//! stack ([`Local::start`]), given a stack and a coroutine when it first
//! runs ([`Local::launch`]), resumed ([`Local::run_task`]), suspended
//! ([`Local::suspend`]), and finished, its stack back in the pool.
//!
//! # Invariants
//!
//! * A job gets a stack only when it first runs; a job that cannot get one
//!   is refused through its join handle, never dropped silently.
//! * A task leaves its slot only when its coroutine has returned; its
//!   stack then goes back to the pool and its slot is released, once.
//! * A finished coroutine's header is reused for a new coroutine of the
//!   same executor only if nothing else references it (`Arc::get_mut`): no
//!   waker kept by a channel, no inbox link, no task.
//! * A coroutine suspends only through its own yielder, on its own stack,
//!   and only when it may (`no_suspend` is zero).
//! * A coroutine is resumed by the executor loop, or by a direct hand-off
//!   from inside the park of another coroutine of this executor
//!   (`Local::park_running`), one level deep at most (`nested`); either
//!   way it runs on its own stack, and `running`, `yielder` and the guard
//!   page are its own while it runs and the parked one's again after.
//! * A cancelling shutdown, or a cancel through the join handle, raises
//!   [`Cancelled`] in a coroutine at most once, and never while it is
//!   already unwinding.
//! * Nothing unwinds out of a coroutine into the executor loop: the job
//!   catches its closure's panics, and the coroutine body catches the rest.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Waker;

use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::Local;
use crate::job::{Job, Start};
use crate::panic::{report_escaped_panic, Cancelled};
use crate::shared::{bump, StopMode};
use crate::stack;
use crate::task::{Suspend, Task, TaskHeader};

/// The stack [`Local::on_executor_stack`] gives `f` when the executor's own
/// is not the running coroutine's parent.
const HOOK_STACK: usize = 1 << 20;

impl Local {
    /// Suspends the running coroutine. When it is resumed by a cancelling
    /// shutdown, this unwinds (with [`Cancelled`]) instead of returning.
    ///
    /// # Panics
    ///
    /// If the running coroutine may not suspend (see [`Local::can_suspend`]);
    /// callers check first.
    #[inline(always)]
    pub(crate) fn suspend(&self, why: Suspend) {
        assert!(self.can_suspend(), "swco: suspend outside a coroutine");
        let yielder = self.yielder.get();
        if matches!(why, Suspend::Park(_)) {
            self.record_park();
        }
        // SAFETY: `yielder` is the running coroutine's Yielder: set when the
        // coroutine started (or restored before resuming it), it lives on
        // that coroutine's stack, which is the stack we are on now; and we
        // are on that stack, not on a foreign one (`no_suspend` is zero:
        // `on_executor_stack` is only entered with it raised).
        unsafe { (*yielder).suspend(why) };
        self.raise_cancel();
    }

    /// Yields the running coroutine to the others of this executor. When
    /// there are none, a trip through the executor loop would resume it
    /// straight away: two stack switches for nothing. That is the common
    /// case of a lock held across a yield (the holder's peers are all
    /// parked on the lock), so it returns at once instead, after the same
    /// looks the loop would have made: no hand-off, job, runnable coroutine
    /// or inbox entry, no cancelling shutdown, no timer due, not tracing
    /// (a traced run records every resume). A cancel through the join
    /// handle is raised here as at any suspension.
    pub(crate) fn yield_running(&self) {
        if self.nothing_else_to_run()
            && !self.tracing
            && !self.cancel_retry_pending.get()
            && self.shared.stop_mode(Ordering::Relaxed) != StopMode::Cancel
            && self
                .earliest_deadline()
                .map_or(true, |due| due > std::time::Instant::now())
        {
            self.raise_cancel();
            return;
        }
        self.suspend_yield();
    }

    /// The suspension of [`yield_running`](Self::yield_running), out of
    /// line: the common return at once then saves no registers for it.
    #[inline(never)]
    fn suspend_yield(&self) {
        self.suspend(Suspend::Yield);
    }

    /// Parks the running coroutine, which has just moved to `WAITING`
    /// (`WakeState::prepare_park`), with no deadline. If the coroutine it
    /// woke last waits in `run_next`, that one runs first, right here, on
    /// top of this coroutine's stack (a direct hand-off: one switch, no
    /// pass through the executor loop); if it then woke this one back, this
    /// one goes on without suspending. If it woke another instead, that one
    /// runs here next, and so on while the loop would take each next
    /// anyway (`take_hand_off`: within the `run_next` budget, so the loop
    /// still comes round for timers and fairness): a chain of hand-offs,
    /// each woken coroutine parking after it wakes the next (a contended
    /// lock), costs one switch in and one back per link, where suspending
    /// here would add a pass through the loop every other link. Otherwise
    /// it suspends as usual.
    pub(crate) fn park_running(&self) {
        let me = self.running_header().map(|h| h.slot);
        while let Some(slot) = self.take_hand_off() {
            self.run_nested(slot);
            if me.is_some() && self.run_next.get() == me {
                // Woken by a coroutine of this executor while the other
                // ran: it put us in `run_next`, where the loop would have
                // found us next.
                self.run_next.set(None);
                self.run_next_streak.set(self.run_next_streak.get() + 1);
                // It blocked, was woken, and is resumed as surely as if it
                // had suspended: counted as such, so that `wakes == blocks`
                // and every block ends in a resumption.
                let counters = &self.shared.counters;
                bump(&counters.blocks, 1);
                bump(&counters.switches, 1);
                bump(&counters.hand_offs, 1);
                // A shutdown's cancellation cannot have started (only the
                // executor loop starts one), but a cancel through the join
                // handle may have come with the wake.
                self.raise_cancel();
                return;
            }
        }
        self.suspend(Suspend::Park(None));
    }

    /// Notes where and when the running coroutine parks, for the prefetch
    /// of its wake (`ParkedAt`).
    #[inline(always)]
    fn record_park(&self) {
        if let Some(header) = self.running_header() {
            // The address of a local: about where the frames a resumption
            // returns through begin.
            let here = 0u8;
            let sp = std::hint::black_box(std::ptr::addr_of!(here)) as usize;
            header.parked.record(sp, self.ticks.get());
        }
    }

    /// Runs the coroutine in `slot` from inside the running one's park,
    /// then makes the running one current again.
    fn run_nested(&self, slot: usize) {
        /// Puts the parked coroutine's context back, however the nested
        /// run ends.
        struct Restore<'a> {
            local: &'a Local,
            running: *const Arc<TaskHeader>,
            yielder: *const Yielder<(), Suspend>,
            guard: usize,
        }
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                self.local.nested.set(false);
                stack::set_running_guard(self.guard);
                self.local.yielder.set(self.yielder);
                self.local.running.set(self.running);
            }
        }
        let _restore = Restore {
            local: self,
            running: self.running.get(),
            yielder: self.yielder.get(),
            guard: stack::running_guard_low(),
        };
        self.nested.set(true);
        bump(&self.shared.counters.hand_offs, 1);
        // Never while tracing (see `Local::nested`): no trace to record.
        self.run_task_with::<false>(slot);
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
    ///
    /// The same goes for a coroutine whose cancellation was requested
    /// through its join handle ([`TaskHeader::cancel_requested`]); every
    /// return from a park calls this, suspended or not (`park.rs`), so the
    /// wake that follows the request is never slept through. One passed
    /// over because the thread is panicking (another coroutine of this
    /// executor is parked mid-unwind, or this one is) is woken again once
    /// the thread is not ([`Local::retry_cancels`]).
    #[inline(always)]
    pub(crate) fn raise_cancel(&self) {
        // The common case, nothing to cancel, inline: it is on every
        // return from a park.
        if self.cancelling.get() || self.running_header().is_some_and(|h| h.cancel_requested()) {
            self.raise_cancel_now();
        }
    }

    /// [`raise_cancel`](Self::raise_cancel), once a cancellation is wanted.
    #[cold]
    #[inline(never)]
    fn raise_cancel_now(&self) {
        let Some(header) = self.running_header() else {
            return;
        };
        if std::thread::panicking() {
            // Relaxed: only this thread touches the flag.
            if !self.cancelling.get() && !header.cancel_raised.load(Ordering::Relaxed) {
                // Nobody else would wake it for its cancel: the shutdown's
                // `kick_cancel` only runs under a shutdown.
                let mut retry = self.cancel_retry.borrow_mut();
                if !retry.iter().any(|h| Arc::ptr_eq(h, header)) {
                    retry.push(header.clone());
                }
                self.cancel_retry_pending.set(true);
            }
            return;
        }
        // Relaxed: only this thread touches the flag.
        if !header.cancel_raised.swap(true, Ordering::Relaxed) {
            std::panic::resume_unwind(Box::new(Cancelled));
        }
    }

    /// Wakes the coroutines `raise_cancel` passed over while the thread was
    /// panicking, once it is not: back here, between resumes, only a
    /// coroutine parked mid-unwind keeps it panicking. A waker's wake, so
    /// only the winner of `WAITING -> RUNNING` schedules; one that is
    /// already runnable finds `NOTIFIED` at its next park and raises there.
    #[inline(always)]
    fn retry_cancels(&self) {
        // One flag in the common case (nothing to retry).
        if !self.cancel_retry_pending.get() || std::thread::panicking() {
            return;
        }
        self.cancel_retry_pending.set(false);
        let retry = std::mem::take(&mut *self.cancel_retry.borrow_mut());
        for header in retry {
            Waker::from(header).wake();
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

    /// Runs `f` off the running coroutine's stack, on the executor thread's
    /// own (or, for a coroutine resumed by a direct hand-off, on a fresh
    /// stack of [`HOOK_STACK`] bytes), then returns to the coroutine.
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
        if self.nested.get() {
            // Resumed by a direct hand-off, this coroutine's parent is the
            // parked coroutine's stack, no larger than its own: `f` gets a
            // stack of its own instead (this is a rare path: a panic hook
            // with little stack left). No coroutine's guard page is then
            // in play.
            if let Ok(own) = corosensei::stack::DefaultStack::new(HOOK_STACK) {
                let guard = stack::running_guard_low();
                stack::set_running_guard(0);
                corosensei::on_stack(own, move || {
                    let f = f;
                    (f.0)()
                });
                stack::set_running_guard(guard);
                return;
            }
        }
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
        self.trace_spawn(&job);
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
    pub(super) fn launch(&self, job: Job) {
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
        let wanted = job.stack_size();
        let taken = self.pool.borrow_mut().take_at_least(wanted);
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
                    wanted.unwrap_or_else(|| self.pool.borrow().stack_size())
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
        self.trace_launch(slot, &job);
        let top = corosensei::stack::Stack::base(&stack).get();
        let header = self.header_for(slot, top, job.body_addr());
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
            swco_wait::hook::discard_deferred_unwind();
        });
        self.tasks.borrow_mut().put(
            slot,
            Task {
                co,
                header,
                yielder: std::ptr::null(),
                guard,
                timer_seq: 0,
            },
        );
        bump(&self.shared.counters.spawned, 1);
        self.run_task(slot);
    }

    /// Resumes the coroutine in `slot` until it suspends or returns.
    #[inline(always)]
    pub(super) fn run_task(&self, slot: usize) {
        self.run_task_with::<true>(slot);
    }

    /// [`run_task`](Self::run_task); `TRACED`: whether the run may be
    /// traced (a direct hand-off never is: there is none while tracing).
    #[inline(always)]
    fn run_task_with<const TRACED: bool>(&self, slot: usize) {
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
        // Woken before its deadline, if it had one.
        self.disarm_timer(task);
        self.running.set(&task.header);
        self.yielder.set(task.yielder);
        stack::set_running_guard(task.guard);
        bump(&self.shared.counters.switches, 1);
        let result = if TRACED {
            self.resume_traced(slot, &mut task.co)
        } else {
            task.co.resume(())
        };
        stack::set_running_guard(0);
        task.yielder = self.yielder.replace(std::ptr::null());
        self.running.set(std::ptr::null());
        self.retry_cancels();
        match result {
            CoroutineResult::Yield(Suspend::Yield) => {
                self.run_queue.borrow_mut().0.push_back(slot);
            }
            CoroutineResult::Yield(Suspend::Park(deadline)) => {
                bump(&self.shared.counters.blocks, 1);
                if let Some(d) = deadline {
                    self.arm_timer(slot, task, d);
                }
            }
            CoroutineResult::Return(()) => {
                let task = self.tasks.borrow_mut().take_finished(slot);
                let Some(Task { co, header, .. }) = task else {
                    unreachable!("the finished task left its slot")
                };
                self.pool.borrow_mut().give_back(co.into_stack());
                self.keep_header(header);
                self.tasks.borrow_mut().release(slot);
                self.finished_one();
            }
        }
    }

    /// A header for a new coroutine in `slot`: a spare one if there is
    /// one, else a new one.
    fn header_for(&self, slot: usize, top: usize, body: usize) -> Arc<TaskHeader> {
        if let Some(mut header) = self.spare_headers.borrow_mut().pop() {
            if let Some(h) = Arc::get_mut(&mut header) {
                h.reuse(slot, top, body);
                return header;
            }
            debug_assert!(false, "a spare header is referenced");
        }
        let mut header = Arc::new(TaskHeader::new(slot, self.shared.clone(), top, body));
        let lent = crate::park::lent_waker(&header);
        Arc::get_mut(&mut header)
            .expect("nothing else holds a new header")
            .lent = Some(lent);
        header
    }

    /// Keeps a finished coroutine's header for reuse if nothing else holds
    /// it (a waker a channel kept, say) and there is room.
    fn keep_header(&self, mut header: Arc<TaskHeader>) {
        let mut spare = self.spare_headers.borrow_mut();
        if spare.len() < super::SPARE_HEADERS && Arc::get_mut(&mut header).is_some() {
            spare.push(header);
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
}
