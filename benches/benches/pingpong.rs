//! Round-trip latency through two capacity-1 channels: every hand-off takes
//! the blocking path (suspend, wake, resume). Coroutines on one executor
//! (a context switch per hop, no cross-core traffic), on two executors (a
//! cross-core wake per hop), and an OS thread talking to a coroutine;
//! against may coroutines and crossbeam-channel between OS threads.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use swco::channel::{Cas, Updt};
use swco::Runtime;
use swco_bench::{pingpong, pingpong_from_thread, pingpong_spsc, Crossbeam, May, Place, Swco};

/// `iters` round trips between a coroutine on executor `a` and one on `b`,
/// through SPSC channels.
fn bench(c: &mut Criterion) {
    May::configure();
    // One executor per core, as a deployment on this machine would have.
    let rt = Runtime::builder().executors(2).build().expect("a runtime");
    let mut g = c.benchmark_group("pingpong");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));

    let packed_cas = Swco::<Cas>::new(&rt, Place::Packed);
    let packed_updt = Swco::<Updt>::new(&rt, Place::Packed);
    let spread_cas = Swco::<Cas>::new(&rt, Place::Spread);
    let spread_updt = Swco::<Updt>::new(&rt, Place::Spread);
    g.bench_function("swco-cas/one-executor", |b| {
        b.iter_custom(|i| pingpong(&packed_cas, i))
    });
    g.bench_function("swco-updt/one-executor", |b| {
        b.iter_custom(|i| pingpong(&packed_updt, i))
    });
    g.bench_function("swco-cas/two-executors", |b| {
        b.iter_custom(|i| pingpong(&spread_cas, i))
    });
    g.bench_function("swco-updt/two-executors", |b| {
        b.iter_custom(|i| pingpong(&spread_updt, i))
    });
    // The same through SPSC channels: each side waits in its single-waiter
    // slot rather than on a waiter list.
    g.bench_function("swco-cas-spsc/one-executor", |b| {
        b.iter_custom(|i| pingpong_spsc(&rt, 0, 0, i))
    });
    g.bench_function("swco-cas-spsc/two-executors", |b| {
        b.iter_custom(|i| pingpong_spsc(&rt, 0, 1, i))
    });
    g.bench_function("swco-cas/thread-coroutine", |b| {
        b.iter_custom(|i| pingpong_from_thread(&packed_cas, i))
    });
    g.bench_function("swco-updt/thread-coroutine", |b| {
        b.iter_custom(|i| pingpong_from_thread(&packed_updt, i))
    });
    g.bench_function("may/two-coroutines", |b| {
        b.iter_custom(|i| pingpong(&May, i))
    });
    g.bench_function("may/thread-coroutine", |b| {
        b.iter_custom(|i| pingpong_from_thread(&May, i))
    });
    g.bench_function("crossbeam/two-threads", |b| {
        b.iter_custom(|i| pingpong(&Crossbeam, i))
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
