//! Spawning: 100 000 trivial coroutines spawned and joined from an OS
//! thread (at most 10 000 outstanding, see `common::spawn_join`), and the
//! 10 000-coroutine daisy chain (spawn, one blocking hand-off each, join),
//! against may.

#[path = "common/mod.rs"]
mod common;

use std::time::Duration;

use common::{chain, spawn_join, May, Place, Swco};
use criterion::{criterion_group, criterion_main, Criterion};
use swco::channel::Cas;
use swco::Runtime;

/// Coroutines spawned and not yet joined, at most.
const WINDOW: usize = 10_000;

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
        b.iter_custom(|i| rounds(i, &|| spawn_join(&swco, 100_000, WINDOW)))
    });
    g.bench_function("join-100000/may", |b| {
        b.iter_custom(|i| rounds(i, &|| spawn_join(&May, 100_000, WINDOW)))
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
    // No plots: drawing them costs about as much as a short benchmark, and
    // the whole suite must finish in 15 minutes on 2 cores.
    config = Criterion::default().without_plots();
    targets = bench
}
criterion_main!(benches);
