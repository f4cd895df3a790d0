//! A waiter that unwinds out of `park` (a coroutine cancelled at shutdown is
//! unwound from inside its park) must leave the waiter list as if it had
//! never waited: its entry must not swallow the next wake-one, and a wake it
//! had already been chosen for must go to another waiter. Otherwise a live
//! waiter sleeps through a buffered message (or a free slot).
//!
//! Each test blocks a "dead" waiter whose park context panics, then a live
//! waiter on a plain thread, then makes progress once, and checks that the
//! live waiter was *woken* (not merely that it got through when its hang
//! guard's deadline passed and it retried).

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::thread;

use common::{Census, Counted, Panic, TestPark, HANG_GUARD};
use swco_channel::hook;
use swco_channel::{
    bounded_in, Cas, ManyConsumers, ManyProducers, Mpmc, Mpsc, Protocol, Spmc, Updt,
};

/// A receiver unwinds out of its park (`panic` says when); then a second
/// receiver blocks; one send must wake the second.
fn recv_side<M: ManyConsumers, P: Protocol>(panic: Panic) {
    let (tx, rx) = bounded_in::<u32, M, P>(1);

    let (park, dead_probe) = TestPark::new(panic);
    let dead_rx = rx.clone();
    let dead = thread::spawn(move || {
        hook::set_current(Some(Rc::new(park)));
        catch_unwind(AssertUnwindSafe(|| dead_rx.recv())).is_err()
    });
    dead_probe.wait_parked();
    let mut dead = Some(dead);
    if panic == Panic::BeforeParking {
        // Let it finish unwinding before the live receiver registers.
        assert!(dead.take().unwrap().join().unwrap(), "recv did not unwind");
    }

    let (park, live_probe) = TestPark::new(Panic::Never);
    let live = thread::spawn(move || {
        hook::set_current(Some(Rc::new(park)));
        rx.recv_timeout(HANG_GUARD)
    });
    live_probe.wait_parked();

    tx.send(7).unwrap();
    assert_eq!(live.join().unwrap(), Ok(7));
    assert!(
        !live_probe.timed_out(),
        "the live receiver was never woken for the buffered message"
    );
    if let Some(dead) = dead {
        assert!(dead.join().unwrap(), "recv did not unwind");
    }
}

/// A sender blocked on a full channel unwinds out of its park; then a
/// second sender blocks; one receive must wake the second. The unwinding
/// sender's message is dropped exactly once, by the unwind.
fn send_side<M: ManyProducers, P: Protocol>(panic: Panic) {
    let census = Census::new();
    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(1);
    tx.send(Counted::new(0, &census))
        .unwrap_or_else(|_| panic!("send failed"));

    let (park, dead_probe) = TestPark::new(panic);
    let dead_tx = tx.clone();
    let dead_census = census.clone();
    let dead = thread::spawn(move || {
        hook::set_current(Some(Rc::new(park)));
        catch_unwind(AssertUnwindSafe(|| {
            dead_tx.send(Counted::new(1, &dead_census))
        }))
        .is_err()
    });
    dead_probe.wait_parked();
    let mut dead = Some(dead);
    if panic == Panic::BeforeParking {
        assert!(dead.take().unwrap().join().unwrap(), "send did not unwind");
    }

    let (park, live_probe) = TestPark::new(Panic::Never);
    let live_census = census.clone();
    let live = thread::spawn(move || {
        hook::set_current(Some(Rc::new(park)));
        tx.send_timeout(Counted::new(2, &live_census), HANG_GUARD)
            .is_ok()
    });
    live_probe.wait_parked();

    assert_eq!(rx.recv().unwrap().value, 0);
    assert!(live.join().unwrap(), "the live sender's send failed");
    assert!(
        !live_probe.timed_out(),
        "the live sender was never woken for the free slot"
    );
    if let Some(dead) = dead {
        assert!(dead.join().unwrap(), "send did not unwind");
    }
    assert_eq!(rx.recv().unwrap().value, 2);
    assert!(rx.try_recv().is_err());
    drop(rx);
    assert_eq!(census.made(), 3);
    assert_eq!(census.dropped(), 3);
}

macro_rules! unwind_tests {
    ($($name:ident: $side:ident::<$mode:ty, $proto:ty>($panic:ident);)*) => {
        $(
            #[test]
            fn $name() {
                $side::<$mode, $proto>(Panic::$panic);
            }
        )*
    };
}

unwind_tests! {
    spmc_cas_recv_unwinding_before_park: recv_side::<Spmc, Cas>(BeforeParking);
    spmc_cas_recv_unwinding_after_wake: recv_side::<Spmc, Cas>(AfterWake);
    spmc_updt_recv_unwinding_before_park: recv_side::<Spmc, Updt>(BeforeParking);
    spmc_updt_recv_unwinding_after_wake: recv_side::<Spmc, Updt>(AfterWake);
    mpmc_cas_recv_unwinding_before_park: recv_side::<Mpmc, Cas>(BeforeParking);
    mpmc_cas_recv_unwinding_after_wake: recv_side::<Mpmc, Cas>(AfterWake);
    mpmc_updt_recv_unwinding_before_park: recv_side::<Mpmc, Updt>(BeforeParking);
    mpmc_updt_recv_unwinding_after_wake: recv_side::<Mpmc, Updt>(AfterWake);
    mpsc_cas_send_unwinding_before_park: send_side::<Mpsc, Cas>(BeforeParking);
    mpsc_cas_send_unwinding_after_wake: send_side::<Mpsc, Cas>(AfterWake);
    mpsc_updt_send_unwinding_before_park: send_side::<Mpsc, Updt>(BeforeParking);
    mpsc_updt_send_unwinding_after_wake: send_side::<Mpsc, Updt>(AfterWake);
    mpmc_cas_send_unwinding_before_park: send_side::<Mpmc, Cas>(BeforeParking);
    mpmc_cas_send_unwinding_after_wake: send_side::<Mpmc, Cas>(AfterWake);
    mpmc_updt_send_unwinding_before_park: send_side::<Mpmc, Updt>(BeforeParking);
    mpmc_updt_send_unwinding_after_wake: send_side::<Mpmc, Updt>(AfterWake);
}
