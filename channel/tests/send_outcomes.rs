//! Every way a send ends, with a drop-counting message: sent (the channel
//! owns it), or given back in each kind of error (the caller owns it). The
//! send path keeps the message in the endpoint and copies it bitwise into
//! the ring or the error, so each outcome must leave exactly one owner.

mod common;

use std::time::{Duration, Instant};

use common::{Census, Counted};
use swco_channel::{
    bounded_in, Cas, Mode, Mpmc, Mpsc, Protocol, SendTimeoutError, Spmc, Spsc, TrySendError, Updt,
};
use swco_test_support::mode_tests;

fn every_send_outcome<M: Mode, P: Protocol>() {
    let census = Census::new();
    let msg = |value| Counted::new(value, &census);
    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(2);

    assert!(tx.try_send(msg(0)).is_ok());
    assert!(tx.send(msg(1)).is_ok());
    match tx.try_send(msg(2)) {
        Err(TrySendError::Full(back)) => assert_eq!(back.value, 2),
        other => panic!("expected Full, got {other:?}"),
    }
    // The deadlines have passed already: no waiting on the clock.
    match tx.send_timeout(msg(3), Duration::ZERO) {
        Err(SendTimeoutError::Timeout(back)) => assert_eq!(back.value, 3),
        other => panic!("expected Timeout, got {other:?}"),
    }
    match tx.send_deadline(msg(4), Instant::now()) {
        Err(SendTimeoutError::Timeout(back)) => assert_eq!(back.value, 4),
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert_eq!(census.dropped(), 3, "the given-back messages");

    assert_eq!(rx.recv().unwrap().value, 0);
    assert!(tx.send_timeout(msg(5), Duration::ZERO).is_ok());
    assert_eq!(rx.recv().unwrap().value, 1);
    assert!(tx.send_deadline(msg(6), Instant::now()).is_ok());
    assert_eq!(census.dropped(), 5);

    // Messages 5 and 6 are still buffered: dropping the last receiver drops
    // them, and every later send gives its message back.
    drop(rx);
    assert_eq!(census.dropped(), 7);
    assert_eq!(tx.send(msg(7)).unwrap_err().into_inner().value, 7);
    match tx.try_send(msg(8)) {
        Err(TrySendError::Disconnected(back)) => assert_eq!(back.value, 8),
        other => panic!("expected Disconnected, got {other:?}"),
    }
    match tx.send_timeout(msg(9), Duration::from_secs(3600)) {
        Err(SendTimeoutError::Disconnected(back)) => assert_eq!(back.value, 9),
        other => panic!("expected Disconnected, got {other:?}"),
    }
    match tx.send_deadline(msg(10), Instant::now()) {
        Err(SendTimeoutError::Disconnected(back)) => assert_eq!(back.value, 10),
        other => panic!("expected Disconnected, got {other:?}"),
    }
    drop(tx);
    assert_eq!(census.made(), 11);
    assert_eq!(census.dropped(), 11);
}

mode_tests! {
    spsc_cas_every_send_outcome_has_one_owner: every_send_outcome::<Spsc, Cas>();
    spsc_updt_every_send_outcome_has_one_owner: every_send_outcome::<Spsc, Updt>();
    spmc_cas_every_send_outcome_has_one_owner: every_send_outcome::<Spmc, Cas>();
    spmc_updt_every_send_outcome_has_one_owner: every_send_outcome::<Spmc, Updt>();
    mpsc_cas_every_send_outcome_has_one_owner: every_send_outcome::<Mpsc, Cas>();
    mpsc_updt_every_send_outcome_has_one_owner: every_send_outcome::<Mpsc, Updt>();
    mpmc_cas_every_send_outcome_has_one_owner: every_send_outcome::<Mpmc, Cas>();
    mpmc_updt_every_send_outcome_has_one_owner: every_send_outcome::<Mpmc, Updt>();
}
