//! What a coroutine costs: skynet (a tree of 1 000 000 leaf coroutines, ten
//! children per node, every node spawned from inside its parent with
//! `swco::spawn`), the 10 000-coroutine daisy chain (spawned from an OS
//! thread, one blocking hand-off each) and a ping-pong of 200 000 round
//! trips through two zero-capacity (rendezvous) channels between two
//! coroutines on one executor, beside the same programs in Go
//! (`bench/go/*.go`, run with `go run` when `go` is on the `PATH`; the
//! ping-pong with `GOMAXPROCS=1`), in the same run; then 200 000 coroutines
//! blocked at once (each in `recv` on its own channel, 16 KiB stacks), all
//! released, with the peak resident set.
//!
//! ```text
//! cargo run --release -p swco-bench --example skynet [-- --leaves N] [--chain N] [--rounds N] [--blocked N] [--reps R] [--executors E]
//! ```
//!
//! Every run checks its result: skynet's sum must be `N(N-1)/2`, and every
//! `join` must succeed; the chain must deliver `N + 1`; the ping-pong's sum
//! must be `N(N+1)/2`. A wrong sum or a dropped coroutine is a failure (exit
//! code 1), not a figure. Prints the median of R runs per system, the ratio
//! swco/Go, and this process's peak resident set (VmHWM), which covers swco
//! only (Go runs in its own process).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use swco::channel::spsc;
use swco::Runtime;
use swco_bench::spawn_chain;

/// A skynet node: the sum of the numbers of its `size` leaves.
fn skynet(num: u64, size: u64, div: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let child = size / div;
    let handles: Vec<_> = (0..div)
        .map(|i| swco::spawn(move || skynet(num + i * child, child, div)))
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("a skynet coroutine was lost"))
        .sum()
}

fn swco_skynet(rt: &Runtime, leaves: u64) -> Duration {
    let start = Instant::now();
    let sum = rt
        .spawn(move || skynet(0, leaves, 10))
        .join()
        .expect("the skynet root was lost");
    let took = start.elapsed();
    let expected = leaves * (leaves - 1) / 2;
    if sum != expected {
        eprintln!("skynet: wrong sum {sum}, expected {expected}");
        std::process::exit(1);
    }
    took
}

fn swco_chain(rt: &Runtime, n: usize) -> Duration {
    let start = Instant::now();
    let chain = spawn_chain(rt, n);
    let passed = chain.pass();
    chain.join();
    let took = start.elapsed();
    if let Err(got) = passed {
        eprintln!("chain: got {got}, expected {}", 1 + n);
        std::process::exit(1);
    }
    took
}

/// `rounds` round trips through two zero-capacity (rendezvous) channels
/// between two coroutines on executor 0: every hand-off blocks one side.
/// Checks the sum of the values that came back.
fn swco_rendezvous_pingpong(rt: &Runtime, rounds: u64) -> Duration {
    let (ping_tx, ping_rx) = spsc::bounded::<u64>(0);
    let (pong_tx, pong_rx) = spsc::bounded::<u64>(0);
    let echo = rt
        .spawn_on(0, move || {
            for v in ping_rx {
                pong_tx.send(v + 1).expect("the pinger waits");
            }
        })
        .expect("executor 0 exists");
    let pinger = rt
        .spawn_on(0, move || {
            let start = Instant::now();
            let mut sum = 0;
            for i in 0..rounds {
                ping_tx.send(i).expect("the echo waits");
                sum += pong_rx.recv().expect("an echo");
            }
            (start.elapsed(), sum)
        })
        .expect("executor 0 exists");
    let (took, sum) = pinger.join().expect("the pinger was lost");
    echo.join().expect("the echo was lost");
    if sum != rounds * (rounds + 1) / 2 {
        eprintln!("rendezvous ping-pong: wrong sum {sum}");
        std::process::exit(1);
    }
    took
}

