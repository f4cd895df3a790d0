//! A quick ping-pong timing loop: two coroutines bouncing a counter through
//! two capacity-1 SPSC channels, on one executor and on two.
//!
//! `cargo run --release -p swco-executor --example quick_pingpong`

use std::time::Instant;

use swco_channel::spsc;
use swco_executor::Runtime;

fn round_trip_ns(rt: &Runtime, a: usize, b: usize, rounds: u64) -> f64 {
    let (ping_tx, ping_rx) = spsc::bounded::<u64>(1);
    let (pong_tx, pong_rx) = spsc::bounded::<u64>(1);
    let ponger = rt
        .spawn_on(b, move || {
            for v in ping_rx {
                pong_tx.send(v).unwrap();
            }
        })
        .unwrap();
    let pinger = rt
        .spawn_on(a, move || {
            let start = Instant::now();
            for i in 0..rounds {
                ping_tx.send(i).unwrap();
                pong_rx.recv().unwrap();
            }
            start.elapsed()
        })
        .unwrap();
    let elapsed = pinger.join().unwrap();
    ponger.join().unwrap();
    elapsed.as_nanos() as f64 / rounds as f64
}

/// Yield ping-pong: two coroutines that just yield to each other.
fn yield_switch_ns(rt: &Runtime, rounds: u64) -> f64 {
    let other = rt
        .spawn_on(0, move || {
            for _ in 0..rounds {
                swco_executor::yield_now();
            }
        })
        .unwrap();
    let timed = rt
        .spawn_on(0, move || {
            let start = Instant::now();
            for _ in 0..rounds {
                swco_executor::yield_now();
            }
            start.elapsed()
        })
        .unwrap();
    let elapsed = timed.join().unwrap();
    other.join().unwrap();
    // Each round is two switches away and two back (both coroutines yield).
    elapsed.as_nanos() as f64 / rounds as f64
}

fn main() {
    // Optional argument: "one", "two" or "yield" to run just that part.
    let only = std::env::args().nth(1);
    let run = |part: &str| only.as_deref().map_or(true, |o| o == part);
    let rt = Runtime::builder().executors(2).build().unwrap();
    if run("one") {
        for _ in 0..3 {
            println!(
                "ping-pong, one executor:  {:8.1} ns per round trip",
                round_trip_ns(&rt, 0, 0, 1_000_000)
            );
        }
    }
    if run("two") {
        for _ in 0..3 {
            println!(
                "ping-pong, two executors: {:8.1} ns per round trip",
                round_trip_ns(&rt, 0, 1, 200_000)
            );
        }
    }
    if run("yield") {
        println!(
            "yield_now between two coroutines: {:8.1} ns per round",
            yield_switch_ns(&rt, 1_000_000)
        );
    }
    rt.shutdown();
    println!("{:?}", rt.stats().total());
}
