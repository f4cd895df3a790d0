//! The seed paper's Table 1 cells under criterion: per-operation send and
//! receive time as seen by one producer or consumer, by n. Same harness as
//! `examples/table1.rs` (which prints the table, the CSV and the plot);
//! this gives criterion's statistics and change detection.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use swco::channel::{Cas, Updt};
use swco::Runtime;
use swco_bench::{
    bench_name, table1_iters, Crossbeam, May, Place, Swco, System, TABLE1_EXECUTORS, TABLE1_N,
};

fn cells<S: System>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    sys: &S,
    recv: bool,
) {
    let name = bench_name(sys.label());
    for n in TABLE1_N {
        group.bench_with_input(BenchmarkId::new(&name, n), &n, |b, &n| {
            b.iter_custom(|iters| table1_iters(sys, n, iters, recv))
        });
    }
}

fn table1(c: &mut Criterion) {
    May::configure();
    let rt = Runtime::builder()
        .executors(TABLE1_EXECUTORS)
        .build()
        .expect("a runtime");
    for (phase, recv) in [("send", false), ("recv", true)] {
        let mut g = c.benchmark_group(format!("table1/{phase}"));
        // Flat: every sample runs the same number of operations, so the
        // rounds of `table1_iters` are alike. Few, short samples: 36
        // benchmarks must fit the suite's 15-minute budget on 2 cores.
        g.sampling_mode(SamplingMode::Flat)
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_millis(700));
        cells(&mut g, &Swco::<Cas>::new(&rt, Place::Packed), recv);
        cells(&mut g, &Swco::<Cas>::new(&rt, Place::Spread), recv);
        cells(&mut g, &Swco::<Updt>::new(&rt, Place::Packed), recv);
        cells(&mut g, &Swco::<Updt>::new(&rt, Place::Spread), recv);
        cells(&mut g, &Crossbeam, recv);
        cells(&mut g, &May, recv);
        g.finish();
    }
    rt.shutdown();
}

criterion_group! {
    name = benches;
    config = swco_bench::criterion_config();
    targets = table1
}
criterion_main!(benches);
