//! The daisy chain of `skynet`, timed by phase: spawning N coroutines from
//! an OS thread (each blocks in `recv` on its left channel), then, once all
//! of them are parked, the hand-off down the chain alone, then the joins.
//! Parking them all first (a marker coroutine queued behind them, then a
//! 100 ms pause) separates the cost of a hop between long-parked
//! coroutines, whose stacks and channels are out of cache, from the cost
//! of starting them.
//!
//! ```text
//! cargo run --release -p swco-bench --example chain_phases [-- N [EXECUTORS [REPS]]]
//! ```
//!
//! Defaults: N = 10 000, one executor, 8 repetitions; prints each
//! repetition's phases and the median hop. Every run checks that the value
//! reaching the end is N + 1 and that every coroutine joins.

use std::time::{Duration, Instant};

use swco::Runtime;
use swco_bench::spawn_chain;

fn main() {
    let arg = |i: usize, default: usize| -> usize {
        std::env::args()
            .nth(i)
            .map_or(default, |s| s.parse().expect("a number"))
    };
    let n = arg(1, 10_000).max(1);
    let executors = arg(2, 1);
    let reps = arg(3, 8).max(1);
    let rt = Runtime::builder()
        .executors(executors)
        .build()
        .expect("a runtime");
    let mut hops = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t0 = Instant::now();
        let chain = spawn_chain(&rt, n);
        let spawned = t0.elapsed();
        // Queued behind the chain on every executor, then a pause: by then
        // every link has started and parked.
        for cpe in 0..executors {
            rt.spawn_on(cpe, || ())
                .expect("the executor exists")
                .join()
                .expect("the marker ran");
        }
        std::thread::sleep(Duration::from_millis(100));
        let t1 = Instant::now();
        let passed = chain.pass();
        let propagated = t1.elapsed();
        let t2 = Instant::now();
        chain.join();
        let joined = t2.elapsed();
        if let Err(got) = passed {
            eprintln!("chain: got {got}, expected {}", 1 + n);
            std::process::exit(1);
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "spawn {:7.2} ms   hand-off down the chain {:7.2} ms   join {:6.2} ms",
            ms(spawned),
            ms(propagated),
            ms(joined)
        );
        hops.push(propagated.as_nanos() as f64 / n as f64);
    }
    hops.sort_by(f64::total_cmp);
    println!(
        "{n} links, {executors} executor(s): median hop {:.0} ns (range {:.0}-{:.0})",
        hops[hops.len() / 2],
        hops[0],
        hops[hops.len() - 1]
    );
}
