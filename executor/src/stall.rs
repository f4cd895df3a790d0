//! Stall detection: the idle accounting that tells when a runtime's live
//! coroutines all wait and nothing can wake them from inside.
//!
//! A runtime is *stalled* when it has live coroutines, every executor is
//! parked with no coroutine deadline pending (no timer that could wake
//! anyone), and nothing has run since. The executors account for it
//! themselves, only on the way into and out of a park, so a busy runtime
//! pays nothing:
//!
//! * before an executor parks with no coroutine timer, it counts itself in
//!   ([`StallWatch::enter`]); the one whose count makes all `n` becomes the
//!   *watcher*: it reads the runtime's *progress* (the executors' own
//!   counts of coroutines resumed and started, which they keep anyway) and
//!   parks with a deadline, the stall period, instead of for ever;
//! * after the park it counts itself out ([`StallWatch::leave`]);
//! * a watcher whose deadline passes with every executor still counted in
//!   and the progress unchanged reports the stall, once per progress value
//!   ([`StallWatch::claim_report`]): two watchers of one stall (one woke for
//!   its stack trim and counted itself in again) report once.
//!
//! # Invariants
//!
//! * **No stall goes unwatched.** Once every executor is counted in and
//!   nothing runs, one of them holds a watch of the current progress: the
//!   last to count itself in reads the progress *after* its increment. An
//!   executor's progress is counted before it counts itself in again
//!   (program order, published by the `SeqCst` read-modify-write), so the
//!   watcher that sees it counted in sees its progress too.
//! * **One report per stall.** A report claims its progress value with a
//!   CAS.
//! * **No false report.** A watch reports only if every executor is still
//!   counted in and the progress it read is still current: anything that
//!   ran in between moved it.
//!
//! A wake that only serves the runtime itself (a dump request answered in
//! the executor loop) runs no coroutine, so it is no progress: a stall
//! report that asks every executor for its part does not end the stall it
//! reports.
//!
//! Why progress is read from counters rather than moved by the loop: the
//! counters are bumped anyway on every resume, so a busy executor does no
//! extra work at all; a progress mark of its own, even a thread-local flag
//! tested per run, showed up in the instruction count of a hop.
//!
//! A watcher whose deadline has passed decides from a [`Sighting`] (what
//! it read, in that order) before it claims the report: besides the
//! accounting above, coroutines waiting on the blocking pool are not
//! stalled (its threads will wake them), and neither are coroutines whose
//! wake or spawn already sits in an executor's inbox (a pool thread that
//! finished a job wakes its coroutine just before it stops counting as
//! busy; an executor that timed out in between has not drained it yet).
//!
//! The loom models in `loom_tests/stall.rs` check the accounting; the
//! tests below, each reason not to report on its own.

use crate::sync::{AtomicU64, AtomicUsize, Ordering};

/// What a watcher reads once its deadline has passed, in this order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sighting {
    /// Live coroutines of the runtime.
    pub(crate) live: usize,
    /// Whether the blocking pool has jobs queued or running.
    pub(crate) blocking_busy: bool,
    /// [`StallWatch::all_idle`].
    pub(crate) all_idle: bool,
    /// Whether the progress is still the value the watch holds.
    pub(crate) progress_unchanged: bool,
    /// Whether any executor's inbox holds a wake or a spawn.
    pub(crate) inbox_pending: bool,
}

/// What a watcher does with its [`Sighting`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Not a stall now (or none to report).
    NoStall,
    /// Not a stall while the blocking pool works: watch again from now.
    Rewatch,
    /// A stall: report it, if [`StallWatch::claim_report`] agrees.
    Stalled,
}

impl Sighting {
    #[must_use]
    pub(crate) fn verdict(&self) -> Verdict {
        if self.blocking_busy {
            Verdict::Rewatch
        } else if self.live > 0 && self.all_idle && self.progress_unchanged && !self.inbox_pending {
            Verdict::Stalled
        } else {
            Verdict::NoStall
        }
    }
}

/// The runtime-wide idle accounting (one per runtime).
pub(crate) struct StallWatch {
    /// Executors parked with no coroutine deadline pending.
    idle: AtomicUsize,
    /// The progress value last reported as stalled (`u64::MAX`: none yet).
    reported: AtomicU64,
}

impl Default for StallWatch {
    fn default() -> Self {
        Self::new()
    }
}

impl StallWatch {
    #[must_use]
    pub(crate) fn new() -> Self {
        StallWatch {
            idle: AtomicUsize::new(0),
            reported: AtomicU64::new(u64::MAX),
        }
    }

    /// An executor of `n` is about to park with no coroutine deadline;
    /// `true` if that makes all `n` idle (it then watches: it reads the
    /// progress next).
    #[must_use]
    pub(crate) fn enter(&self, n: usize) -> bool {
        // SeqCst: see the module invariants.
        self.idle.fetch_add(1, Ordering::SeqCst) + 1 == n
    }

    /// The executor is back from that park.
    pub(crate) fn leave(&self) {
        self.idle.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether all `n` executors are counted in (read before the progress
    /// it is checked with).
    #[must_use]
    pub(crate) fn all_idle(&self, n: usize) -> bool {
        self.idle.load(Ordering::SeqCst) == n
    }

    /// Claims the report of the stall at progress value `progress`;
    /// `false` if it was already reported.
    #[must_use]
    pub(crate) fn claim_report(&self, progress: u64) -> bool {
        let last = self.reported.load(Ordering::SeqCst);
        last != progress
            && self
                .reported
                .compare_exchange(last, progress, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{Sighting, Verdict};

    /// Every sign of a stall.
    fn stalled() -> Sighting {
        Sighting {
            live: 3,
            blocking_busy: false,
            all_idle: true,
            progress_unchanged: true,
            inbox_pending: false,
        }
    }

    #[test]
    fn every_sign_is_a_stall() {
        assert_eq!(stalled().verdict(), Verdict::Stalled);
    }

    #[test]
    fn a_wake_waiting_in_an_inbox_is_no_stall() {
        let seen = Sighting {
            inbox_pending: true,
            ..stalled()
        };
        assert_eq!(seen.verdict(), Verdict::NoStall);
    }

    #[test]
    fn a_busy_blocking_pool_is_watched_again() {
        for pending in [false, true] {
            let seen = Sighting {
                blocking_busy: true,
                inbox_pending: pending,
                ..stalled()
            };
            assert_eq!(seen.verdict(), Verdict::Rewatch);
        }
    }

    #[test]
    fn progress_a_waking_executor_or_no_coroutine_is_no_stall() {
        let cases = [
            Sighting {
                live: 0,
                ..stalled()
            },
            Sighting {
                all_idle: false,
                ..stalled()
            },
            Sighting {
                progress_unchanged: false,
                ..stalled()
            },
        ];
        for seen in cases {
            assert_eq!(seen.verdict(), Verdict::NoStall, "{seen:?}");
        }
    }
}
