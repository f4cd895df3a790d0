//! The contended `swco::sync::Mutex` of the `sync` bench's `mutex-64`
//! group (64 coroutines, each doing `k` read / `yield_now` / write
//! increments with the guard held across the yield; the counter must come
//! out at 64·`k`), in two uses.
//!
//! **Instructions per hand-off**, for callgrind, on one executor (the
//! default), so that the run is deterministic:
//!
//! ```sh
//! cargo build --release -p swco-bench --example mutex_cost
//! for k in 100 200; do
//!     valgrind --tool=callgrind --callgrind-out-file=/tmp/m.$k \
//!         target/release/examples/mutex_cost $k
//! done
//! ```
//!
//! The difference of the two totals over 6 400 is the cost of one
//! hand-off (unlock, wake, yield, lock, park, switch).
//!
//! **The ratio to may, run by run**: with a fourth argument `may`, each
//! round runs the swco scenario and then the same on `may::sync::Mutex`
//! (may's worker `i` mod the executors, as the bench places them), and
//! the median of the rounds' ratios is printed with each side's median.
//! Alternating in one process keeps a noisy machine's drifts out of the
//! ratio, which criterion's group-after-group runs let in:
//!
//! ```sh
//! target/release/examples/mutex_cost 100 2 200 may
//! ```
//!
//! Arguments: `k` (default 100), the executors (default 1; party `i` runs
//! on executor `i` mod the count), the rounds on one runtime (default 1;
//! medians are reported) and `may` for the comparison.

use std::sync::Arc;
use std::time::{Duration, Instant};

use swco::Runtime;
use swco_bench::May;

/// Contending coroutines.
const PARTIES: usize = 64;

fn main() {
    let mut args = std::env::args().skip(1);
    let k: usize = args.next().map_or(100, |a| a.parse().expect("a count"));
    let executors: usize = args.next().map_or(1, |a| a.parse().expect("a count"));
    let rounds: usize = args.next().map_or(1, |a| a.parse().expect("a count"));
    let vs_may = args.next().is_some_and(|a| a == "may");
    let rt = Runtime::builder()
        .executors(executors)
        .build()
        .expect("a runtime");
    if vs_may {
        may::config().set_workers(executors);
    }
    let mut swco_times = Vec::new();
    let mut may_times = Vec::new();
    let mut ratios = Vec::new();
    for _ in 0..rounds.max(1) {
        let s = swco_run(&rt, k, executors);
        swco_times.push(s);
        if vs_may {
            let m = may_run(k);
            may_times.push(m);
            ratios.push(s.as_secs_f64() / m.as_secs_f64());
        }
    }
    let hand_offs = PARTIES * k;
    let s = median(&mut swco_times);
    println!(
        "swco: {hand_offs} hand-offs on {executors} executor(s): {:.0} ns each \
         (median of {} rounds: {s:?})",
        s.as_nanos() as f64 / hand_offs.max(1) as f64,
        swco_times.len(),
    );
    if vs_may {
        let m = median(&mut may_times);
        ratios.sort_by(f64::total_cmp);
        println!(
            "may:  {hand_offs} hand-offs on {executors} worker(s): {:.0} ns each (median {m:?})",
            m.as_nanos() as f64 / hand_offs.max(1) as f64,
        );
        println!(
            "swco / may: {:.2}x (median of {} rounds' ratios; quartiles {:.2}x to {:.2}x)",
            ratios[ratios.len() / 2],
            ratios.len(),
            ratios[ratios.len() / 4],
            ratios[ratios.len() * 3 / 4],
        );
    }
}

fn median<T: Ord + Copy>(v: &mut [T]) -> T {
    v.sort();
    v[v.len() / 2]
}

/// One round on swco: the time from the first spawn to the last join.
fn swco_run(rt: &Runtime, k: usize, executors: usize) -> Duration {
    let m = Arc::new(swco::sync::Mutex::new(0usize));
    let start = Instant::now();
    let parties: Vec<_> = (0..PARTIES)
        .map(|i| {
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
        })
        .collect();
    for p in parties {
        p.join().expect("a contender finished");
    }
    let elapsed = start.elapsed();
    assert_eq!(*m.lock(), PARTIES * k, "swco's mutex lost an increment");
    elapsed
}

/// The same round on may.
fn may_run(k: usize) -> Duration {
    let m = Arc::new(may::sync::Mutex::new(0usize));
    let start = Instant::now();
    let parties: Vec<_> = (0..PARTIES)
        .map(|i| {
            let m = Arc::clone(&m);
            May::spawn(i, move || {
                for _ in 0..k {
                    let mut g = m.lock().expect("not poisoned");
                    let v = *g;
                    may::coroutine::yield_now();
                    *g = v + 1;
                }
            })
        })
        .collect();
    for p in parties {
        p.join().expect("a contender finished");
    }
    let elapsed = start.elapsed();
    assert_eq!(
        *m.lock().expect("not poisoned"),
        PARTIES * k,
        "may's mutex lost an increment"
    );
    elapsed
}
