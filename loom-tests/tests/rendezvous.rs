//! Zero-capacity (rendezvous) models, both protocols: a hand-off between a
//! blocking sender and a blocking receiver (each may arrive first, and each
//! may have to park), and disconnection racing a blocked party. A lost
//! wake-up leaves a thread parked for ever, which loom reports as a
//! deadlock; a message delivered twice, lost, or dropped twice fails an
//! assertion.
#![cfg(loom)]

#[macro_use]
mod common;

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use common::Tracked;
use loom::thread;
use swco_channel::{
    bounded_in, select, Cas, Mode, Mpmc, Protocol, Select, Spsc, TryRecvError, Updt,
};

/// Two messages through a rendezvous: the sender's second send can only
/// start once the receiver took the first, so both sides block in turn.
fn hand_off<M: Mode, P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, M, P>(0);
    let sender = thread::spawn(move || {
        tx.send(1).expect("the receiver is alive");
        tx.send(2).expect("the receiver is alive");
    });
    assert_eq!(rx.recv(), Ok(1));
    assert_eq!(rx.recv(), Ok(2));
    sender.join().unwrap();
    // The sender is gone and left nothing behind.
    assert!(rx.recv().is_err());
}

/// A sender offers one message and drops its endpoint; the receiver takes
/// the message (the send completed only if it did) and then sees the
/// disconnection.
fn hand_off_then_disconnect<M: Mode, P: Protocol>() {
    let drops = std::sync::Arc::new(AtomicU64::new(0));
    let (tx, rx) = bounded_in::<Tracked, M, P>(0);
    let d = drops.clone();
    let sender = thread::spawn(move || tx.send(Tracked::new(0, &d)).is_ok());
    let got = rx.recv();
    assert!(got.is_ok(), "the sender's message was lost");
    drop(got);
    assert!(rx.recv().is_err());
    assert!(sender.join().unwrap(), "received but the send failed");
    assert_eq!(drops.load(SeqCst), 1, "dropped exactly once");
}

/// The receiver goes away while a sender offers: the sender gets its
/// message back (nobody ever receives), and it is dropped exactly once.
fn receiver_gone_gives_the_message_back<M: Mode, P: Protocol>() {
    let drops = std::sync::Arc::new(AtomicU64::new(0));
    let (tx, rx) = bounded_in::<Tracked, M, P>(0);
    let d = drops.clone();
    let sender = thread::spawn(move || {
        let back = tx.send(Tracked::new(0, &d)).expect_err("nobody receives");
        drop(back.into_inner());
    });
    drop(rx);
    sender.join().unwrap();
    assert_eq!(drops.load(SeqCst), 1, "dropped exactly once");
}

model!(cas_spsc_rendezvous_hand_off, 4, hand_off::<Spsc, Cas>());
model!(updt_spsc_rendezvous_hand_off, 3, hand_off::<Spsc, Updt>());
model!(cas_mpmc_rendezvous_hand_off, 4, hand_off::<Mpmc, Cas>());
model!(updt_mpmc_rendezvous_hand_off, 3, hand_off::<Mpmc, Updt>());
model!(
    cas_spsc_rendezvous_hand_off_then_disconnect,
    4,
    hand_off_then_disconnect::<Spsc, Cas>()
);
model!(
    updt_spsc_rendezvous_hand_off_then_disconnect,
    3,
    hand_off_then_disconnect::<Spsc, Updt>()
);
model!(
    cas_mpmc_rendezvous_receiver_gone,
    4,
    receiver_gone_gives_the_message_back::<Mpmc, Cas>()
);
model!(
    updt_mpmc_rendezvous_receiver_gone,
    3,
    receiver_gone_gives_the_message_back::<Mpmc, Updt>()
);

/// A select receiving from two rendezvous channels meets a blocking sender
/// on one of them: the select waits with a packet in each rendezvous, the
/// sender serves one (deciding the select's token), and the select takes
/// the other packet back: nothing stale stays queued.
fn select_meets_a_sender<P: Protocol>() {
    let (tx_a, rx_a) = bounded_in::<u32, Spsc, P>(0);
    let (tx_b, rx_b) = bounded_in::<u32, Mpmc, P>(0);
    let selector = thread::spawn(move || {
        let got = select! {
            recv(rx_a) -> v => v.expect("a sender is alive"),
            recv(rx_b) -> v => v.expect("a sender is alive") + 100,
        };
        (got, rx_a, rx_b)
    });
    tx_a.send(1).expect("the selector receives");
    let (got, rx_a, rx_b) = selector.join().unwrap();
    assert_eq!(got, 1, "the select took the message from its channel");
    // No packet of the select is left in either rendezvous.
    assert!(tx_a.try_send(2).is_err());
    assert!(tx_b.try_send(3).is_err());
    drop((rx_a, rx_b));
}

