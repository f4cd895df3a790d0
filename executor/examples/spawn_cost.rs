//! Spawn cost: 100 000 trivial coroutines spawned and joined from an OS
//! thread (at most 10 000 outstanding), a 10 000-coroutine daisy chain
//! (spawn, one blocking hand-off each, join), and a burst: one coroutine on
//! a single-executor runtime spawns 10 000 children that all block, then
//! releases and joins them (no cross-thread wakes: stack handling shows).
//! Prints the median of 5 rounds (after one warm-up round) per coroutine.
//!
//! `cargo run --release -p swco-executor --example spawn_cost [rounds]`
//!
//! With `rounds` = 1 it runs each workload once, without warm-up, which is
//! what `strace -c -f` wants for syscall counts per coroutine.
//! `SWCO_GUARD_PAGES=mprotect|madvise` picks the guard-page path.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use swco_channel::{mpmc, spsc};
use swco_executor::Runtime;

const COUNT: usize = 100_000;
const WINDOW: usize = 10_000;
const CHAIN: usize = 10_000;

fn spawn_join(rt: &Runtime) -> Duration {
    let start = Instant::now();
    let mut live = VecDeque::with_capacity(WINDOW + 1);
    for i in 0..COUNT {
        live.push_back((i, rt.spawn(move || i)));
        if live.len() > WINDOW {
            let (i, h) = live.pop_front().unwrap();
            assert_eq!(h.join().unwrap(), i);
        }
    }
    for (i, h) in live {
        assert_eq!(h.join().unwrap(), i);
    }
    start.elapsed()
}

fn chain(rt: &Runtime) -> Duration {
    let start = Instant::now();
    let (head, mut rx) = spsc::bounded::<u64>(1);
    let mut joins = Vec::with_capacity(CHAIN);
    for _ in 0..CHAIN {
        let (tx, next) = spsc::bounded::<u64>(1);
        let left = std::mem::replace(&mut rx, next);
        joins.push(rt.spawn(move || {
            let v = left.recv().unwrap();
            tx.send(v + 1).unwrap();
        }));
    }
    head.send(0).unwrap();
    assert_eq!(rx.recv().unwrap(), CHAIN as u64);
    for j in joins {
        j.join().unwrap();
    }
    start.elapsed()
}

/// From inside a coroutine: spawn `CHAIN` children on this executor, all
/// blocked at once, then release and join them.
fn burst(rt: &Runtime) -> Duration {
    rt.spawn(|| {
        let start = Instant::now();
        let (tx, rx) = mpmc::bounded::<()>(1);
        let started = Arc::new(AtomicUsize::new(0));
        let children: Vec<_> = (0..CHAIN)
            .map(|_| {
                let (rx, started) = (rx.clone(), started.clone());
                swco_executor::spawn(move || {
                    started.fetch_add(1, Ordering::Relaxed);
                    let _ = rx.recv();
                })
            })
            .collect();
        // Let them all start (and block): each then holds a stack.
        while started.load(Ordering::Relaxed) < CHAIN {
            swco_executor::yield_now();
        }
        drop(tx);
        for c in children {
            c.join().unwrap();
        }
        start.elapsed()
    })
    .join()
    .unwrap()
}

/// Median per-coroutine time of `rounds` runs of `f` (plus one warm-up run
/// when `rounds > 1`), in nanoseconds.
fn median_ns(rounds: usize, per: usize, f: impl Fn() -> Duration) -> f64 {
    if rounds > 1 {
        f();
    }
    let mut times: Vec<Duration> = (0..rounds).map(|_| f()).collect();
    times.sort();
    times[times.len() / 2].as_nanos() as f64 / per as f64
}

fn main() {
    let rounds = std::env::args()
        .nth(1)
        .map_or(5, |r| r.parse().expect("rounds: a number"))
        .max(1);
    let rt = Runtime::builder().executors(2).build().unwrap();
    println!(
        "spawn_cost: 2 executors, {} KiB stacks, guard pages: {:?}, median of {rounds}",
        rt.stack_size() / 1024,
        rt.guard_pages(),
    );
    let ns = median_ns(rounds, COUNT, || spawn_join(&rt));
    println!("  spawn+join x{COUNT} (window {WINDOW}) from a thread: {ns:8.0} ns/coroutine");
    let ns = median_ns(rounds, CHAIN, || chain(&rt));
    println!("  daisy chain x{CHAIN}:                          {ns:8.0} ns/coroutine");
    let one = Runtime::builder().executors(1).build().unwrap();
    let ns = median_ns(rounds, CHAIN, || burst(&one));
    println!("  burst of {CHAIN} blocked children, 1 executor:  {ns:8.0} ns/coroutine");
    for (name, rt) in [("2 executors", &rt), ("1 executor", &one)] {
        let total = rt.stats().total();
        println!(
            "  {name}: coroutines spawned: {}, stacks freshly carved: {}",
            total.spawned, total.stacks_mapped
        );
    }
}
