//! The round trip of `swco::unblock(|| ())` from a coroutine: the job goes
//! to a blocking-pool thread, which runs it and wakes the coroutine back
//! on its executor. Measured two ways, each the median of 7 rounds (after
//! one warm-up round) of 2 000 calls, in µs per call:
//!
//! * `warm`: back to back, so the pool thread that ran the last call is
//!   usually still waking up or just waiting when the next comes;
//! * `after idle`: with a 1 ms `swco::sleep` between calls (not timed), so
//!   both the pool thread and the executor have parked: two cold thread
//!   wake-ups per call, the cost a program that blocks now and then sees.
//!
//! `cargo run --release -p swco-executor --example unblock_cost [rounds]`

use std::time::{Duration, Instant};

use swco_executor::{unblock, Runtime};

const CALLS: u32 = 2_000;

fn round(rt: &Runtime, pause: Option<Duration>) -> f64 {
    let h = rt.spawn(move || {
        let mut busy = Duration::ZERO;
        for _ in 0..CALLS {
            if let Some(p) = pause {
                swco_executor::sleep(p);
            }
            let start = Instant::now();
            unblock(|| ());
            busy += start.elapsed();
        }
        busy
    });
    h.join().unwrap().as_secs_f64() * 1e6 / f64::from(CALLS)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(7, |s| s.parse().expect("rounds: a number"));
    let rt = Runtime::builder().executors(1).build().unwrap();
    for (label, pause) in [
        ("warm", None),
        ("after idle", Some(Duration::from_millis(1))),
    ] {
        round(&rt, pause); // warm-up
        let runs: Vec<f64> = (0..rounds).map(|_| round(&rt, pause)).collect();
        let lo = runs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = runs.iter().copied().fold(0.0, f64::max);
        println!(
            "unblock(|| ()) round trip, {label}: median {:.2} µs per call \
             (rounds {lo:.2}..{hi:.2}, {rounds} x {CALLS} calls)",
            median(runs)
        );
    }
    rt.shutdown();
}
