//! Single-waiter slot models (`WaiterSlot`, the waiter "list" of a side with
//! one endpoint). The blocking models already cover "register, fence,
//! re-check" against "progress, fence, look" on these sides; what is new here
//! is the waker the slot *keeps* between blocks. When the endpoint blocks
//! again from another thread, the slot must replace that waker, and a peer
//! that saw the previous registration may still be reading the old one. So
//! each model blocks the lone endpoint on one thread, hands it to a second
//! thread, and blocks it there again, while the peer's wake for the first
//! block may still be in flight. A replacement that does not wait for that
//! peer is a write racing a read of the same cell, which loom reports; a
//! lost wake-up is a deadlock, which loom reports too.
//!
//! Modes: `spsc` (one waker endpoint: `WaiterSlot<true>`, counted in with
//! plain stores before a fence) and `mpsc`/`spmc` (several waker endpoints,
//! here one of them: `WaiterSlot<false>`, counted in with `updt`), each for
//! both protocols.
#![cfg(loom)]

#[macro_use]
mod common;

use loom::thread;
use swco_channel::{bounded_in, Cas, Mode, Mpsc, Protocol, Spmc, Spsc, Updt};

/// The lone receiver blocks on an empty ring on thread A, then on thread B;
/// one producer sends a message for each.
fn receiver_moves<M: Mode, P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, M, P>(1);
    let producer = thread::spawn(move || {
        tx.send(1).expect("receiver alive");
        tx.send(2).expect("receiver alive");
    });
    let first = thread::spawn(move || {
        let got = rx.recv().expect("sender alive");
        (got, rx)
    });
    let (got, rx) = first.join().expect("first receiver panicked");
    assert_eq!(got, 1);
    // A fresh thread, so that loom lets its first look at the slot's words
    // return any value not yet ordered before it.
    let second = thread::spawn(move || rx.recv());
    assert_eq!(second.join().expect("second receiver panicked"), Ok(2));
    producer.join().expect("producer panicked");
}

/// The lone sender blocks on a full ring (one slot, filled first) on thread
/// A, then on thread B; one consumer receives everything.
fn sender_moves<M: Mode, P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, M, P>(1);
    tx.try_send(0).expect("an empty ring has room");
    let consumer = thread::spawn(move || {
        (0..3)
            .map(|_| rx.recv().expect("sender alive"))
            .collect::<Vec<_>>()
    });
    let first = thread::spawn(move || {
        tx.send(1).expect("receiver alive");
        tx
    });
    let tx = first.join().expect("first sender panicked");
    // A fresh thread, as in `receiver_moves`.
    let second = thread::spawn(move || tx.send(2).expect("receiver alive"));
    second.join().expect("second sender panicked");
    assert_eq!(consumer.join().expect("consumer panicked"), [0, 1, 2]);
}

model!(cas_spsc_receiver_moves, 2, receiver_moves::<Spsc, Cas>());
model!(updt_spsc_receiver_moves, 2, receiver_moves::<Spsc, Updt>());
model!(cas_mpsc_receiver_moves, 2, receiver_moves::<Mpsc, Cas>());
model!(updt_mpsc_receiver_moves, 2, receiver_moves::<Mpsc, Updt>());
model!(cas_spsc_sender_moves, 2, sender_moves::<Spsc, Cas>());
model!(updt_spsc_sender_moves, 2, sender_moves::<Spsc, Updt>());
model!(cas_spmc_sender_moves, 2, sender_moves::<Spmc, Cas>());
model!(updt_spmc_sender_moves, 2, sender_moves::<Spmc, Updt>());
