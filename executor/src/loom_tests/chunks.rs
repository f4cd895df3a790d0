//! The chunk claim of `parallel_for` (`swco-executor`'s `chunks.rs`):
//! workers claiming chunks from one fetch-and-add counter get every index
//! exactly once, and the stop flag stops the claims.

use loom::sync::Arc;
use loom::thread;

use crate::chunks::ChunkCounter;

/// Claims until the counter says no more; the indices claimed, in order.
fn drain(c: &ChunkCounter) -> Vec<usize> {
    let mut got = Vec::new();
    while let Some(r) = c.claim() {
        got.extend(r);
    }
    got
}

/// Two workers drain `range` in chunks of `grain`: together they get every
/// index once.
fn every_index_once(name: &str, range: std::ops::Range<usize>, grain: usize) {
    super::check(name, None, move || {
        let c = Arc::new(ChunkCounter::new(range.clone(), grain));
        let other = c.clone();
        let t = thread::spawn(move || drain(&other));
        let mut all = drain(&c);
        all.extend(t.join().unwrap());
        all.sort_unstable();
        assert_eq!(
            all,
            range.clone().collect::<Vec<_>>(),
            "an index lost or claimed twice"
        );
        assert_eq!(c.claim(), None, "a claim after the end");
    });
}

#[test]
fn two_workers_claim_every_index_once() {
    every_index_once("two_workers_claim_every_index_once", 3..8, 2);
}

#[test]
fn two_workers_claim_every_index_once_grain_one() {
    every_index_once("two_workers_claim_every_index_once_grain_one", 0..3, 1);
}

/// One worker stops the counter (its body panicked) while the other
/// claims: chunks handed out before the stop are whole and distinct, and
/// no claim that comes after the stop (on the stopping thread, or on any
/// thread once it has joined it) gets anything.
#[test]
fn the_stop_flag_stops_claims() {
    super::check("the_stop_flag_stops_claims", None, || {
        let c = Arc::new(ChunkCounter::new(0..6, 1));
        let other = c.clone();
        let t = thread::spawn(move || drain(&other));
        let first = c.claim();
        c.stop();
        assert_eq!(c.claim(), None, "claimed after stopping");
        let theirs = t.join().unwrap();
        assert_eq!(c.claim(), None, "claimed after the stop was seen");
        let mut all: Vec<usize> = first.into_iter().flatten().chain(theirs).collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "an index claimed twice");
    });
}
