//! The concurrent prime sieve (Hoare, Pike): a chain of coroutines, one per
//! prime found, each filtering the multiples of its prime out of the stream
//! and spawning the next stage from inside itself when a new prime gets
//! through. Each stage is spawned on its parent's executor (the default
//! placement); idle executors steal stages that have not started yet.
//!
//! The program checks the primes it found against trial division and
//! exits nonzero if they differ.
//!
//! ```text
//! cargo run --release --example sieve [-- PRIMES [EXECUTORS]]
//! ```

use std::time::Instant;

use swco::channel::{mpsc, spsc};
use swco::Runtime;

/// Receives the stream, keeps its first number as its prime, and forwards
/// the numbers that prime does not divide to a stage it spawns.
fn stage(input: spsc::Receiver<u64>, primes: mpsc::Sender<u64>) {
    let Ok(prime) = input.recv() else { return };
    if primes.send(prime).is_err() {
        return; // the reader has all the primes it wants
    }
    let (tx, rx) = spsc::bounded(16);
    let next = swco::spawn(move || stage(rx, primes));
    for n in input {
        if n % prime != 0 && tx.send(n).is_err() {
            break;
        }
    }
    drop(tx);
    let _ = next.join();
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let wanted: usize = args.next().map_or(Ok(1000), |a| a.parse())?;
    let executors: usize = args.next().map_or(Ok(4), |a| a.parse())?;

    let rt = Runtime::builder().executors(executors).build()?;
    let start = Instant::now();
    let (numbers, first_input) = spsc::bounded(16);
    let (primes_tx, primes) = mpsc::bounded(64);
    let first = rt.spawn(move || stage(first_input, primes_tx));
    let feeder = rt.spawn(move || (2u64..).try_for_each(|n| numbers.send(n)));

    let found: Vec<u64> = primes.iter().take(wanted).collect();
    // Dropping the reader makes the last stage's send fail; the failure
    // travels back up the chain as each stage's output disconnects.
    drop(primes);
    feeder.join()?.ok();
    first.join()?;
    let elapsed = start.elapsed();

    println!(
        "{} primes, the last {}, in {:.1} ms on {executors} executors",
        found.len(),
        found.last().copied().unwrap_or(0),
        elapsed.as_secs_f64() * 1e3
    );
    let total = rt.stats().total();
    println!(
        "coroutines spawned {}, context switches {}, blocks {}, wakes {}",
        total.spawned, total.context_switches, total.blocks, total.wakes
    );
    // Self-check: exactly the first `wanted` primes, in order.
    let is_prime = |n: u64| n >= 2 && (2..).take_while(|d| d * d <= n).all(|d| n % d != 0);
    let expected: Vec<u64> = (2u64..).filter(|&n| is_prime(n)).take(wanted).collect();
    assert_eq!(found, expected, "the first {wanted} primes");
    Ok(())
}
