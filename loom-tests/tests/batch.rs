//! Batch models: one claim covering several slots, for both protocols.
//!
//! * `*_batches_race` (MPSC, two producers) and `*_batch_publish_race`
//!   (SPSC): producers offer batches to a ring whose positions start one
//!   slot before its end, so a run of two crosses the end; a consumer thread
//!   takes a batch meanwhile.
//!   Claims exclude each other (no slot written twice), every message is
//!   either received exactly once or given back in the error, never both,
//!   the given-back ones are exactly the unsent tail, and each producer's
//!   messages arrive in order. (An MPMC race, with four threads, takes
//!   minutes; the MPMC claims are covered by the blocking models and, for
//!   single messages, by `data_path.rs`.)
//! * `*_batch_blocks`: a blocking batch of three into a ring of two, against
//!   a blocking batch receiver: no lost wake-up (loom reports a deadlock
//!   if a party sleeps through the other's progress), and the three arrive
//!   in order.
#![cfg(loom)]

#[macro_use]
mod common;

use common::{assert_exactly_once, assert_fifo_per_producer, msg, Fan};
use loom::thread;
use swco_channel::{bounded_in, Cas, Mpmc, Mpsc, Protocol, Spsc, TrySendError, Updt};

/// Producers with `batches[p]` messages each race a consumer's one batch of
/// up to `max`; the ring of `capacity` starts one slot before its end.
fn batches_race<M: Fan, P: Protocol>(capacity: usize, batches: &'static [u32], max: usize) {
    let (tx, rx) = bounded_in::<u32, M, P>(capacity);
    // Move both positions to the ring's last slot.
    for _ in 0..capacity - 1 {
        tx.try_send(u32::MAX).expect("room");
        assert_eq!(rx.try_recv(), Ok(u32::MAX));
    }
    let producers: Vec<_> = M::fan_tx(tx, batches.len())
        .into_iter()
        .zip(batches)
        .enumerate()
        .map(|(p, (tx, &n))| {
            thread::spawn(move || {
                let all: Vec<u32> = (0..n).map(|s| msg(p, s)).collect();
                let sent = match tx.try_send_batch(all.clone()) {
                    Ok(k) => k,
                    Err(TrySendError::Full(rest)) => {
                        // What comes back is exactly the unsent tail.
                        let k = all.len() - rest.len();
                        assert_eq!(rest, all[k..], "not the unsent tail");
                        k
                    }
                    Err(TrySendError::Disconnected(_)) => panic!("receiver gone"),
                };
                all[..sent].to_vec()
            })
        })
        .collect();
    // The consumer runs on a thread of its own, so that loom interleaves
    // it with the producers as freely as they interleave with each other.
    let consumer = thread::spawn(move || {
        let mut got = Vec::new();
        let _ = rx.try_recv_batch(&mut got, max);
        (rx, got)
    });
    let mut sent = Vec::new();
    for p in producers {
        sent.push(p.join().expect("producer panicked"));
    }
    let (rx, mut got) = consumer.join().expect("consumer panicked");
    // What is still buffered comes after everything received so far.
    while rx.try_recv_batch(&mut got, max).is_ok() {}
    assert_fifo_per_producer(&got);
    let counts: Vec<u32> = sent.iter().map(|s| s.len() as u32).collect();
    assert_exactly_once(&[got], &counts);
}

/// A blocking batch of `n` into a ring of `capacity`, received in blocking
/// batches of up to `max`.
fn batch_blocks<M: Fan, P: Protocol>(capacity: usize, n: u32, max: usize) {
    let (tx, rx) = bounded_in::<u32, M, P>(capacity);
    let producer = thread::spawn(move || {
        assert_eq!(tx.send_batch((0..n).map(|s| msg(0, s))), Ok(n as usize));
    });
    let mut got = Vec::new();
    while got.len() < n as usize {
        rx.recv_batch(&mut got, max).expect("the sender is alive");
    }
    producer.join().expect("producer panicked");
    assert_eq!(got, (0..n).map(|s| msg(0, s)).collect::<Vec<_>>());
}

model!(
    cas_mpsc_batches_race,
    2,
    batches_race::<Mpsc, Cas>(3, &[2, 1], 3)
);
model!(
    updt_mpsc_batches_race,
    1,
    batches_race::<Mpsc, Updt>(3, &[2, 1], 3)
);

model!(
    cas_spsc_batch_publish_race,
    3,
    batches_race::<Spsc, Cas>(2, &[2], 2)
);
model!(
    updt_spsc_batch_publish_race,
    3,
    batches_race::<Spsc, Updt>(2, &[2], 2)
);

model!(cas_spsc_batch_blocks, 2, batch_blocks::<Spsc, Cas>(2, 3, 2));
model!(
    updt_spsc_batch_blocks,
    2,
    batch_blocks::<Spsc, Updt>(2, 3, 2)
);
model!(cas_mpmc_batch_blocks, 2, batch_blocks::<Mpmc, Cas>(2, 3, 2));
model!(
    updt_mpmc_batch_blocks,
    2,
    batch_blocks::<Mpmc, Updt>(2, 3, 2)
);
