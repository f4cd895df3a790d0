//! Select models: a select over two channels of different modes (an `spsc`
//! and an `mpmc` one, same protocol) races two senders that send one
//! message each. Over every interleaving:
//!
//! * exactly one operation is selected and consumes its message (the select
//!   may block first: then a send must wake it, or loom reports a deadlock);
//! * the other message stays in its channel, unconsumed.
//!
//! And the hand-on: a select woken by the wake-one of a channel whose
//! operation it does not complete passes the wake to that channel's next
//! waiter (`hand_on` models).
//!
//! Under loom the select starts its scan at the first operation (loom needs
//! determinism), so both orders of the two operations are modelled.
//!
//! Preemption bounds: 3 for the races (about 30,000 executions each), 1 for
//! the hand-on models, which have one more thread and a blocked receiver
//! (bound 2 runs for many minutes). Bound 1 is enough to find a select that
//! does not hand its wake on: with `leave` in place of `abandon` the
//! `hand_on` models deadlock.
#![cfg(loom)]

#[macro_use]
mod common;

use loom::thread;
use swco_channel::{
    bounded_in, select, Cas, Mpmc, Protocol, Receiver, Select, Spsc, TryRecvError, Updt,
};

/// Which of the two channels the select took from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Took {
    Spsc,
    Mpmc,
}

fn select_once<P: Protocol>(
    a: &Receiver<u32, Spsc, P>,
    b: &Receiver<u32, Mpmc, P>,
    use_macro: bool,
    a_first: bool,
) -> (Took, u32) {
    if use_macro {
        if a_first {
            select! {
                recv(a) -> m => (Took::Spsc, m.unwrap()),
                recv(b) -> m => (Took::Mpmc, m.unwrap()),
            }
        } else {
            select! {
                recv(b) -> m => (Took::Mpmc, m.unwrap()),
                recv(a) -> m => (Took::Spsc, m.unwrap()),
            }
        }
    } else {
        let mut sel = Select::new();
        let (ia, ib) = if a_first {
            let ia = sel.recv(a);
            (ia, sel.recv(b))
        } else {
            let ib = sel.recv(b);
            (sel.recv(a), ib)
        };
        let oper = sel.select();
        if oper.index() == ia {
            (Took::Spsc, oper.recv(a).unwrap())
        } else {
            assert_eq!(oper.index(), ib);
            (Took::Mpmc, oper.recv(b).unwrap())
        }
    }
}

/// Two senders (one per channel, one message each) race a select on the
/// main thread.
fn two_senders_race<P: Protocol>(use_macro: bool, a_first: bool) {
    let (tx_a, rx_a) = bounded_in::<u32, Spsc, P>(1);
    let (tx_b, rx_b) = bounded_in::<u32, Mpmc, P>(1);
    let ta = thread::spawn(move || {
        tx_a.send(1).expect("receiver alive");
        tx_a
    });
    let tb = thread::spawn(move || {
        tx_b.send(2).expect("receiver alive");
        tx_b
    });
    let (took, v) = select_once(&rx_a, &rx_b, use_macro, a_first);
    let _tx_a = ta.join().expect("sender a panicked");
    let _tx_b = tb.join().expect("sender b panicked");
    match took {
        Took::Spsc => {
            assert_eq!(v, 1);
            assert_eq!(rx_a.try_recv(), Err(TryRecvError::Empty));
            assert_eq!(rx_b.try_recv(), Ok(2), "the other message was lost");
        }
        Took::Mpmc => {
            assert_eq!(v, 2);
            assert_eq!(rx_b.try_recv(), Err(TryRecvError::Empty));
            assert_eq!(rx_a.try_recv(), Ok(1), "the other message was lost");
        }
    }
}

model!(
    cas_macro_two_senders_race,
    3,
    two_senders_race::<Cas>(true, true)
);
model!(
    cas_macro_two_senders_race_reversed,
    3,
    two_senders_race::<Cas>(true, false)
);
model!(
    updt_macro_two_senders_race,
    3,
    two_senders_race::<Updt>(true, true)
);
model!(
    updt_macro_two_senders_race_reversed,
    3,
    two_senders_race::<Updt>(true, false)
);
model!(
    cas_struct_two_senders_race,
    3,
    two_senders_race::<Cas>(false, true)
);
model!(
    updt_struct_two_senders_race,
    3,
    two_senders_race::<Updt>(false, true)
);

/// The hand-on. A plain receiver blocks in `recv` on the mpmc channel; the
/// main thread selects over the spsc and the mpmc channel (spsc first, so
/// that when both are ready it takes the spsc message); one sender thread
/// sends on the spsc channel, then on the mpmc one. If the mpmc send's
/// wake-one chooses the select but the select takes the spsc message, the
/// select must hand the wake to the plain receiver, or that receiver sleeps
/// for ever (a deadlock loom reports). If the select takes the mpmc message
/// instead, the main thread sends the plain receiver another.
fn hand_on<P: Protocol>(use_macro: bool) {
    let (tx_a, rx_a) = bounded_in::<u32, Spsc, P>(1);
    let (tx_b, rx_b) = bounded_in::<u32, Mpmc, P>(2);
    let plain_rx = rx_b.clone();
    let tx_b2 = tx_b.clone();
    let plain = thread::spawn(move || plain_rx.recv().expect("senders alive"));
    let sender = thread::spawn(move || {
        tx_a.send(1).expect("receiver alive");
        tx_b.send(2).expect("receivers alive");
        tx_a
    });
    let (took, _) = select_once(&rx_a, &rx_b, use_macro, true);
    if took == Took::Mpmc {
        tx_b2.send(3).expect("receivers alive");
    }
    let _tx_a = sender.join().expect("sender panicked");
    let got = plain.join().expect("plain receiver panicked");
    assert!(got == 2 || got == 3);
}

model!(cas_macro_hand_on, 1, hand_on::<Cas>(true));
model!(updt_macro_hand_on, 1, hand_on::<Updt>(true));
model!(cas_struct_hand_on, 1, hand_on::<Cas>(false));
model!(updt_struct_hand_on, 1, hand_on::<Updt>(false));