/// `n` coroutines, each parked in `recv` on its own channel, all at once;
/// then all released. Checks the exact count and sum.
fn swco_blocked(n: u64, executors: usize) -> Duration {
    let rt = Runtime::builder()
        .executors(executors)
        .stack_size(swco::MIN_STACK_SIZE)
        .build()
        .expect("a runtime");
    let start = Instant::now();
    let (senders, handles): (Vec<_>, Vec<_>) = (0..n)
        .map(|_| {
            let (tx, rx) = spsc::bounded::<u64>(1);
            (tx, rt.spawn(move || rx.recv().unwrap()))
        })
        .unzip();
    while {
        let t = rt.stats().total();
        t.blocks - t.wakes < n
    } {
        std::thread::sleep(Duration::from_micros(100));
    }
    for (i, tx) in senders.iter().enumerate() {
        tx.send(i as u64).unwrap();
    }
    let sum: u64 = handles
        .into_iter()
        .map(|h| h.join().expect("a blocked coroutine was lost"))
        .sum();
    let took = start.elapsed();
    // A join returns as soon as the result is handed over, a moment before
    // the executor counts the coroutine finished: count after shutdown.
    rt.shutdown();
    if sum != n * (n - 1) / 2 || rt.stats().total().finished != n {
        eprintln!("blocked: wrong sum {sum} or count");
        std::process::exit(1);
    }
    took
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Runs `bench/go/<program>.go` with `args`; its lines are
/// `<name> <result> <milliseconds>`. Checks every result against
/// `expected`. `None` when Go is not installed.
fn go_runs(
    program: &str,
    args: &[String],
    env: &[(&str, &str)],
    expected: u64,
) -> Option<Vec<Duration>> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("go/{program}.go"));
    let out = Command::new("go")
        .envs(env.iter().copied())
        .arg("run")
        .arg(&source)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "go run {program}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    }
    let runs = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let result: u64 = f[1].parse().expect("a Go result");
            if result != expected {
                eprintln!("go {program}: wrong result {result}, expected {expected}");
                std::process::exit(1);
            }
            Duration::from_secs_f64(f[2].parse::<f64>().expect("Go milliseconds") / 1e3)
        })
        .collect();
    Some(runs)
}

fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

fn report(name: &str, swco: Duration, go: Option<Vec<Duration>>) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    match go {
        Some(go) => {
            let go = median(go);
            println!(
                "{name:<14} swco {:>9.1} ms   Go {:>9.1} ms   swco/Go {:.2}",
                ms(swco),
                ms(go),
                swco.as_secs_f64() / go.as_secs_f64()
            );
        }
        None => println!("{name:<14} swco {:>9.1} ms   (Go not installed)", ms(swco)),
    }
}

fn main() {
    let mut leaves: u64 = 1_000_000;
    let mut chain: usize = 10_000;
    let mut blocked: u64 = 200_000;
    let mut reps: usize = 5;
    let mut executors: usize = 2;
    let mut rounds: u64 = 200_000;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |what: &str| {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{a} needs a number ({what})"))
        };
        match a.as_str() {
            "--leaves" => leaves = value("leaves, a power of ten"),
            "--chain" => chain = value("coroutines") as usize,
            "--blocked" => blocked = value("coroutines"),
            "--reps" => reps = value("runs per system") as usize,
            "--executors" => executors = value("executors") as usize,
            "--rounds" => rounds = value("ping-pong round trips"),
            "-h" | "--help" => {
                println!(
                    "skynet [--leaves N] [--chain N] [--rounds N] [--blocked N] [--reps R] [--executors E]"
                );
                return;
            }
            other => panic!("unknown argument {other}"),
        }
    }
    let rt = Runtime::builder()
        .executors(executors)
        .build()
        .expect("a runtime");
    println!(
        "{executors} executors, median of {reps} runs; Go with GOMAXPROCS = all cores (its default)"
    );

    let sky: Vec<Duration> = (0..reps).map(|_| swco_skynet(&rt, leaves)).collect();
    let go = go_runs(
        "skynet",
        &[leaves.to_string(), reps.to_string()],
        &[],
        leaves * (leaves - 1) / 2,
    );
    report(&format!("skynet {leaves}"), median(sky), go);
    let sky_rss = peak_rss_mib();

    let ch: Vec<Duration> = (0..reps).map(|_| swco_chain(&rt, chain)).collect();
    let go = go_runs(
        "chain",
        &[chain.to_string(), reps.to_string()],
        &[],
        1 + chain as u64,
    );
    report(&format!("chain {chain}"), median(ch), go);

    let pp: Vec<Duration> = (0..reps)
        .map(|_| swco_rendezvous_pingpong(&rt, rounds))
        .collect();
    let go = go_runs(
        "pingpong",
        &[rounds.to_string(), reps.to_string()],
        &[("GOMAXPROCS", "1")],
        rounds * (rounds + 1) / 2,
    );
    report(&format!("rendezvous {rounds}"), median(pp), go);

    rt.shutdown();
    let stats = rt.stats().total();
    if let Some(mib) = sky_rss {
        println!(
            "peak RSS after skynet {mib:.1} MiB; after both: {:.1} MiB; \
             {} coroutines run, {} stacks carved",
            peak_rss_mib().unwrap_or(0.0),
            stats.finished,
            stats.stacks_mapped
        );
    }

    let took = swco_blocked(blocked, executors);
    println!(
        "blocked {blocked}: all parked at once, then released, in {:.1} ms; peak RSS {:.1} MiB",
        took.as_secs_f64() * 1e3,
        peak_rss_mib().unwrap_or(0.0)
    );
}
