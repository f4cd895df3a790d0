//! Flat combining on an `Updt` side (`channel/src/claim/combine.rs`): a
//! claimant that loses its first try publishes its request and is served
//! by whoever holds the claim next (possibly itself, after all).
//!
//! Two producers send blocking batches of two into an `Updt` MPSC ring of
//! two slots whose positions start on its last slot, so runs cross the
//! ring's end and the ring fills; a consumer receives everything. Checked
//! in every execution: each message arrives exactly once and each
//! producer's in order (so no request was served twice, none lost, and
//! served runs never overlapped), and nobody sleeps through the other's
//! progress (loom reports a deadlock). Checked over the whole model: some
//! executions did take the combining path, so the checks above cover it.
#![cfg(loom)]

#[macro_use]
mod common;

use common::{assert_exactly_once, assert_fifo_per_producer, msg};
use loom::thread;
use swco_channel::{mpsc, Updt};

fn combining_batches_cross_the_end() {
    let (tx, rx) = mpsc::bounded_with::<u32, Updt>(2);
    // Move both positions to the ring's last slot.
    tx.try_send(u32::MAX).expect("room");
    assert_eq!(rx.try_recv(), Ok(u32::MAX));
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let tx = tx.clone();
            thread::spawn(move || {
                assert_eq!(tx.send_batch([msg(p, 0), msg(p, 1)]), Ok(2));
            })
        })
        .collect();
    drop(tx);
    let mut got = Vec::new();
    while rx.recv_batch(&mut got, 2).is_ok() {}
    for p in producers {
        p.join().expect("producer panicked");
    }
    assert_fifo_per_producer(&got);
    assert_exactly_once(&[got], &[2, 2]);
}

#[test]
fn updt_combining_batches_cross_the_end() {
    let before = swco_channel::__loom_combined_requests();
    common::check(
        "updt_combining_batches_cross_the_end",
        1,
        combining_batches_cross_the_end,
    );
    let served = swco_channel::__loom_combined_requests() - before;
    assert!(served > 0, "no execution reached the combining path");
    eprintln!("  requests served by combining, over all executions: {served}");
}