/// A select sending meets a select receiving on one rendezvous channel:
/// each waits in the rendezvous (the send's packet message-less), the
/// receive's re-check leaves the other select's send to act, and the send
/// reserves the receive's packet and fills it: exactly one hand-off.
/// Preemption bound 2: both selects now queue, re-check and withdraw
/// packets, and at 3 the model runs past half an hour (90 000 executions
/// at 2, in seconds).
fn select_meets_a_select<P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, Spsc, P>(0);
    let receiver = thread::spawn(move || {
        let got = select! {
            recv(rx) -> v => v.expect("the sender is alive"),
        };
        (got, rx)
    });
    select! {
        send(tx, 5) -> res => res.expect("the receiver is alive"),
    }
    let (got, rx) = receiver.join().unwrap();
    assert_eq!(got, 5);
    assert!(tx.try_send(6).is_err(), "no stale packet");
    drop(rx);
}

/// A select sending on a rendezvous channel waits on the senders' waiter
/// list for a receiver to appear; a blocking receiver then queues its
/// packet. The receiver's look at that list under the rendezvous lock and
/// the select's re-check under the same lock order the two: either the
/// select sees the packet, or the receiver sees the registration and wakes
/// it. A missed one leaves both parked (a deadlock loom reports).
fn select_send_meets_a_blocking_receiver<M: Mode, P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, M, P>(0);
    let receiver = thread::spawn(move || (rx.recv(), rx));
    select! {
        send(tx, 7) -> res => res.expect("the receiver is alive"),
    }
    let (got, rx) = receiver.join().unwrap();
    assert_eq!(got, Ok(7));
    assert!(tx.try_send(8).is_err(), "no stale packet");
    drop(rx);
}

model!(
    cas_spsc_select_send_meets_a_blocking_receiver,
    3,
    select_send_meets_a_blocking_receiver::<Spsc, Cas>()
);
model!(
    updt_spsc_select_send_meets_a_blocking_receiver,
    3,
    select_send_meets_a_blocking_receiver::<Spsc, Updt>()
);
model!(
    cas_mpmc_select_send_meets_a_blocking_receiver,
    3,
    select_send_meets_a_blocking_receiver::<Mpmc, Cas>()
);
model!(
    updt_mpmc_select_send_meets_a_blocking_receiver,
    3,
    select_send_meets_a_blocking_receiver::<Mpmc, Updt>()
);

model!(
    cas_select_meets_a_rendezvous_sender,
    4,
    select_meets_a_sender::<Cas>()
);
model!(
    updt_select_meets_a_rendezvous_sender,
    4,
    select_meets_a_sender::<Updt>()
);
model!(
    cas_select_meets_a_select_in_a_rendezvous,
    2,
    select_meets_a_select::<Cas>()
);
model!(
    updt_select_meets_a_select_in_a_rendezvous,
    2,
    select_meets_a_select::<Updt>()
);

// ---- a select's send waits in the rendezvous, and reserves its partner ----

/// A select blocked on a rendezvous send is visible to the other side's
/// readiness and to a non-blocking receive (crossbeam's and Go's
/// semantics): a `Select` waiting for a receive to be ready wakes once the
/// sending select has queued its packet, and a `try_recv` then meets that
/// packet and gets the message, which the select makes (or sends through
/// its `SelectedOperation`) once it wakes. A readiness probe that misses
/// the packet and is not woken leaves both parked, and a `try_recv` that
/// never sees the packet spins past loom's branch bound: both fail.
fn try_recv_meets_a_blocked_select_send<P: Protocol>(use_macro: bool) {
    let (tx, rx) = bounded_in::<u32, Mpmc, P>(0);
    let sender = thread::spawn(move || {
        if use_macro {
            select! {
                send(tx, 7) -> res => res.expect("the receiver is alive"),
            }
        } else {
            let mut sel = Select::new();
            sel.send(&tx);
            let oper = sel.select();
            oper.send(&tx, 7).expect("the receiver is alive");
        }
        tx
    });
    let mut ready = Select::new();
    ready.recv(&rx);
    assert_eq!(ready.ready(), 0);
    drop(ready);
    // A select woken spuriously takes its packet back while it looks
    // again (loom's parkers may wake once spuriously), so the try may miss
    // it once; the select queues it again.
    let got = loop {
        match rx.try_recv() {
            Ok(got) => break got,
            Err(TryRecvError::Empty) => thread::yield_now(),
            Err(e) => panic!("{e:?}"),
        }
    };
    assert_eq!(got, 7, "the select's send met the try");
    let tx = sender.join().unwrap();
    assert!(tx.try_send(8).is_err(), "no stale packet");
    drop(rx);
}

