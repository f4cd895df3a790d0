//! A waiter that unwinds out of `park` (a coroutine cancelled at shutdown is
//! unwound from inside its park) must leave the waiter list as if it had
//! never waited: its entry must not swallow the next wake-one, and a wake it
//! had already been chosen for must go to another waiter. Otherwise a live
//! waiter sleeps through a buffered message (or a free slot).
//!
//! Each of those tests blocks a "dead" waiter whose park context panics, then a live
//! waiter on a plain thread, then makes progress once, and checks that the
//! live waiter was *woken* (not merely that it got through when its hang
//! guard's deadline passed and it retried).
//!
//! A waker that panics (wakers are user code) must not take with it the
//! messages a receive took out of the ring before waking it.

mod common;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use common::{Census, Counted, Panic, TestPark, HANG_GUARD};
use swco_channel::hook;
use swco_channel::{
    bounded_in, Cas, ManyConsumers, ManyProducers, Mode, Mpmc, Mpsc, Protocol, Receiver,
    RecvTimeoutError, Select, Spmc, Spsc, Updt,
};
use swco_test_support::mode_tests;

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

mode_tests! {
    spmc_cas_recv_unwinding_before_park: recv_side::<Spmc, Cas>(Panic::BeforeParking);
    spmc_cas_recv_unwinding_after_wake: recv_side::<Spmc, Cas>(Panic::AfterWake);
    spmc_updt_recv_unwinding_before_park: recv_side::<Spmc, Updt>(Panic::BeforeParking);
    spmc_updt_recv_unwinding_after_wake: recv_side::<Spmc, Updt>(Panic::AfterWake);
    mpmc_cas_recv_unwinding_before_park: recv_side::<Mpmc, Cas>(Panic::BeforeParking);
    mpmc_cas_recv_unwinding_after_wake: recv_side::<Mpmc, Cas>(Panic::AfterWake);
    mpmc_updt_recv_unwinding_before_park: recv_side::<Mpmc, Updt>(Panic::BeforeParking);
    mpmc_updt_recv_unwinding_after_wake: recv_side::<Mpmc, Updt>(Panic::AfterWake);
    mpsc_cas_send_unwinding_before_park: send_side::<Mpsc, Cas>(Panic::BeforeParking);
    mpsc_cas_send_unwinding_after_wake: send_side::<Mpsc, Cas>(Panic::AfterWake);
    mpsc_updt_send_unwinding_before_park: send_side::<Mpsc, Updt>(Panic::BeforeParking);
    mpsc_updt_send_unwinding_after_wake: send_side::<Mpsc, Updt>(Panic::AfterWake);
    mpmc_cas_send_unwinding_before_park: send_side::<Mpmc, Cas>(Panic::BeforeParking);
    mpmc_cas_send_unwinding_after_wake: send_side::<Mpmc, Cas>(Panic::AfterWake);
    mpmc_updt_send_unwinding_before_park: send_side::<Mpmc, Updt>(Panic::BeforeParking);
    mpmc_updt_send_unwinding_after_wake: send_side::<Mpmc, Updt>(Panic::AfterWake);
}

// ---- a panicking waker --------------------------------------------------
//
// A receive that frees a slot wakes a sender waiting for it, and a waker is
// user code: it may panic. By then the receive has taken its messages out
// of the ring, so the panic must not unwind through the receive (its
// messages would be received by nobody and dropped by nobody). The receive
// returns them, and the panic goes on at the thread's next blocking
// operation, as a rendezvous receiver's does.

/// A waker that panics, as a buggy task's might.
struct PanicWake;

const WAKER_PANIC: &str = "test waker: panics on wake";

impl Wake for PanicWake {
    fn wake(self: Arc<Self>) {
        std::panic::panic_any(WAKER_PANIC);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        std::panic::panic_any(WAKER_PANIC);
    }
}

/// A waker that does nothing.
struct NoopWake;

impl Wake for NoopWake {
    fn wake(self: Arc<Self>) {}
}

/// Each way of taking messages out of a full ring.
#[derive(Clone, Copy, Debug)]
enum Take {
    Recv,
    TryRecv,
    RecvTimeout,
    Iter,
    TryIter,
    RecvBatch,
    TryRecvBatch,
    RecvAsync,
    Select,
}

impl Take {
    /// How many messages it takes from a full ring: what the channel holds.
    fn count(self) -> usize {
        match self {
            Take::RecvBatch | Take::TryRecvBatch => 2,
            _ => 1,
        }
    }

