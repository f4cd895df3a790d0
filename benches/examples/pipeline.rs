//! A million messages through MPMC channels between OS threads: 2 producers,
//! 2 consumers, for each swco protocol and for crossbeam-channel's `bounded`
//! in the same run. Prints messages per second (median of 5 runs) and the
//! ratio to crossbeam.
//!
//! ```text
//! cargo run --release -p swco-bench --example pipeline [-- --messages N --capacity C --trace PATH]
//! ```
//!
//! With `--trace PATH` (or `SWCO_TRACE=PATH` in the environment) it then
//! runs the same pipeline once more, as coroutines on a two-executor swco
//! runtime (`cas`) that records a trace to PATH
//! ([`RuntimeBuilder::trace`](swco::RuntimeBuilder::trace)): open it in
//! Perfetto, or draw it with the `trace_svg` example.

use std::thread;
use std::time::{Duration, Instant};

use swco::channel::{mpmc, Cas, Protocol, Updt};
use swco::Runtime;

const PRODUCERS: usize = 2;
const CONSUMERS: usize = 2;
const RUNS: usize = 5;

/// Runs one pass: `messages` split over the producers, summed by the
/// consumers; checks the sum so the work cannot be optimised away.
fn pass<S, R>(messages: u64, tx: S, rx: R) -> Duration
where
    S: Fn(u64) + Clone + Send + 'static,
    R: Fn() -> Option<u64> + Clone + Send + 'static,
{
    let start = Instant::now();
    let per = messages / PRODUCERS as u64;
    let producers: Vec<_> = (0..PRODUCERS as u64)
        .map(|p| {
            let tx = tx.clone();
            thread::spawn(move || (p * per..(p + 1) * per).for_each(&tx))
        })
        .collect();
    drop(tx);
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let rx = rx.clone();
            thread::spawn(move || std::iter::from_fn(&rx).sum::<u64>())
        })
        .collect();
    drop(rx);
    producers.into_iter().for_each(|p| p.join().unwrap());
    let sum: u64 = consumers.into_iter().map(|c| c.join().unwrap()).sum();
    let elapsed = start.elapsed();
    let n = per * PRODUCERS as u64;
    assert_eq!(sum, n * (n - 1) / 2, "lost or duplicated messages");
    elapsed
}

// Each producer and consumer thread gets its own clone of a closure, and so
// its own endpoint: when the last clone goes, the channel disconnects and the
// consumers' loops end.

fn swco_pass<P: Protocol>(messages: u64, capacity: usize) -> Duration {
    let (tx, rx) = mpmc::bounded_with::<u64, P>(capacity);
    pass(
        messages,
        move |v| tx.send(v).unwrap(),
        move || rx.recv().ok(),
    )
}

fn crossbeam_pass(messages: u64, capacity: usize) -> Duration {
    let (tx, rx) = crossbeam_channel::bounded::<u64>(capacity);
    pass(
        messages,
        move |v| tx.send(v).unwrap(),
        move || rx.recv().ok(),
    )
}

/// The pipeline as coroutines, traced to `path`: producer `p` on
/// executor `p % 2`, consumer `c` on executor `(c + 1) % 2`, so each
/// executor holds a producer and a consumer of the one channel.
fn traced_pass(messages: u64, capacity: usize, path: &str) -> Duration {
    let rt = Runtime::builder()
        .executors(2)
        .trace(path)
        .build()
        .unwrap_or_else(|e| panic!("cannot trace to {path}: {e}"));
    let (tx, rx) = mpmc::bounded_with::<u64, Cas>(capacity);
    let per = messages / PRODUCERS as u64;
    let start = Instant::now();
    let producers: Vec<_> = (0..PRODUCERS as u64)
        .map(|p| {
            let tx = tx.clone();
            rt.spawn_builder()
                .name(format!("producer {p}"))
                .on(p as usize % 2)
                .spawn(move || (p * per..(p + 1) * per).for_each(|v| tx.send(v).unwrap()))
                .expect("spawn")
        })
        .collect();
    drop(tx);
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|c| {
            let rx = rx.clone();
            rt.spawn_builder()
                .name(format!("consumer {c}"))
                .on((c + 1) % 2)
                .spawn(move || rx.iter().sum::<u64>())
                .expect("spawn")
        })
        .collect();
    drop(rx);
    producers.into_iter().for_each(|p| p.join().unwrap());
    let sum: u64 = consumers.into_iter().map(|c| c.join().unwrap()).sum();
    let elapsed = start.elapsed();
    let n = per * PRODUCERS as u64;
    assert_eq!(sum, n * (n - 1) / 2, "lost or duplicated messages");
    rt.shutdown(); // writes the trace
    elapsed
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

/// The value after `name` on the command line, if any.
fn arg_str(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn main() {
    let messages = arg("--messages", 1_000_000);
    let capacity = arg("--capacity", 1024) as usize;
    println!(
        "{messages} messages, MPMC {PRODUCERS}P/{CONSUMERS}C, capacity {capacity}, OS threads, median of {RUNS}"
    );
    let mut rows: Vec<(&str, Vec<Duration>)> = vec![
        ("swco cas", vec![]),
        ("swco updt", vec![]),
        ("crossbeam", vec![]),
    ];
    // Interleave the systems so machine noise hits them alike.
    for _ in 0..RUNS {
        rows[0].1.push(swco_pass::<Cas>(messages, capacity));
        rows[1].1.push(swco_pass::<Updt>(messages, capacity));
        rows[2].1.push(crossbeam_pass(messages, capacity));
    }
    let rate = |d: Duration| messages as f64 / d.as_secs_f64();
    let base = rate(median(rows[2].1.clone()));
    println!("{:<12} {:>14} {:>12}", "system", "msgs/s", "vs crossbeam");
    for (name, times) in rows {
        let r = rate(median(times));
        println!("{name:<12} {r:>14.0} {:>11.2}x", r / base);
    }
    if let Some(path) = arg_str("--trace").or_else(|| std::env::var("SWCO_TRACE").ok()) {
        let d = traced_pass(messages, capacity, &path);
        println!(
            "traced: swco cas, coroutines on 2 executors, {:.0} msgs/s; trace written to {path}",
            rate(d)
        );
    }
}
