//! The stall detector's idle accounting (`swco-executor`'s `stall.rs`):
//! the last executor to go idle watches the final progress, and a stall is
//! reported once.

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::stall::StallWatch;

/// Two executors and their progress counters (bumped only by their
/// owner, relaxed, as the executors' own counters are).
struct Runtime {
    watch: StallWatch,
    runs: [AtomicU64; 2],
}

impl Runtime {
    fn new() -> Arc<Self> {
        Arc::new(Runtime {
            watch: StallWatch::new(),
            runs: [AtomicU64::new(0), AtomicU64::new(0)],
        })
    }

    fn progress(&self) -> u64 {
        self.runs.iter().map(|r| r.load(Ordering::Relaxed)).sum()
    }

    /// Executor `me` runs something, then parks idle: the progress it
    /// watches if it was the last.
    fn run_then_idle(&self, me: usize) -> Option<u64> {
        let r = &self.runs[me];
        r.store(r.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        self.watch.enter(2).then(|| self.progress())
    }
}

/// Both executors run something, then go idle: whoever ends up last
/// holds a watch of the final progress, sees the stall, and it is
/// reported once.
#[test]
fn the_last_idle_executor_watches_the_final_progress() {
    super::check(
        "the_last_idle_executor_watches_the_final_progress",
        None,
        || {
            let rt = Runtime::new();
            let other = rt.clone();
            let t = thread::spawn(move || other.run_then_idle(1));
            let mine = rt.run_then_idle(0);
            let theirs = t.join().unwrap();
            let held: Vec<u64> = mine.into_iter().chain(theirs).collect();
            assert_eq!(held.len(), 1, "exactly one executor is last");
            assert_eq!(
                held[0], 2,
                "the watch missed progress: a false stall or a missed one"
            );
            assert!(rt.watch.all_idle(2) && rt.progress() == held[0]);
            assert!(rt.watch.claim_report(held[0]));
            assert!(!rt.watch.claim_report(held[0]), "reported twice");
        },
    );
}

/// Two watchers of one stall racing to report: one report.
#[test]
fn one_report_per_stall() {
    super::check("one_report_per_stall", None, || {
        let rt = Runtime::new();
        let other = rt.clone();
        let t = thread::spawn(move || other.watch.claim_report(0));
        let mine = rt.watch.claim_report(0);
        let theirs = t.join().unwrap();
        assert!(
            mine ^ theirs,
            "reported {} times",
            u8::from(mine) + u8::from(theirs)
        );
    });
}
