//! Ping-pong round trips through two capacity-1 channels, every hop taking
//! the blocking path, for swco and its peers *interleaved* in one process:
//! each round runs every system once, and the figures are medians over the
//! rounds, so a machine that speeds up or slows down during the run moves
//! all systems alike. The criterion suite (`benches/pingpong.rs`) runs the
//! systems one after the other, and on a shared virtual machine their
//! ratios then drift by tens of percent between runs.
//!
//! ```text
//! cargo run --release -p swco-bench --example pingpong [-- --rounds R] [--iters N]
//! ```
//!
//! Rows: swco `cas`, `updt` (MPMC channels) and `cas` SPSC, with both
//! coroutines on one executor, then on two executors; may's two coroutines
//! (one worker per core, may's default); crossbeam-channel between two OS
//! threads. Each figure is a median in ns per round trip, with the range
//! over the rounds; the last column is the ratio of medians to the peer
//! named for that row (may for one executor, crossbeam for two). Every
//! round trip checks that the reply is the ping it answers.

use std::time::Duration;

use swco::channel::{Cas, Updt};
use swco::Runtime;
use swco_bench::{pingpong, pingpong_spsc, Crossbeam, May, Place, Swco};

fn main() {
    let mut rounds = 9usize;
    let mut iters = 100_000u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |what: &str| -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{a} needs a number ({what})"))
        };
        match a.as_str() {
            "--rounds" => rounds = value("rounds").max(1) as usize,
            "--iters" => iters = value("round trips per measurement").max(1),
            "-h" | "--help" => {
                println!("pingpong [--rounds R] [--iters N]");
                return;
            }
            other => panic!("unknown argument {other}"),
        }
    }
    May::configure();
    let rt = Runtime::builder().executors(2).build().expect("a runtime");
    let packed_cas = Swco::<Cas>::new(&rt, Place::Packed);
    let packed_updt = Swco::<Updt>::new(&rt, Place::Packed);
    let spread_cas = Swco::<Cas>::new(&rt, Place::Spread);
    let spread_updt = Swco::<Updt>::new(&rt, Place::Spread);
    type Run<'a> = Box<dyn Fn(u64) -> Duration + 'a>;
    let systems: Vec<(&str, Run)> = vec![
        (
            "swco cas, one executor",
            Box::new(|i| pingpong(&packed_cas, i)),
        ),
        (
            "swco updt, one executor",
            Box::new(|i| pingpong(&packed_updt, i)),
        ),
        (
            "swco cas SPSC, one executor",
            Box::new(|i| pingpong_spsc(&rt, 0, 0, i)),
        ),
        ("may, two coroutines", Box::new(|i| pingpong(&May, i))),
        (
            "swco cas, two executors",
            Box::new(|i| pingpong(&spread_cas, i)),
        ),
        (
            "swco updt, two executors",
            Box::new(|i| pingpong(&spread_updt, i)),
        ),
        (
            "swco cas SPSC, two executors",
            Box::new(|i| pingpong_spsc(&rt, 0, 1, i)),
        ),
        (
            "crossbeam, two threads",
            Box::new(|i| pingpong(&Crossbeam, i)),
        ),
    ];
    // Warm-up: stacks carved, threads awake, may's workers started.
    for (_, run) in &systems {
        run(iters / 10);
    }
    let mut ns: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); systems.len()];
    for _ in 0..rounds {
        for (k, (_, run)) in systems.iter().enumerate() {
            ns[k].push(run(iters).as_nanos() as f64 / iters as f64);
        }
    }
    rt.shutdown();
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let may = median(&ns[3]);
    let crossbeam = median(&ns[7]);
    println!("{rounds} rounds of {iters} round trips per system, interleaved; ns per round trip");
    for (k, (name, _)) in systems.iter().enumerate() {
        let m = median(&ns[k]);
        let lo = ns[k].iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ns[k].iter().copied().fold(0.0, f64::max);
        let ratio = match k {
            0..=2 => format!("{:.2}x may", m / may),
            4..=6 => format!("{:.2}x crossbeam", m / crossbeam),
            _ => String::new(),
        };
        println!("{name:<30} {m:8.1}  ({lo:.1}-{hi:.1})  {ratio}");
    }
}
