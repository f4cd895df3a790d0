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

use swco::Runtime;
use swco_bench::contended::{self, PARTIES};
use swco_bench::median;

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
    // Seconds a round, and swco's time over may's, round by round.
    let mut swco_times = Vec::new();
    let mut may_times = Vec::new();
    let mut ratios = Vec::new();
    for _ in 0..rounds.max(1) {
        let s = contended::swco_mutex(&rt, k).as_secs_f64();
        swco_times.push(s);
        if vs_may {
            let m = contended::may_mutex(k).as_secs_f64();
            may_times.push(m);
            ratios.push(s / m);
        }
    }
    let hand_offs = (PARTIES * k).max(1) as f64;
    let s = median(&mut swco_times);
    println!(
        "swco: {} hand-offs on {executors} executor(s): {:.0} ns each \
         (median of {} rounds: {:.1} us)",
        PARTIES * k,
        s * 1e9 / hand_offs,
        swco_times.len(),
        s * 1e6,
    );
    if vs_may {
        let m = median(&mut may_times);
        println!(
            "may:  {} hand-offs on {executors} worker(s): {:.0} ns each (median {:.1} us)",
            PARTIES * k,
            m * 1e9 / hand_offs,
            m * 1e6,
        );
        // `median` leaves the ratios sorted, for the quartiles.
        let r = median(&mut ratios);
        println!(
            "swco / may: {r:.2}x (median of {} rounds' ratios; quartiles {:.2}x to {:.2}x)",
            ratios.len(),
            ratios[ratios.len() / 4],
            ratios[ratios.len() * 3 / 4],
        );
    }
}
