//! What recording a trace costs ([`RuntimeBuilder::trace`]): the ping-pong
//! of `hop_cost` (two coroutines on one executor, two capacity-1 SPSC
//! channels, every hop a park, a wake and a run), timed with and without a
//! trace, the two alternating in one process. The extra time per round
//! trip, divided by the events a round trip records (counted in the file),
//! is the cost of one event.
//!
//! ```sh
//! cargo run --release -p swco-executor --example trace_cost [-- ROUNDS REPS]
//! ```
//!
//! Defaults: 200 000 round trips, 7 repetitions of each; the medians are
//! compared. The trace goes to a file in the temporary directory, removed
//! afterwards; writing it (at shutdown) is not timed.
//!
//! [`RuntimeBuilder::trace`]: swco_executor::RuntimeBuilder::trace

use std::path::Path;
use std::time::{Duration, Instant};

use swco_channel::spsc;
use swco_executor::Runtime;

/// `rounds` round trips on a one-executor runtime, traced to `trace` if
/// given; the time the pinger measured.
fn pingpong(rounds: u64, trace: Option<&Path>) -> Duration {
    let mut builder = Runtime::builder().executors(1);
    if let Some(path) = trace {
        // Room for every event (a round trip records six), so that none is
        // dropped and the count per round trip is exact.
        let capacity = usize::try_from(rounds * 16).expect("fits");
        builder = builder.trace(path).trace_capacity(capacity);
    }
    let rt = builder.build().expect("a runtime");
    let (ping_tx, ping_rx) = spsc::bounded::<u64>(1);
    let (pong_tx, pong_rx) = spsc::bounded::<u64>(1);
    let ponger = rt
        .spawn_builder()
        .name("ponger")
        .on(0)
        .spawn(move || {
            for v in ping_rx {
                pong_tx.send(v).unwrap();
            }
        })
        .expect("spawn");
    let pinger = rt
        .spawn_builder()
        .name("pinger")
        .on(0)
        .spawn(move || {
            let start = Instant::now();
            for i in 0..rounds {
                ping_tx.send(i).unwrap();
                assert_eq!(pong_rx.recv().unwrap(), i);
            }
            start.elapsed()
        })
        .expect("spawn");
    let elapsed = pinger.join().expect("pinger");
    ponger.join().expect("ponger");
    rt.shutdown();
    elapsed
}

/// Events of each kind in the trace at `path`: (runs, instants), and the
/// dropped count.
fn count_events(path: &Path) -> (u64, u64, u64) {
    let text = std::fs::read_to_string(path).expect("the trace");
    let trace: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let runs = events.iter().filter(|e| e["ph"] == "X").count() as u64;
    let instants = events.iter().filter(|e| e["ph"] == "i").count() as u64;
    let dropped = trace["otherData"]["swco_dropped_events"]
        .as_str()
        .and_then(|d| d.parse().ok())
        .expect("a dropped count");
    (runs, instants, dropped)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: u64 = args
        .next()
        .map(|r| r.parse().expect("rounds: a number"))
        .unwrap_or(200_000);
    let reps: usize = args
        .next()
        .map(|r| r.parse().expect("reps: a number"))
        .unwrap_or(7);
    let path = std::env::temp_dir().join(format!("swco-trace-cost-{}.json", std::process::id()));
    let (mut off, mut on) = (Vec::new(), Vec::new());
    // Alternate, so that the machine's drift hits both alike.
    for _ in 0..reps {
        off.push(pingpong(rounds, None));
        on.push(pingpong(rounds, Some(&path)));
    }
    let (runs, instants, dropped) = count_events(&path);
    std::fs::remove_file(&path).expect("remove the trace");
    assert_eq!(dropped, 0, "the buffer holds every event");
    let per_rt = |d: Duration| d.as_nanos() as f64 / rounds as f64;
    let (off_ns, on_ns) = (per_rt(median(off.clone())), per_rt(median(on.clone())));
    let events = (runs + instants) as f64 / rounds as f64;
    println!(
        "{rounds} round trips, one executor, median of {reps}: \
         {off_ns:.1} ns per round trip untraced, {on_ns:.1} ns traced"
    );
    println!(
        "{events:.2} events per round trip ({:.2} runs, {:.2} instants): \
         {:.1} ns per event",
        runs as f64 / rounds as f64,
        instants as f64 / rounds as f64,
        (on_ns - off_ns) / events
    );
    let range = |v: &[Duration]| {
        let (lo, hi) = (v.iter().min().unwrap(), v.iter().max().unwrap());
        format!("{:.1}–{:.1}", per_rt(*lo), per_rt(*hi))
    };
    println!(
        "ranges, ns per round trip: untraced {}, traced {}",
        range(&off),
        range(&on)
    );
}
