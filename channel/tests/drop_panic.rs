//! A buffered message whose `Drop` panics must not stop the others from
//! being dropped, exactly once each, and the panic must reach whoever
//! dropped the channel, as with a `Vec`.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use common::{Census, Counted};
use swco_channel::{bounded_in, Cas, Mode, Mpmc, Mpsc, Protocol, Spmc, Spsc, Updt};
use swco_test_support::mode_tests;

/// A counted message whose drop panics if `explode` is set. Its `Counted`
/// field is still dropped (and counted) when its own `drop` panics.
struct Bomb {
    _counted: Counted<()>,
    explode: bool,
}

impl Bomb {
    fn new(explode: bool, census: &Arc<Census>) -> Self {
        Bomb {
            _counted: Counted::new((), census),
            explode,
        }
    }
}

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.explode {
            panic!("a message's drop panics");
        }
    }
}

/// Four buffered messages, the second of which panics when dropped. The
/// last receiver goes first, so its drain drops them while a sender is
/// still alive (the ring is not freed yet).
fn last_receiver_drains_past_a_panicking_drop<M: Mode, P: Protocol>() {
    let census = Census::new();
    let (tx, rx) = bounded_in::<Bomb, M, P>(4);
    for i in 0..4 {
        tx.try_send(Bomb::new(i == 1, &census))
            .unwrap_or_else(|_| panic!("try_send failed"));
    }
    let dropping = catch_unwind(AssertUnwindSafe(move || drop(rx)));
    assert!(
        dropping.is_err(),
        "the drop's panic did not reach the dropper"
    );
    assert_eq!(census.made(), 4);
    assert_eq!(
        census.dropped(),
        4,
        "buffered messages left undropped after a panicking drop"
    );
    // Sends fail (receivers gone) and give the message back.
    assert!(tx.try_send(Bomb::new(false, &census)).is_err());
    drop(tx);
    assert_eq!(census.made(), 5);
    assert_eq!(census.dropped(), 5);
}

mode_tests! {
    spsc_cas_drain_continues_past_a_panicking_drop: last_receiver_drains_past_a_panicking_drop::<Spsc, Cas>();
    spsc_updt_drain_continues_past_a_panicking_drop: last_receiver_drains_past_a_panicking_drop::<Spsc, Updt>();
    spmc_cas_drain_continues_past_a_panicking_drop: last_receiver_drains_past_a_panicking_drop::<Spmc, Cas>();
    spmc_updt_drain_continues_past_a_panicking_drop: last_receiver_drains_past_a_panicking_drop::<Spmc, Updt>();
    mpsc_cas_drain_continues_past_a_panicking_drop: last_receiver_drains_past_a_panicking_drop::<Mpsc, Cas>();
    mpsc_updt_drain_continues_past_a_panicking_drop: last_receiver_drains_past_a_panicking_drop::<Mpsc, Updt>();
    mpmc_cas_drain_continues_past_a_panicking_drop: last_receiver_drains_past_a_panicking_drop::<Mpmc, Cas>();
    mpmc_updt_drain_continues_past_a_panicking_drop: last_receiver_drains_past_a_panicking_drop::<Mpmc, Updt>();
}
