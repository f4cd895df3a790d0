//! The athread / swYAKL model against its peers, in one run: a
//! `parallel_reduce` over 20 M indices (the sum of `(i as f64).sqrt().sin()`,
//! grain 4096) against rayon's `par_iter().with_min_len(4096)` on a pool of
//! the same size, and a `spawn_all` launch + join against a loop of
//! `spawn_on` + `join`, one per executor.
//!
//! ```text
//! cargo run --release -p swco-bench --example athread [-- --n N] [--grain G] [--reps R] [--launches L] [--executors E,E,..] [--only reduce|launch]
//! ```
//!
//! Every run checks its result: the reduction must match a serial sum
//! within 1e-9 relative, and every launch must return each executor's
//! index in order. A wrong result is a failure (exit code 1), not a figure.
//! Each figure is the median of R runs; swco and its peer alternate run by
//! run, so the host's swings in speed fall on both, and each ratio is of
//! the two medians, with the range of the rounds' own ratios.

use std::time::{Duration, Instant};

use rayon::prelude::*;
use swco::Runtime;

struct Args {
    n: usize,
    grain: usize,
    reps: usize,
    launches: usize,
    executors: Vec<usize>,
    /// Run only this part (`reduce` or `launch`); both if `None`.
    only: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        n: 20_000_000,
        grain: 4096,
        reps: 7,
        launches: 2000,
        executors: vec![2, 64],
        only: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--n" => a.n = value.parse().unwrap(),
            "--grain" => a.grain = value.parse().unwrap(),
            "--reps" => a.reps = value.parse().unwrap(),
            "--launches" => a.launches = value.parse().unwrap(),
            "--executors" => a.executors = value.split(',').map(|v| v.parse().unwrap()).collect(),
            "--only" => match value.as_str() {
                "reduce" | "launch" => a.only = Some(value.clone()),
                other => panic!("--only takes reduce or launch, not {other}"),
            },
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

fn term(i: usize) -> f64 {
    (i as f64).sqrt().sin()
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn ratio_range(a: &[Duration], b: &[Duration]) -> (f64, f64) {
    let r: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(x, y)| x.as_secs_f64() / y.as_secs_f64())
        .collect();
    (
        r.iter().copied().fold(f64::INFINITY, f64::min),
        r.iter().copied().fold(0.0, f64::max),
    )
}

fn check_sum(what: &str, got: f64, want: f64) {
    let rel = ((got - want) / want).abs();
    if rel > 1e-9 {
        eprintln!("{what}: sum {got} differs from the serial {want} (relative {rel:e})");
        std::process::exit(1);
    }
}

fn reduce(a: &Args, executors: usize, serial: f64) {
    let rt = Runtime::builder().executors(executors).build().unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(executors)
        .build()
        .unwrap();
    let (mut swco_t, mut rayon_t) = (Vec::new(), Vec::new());
    for _ in 0..a.reps {
        let t = Instant::now();
        let s = rt.parallel_reduce(
            0..a.n,
            a.grain,
            0.0,
            |r| r.map(term).sum::<f64>(),
            |x, y| x + y,
        );
        swco_t.push(t.elapsed());
        check_sum("swco parallel_reduce", s, serial);
        let t = Instant::now();
        let s: f64 = pool.install(|| {
            (0..a.n)
                .into_par_iter()
                .with_min_len(a.grain)
                .map(term)
                .sum()
        });
        rayon_t.push(t.elapsed());
        check_sum("rayon", s, serial);
    }
    let (lo, hi) = ratio_range(&swco_t, &rayon_t);
    let (ms, mr) = (median(&mut swco_t), median(&mut rayon_t));
    println!(
        "parallel_reduce n={} grain={} executors={executors}: swco {:.2} ms, rayon {:.2} ms, \
         swco/rayon {:.3} (rounds {lo:.3}..{hi:.3})",
        a.n,
        a.grain,
        ms.as_secs_f64() * 1e3,
        mr.as_secs_f64() * 1e3,
        ms.as_secs_f64() / mr.as_secs_f64(),
    );
}

fn launch(a: &Args, executors: usize) {
    let rt = Runtime::builder().executors(executors).build().unwrap();
    let want: Vec<usize> = (0..executors).collect();
    let (mut all_t, mut loop_t) = (Vec::new(), Vec::new());
    for _ in 0..a.reps {
        let t = Instant::now();
        for _ in 0..a.launches {
            let got = rt.spawn_all(|cpe| cpe).join().unwrap();
            if got != want {
                eprintln!("spawn_all returned {got:?}");
                std::process::exit(1);
            }
        }
        all_t.push(t.elapsed() / a.launches as u32);
        let t = Instant::now();
        for _ in 0..a.launches {
            let handles: Vec<_> = (0..executors)
                .map(|cpe| rt.spawn_on(cpe, move || cpe).unwrap())
                .collect();
            let got: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            if got != want {
                eprintln!("spawn_on loop returned {got:?}");
                std::process::exit(1);
            }
        }
        loop_t.push(t.elapsed() / a.launches as u32);
    }
    let (lo, hi) = ratio_range(&all_t, &loop_t);
    let (ma, ml) = (median(&mut all_t), median(&mut loop_t));
    println!(
        "launch + join executors={executors}: spawn_all {:.2} us, spawn_on loop {:.2} us, \
         spawn_all/loop {:.3} (rounds {lo:.3}..{hi:.3})",
        ma.as_secs_f64() * 1e6,
        ml.as_secs_f64() * 1e6,
        ma.as_secs_f64() / ml.as_secs_f64(),
    );
}

fn main() {
    let a = args();
    if a.only.as_deref() != Some("launch") {
        let serial: f64 = (0..a.n).map(term).sum();
        for &e in &a.executors {
            reduce(&a, e, serial);
        }
    }
    if a.only.as_deref() != Some("reduce") {
        for &e in &a.executors {
            launch(&a, e);
        }
    }
}
