//! Flat combining on an `Updt` side (`claim/combine.rs`): a claimant that
//! loses its first try publishes its request and is served by whoever
//! holds the claim next (possibly itself, after all).
//!
//! Two producers send blocking batches of two into an `Updt` MPSC ring of
//! two slots whose positions start on its last slot, so runs cross the
//! ring's end and the ring fills; a consumer receives everything. Checked
//! in every execution: each message arrives exactly once and each
//! producer's in order (so no request was served twice, none lost, and
//! served runs never overlapped), and nobody sleeps through the other's
//! progress (loom reports a deadlock). Checked over the whole model: some
//! executions did take the combining path (the crate's count of requests
//! served by combining rose), so the checks above cover it.

use loom::thread;

use crate::claim::combine::served_requests;
use crate::{mpsc, Updt};

/// Message `seq` of producer `p`: the producer in the high bits.
fn msg(p: u32, seq: u32) -> u32 {
    (p << 8) | seq
}

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
    // Each producer's messages in the order sent, each exactly once.
    for p in 0..2 {
        let mine: Vec<u32> = got.iter().copied().filter(|v| v >> 8 == p).collect();
        assert_eq!(mine, [msg(p, 0), msg(p, 1)], "received {got:x?}");
    }
    assert_eq!(got.len(), 4, "received {got:x?}");
}

#[test]
fn updt_combining_batches_cross_the_end() {
    // The count is the test thread's, over every model run on it so far.
    let before = served_requests();
    super::check(
        "updt_combining_batches_cross_the_end",
        Some(1),
        combining_batches_cross_the_end,
    );
    let served = served_requests() - before;
    assert!(served > 0, "no execution reached the combining path");
    eprintln!("  requests served by combining, over all executions: {served}");
}