    fn from<M: Mode, P: Protocol>(self, rx: &Receiver<Counted<u32>, M, P>) -> Vec<Counted<u32>> {
        let one = match self {
            Take::Recv => rx.recv().ok(),
            Take::TryRecv => rx.try_recv().ok(),
            Take::RecvTimeout => rx.recv_timeout(HANG_GUARD).ok(),
            Take::Iter => rx.iter().next(),
            Take::TryIter => rx.try_iter().next(),
            Take::RecvAsync => {
                let waker = Waker::from(Arc::new(NoopWake));
                match std::pin::pin!(rx.recv_async()).poll(&mut Context::from_waker(&waker)) {
                    Poll::Ready(got) => got.ok(),
                    Poll::Pending => None,
                }
            }
            Take::Select => {
                let mut sel = Select::new();
                sel.recv(rx);
                sel.select().recv(rx).ok()
            }
            Take::RecvBatch | Take::TryRecvBatch => {
                let mut out = Vec::new();
                let n = if let Take::RecvBatch = self {
                    rx.recv_batch(&mut out, 2).ok()
                } else {
                    rx.try_recv_batch(&mut out, 2).ok()
                };
                assert_eq!(n, Some(2), "the batch took {n:?}");
                return out;
            }
        };
        one.into_iter().collect()
    }
}

/// A full channel, a send future pending on it under a waker that panics,
/// and a receive (`take`) that frees a slot and so wakes it: the receive
/// returns its messages, the waker's panic goes on at the next blocking
/// operation, and every message is received once and dropped once.
fn panicking_waker<M: Mode, P: Protocol>(take: Take) {
    let census = Census::new();
    let full = take.count();
    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(full);
    for i in 0..full {
        tx.send(Counted::new(i as u32, &census))
            .unwrap_or_else(|_| panic!("send failed"));
    }
    let mut last = tx.send_async(Counted::new(full as u32, &census));
    let panicking = Waker::from(Arc::new(PanicWake));
    assert!(
        Pin::new(&mut last)
            .poll(&mut Context::from_waker(&panicking))
            .is_pending(),
        "the send future found room in a full channel"
    );

    let got = catch_unwind(AssertUnwindSafe(|| take.from(&rx)))
        .unwrap_or_else(|_| panic!("{take:?} unwound: the messages it took are lost"));
    let values: Vec<u32> = got.iter().map(|m| m.value).collect();
    assert_eq!(values, (0..full as u32).collect::<Vec<_>>(), "{take:?}");
    drop(got);

    // The ring is empty now, so this receive blocks: the deferred panic
    // goes on before it does, once.
    let deferred = catch_unwind(AssertUnwindSafe(|| {
        rx.recv_timeout(Duration::ZERO).map(|m| m.value)
    }))
    .expect_err("the waker's panic was swallowed");
    assert_eq!(deferred.downcast_ref::<&str>(), Some(&WAKER_PANIC));
    assert!(matches!(
        rx.recv_timeout(Duration::ZERO),
        Err(RecvTimeoutError::Timeout)
    ));

    // The send future completes under a waker that does not panic.
    let waker = Waker::from(Arc::new(NoopWake));
    assert!(matches!(
        Pin::new(&mut last).poll(&mut Context::from_waker(&waker)),
        Poll::Ready(Ok(()))
    ));
    drop(last);
    assert_eq!(rx.recv().map(|m| m.value).ok(), Some(full as u32));
    drop((tx, rx));
    assert_eq!(census.made(), full + 1);
    assert_eq!(census.dropped(), full + 1);
}

/// Every way of taking messages, on every kind of waiter list a sender may
/// wait on (a slot woken by one or by several receivers; a list) and both
/// protocols.
fn panicking_waker_all_modes(take: Take) {
    panicking_waker::<Spsc, Cas>(take);
    panicking_waker::<Spmc, Updt>(take);
    panicking_waker::<Mpsc, Updt>(take);
    panicking_waker::<Mpmc, Cas>(take);
}

macro_rules! panicking_waker_tests {
    ($($name:ident: $take:ident;)*) => {
        $(
            #[test]
            fn $name() {
                panicking_waker_all_modes(Take::$take);
            }
        )*
    };
}

panicking_waker_tests! {
    a_panicking_waker_keeps_the_message_of_recv: Recv;
    a_panicking_waker_keeps_the_message_of_try_recv: TryRecv;
    a_panicking_waker_keeps_the_message_of_recv_timeout: RecvTimeout;
    a_panicking_waker_keeps_the_message_of_iter: Iter;
    a_panicking_waker_keeps_the_message_of_try_iter: TryIter;
    a_panicking_waker_keeps_the_messages_of_recv_batch: RecvBatch;
    a_panicking_waker_keeps_the_messages_of_try_recv_batch: TryRecvBatch;
    a_panicking_waker_keeps_the_message_of_recv_async: RecvAsync;
    a_panicking_waker_keeps_the_message_of_select: Select;
}
