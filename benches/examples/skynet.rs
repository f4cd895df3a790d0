//! What a coroutine costs: skynet (a tree of 1 000 000 leaf coroutines, ten
//! children per node, every node spawned from inside its parent with
//! `swco::spawn`), the 10 000-coroutine daisy chain (spawned from an OS
//! thread, one blocking hand-off each) and a ping-pong of 200 000 round
//! trips through two zero-capacity (rendezvous) channels between two
//! coroutines on one executor, beside the same programs in Go
//! (`benches/go/*.go`, built with `go build` when `go` is on the `PATH`; the
//! ping-pong run with `GOMAXPROCS=1`), in the same run and alternating
//! with swco run by run, so that this host's swings in speed fall on both;
//! then 200 000 coroutines
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
//! of the medians swco/Go with the range of the rounds' own ratios (each
//! swco run over the Go run right after it), and this process's peak
//! resident set (VmHWM), which covers swco only (Go runs in its own
//! process).

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

/// A Go peer, `benches/go/<program>.go`, built once (`go build`) so that
/// its runs can alternate with swco's, one by one.
struct GoPeer {
    program: &'static str,
    binary: std::path::PathBuf,
    env: &'static [(&'static str, &'static str)],
}

impl GoPeer {
    /// Builds the peer into `dir`; `None` (with a note) when Go is not
    /// installed or the build fails.
    fn build(
        program: &'static str,
        env: &'static [(&'static str, &'static str)],
        dir: &Path,
    ) -> Option<GoPeer> {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("go/{program}.go"));
        let binary = dir.join(program);
        let out = Command::new("go")
            .arg("build")
            .arg("-o")
            .arg(&binary)
            .arg(&source)
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!(
                "go build {program}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        Some(GoPeer {
            program,
            binary,
            env,
        })
    }

    /// One warm run for the size `arg`: the program runs twice (its own
    /// repetition count), and the second run counts, as swco's runs come
    /// after a warm-up too. Its output lines are `<name> <result>
    /// <milliseconds>`; a result other than `expected` fails the benchmark.
    fn run(&self, arg: u64, expected: u64) -> Option<Duration> {
        let out = Command::new(&self.binary)
            .envs(self.env.iter().copied())
            .arg(arg.to_string())
            .arg("2")
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!(
                "go {}: {}",
                self.program,
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        let mut last = None;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let result: u64 = f[1].parse().expect("a Go result");
            if result != expected {
                eprintln!(
                    "go {}: wrong result {result}, expected {expected}",
                    self.program
                );
                std::process::exit(1);
            }
            last = Some(Duration::from_secs_f64(
                f[2].parse::<f64>().expect("Go milliseconds") / 1e3,
            ));
        }
        last
    }
}

/// A warm-up run of swco (not counted), then `reps` rounds, each running
/// swco once and then its Go peer once (if any, for the size `arg`, which
/// must give `expected`), so that a host that speeds up or slows down
/// during the run moves both alike; then the report of both.
fn compare(
    name: &str,
    reps: usize,
    mut swco: impl FnMut() -> Duration,
    go: Option<&GoPeer>,
    arg: u64,
    expected: u64,
) {
    swco();
    let mut ours = Vec::with_capacity(reps);
    let mut theirs = go.map(|_| Vec::with_capacity(reps));
    for _ in 0..reps {
        ours.push(swco());
        if let (Some(peer), Some(times)) = (go, theirs.as_mut()) {
            match peer.run(arg, expected) {
                Some(t) => times.push(t),
                None => theirs = None,
            }
        }
    }
    report(name, &ours, theirs.as_deref());
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

/// Prints the medians and their ratio, and the range of the ratios of the
/// rounds (swco's run over the Go run that followed it).
fn report(name: &str, swco: &[Duration], go: Option<&[Duration]>) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let ours = median(swco.to_vec());
    match go {
        Some(go) if go.len() == swco.len() => {
            let theirs = median(go.to_vec());
            let ratios: Vec<f64> = swco
                .iter()
                .zip(go)
                .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
                .collect();
            let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = ratios.iter().copied().fold(0.0, f64::max);
            println!(
                "{name:<14} swco {:>9.1} ms   Go {:>9.1} ms   swco/Go {:.2} (rounds {lo:.2}-{hi:.2})",
                ms(ours),
                ms(theirs),
                ours.as_secs_f64() / theirs.as_secs_f64()
            );
        }
        _ => println!("{name:<14} swco {:>9.1} ms   (Go not installed)", ms(ours)),
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

    let dir = std::env::temp_dir().join(format!("swco-skynet-go-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let go_skynet = GoPeer::build("skynet", &[], &dir);
    let go_chain = GoPeer::build("chain", &[], &dir);
    let go_pingpong = GoPeer::build("pingpong", &[("GOMAXPROCS", "1")], &dir);

    compare(
        &format!("skynet {leaves}"),
        reps,
        || swco_skynet(&rt, leaves),
        go_skynet.as_ref(),
        leaves,
        leaves * (leaves - 1) / 2,
    );
    let sky_rss = peak_rss_mib();
    compare(
        &format!("chain {chain}"),
        reps,
        || swco_chain(&rt, chain),
        go_chain.as_ref(),
        chain as u64,
        1 + chain as u64,
    );
    compare(
        &format!("rendezvous {rounds}"),
        reps,
        || swco_rendezvous_pingpong(&rt, rounds),
        go_pingpong.as_ref(),
        rounds,
        rounds * (rounds + 1) / 2,
    );
    let _ = std::fs::remove_dir_all(&dir);

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
