//! The contended-mutex scenario, shared by the `sync` bench's `mutex-64`
//! group and `examples/mutex_cost.rs`, so that both time the same loop:
//! [`PARTIES`] coroutines each do `k` read / `yield_now` / write
//! increments of one counter with the guard held across the yield. Party
//! `i` runs on swco executor `i` mod the runtime's executors, and on may
//! worker `i` mod may's workers. Each run checks that the counter comes
//! out at `PARTIES`·`k`, so a lost increment fails the run instead of
//! timing it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use swco::Runtime;

use crate::May;

/// Contending coroutines.
pub const PARTIES: usize = 64;

/// Spawns [`PARTIES`] parties with `spawn(i)`, then joins each with
/// `join`; the time from the first spawn to the last join. (The `sync`
/// bench times its barrier parties with it too.)
pub fn all_parties<H>(spawn: impl FnMut(usize) -> H, join: impl Fn(H)) -> Duration {
    let start = Instant::now();
    let parties: Vec<H> = (0..PARTIES).map(spawn).collect();
    for party in parties {
        join(party);
    }
    start.elapsed()
}

/// One run on `swco::sync::Mutex`.
///
/// # Panics
///
/// If the counter does not come out at `PARTIES`·`k`, or a party fails.
#[must_use]
pub fn swco_mutex(rt: &Runtime, k: usize) -> Duration {
    let m = Arc::new(swco::sync::Mutex::new(0usize));
    let executors = rt.executors();
    let t = all_parties(
        |i| {
            let m = Arc::clone(&m);
            rt.spawn_on(i % executors, move || {
                for _ in 0..k {
                    let mut g = m.lock();
                    let v = *g;
                    swco::yield_now();
                    *g = v + 1;
                }
            })
            .expect("executor in range")
        },
        |h| h.join().expect("a contender finished"),
    );
    assert_eq!(
        *m.lock(),
        PARTIES * k,
        "swco::sync::Mutex lost an increment"
    );
    t
}

/// The same run on `may::sync::Mutex`, with may coroutines.
///
/// # Panics
///
/// As [`swco_mutex`].
#[must_use]
pub fn may_mutex(k: usize) -> Duration {
    let m = Arc::new(may::sync::Mutex::new(0usize));
    let t = all_parties(
        |i| {
            let m = Arc::clone(&m);
            May::spawn(i, move || {
                for _ in 0..k {
                    let mut g = m.lock().expect("not poisoned");
                    let v = *g;
                    may::coroutine::yield_now();
                    *g = v + 1;
                }
            })
        },
        |h| h.join().expect("a contender finished"),
    );
    assert_eq!(
        *m.lock().expect("not poisoned"),
        PARTIES * k,
        "may::sync::Mutex lost an increment"
    );
    t
}
