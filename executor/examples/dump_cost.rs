//! How long a dump of many parked coroutines takes: `N` coroutines (200 000
//! by default) park in a receive on one rendezvous channel, a dump lists
//! them, and then every one is released and joined. Checks itself: the dump
//! must list every coroutine, parked on that channel, and every message
//! must come back exactly once.
//!
//! ```sh
//! cargo run --release -p swco-executor --example dump_cost -- 200000 2
//! ```
//!
//! Arguments: the number of coroutines, of executors (default 2), and of
//! dumps whose median is reported (default 5).

use std::time::{Duration, Instant};

use swco_channel::mpmc;
use swco_executor::{CoroutineState, Runtime};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(200_000, |a| a.parse().expect("a count"));
    let executors: usize = args.next().map_or(2, |a| a.parse().expect("a count"));
    let repeat: usize = args.next().map_or(5, |a| a.parse().expect("a count"));
    let rt = Runtime::builder()
        .executors(executors)
        .stack_size(16 * 1024)
        .build()
        .expect("a runtime");
    let (tx, rx) = mpmc::bounded::<u64>(0);
    let start = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let rx = rx.clone();
            rt.spawn(move || rx.recv().expect("a message"))
        })
        .collect();
    // Wait until every one is parked (a dump per look, so the loop itself
    // also shows the dump working while coroutines are still starting).
    let mut looks = 0;
    let dump = loop {
        looks += 1;
        let dump = rt.dump();
        let parked = dump
            .coroutines()
            .iter()
            .filter(|c| c.state() == CoroutineState::Parked)
            .count();
        if parked == n {
            break dump;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let spawned_in = start.elapsed();
    assert_eq!(dump.coroutines().len(), n, "the dump lost coroutines");
    assert!(dump.coroutines().iter().all(|c| c
        .waiting_on()
        .starts_with("recv on mpmc channel (cas, capacity 0)")));
    let text_start = Instant::now();
    let text = dump.to_string();
    let text_took = text_start.elapsed();
    assert_eq!(text.lines().filter(|l| l.starts_with("  #")).count(), n);
    // Again, now that nothing moves: the figure reported (the median of
    // `repeat` dumps).
    let mut quiet = rt.dump();
    let mut took = vec![quiet.took()];
    for _ in 1..repeat {
        quiet = rt.dump();
        took.push(quiet.took());
    }
    took.sort();
    assert_eq!(quiet.coroutines().len(), n);
    for i in 0..n as u64 {
        tx.send(i).expect("a receiver");
    }
    let mut seen = vec![false; n];
    for h in handles {
        let i = h.join().expect("the coroutine") as usize;
        assert!(!seen[i], "message {i} received twice");
        seen[i] = true;
    }
    assert!(seen.iter().all(|&s| s), "a message was lost");
    println!(
        "{n} parked coroutines on {executors} executors: dump taken in {:.1?} (median of {repeat}) \
         (max stack high-water {} KiB), formatted in {:.1?} ({} KiB of text); \
         {looks} dumps while they started ({spawned_in:.1?})",
        took[took.len() / 2],
        quiet.max_stack_high_water() / 1024,
        text_took,
        text.len() / 1024,
    );
}
