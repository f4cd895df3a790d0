//! Instructions per blocking round trip, for callgrind: two coroutines on one
//! executor bounce a counter through two capacity-1 SPSC channels, so every
//! hop takes the blocking path (register, re-check, suspend, wake, resume).
//!
//! ```sh
//! cargo build --release -p swco-executor --example hop_cost
//! for n in 100000 200000; do
//!     valgrind --tool=callgrind --callgrind-out-file=/tmp/hop.$n \
//!         target/release/examples/hop_cost cas $n
//! done
//! callgrind_annotate /tmp/hop.200000 | head -40
//! ```
//!
//! Setup and teardown (runtime, threads, stacks) cost the same whatever the
//! number of rounds, so the difference between the two runs' totals, divided
//! by the difference in rounds (100 000), is the cost of one round trip.
//! Without valgrind it prints ns per round trip.
//!
//! Arguments: `cas` or `updt` (default `cas`), the number of rounds
//! (default 1 000 000), the channels' capacity (default 1; 0 for
//! rendezvous channels, where each hop meets a parked peer), and the mode,
//! `spsc` (default) or `mpmc` (whose sides wait in a waiter list rather
//! than a single-waiter slot).

use std::time::Instant;

use swco_channel::{mpmc, spsc, Cas, Protocol, Receiver, Sender, Updt};
use swco_executor::Runtime;

/// Runs `rounds` round trips on a one-executor runtime over the channels
/// `make` makes; returns the time the pinger measured.
fn pingpong<M, P>(
    rounds: u64,
    make: impl Fn() -> (Sender<u64, M, P>, Receiver<u64, M, P>),
) -> std::time::Duration
where
    M: swco_channel::Mode,
    P: Protocol,
    Sender<u64, M, P>: Send + 'static,
    Receiver<u64, M, P>: Send + 'static,
{
    let rt = Runtime::builder().executors(1).build().expect("a runtime");
    let (ping_tx, ping_rx) = make();
    let (pong_tx, pong_rx) = make();
    let ponger = rt
        .spawn_on(0, move || {
            for v in ping_rx {
                pong_tx.send(v).unwrap();
            }
        })
        .expect("spawn");
    let pinger = rt
        .spawn_on(0, move || {
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

/// [`pingpong`] over `mode`'s channels of protocol `P`.
fn run<P: Protocol>(rounds: u64, capacity: usize, mode: &str) -> std::time::Duration {
    match mode {
        "spsc" => pingpong(rounds, || spsc::bounded_with::<u64, P>(capacity)),
        "mpmc" => pingpong(rounds, || mpmc::bounded_with::<u64, P>(capacity)),
        other => panic!("mode: spsc or mpmc, not {other}"),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let protocol = args.next().unwrap_or_else(|| "cas".into());
    let rounds: u64 = args
        .next()
        .map(|r| r.parse().expect("rounds: a number"))
        .unwrap_or(1_000_000);
    let capacity: usize = args
        .next()
        .map(|c| c.parse().expect("capacity: a number"))
        .unwrap_or(1);
    let mode = args.next().unwrap_or_else(|| "spsc".into());
    let elapsed = match protocol.as_str() {
        "cas" => run::<Cas>(rounds, capacity, &mode),
        "updt" => run::<Updt>(rounds, capacity, &mode),
        other => panic!("protocol: cas or updt, not {other}"),
    };
    println!(
        "{protocol} {mode}, capacity {capacity}: {rounds} round trips, {:.1} ns per round trip",
        elapsed.as_nanos() as f64 / rounds as f64
    );
}