/// A select with a send and a receive on one rendezvous channel, met by a
/// plain blocking receive (`recv_from_it`) or send: the select parks until
/// then (its own packets are no partner of its operations, so its re-check
/// finds nothing and it does not spin), and exactly one hand-off happens,
/// with the other party. A re-check that counts the select's own packets
/// spins, and the model fails (loom reports a causality violation once the
/// spin has run its clocks past their bound).
fn select_with_both_sides_meets_a_party<P: Protocol>(recv_from_it: bool) {
    let (tx, rx) = bounded_in::<u32, Mpmc, P>(0);
    let (tx2, rx2) = (tx.clone(), rx.clone());
    let selector = thread::spawn(move || {
        let outcome = select! {
            recv(rx2) -> v => Err(v.expect("a sender is alive")),
            send(tx2, 1) -> res => Ok(res.expect("a receiver is alive")),
        };
        (outcome, tx2, rx2)
    });
    if recv_from_it {
        assert_eq!(rx.recv(), Ok(1));
    } else {
        tx.send(2).expect("the select receives");
    }
    let (outcome, tx2, rx2) = selector.join().unwrap();
    if recv_from_it {
        assert_eq!(outcome, Ok(()), "the select sent");
    } else {
        assert_eq!(outcome, Err(2), "the select received");
    }
    assert!(tx.try_send(3).is_err(), "no stale packet");
    assert!(rx.try_recv().is_err(), "no stale packet");
    drop((tx2, rx2));
}

/// A future that polls once, then is dropped.
fn poll_once<F: std::future::Future>(f: F) -> std::task::Poll<F::Output> {
    struct Nobody;
    impl std::task::Wake for Nobody {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Nobody));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    f.as_mut().poll(&mut cx)
}

/// The reservation's give-up: a `Select` send reserves the receiver that
/// made it ready, a pending receive future, which is dropped (its owner
/// gives up on it) while reserved. The send must then go to the receiver
/// that comes next (a blocking `recv`), not into the abandoned packet: a
/// fill that ignores the give-up loses the message and leaves that
/// `recv` parked for ever, a deadlock loom reports.
fn reserved_receiver_gives_up<P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, Mpmc, P>(0);
    let receiver = thread::spawn(move || {
        // Pending (queued), or served at once by the select's packet.
        if let std::task::Poll::Ready(got) = poll_once(rx.recv_async()) {
            return (got, rx);
        }
        (rx.recv(), rx)
    });
    let mut sel = Select::new();
    sel.send(&tx);
    let oper = sel.select();
    oper.send(&tx, 9).expect("the receiver is alive");
    let (got, rx) = receiver.join().unwrap();
    assert_eq!(got, Ok(9), "delivered exactly once");
    assert!(tx.try_send(10).is_err(), "no stale packet");
    drop(rx);
}

model!(
    cas_try_recv_meets_a_blocked_select_send,
    3,
    try_recv_meets_a_blocked_select_send::<Cas>(true)
);
model!(
    updt_try_recv_meets_a_blocked_select_send,
    3,
    try_recv_meets_a_blocked_select_send::<Updt>(true)
);
model!(
    cas_try_recv_meets_a_blocked_select_builder_send,
    3,
    try_recv_meets_a_blocked_select_send::<Cas>(false)
);
model!(
    updt_try_recv_meets_a_blocked_select_builder_send,
    3,
    try_recv_meets_a_blocked_select_send::<Updt>(false)
);
model!(
    cas_select_with_both_sides_sends_to_a_receiver,
    3,
    select_with_both_sides_meets_a_party::<Cas>(true)
);
model!(
    updt_select_with_both_sides_sends_to_a_receiver,
    3,
    select_with_both_sides_meets_a_party::<Updt>(true)
);
model!(
    cas_select_with_both_sides_receives_from_a_sender,
    3,
    select_with_both_sides_meets_a_party::<Cas>(false)
);
model!(
    updt_select_with_both_sides_receives_from_a_sender,
    3,
    select_with_both_sides_meets_a_party::<Updt>(false)
);
model!(
    cas_reserved_receiver_gives_up,
    3,
    reserved_receiver_gives_up::<Cas>()
);
model!(
    updt_reserved_receiver_gives_up,
    3,
    reserved_receiver_gives_up::<Updt>()
);
