//! MPMC throughput with small and large buffers: capacity 1, 16 and 1024 at
//! 1, 4 and 16 producer/consumer pairs. With capacity 1 or 16 most sends
//! and receives find the ring full or empty, so this measures the blocking
//! path (waiter lists, suspend, wake) as well as the fast path. swco
//! coroutines on one executor per core (producers on executor 0, consumers
//! on executor 1), may coroutines queued likewise on its 2 workers,
//! crossbeam-channel on OS threads.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use swco::channel::{Cas, Updt};
use swco::Runtime;
use swco_bench::{bench_name, throughput, Crossbeam, May, Place, Swco, System};

fn cells<S: System>(c: &mut Criterion, sys: &S) {
    let name = bench_name(sys.label());
    for capacity in [1usize, 16, 1024] {
        let mut g = c.benchmark_group(format!("throughput/cap{capacity}"));
        g.throughput(Throughput::Elements(1))
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        for pairs in [1usize, 4, 16] {
            g.bench_with_input(
                BenchmarkId::new(&name, format!("{pairs}p{pairs}c")),
                &pairs,
                |b, &pairs| b.iter_custom(|iters| throughput(sys, pairs, capacity, iters)),
            );
        }
        g.finish();
    }
}

fn bench(c: &mut Criterion) {
    May::configure();
    let rt = Runtime::builder().executors(2).build().expect("a runtime");
    cells(c, &Swco::<Cas>::new(&rt, Place::Spread));
    cells(c, &Swco::<Updt>::new(&rt, Place::Spread));
    cells(c, &Crossbeam);
    cells(c, &May);
    rt.shutdown();
}

criterion_group! {
    name = benches;
    config = swco_bench::criterion_config();
    targets = bench
}
criterion_main!(benches);
