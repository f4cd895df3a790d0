//! What an executor runs next: how a wake reaches the run queue (locally,
//! through the `run_next` hand-off; remotely, through the inbox), the order
//! in which hand-offs, new jobs and woken coroutines are taken, and
//! stealing of jobs that have not started.
//!
//! # Invariants
//!
//! * Only the winner of a coroutine's `WAITING -> RUNNING` transition
//!   schedules it, so a slot is queued at most once per suspension.
//! * A wake from the home executor thread never allocates or locks: it
//!   takes `run_next`, and whatever was there goes to the back of the run
//!   queue. A wake from any other thread is one inbox push.
//! * `run_next` runs at most [`RUN_NEXT_BUDGET`] times in a row, and every
//!   [`FAIRNESS_PERIOD`] decisions the oldest runnable coroutine and the
//!   oldest jobs go first, so neither a ping-pong pair nor a stream of
//!   spawns starves the rest.
//! * A direct hand-off (`Local::take_hand_off`) takes `run_next` only
//!   when the loop would take it next: within the budget, off the fairness
//!   tick, with the inbox empty and no cancelling shutdown; it counts
//!   against both like the loop's own choice.
//! * Only jobs (no stack yet) are stolen; a started coroutine never moves.
//! * A local wake may prefetch the woken coroutine's task, job body and
//!   top frames (`Local::prefetch`): a hint only, computed from its header
//!   and its slot's pointer, never by dereferencing the task.

use std::sync::Arc;
use std::task::Wake;

use crossbeam_deque::Steal;

use super::Local;
use crate::job::Job;
use crate::shared::bump;
use crate::task::TaskHeader;
use crate::trace::WakeFrom;

// The `Wake` impl of `TaskHeader` (task.rs) lives here, with the run queue
// it schedules onto.
impl Wake for TaskHeader {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    #[inline]
    fn wake_by_ref(self: &Arc<Self>) {
        if self.state.notify() {
            schedule(self);
        }
    }
}

/// Puts a woken coroutine on its home run queue: directly if we are on the
/// home executor thread (no lock, no allocation), else through its inbox
/// (its own wake link: no allocation either). Called only by the winner of
/// its `WAITING -> RUNNING` transition.
fn schedule(task: &TaskHeader) {
    let home = &task.home;
    if let Some(local) = Local::current() {
        if std::ptr::eq(Arc::as_ptr(&local.shared), Arc::as_ptr(home)) {
            // Woken by its own executor: it runs next (depth-first hand-off);
            // whatever was next goes to the back of the queue.
            local.prefetch(task);
            if let Some(previous) = local.run_next.replace(Some(task.slot)) {
                local.run_queue.borrow_mut().0.push_back(previous);
            }
            bump(&local.shared.counters.wakes, 1);
            local.trace_wake(task.slot, WakeFrom::Local);
            return;
        }
    }
    // SAFETY: we won the coroutine's WAITING -> RUNNING transition, so its
    // link is out of the inbox (its last push was drained before it ran and
    // parked again) and nobody else pushes it until it parks again. Nothing
    // but that drain can make it run, so it cannot finish, and its header
    // (which the task's table entry keeps alive) outlives the link's stay
    // in the list; an executor that exits with it queued leaks the task,
    // header included (`leak_leftovers`).
    unsafe { home.inbox.push_wake(&task.link) };
}

/// Asks the CPU to start loading the cache lines of `[from, to)`. Only a
/// hint: it never faults, even on unmapped addresses, and the program sees
/// nothing of it.
#[inline]
fn prefetch_lines(from: usize, to: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let mut line = from & !63;
        while line < to {
            // SAFETY: `prefetcht0` never faults and has no effect the
            // program can observe; SSE is part of the x86_64 baseline.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) };
            line += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (from, to);
}

/// Hand-offs through `run_next` in a row before the run queue gets a turn.
pub(super) const RUN_NEXT_BUDGET: u32 = 16;

/// Every this many scheduling decisions, jobs waiting to start are served
/// oldest first, before started coroutines and newer jobs.
const FAIRNESS_PERIOD: u32 = 61;

/// What the executor runs next.
pub(super) enum Runnable {
    /// A started coroutine, by slot.
    Slot(usize),
    /// A job to start.
    Job(Job),
}

impl Local {
    /// Starts loading the cache lines a woken coroutine touches first when
    /// it resumes, unless it parked so recently that they are still in
    /// cache: its task, its job's body (closure and join slot), and its
    /// stack from just below where it parked up through the frames it
    /// returns through (see [`ParkedAt`](crate::task::ParkedAt)). A
    /// coroutine woken after a long wait (one of a chain of thousands, each
    /// woken once) has all of these out of cache, and the waker still has
    /// work to do before it switches (finish its send, maybe its
    /// coroutine), which these loads overlap.
    #[inline]
    fn prefetch(&self, task: &TaskHeader) {
        let Some((from, to)) = task.parked.frames(self.ticks.get()) else {
            return;
        };
        // The address only: the task is not dereferenced here. A hint must
        // never panic, so a table borrowed elsewhere just skips this line.
        if let Ok(table) = self.tasks.try_borrow() {
            let boxed = table.ptr(task.slot) as usize;
            prefetch_lines(boxed, boxed + 1);
        }
        let body = task.parked.body();
        prefetch_lines(body, body + 128);
        prefetch_lines(from, to);
    }

    /// Takes whatever other threads handed over. The common case, nothing
    /// pending, is one relaxed load, inlined into the run loop.
    #[inline]
    pub(super) fn drain_inbox(&self) {
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
            self.trace_remote_wakes(&spare.wakes);
            self.run_queue.borrow_mut().0.extend(spare.wakes.drain(..));
        }
        let mut jobs = std::mem::take(&mut spare.spawns);
        drop(spare);
        for job in jobs.drain(..) {
            if job.is_request() {
                job.serve(self);
            } else {
                self.start(job);
            }
        }
        // Hand the (empty, still allocated) buffer back for the next swap.
        self.spare.borrow_mut().spawns = jobs;
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
    pub(super) fn next_runnable(&self) -> Option<Runnable> {
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

    /// The coroutine the running one may hand its thread to directly, from
    /// inside its park (`Local::park_running`): the `run_next` hand-off, if
    /// the executor loop would take it next anyway (within its budget, not
    /// at a fairness tick), nothing came through the inbox, no cancelling
    /// shutdown is under way, and the running coroutine is not itself
    /// running inside another's park.
    #[inline]
    pub(crate) fn take_hand_off(&self) -> Option<usize> {
        if self.nested.get() || self.cancelling.get() || self.shared.inbox.is_pending() {
            return None;
        }
        let streak = self.run_next_streak.get();
        let tick = self.ticks.get().wrapping_add(1);
        if streak >= RUN_NEXT_BUDGET || tick % FAIRNESS_PERIOD == 0 {
            return None;
        }
        let slot = self.run_next.take()?;
        self.ticks.set(tick);
        self.run_next_streak.set(streak + 1);
        Some(slot)
    }

    /// Takes unstarted jobs from another executor's local spawns (a batch,
    /// oldest first), starting from the next executor round. Started
    /// coroutines never move: only jobs that hold no stack yet do.
    pub(super) fn steal(&self) -> Option<Runnable> {
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
}
