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
//!   *watcher* and parks with a deadline, the stall period, instead of for
//!   ever;
//! * after the park it counts itself out ([`StallWatch::leave`]); the first
//!   coroutine or job it then runs is *progress* ([`StallWatch::progress`]),
//!   which moves the epoch on;
//! * a watcher whose deadline passes with the epoch unchanged and every
//!   executor still counted in reports the stall, once per epoch
//!   ([`StallWatch::claim_report`]): two watchers of one epoch (one woke for
//!   its stack trim and counted itself in again) report once.
//!
//! # Invariants
//!
//! * **No stall goes unwatched.** Once every executor is counted in and
//!   nothing runs, one of them holds a watch of the current epoch: the last
//!   to count itself in reads the epoch *after* its increment, when nobody
//!   can move it any more (moving it takes an executor that counted itself
//!   out, so the count would not have reached `n`).
//! * **One report per stall.** A report claims its epoch with a CAS.
//! * **No false report.** A watch reports only if the epoch it read is still
//!   current: anything that ran in between moved it.
//!
//! A wake that only serves the runtime itself (a dump request answered in
//! the executor loop) runs no coroutine, so it is no progress: a stall
//! report that asks every executor for its part does not end the stall it
//! reports.
//!
//! The model in `tests` checks these with loom (two executors).

use crate::sync::{AtomicU64, AtomicUsize, Ordering};

/// The runtime-wide idle accounting (one per runtime).
pub(crate) struct StallWatch {
    /// Executors parked with no coroutine deadline pending.
    idle: AtomicUsize,
    /// Moved on by every run that follows a park.
    epoch: AtomicU64,
    /// The last epoch reported as stalled (`u64::MAX`: none yet).
    reported: AtomicU64,
}

/// A watcher's hold on one epoch: [`StallWatch::enter`] made every executor
/// idle at `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Watch {
    pub(crate) epoch: u64,
}

impl StallWatch {
    pub(crate) fn new() -> Self {
        StallWatch {
            idle: AtomicUsize::new(0),
            epoch: AtomicU64::new(0),
            reported: AtomicU64::new(u64::MAX),
        }
    }

    /// An executor of `n` is about to park with no coroutine deadline: a
    /// [`Watch`] if it is the last one, making all `n` idle.
    pub(crate) fn enter(&self, n: usize) -> Option<Watch> {
        // SeqCst, both: the count and the epoch are read in one order by
        // every executor (see the module invariants).
        let idle = self.idle.fetch_add(1, Ordering::SeqCst) + 1;
        (idle == n).then(|| Watch {
            epoch: self.epoch.load(Ordering::SeqCst),
        })
    }

    /// The executor is back from that park.
    pub(crate) fn leave(&self) {
        self.idle.fetch_sub(1, Ordering::SeqCst);
    }

    /// The executor ran something after a park.
    pub(crate) fn progress(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// The current epoch (for a report made outside the executors, by a
    /// runtime's drop).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Whether `watch` still holds: nothing ran since it was taken, and all
    /// `n` executors are still idle.
    pub(crate) fn still_stalled(&self, watch: Watch, n: usize) -> bool {
        self.epoch.load(Ordering::SeqCst) == watch.epoch && self.idle.load(Ordering::SeqCst) == n
    }

    /// Claims the report of the stall at `epoch`; `false` if it was already
    /// reported.
    pub(crate) fn claim_report(&self, epoch: u64) -> bool {
        let last = self.reported.load(Ordering::SeqCst);
        last != epoch
            && self
                .reported
                .compare_exchange(last, epoch, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
    }
}

#[cfg(all(test, loom))]
mod tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Two executors go idle, one after a piece of work; whoever ends up
    /// last holds a watch of the final epoch, and a report happens once.
    #[test]
    fn the_last_idle_executor_watches_the_final_epoch() {
        loom::model(|| {
            let watch = Arc::new(StallWatch::new());
            let other = watch.clone();
            let t = thread::spawn(move || {
                // Runs something (after a park), then parks idle.
                other.progress();
                other.enter(2)
            });
            let mine = watch.enter(2);
            let theirs = t.join().unwrap();
            let held: Vec<Watch> = mine.into_iter().chain(theirs).collect();
            assert!(!held.is_empty(), "both idle, nobody watches");
            let current = watch.epoch();
            let valid: Vec<&Watch> = held.iter().filter(|w| w.epoch == current).collect();
            assert!(
                !valid.is_empty(),
                "no watch of the final epoch: a stall missed"
            );
            for w in &valid {
                assert!(watch.still_stalled(**w, 2));
            }
            // Every valid watcher tries to report: exactly one does.
            let reports = valid.iter().filter(|w| watch.claim_report(w.epoch)).count();
            assert_eq!(reports, 1);
        });
    }

    /// Two watchers of one epoch (one of them woke for its stack trim and
    /// counted itself in again) racing to report: one report.
    #[test]
    fn one_report_per_stall() {
        loom::model(|| {
            let watch = Arc::new(StallWatch::new());
            let epoch = watch.epoch();
            let other = watch.clone();
            let t = thread::spawn(move || other.claim_report(epoch));
            let mine = watch.claim_report(epoch);
            let theirs = t.join().unwrap();
            assert!(
                mine ^ theirs,
                "reported {} times",
                u8::from(mine) + u8::from(theirs)
            );
        });
    }

    /// A watch taken before something ran is not a stall.
    #[test]
    fn progress_after_the_watch_is_no_stall() {
        loom::model(|| {
            let watch = Arc::new(StallWatch::new());
            let w = watch.enter(1).expect("the only executor watches");
            let other = watch.clone();
            let t = thread::spawn(move || {
                other.leave();
                other.progress();
            });
            let stalled = watch.still_stalled(w, 1);
            t.join().unwrap();
            assert!(!watch.still_stalled(w, 1));
            let _ = stalled;
        });
    }
}
