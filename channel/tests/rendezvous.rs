//! Zero-capacity (rendezvous) channels, every mode × protocol, between OS
//! threads: Go's unbuffered semantics (a send completes only when a
//! receiver takes the value), `try_send` only with a receiver waiting,
//! timeouts and disconnection that give the value back, and nothing left
//! behind by a party that gave up. Exact counts live in `exactly_once.rs`
//! (capacity 0 is one of its capacities).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{Census, Counted, HANG_GUARD};
use swco_channel::{
    bounded_in, Cas, Mode, Mpmc, Mpsc, Protocol, RecvTimeoutError, SendTimeoutError, Spmc, Spsc,
    TryRecvError, TrySendError, Updt,
};
use swco_test_support::mode_tests;

/// Spins (yielding) until `f` holds, or fails after the hang guard.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_GUARD;
    while !f() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        thread::yield_now();
    }
}

fn shape<M: Mode, P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, M, P>(0);
    assert_eq!(tx.capacity(), 0);
    assert_eq!(rx.capacity(), 0);
    assert_eq!(tx.len(), 0);
    assert!(tx.is_empty() && tx.is_full());
    assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)), "nobody waits");
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "nobody offers");
}

/// A send does not complete before a receiver takes the value.
fn send_waits_for_the_receiver<M: Mode, P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, M, P>(0);
    let sent = Arc::new(AtomicUsize::new(0));
    let s = sent.clone();
    let sender = thread::spawn(move || {
        tx.send(7).unwrap();
        s.store(1, Ordering::SeqCst);
    });
    // A buffered channel would let the sender finish in this time.
    thread::sleep(Duration::from_millis(100));
    assert_eq!(sent.load(Ordering::SeqCst), 0, "the send completed alone");
    assert_eq!(rx.recv(), Ok(7));
    sender.join().unwrap();
    assert_eq!(sent.load(Ordering::SeqCst), 1);
}

/// `try_send` completes once a receiver is waiting, handing it the value.
fn try_send_reaches_a_waiting_receiver<M: Mode, P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, M, P>(0);
    let receiver = thread::spawn(move || rx.recv());
    let mut v = 5;
    eventually("a receiver to wait", || match tx.try_send(v) {
        Ok(()) => true,
        Err(TrySendError::Full(back)) => {
            v = back;
            false
        }
        Err(e) => panic!("{e:?}"),
    });
    assert_eq!(receiver.join().unwrap(), Ok(5));
}

/// `try_recv` completes once a sender is waiting.
fn try_recv_takes_from_a_waiting_sender<M: Mode, P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, M, P>(0);
    let sender = thread::spawn(move || tx.send(9));
    let mut got = None;
    eventually("a sender to wait", || match rx.try_recv() {
        Ok(v) => {
            got = Some(v);
            true
        }
        Err(TryRecvError::Empty) => false,
        Err(e) => panic!("{e:?}"),
    });
    assert_eq!(got, Some(9));
    assert_eq!(sender.join().unwrap(), Ok(()));
}

/// Timeouts give the value back and leave nothing queued: the next pair
/// meets as if the timed-out parties had never come.
fn timeouts_leave_nothing_behind<M: Mode, P: Protocol>() {
    let census = Census::new();
    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(0);
    match tx.send_timeout(Counted::new(1, &census), Duration::from_millis(20)) {
        Err(SendTimeoutError::Timeout(back)) => assert_eq!(back.value, 1),
        other => panic!("expected a timeout, got {:?}", other.map_err(|_| ())),
    }
    assert!(matches!(
        rx.recv_timeout(Duration::from_millis(20)),
        Err(RecvTimeoutError::Timeout)
    ));
    // Neither left a packet: no receiver waits, no sender offers.
    assert!(matches!(
        tx.try_send(Counted::new(2, &census)),
        Err(TrySendError::Full(_))
    ));
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
    let c = census.clone();
    let sender = thread::spawn(move || tx.send(Counted::new(3, &c)).is_ok());
    assert_eq!(rx.recv().unwrap().value, 3);
    assert!(sender.join().unwrap());
    drop(rx);
    assert_eq!(census.made(), 3);
    assert_eq!(census.dropped(), 3);
}

/// A sender blocked when the receivers go gets its value back; a receiver
/// blocked when the senders go gets `RecvError`.
fn disconnection_wakes_the_blocked_side<M: Mode, P: Protocol>() {
    let census = Census::new();
    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(0);
    let c = census.clone();
    let sender = thread::spawn(move || {
        let back = tx.send(Counted::new(4, &c)).unwrap_err().into_inner();
        back.value
    });
    thread::sleep(Duration::from_millis(50));
    drop(rx);
    assert_eq!(sender.join().unwrap(), 4);

    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(0);
    let receiver = thread::spawn(move || rx.recv().map(|m| m.value));
    thread::sleep(Duration::from_millis(50));
    drop(tx);
    assert!(receiver.join().unwrap().is_err());
    assert_eq!(census.dropped(), census.made());
}

/// Every rendezvous scenario above, on one mode and protocol.
fn rendezvous<M: Mode, P: Protocol>() {
    shape::<M, P>();
    send_waits_for_the_receiver::<M, P>();
    try_send_reaches_a_waiting_receiver::<M, P>();
    try_recv_takes_from_a_waiting_sender::<M, P>();
    timeouts_leave_nothing_behind::<M, P>();
    disconnection_wakes_the_blocked_side::<M, P>();
}

mode_tests! {
    cas_spsc_rendezvous: rendezvous::<Spsc, Cas>();
    updt_spsc_rendezvous: rendezvous::<Spsc, Updt>();
    cas_spmc_rendezvous: rendezvous::<Spmc, Cas>();
    updt_spmc_rendezvous: rendezvous::<Spmc, Updt>();
    cas_mpsc_rendezvous: rendezvous::<Mpsc, Cas>();
    updt_mpsc_rendezvous: rendezvous::<Mpsc, Updt>();
    cas_mpmc_rendezvous: rendezvous::<Mpmc, Cas>();
    updt_mpmc_rendezvous: rendezvous::<Mpmc, Updt>();
}
