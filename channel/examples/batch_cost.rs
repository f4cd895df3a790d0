//! What a message costs in a batch next to a single `send`/`recv`, on one
//! thread without blocking (fill the ring, drain it), for both protocols:
//! the per-message overhead alone, with the sum checked.
//!
//! ```sh
//! cargo run -p swco-channel --release --example batch_cost
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use swco_channel::{mpmc, Cas, Protocol, Updt};

const CAP: usize = 256;

/// Fills and drains a ring `ROUNDS` times, `k` messages per operation
/// (`k == 1`: single `send`/`recv`); returns ns per message (send + recv).
fn fill_drain<P: Protocol>(k: usize, rounds: u64) -> f64 {
    let (tx, rx) = mpmc::bounded_with::<u64, P>(CAP);
    let mut vals = vec![0u64; k];
    let mut got = Vec::with_capacity(CAP);
    let mut sum = 0u64;
    let mut expected = 0u64;
    let start = Instant::now();
    let mut next = 0u64;
    for _ in 0..rounds {
        let mut sent = 0;
        while sent < CAP {
            if k == 1 {
                tx.send(black_box(next)).unwrap();
                expected = expected.wrapping_add(next);
                next += 1;
                sent += 1;
            } else {
                for v in vals.iter_mut() {
                    *v = next;
                    expected = expected.wrapping_add(next);
                    next += 1;
                }
                tx.send_batch(black_box(&vals).iter().copied()).unwrap();
                sent += k;
            }
        }
        if k == 1 {
            for _ in 0..CAP {
                sum = sum.wrapping_add(rx.recv().unwrap());
            }
        } else {
            let mut left = CAP;
            while left > 0 {
                got.clear();
                left -= rx.recv_batch(&mut got, k).unwrap();
                sum = got.iter().fold(sum, |a, &v| a.wrapping_add(v));
            }
        }
    }
    let elapsed: Duration = start.elapsed();
    assert_eq!(sum, expected, "a message was lost or invented");
    elapsed.as_nanos() as f64 / (rounds * CAP as u64) as f64
}

/// `batch_cost [K ROUNDS]`: every k in 1, 4, 16, 64 for 20 000 rounds, or
/// just `K` for `ROUNDS` (for `valgrind --tool=callgrind`).
fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("usage: batch_cost [K ROUNDS]"))
        .collect();
    let (ks, rounds) = match args[..] {
        [k, rounds] => (vec![k as usize], rounds),
        _ => (vec![1, 4, 16, 64], 20_000),
    };
    println!("ns per message (send + recv), one thread, ring of {CAP}");
    println!("{:<6} {:>8} {:>8}", "k", "cas", "updt");
    for k in ks {
        let cas = fill_drain::<Cas>(k, rounds);
        let updt = fill_drain::<Updt>(k, rounds);
        println!("{k:<6} {cas:>8.2} {updt:>8.2}");
    }
}
