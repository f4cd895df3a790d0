//! Spawning: 100 000 trivial coroutines spawned and joined (at most 10 000
//! outstanding, see `swco_bench::spawn_join`), from an OS thread and from inside
//! a coroutine, and the 10 000-coroutine daisy chain (spawn, one blocking
//! hand-off each, join), against may.
//!
//! From an OS thread, a spawn onto an idle (parked) executor costs a futex
//! wake; from inside a coroutine, the spawner's own executor is awake, so
//! the two variants separate the runtime's own cost from the OS's.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use swco::channel::Cas;
use swco::Runtime;
use swco_bench::{chain, spawn_join, spawn_window, May, Place, Swco};

/// Coroutines spawned and not yet joined, at most.
const WINDOW: usize = 10_000;

const COUNT: usize = 100_000;

/// [`spawn_join`] from inside a swco coroutine, with `swco::spawn` (placed
/// round-robin over the executors); joins suspend only the spawner.
fn swco_inside(rt: &Runtime) -> Duration {
    rt.spawn(|| {
        spawn_window(COUNT, WINDOW, |i| {
            let h = swco::spawn(move || i);
            move || h.join().unwrap()
        })
    })
    .join()
    .expect("the spawner finished")
}

/// The same from inside a may coroutine.
fn may_inside() -> Duration {
    May::spawn(0, || {
        spawn_window(COUNT, WINDOW, |i| {
            let h = May::spawn(i, move || i);
            move || h.join().unwrap()
        })
    })
    .join()
    .expect("the spawner finished")
}

fn bench(c: &mut Criterion) {
    May::configure();
    let rt = Runtime::builder().executors(2).build().expect("a runtime");
    let swco = Swco::<Cas>::new(&rt, Place::Policy);
    let mut g = c.benchmark_group("spawn");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let rounds = |iters: u64, f: &dyn Fn() -> Duration| (0..iters).map(|_| f()).sum::<Duration>();
    g.bench_function("join-100000/swco", |b| {
        b.iter_custom(|i| rounds(i, &|| spawn_join(&swco, COUNT, WINDOW)))
    });
    g.bench_function("join-100000/may", |b| {
        b.iter_custom(|i| rounds(i, &|| spawn_join(&May, COUNT, WINDOW)))
    });
    g.bench_function("join-100000-inside/swco", |b| {
        b.iter_custom(|i| rounds(i, &|| swco_inside(&rt)))
    });
    g.bench_function("join-100000-inside/may", |b| {
        b.iter_custom(|i| rounds(i, &|| may_inside()))
    });
    g.bench_function("chain-10000/swco", |b| {
        b.iter_custom(|i| rounds(i, &|| chain(&swco, 10_000)))
    });
    g.bench_function("chain-10000/may", |b| {
        b.iter_custom(|i| rounds(i, &|| chain(&May, 10_000)))
    });
    g.finish();
    rt.shutdown();
}

criterion_group! {
    name = benches;
    config = swco_bench::criterion_config();
    targets = bench
}
criterion_main!(benches);
