//! What code moving over from crossbeam-channel relies on: `select!`'s
//! spellings (`default()`, trailing commas inside an arm), `select_biased!`,
//! `same_channel`, and endpoints that are `UnwindSafe` and `RefUnwindSafe`.
//!
//! Nothing here blocks: every select has a ready arm or a default.

use std::panic::{catch_unwind, RefUnwindSafe, UnwindSafe};
use std::time::Duration;

use static_assertions::assert_impl_all;
use swco_channel::{mpmc, mpsc, select, select_biased, spmc, spsc, Cas, Updt};

// Each mode and protocol, and a message type that is neither.
assert_impl_all!(mpmc::Sender<u8>: UnwindSafe, RefUnwindSafe);
assert_impl_all!(mpmc::Receiver<u8, Updt>: UnwindSafe, RefUnwindSafe);
assert_impl_all!(mpsc::Sender<u8, Updt>: UnwindSafe, RefUnwindSafe);
assert_impl_all!(mpsc::Receiver<u8>: UnwindSafe, RefUnwindSafe);
assert_impl_all!(spmc::Sender<u8>: UnwindSafe, RefUnwindSafe);
assert_impl_all!(spmc::Receiver<u8, Updt>: UnwindSafe, RefUnwindSafe);
assert_impl_all!(spsc::Sender<std::cell::Cell<u8>, Cas>: UnwindSafe, RefUnwindSafe);
assert_impl_all!(spsc::Receiver<std::cell::Cell<u8>, Updt>: UnwindSafe, RefUnwindSafe);

/// `default()` with empty parentheses is `default`: taken when nothing is
/// ready, not taken when something is.
#[test]
fn default_with_empty_parentheses() {
    let (tx, rx) = mpmc::bounded::<u32>(1);
    let got = select! {
        recv(rx) -> m => m.ok(),
        default() => None,
    };
    assert_eq!(got, None);
    tx.send(5).unwrap();
    let got = select! {
        recv(rx) -> m => m.ok(),
        default() => None,
    };
    assert_eq!(got, Some(5));
    // As the last arm without a comma, and with a block body.
    let mut defaults = 0;
    let got = select! {
        recv(rx) -> m => m.ok(),
        default() => {
            defaults += 1;
            None
        }
    };
    assert_eq!((got, defaults), (None, 1));
}

/// Trailing commas inside `recv(r,)`, `send(s, v,)` and `default(t,)`.
#[test]
fn trailing_commas_inside_arms() {
    let (tx, rx) = spsc::bounded_with::<u32, Updt>(1);
    select! {
        send(tx, 1,) -> r => r.unwrap(),
        default(Duration::from_millis(1),) => panic!("the send had room"),
    }
    let got = select! {
        recv(rx,) -> m => m.unwrap(),
        default(Duration::from_millis(1),) => panic!("a message was there"),
    };
    assert_eq!(got, 1);
    let timed_out = select! {
        recv(rx,) -> _ => false,
        default(Duration::from_millis(1),) => true
    };
    assert!(timed_out);
    // `select_biased!` takes the same spellings.
    let timed_out = select_biased! {
        recv(rx,) -> _ => false,
        send(tx, 2,) -> r => { r.unwrap(); false }
        default() => true,
    };
    assert!(!timed_out);
    assert_eq!(rx.try_recv(), Ok(2));
}

/// `select_biased!` without a default, with a receive that has to wait for
/// nothing: the first ready arm in the order written wins every time, on
/// both a receive and a send.
#[test]
fn select_biased_prefers_the_first_ready_arm() {
    let (tx1, rx1) = mpmc::bounded::<u32>(4);
    let (tx2, rx2) = mpmc::bounded::<u32>(4);
    for i in 0..4 {
        tx1.send(i).unwrap();
        tx2.send(10 + i).unwrap();
    }
    for i in 0..4 {
        let got = select_biased! {
            recv(rx1) -> m => m.unwrap(),
            recv(rx2) -> m => m.unwrap(),
        };
        assert_eq!(got, i);
    }
    // Now only the second is ready.
    let got = select_biased! {
        recv(rx1) -> m => m.unwrap(),
        recv(rx2) -> m => m.unwrap(),
    };
    assert_eq!(got, 10);
    // A send first in order, with room, wins over a ready receive.
    let (tx3, rx3) = spsc::bounded::<u32>(1);
    select_biased! {
        send(tx3, 7) -> r => r.unwrap(),
        recv(rx2) -> _ => panic!("took the second arm"),
    }
    assert_eq!(rx3.try_recv(), Ok(7));
}

#[test]
fn same_channel() {
    let (tx, rx) = mpmc::bounded::<u32>(1);
    let (tx2, rx2) = mpmc::bounded::<u32>(1);
    assert!(tx.same_channel(&tx.clone()));
    assert!(rx.same_channel(&rx.clone()));
    assert!(!tx.same_channel(&tx2));
    assert!(!rx.same_channel(&rx2));
    let (stx, srx) = spsc::bounded_with::<u32, Updt>(0);
    assert!(stx.same_channel(&stx));
    assert!(srx.same_channel(&srx));
}

/// Endpoints cross `catch_unwind` without `AssertUnwindSafe`, and the
/// channel works on after a panic inside it.
#[test]
fn endpoints_cross_catch_unwind() {
    let (tx, rx) = mpmc::bounded::<u32>(2);
    let r = catch_unwind(|| {
        tx.send(1).unwrap();
        panic!("after a send");
    });
    assert!(r.is_err());
    let r = catch_unwind(|| rx.recv().unwrap());
    assert_eq!(r.ok(), Some(1));
}
