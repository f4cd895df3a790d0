//! Deadlines of parked coroutines: a min-heap of `(deadline, sequence,
//! slot)` per executor.
//!
//! # Invariants
//!
//! * A task's `timer_seq` names its one live heap entry (0: none). An entry
//!   whose sequence no longer matches its task's is stale: it is skipped
//!   when it fires, and stale entries are dropped in bulk once they are the
//!   majority, so the heap does not grow without bound.
//! * A deadline makes a coroutine runnable only through its wake state's
//!   `expire` (the same `WAITING -> RUNNING` transition a waker wins), so a
//!   timer and a wake racing schedule it once.

use std::cmp::Reverse;
use std::time::Instant;

use super::Local;
use crate::shared::bump;
use crate::task::Task;
use crate::trace::WakeFrom;

impl Local {
    /// Arms a deadline for the task in `slot`, which has just parked.
    pub(super) fn arm_timer(&self, slot: usize, task: &mut Task, deadline: Instant) {
        let seq = self.next_timer_seq.get() + 1;
        self.next_timer_seq.set(seq);
        self.timers
            .borrow_mut()
            .push(Reverse((deadline, seq, slot)));
        task.timer_seq = seq;
    }

    /// Forgets the deadline of a task resumed before it: its heap entry is
    /// now stale.
    pub(super) fn disarm_timer(&self, task: &mut Task) {
        if task.timer_seq != 0 {
            task.timer_seq = 0;
            self.stale_timers.set(self.stale_timers.get() + 1);
        }
    }

    /// The earliest deadline, if any.
    pub(super) fn earliest_deadline(&self) -> Option<Instant> {
        self.timers.borrow().peek().map(|Reverse((d, _, _))| *d)
    }

    pub(super) fn fire_timers(&self) {
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
                        self.trace_wake(slot, WakeFrom::Timer);
                    }
                }
                _ => self
                    .stale_timers
                    .set(self.stale_timers.get().saturating_sub(1)),
            }
        }
    }
}
