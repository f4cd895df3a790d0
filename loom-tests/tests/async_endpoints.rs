//! Async-endpoint models: a pending future holds a registration between
//! polls, and dropping it (cancellation) must neither lose a message or a
//! wake-up nor leave a stale waiter behind to swallow the next wake-one.
//!
//! Each model polls a future by hand, once (it registers and returns
//! `Pending`), then drops it while the peer's operation races the drop; then
//! a *blocking* operation of the same side must complete. A message taken
//! but not returned, a wake kept by the dropped future, or a stale
//! registration that swallows the peer's wake leaves the blocking operation
//! parked for ever, which loom reports as a deadlock.
//!
//! The receive models run on `spsc` (`WaiterSlot<true>`), `mpsc`
//! (`WaiterSlot<false>`) and `mpmc` (`WaitList`), the send models on
//! `spsc`, `spmc` and `mpmc`, each for both protocols. Two more: a future
//! chosen by a wake-one and then dropped must hand the wake on to a blocked
//! receiver (`WaitList`), and a *leaked* pending future on a lone side must
//! not make the side's retirement race a peer reading the kept waker.
#![cfg(loom)]

#[macro_use]
mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use loom::sync::atomic::AtomicBool;
use loom::thread;
use swco_channel::{
    bounded_in, Cas, ManyConsumers, Mode, Mpmc, Mpsc, Protocol, Receiver, Sender, Spmc, Spsc, Updt,
};

/// A waker that records that it was woken, in a loom atomic: a task that
/// sees the flag set has synchronised with the wake, as with a real
/// executor's waker.
#[derive(Default)]
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, SeqCst);
    }
}

fn flag_waker() -> (Arc<Flag>, Waker) {
    let flag = Arc::new(Flag::default());
    (flag.clone(), Waker::from(flag))
}

/// Waits (yielding to the other loom threads) until `flag` is set. A lost
/// wake-up makes this wait for ever, which loom reports. (A load, not a
/// `swap`: a spin of read-modify-writes fills loom's bounded store history,
/// and loom then let a thread's load miss its own store of `true`.)
fn wait_woken(flag: &Flag) {
    while !flag.0.load(SeqCst) {
        thread::yield_now();
    }
}

fn poll_once<F: Future + Unpin>(fut: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(waker))
}

/// A thread that sends 1 on `tx` and returns the sender, so that the
/// receiver never sees a disconnect.
fn send_one<M: Mode, P: Protocol>(tx: Sender<u32, M, P>) -> thread::JoinHandle<Sender<u32, M, P>> {
    thread::spawn(move || {
        tx.send(1).expect("receiver alive");
        tx
    })
}

/// The receiver got the sender's 1, and only once.
fn received_once<M: Mode, P: Protocol>(
    got: u32,
    sender: thread::JoinHandle<Sender<u32, M, P>>,
    rx: &Receiver<u32, M, P>,
) {
    assert_eq!(got, 1);
    let tx = sender.join().expect("sender panicked");
    assert!(rx.try_recv().is_err(), "received twice");
    drop(tx);
}

/// A thread receiving two messages, and returning them and its receiver.
type TwoReceived<M, P> = thread::JoinHandle<(u32, u32, Receiver<u32, M, P>)>;

/// A full ring (one slot, filled first with 0), and a thread receiving two
/// messages from it.
fn full_ring_and_receiver<M: Mode, P: Protocol>() -> (Sender<u32, M, P>, TwoReceived<M, P>) {
    let (tx, rx) = bounded_in::<u32, M, P>(1);
    tx.try_send(0).expect("an empty ring has room");
    let receiver = thread::spawn(move || {
        let first = rx.recv().expect("sender alive");
        let second = rx.recv().expect("sender alive");
        (first, second, rx)
    });
    (tx, receiver)
}

/// The receiver of [`full_ring_and_receiver`] got the first message, then
/// `second`.
fn received_first_then<M: Mode, P: Protocol>(
    second: u32,
    tx: Sender<u32, M, P>,
    receiver: TwoReceived<M, P>,
) {
    let (first, got, rx) = receiver.join().expect("receiver panicked");
    assert_eq!((first, got), (0, second));
    drop((tx, rx));
}

/// A receive future polled once on an empty ring, then dropped, while a
/// sender's `send` races poll and drop; then the receiver blocks in `recv`.
/// It must get the message: either the future returned it, or it is still
/// in the ring, and a wake the future was chosen for was not lost with it.
fn recv_future_dropped_racing_send<M: Mode, P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, M, P>(1);
    let sender = send_one(tx);
    let (_, waker) = flag_waker();
    let mut fut = rx.recv_async();
    let early = match poll_once(&mut fut, &waker) {
        Poll::Ready(got) => Some(got.expect("sender alive")),
        Poll::Pending => None,
    };
    drop(fut);
    let got = match early {
        Some(got) => got,
        None => rx.recv().expect("sender alive"),
    };
    received_once(got, sender, &rx);
}

/// A send future polled once on a full ring (one slot, filled first), then
/// dropped with its message, while a receiver's two `recv`s race poll and
/// drop; if it did not complete, the sender then blocks in `send`. The
/// receiver gets the first message and exactly one of the other two.
fn send_future_dropped_racing_recv<M: Mode, P: Protocol>() {
    let (tx, receiver) = full_ring_and_receiver::<M, P>();
    let (_, waker) = flag_waker();
    let mut fut = tx.send_async(1);
    let sent = poll_once(&mut fut, &waker);
    drop(fut);
    let expected = match sent {
        Poll::Ready(r) => {
            r.expect("receiver alive");
            1
        }
        Poll::Pending => {
            tx.send(2).expect("receiver alive");
            2
        }
    };
    received_first_then(expected, tx, receiver);
}

/// A receive future polled, then at once polled again (spuriously: on a
/// lone side its registration stands, and it retries while registered),
/// then, while still pending, polled once more only when woken; a sender's
/// `send` races all of it. Once woken it must be ready. With `fresh`, the
/// polls after the first bring another waker (the task moved, or
/// `Waker::will_wake` did not recognise a clone): a standing registration
/// swaps it in place, and that waker must be the one woken.
fn recv_future_repolled<M: Mode, P: Protocol>(fresh: bool) {
    let (tx, rx) = bounded_in::<u32, M, P>(1);
    let sender = send_one(tx);
    let (first_flag, first) = flag_waker();
    let (later_flag, later) = if fresh {
        flag_waker()
    } else {
        (first_flag.clone(), first.clone())
    };
    let mut fut = rx.recv_async();
    let mut got = None;
    for waker in [&first, &later] {
        if let Poll::Ready(r) = poll_once(&mut fut, waker) {
            got = Some(r.expect("sender alive"));
            break;
        }
    }
    let got = got.unwrap_or_else(|| {
        wait_woken(&later_flag);
        match poll_once(&mut fut, &later) {
            Poll::Ready(r) => r.expect("sender alive"),
            Poll::Pending => panic!("woken, but the message is not there"),
        }
    });
    drop(fut);
    received_once(got, sender, &rx);
}

/// The send side of [`recv_future_repolled`]: a send future on a full ring
/// (one slot, filled first) polled twice, then again when woken, while a
/// receiver takes both messages.
fn send_future_repolled<M: Mode, P: Protocol>(fresh: bool) {
    let (tx, receiver) = full_ring_and_receiver::<M, P>();
    let (first_flag, first) = flag_waker();
    let (later_flag, later) = if fresh {
        flag_waker()
    } else {
        (first_flag.clone(), first.clone())
    };
    let mut fut = tx.send_async(1);
    let mut sent = false;
    for waker in [&first, &later] {
        if let Poll::Ready(r) = poll_once(&mut fut, waker) {
            r.expect("receiver alive");
            sent = true;
            break;
        }
    }
    if !sent {
        wait_woken(&later_flag);
        match poll_once(&mut fut, &later) {
            Poll::Ready(r) => r.expect("receiver alive"),
            Poll::Pending => panic!("woken, but there is no room"),
        }
    }
    drop(fut);
    received_first_then(1, tx, receiver);
}

/// Several receivers: a future registers first (the ring is empty and no
/// sender runs yet), a blocking receiver races it on another thread; the
/// send chooses the oldest waiter, the future, which is dropped without
/// being polled again. Its wake must go to the blocked receiver.
fn chosen_recv_future_hands_on<M: ManyConsumers, P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, M, P>(1);
    let rx2 = rx.clone();
    let (_, waker) = flag_waker();
    let mut fut = rx.recv_async();
    assert!(poll_once(&mut fut, &waker).is_pending());
    let receiver = thread::spawn(move || rx2.recv().expect("sender alive"));
    tx.send(1).expect("receivers alive");
    drop(fut);
    assert_eq!(receiver.join().expect("receiver panicked"), 1);
    drop((tx, rx));
}

/// A pending receive future on a lone receiver is leaked (`mem::forget`),
/// so its registration stays in the receiver side's slot; then the receiver
/// is dropped (retiring the slot, which drops the kept waker) while a send
/// races it (and may be reading that waker to wake the leaked waiter).
fn leaked_recv_future_then_retire<M: Mode, P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, M, P>(1);
    let (_, waker) = flag_waker();
    let mut fut = rx.recv_async();
    assert!(poll_once(&mut fut, &waker).is_pending());
    std::mem::forget(fut);
    let sender = thread::spawn(move || {
        // Either outcome: the receiver may already be gone.
        let _ = tx.send(1);
    });
    drop(rx);
    sender.join().expect("sender panicked");
}

/// [`model!`]s at bound 3: `name => body;` each.
macro_rules! models {
    ($($name:ident => $body:expr;)*) => {
        $(model!($name, 3, $body);)*
    };
}

// Two loom threads each, small enough for bound 3 (the whole file runs in
// about ten seconds in release); the blocking models use 1 or 2 because
// they have more threads.
models! {
    cas_spsc_recv_future_dropped => recv_future_dropped_racing_send::<Spsc, Cas>();
    updt_spsc_recv_future_dropped => recv_future_dropped_racing_send::<Spsc, Updt>();
    cas_mpsc_recv_future_dropped => recv_future_dropped_racing_send::<Mpsc, Cas>();
    updt_mpsc_recv_future_dropped => recv_future_dropped_racing_send::<Mpsc, Updt>();
    cas_mpmc_recv_future_dropped => recv_future_dropped_racing_send::<Mpmc, Cas>();
    updt_mpmc_recv_future_dropped => recv_future_dropped_racing_send::<Mpmc, Updt>();

    cas_spsc_send_future_dropped => send_future_dropped_racing_recv::<Spsc, Cas>();
    updt_spsc_send_future_dropped => send_future_dropped_racing_recv::<Spsc, Updt>();
    cas_spmc_send_future_dropped => send_future_dropped_racing_recv::<Spmc, Cas>();
    updt_spmc_send_future_dropped => send_future_dropped_racing_recv::<Spmc, Updt>();
    cas_mpmc_send_future_dropped => send_future_dropped_racing_recv::<Mpmc, Cas>();
    updt_mpmc_send_future_dropped => send_future_dropped_racing_recv::<Mpmc, Updt>();

    cas_mpmc_chosen_recv_future_hands_on => chosen_recv_future_hands_on::<Mpmc, Cas>();
    updt_mpmc_chosen_recv_future_hands_on => chosen_recv_future_hands_on::<Mpmc, Updt>();

    cas_spsc_leaked_recv_future => leaked_recv_future_then_retire::<Spsc, Cas>();
    updt_spsc_leaked_recv_future => leaked_recv_future_then_retire::<Spsc, Updt>();
    cas_mpsc_leaked_recv_future => leaked_recv_future_then_retire::<Mpsc, Cas>();
    updt_mpsc_leaked_recv_future => leaked_recv_future_then_retire::<Mpsc, Updt>();

    cas_spsc_recv_future_repolled => recv_future_repolled::<Spsc, Cas>(false);
    updt_spsc_recv_future_repolled => recv_future_repolled::<Spsc, Updt>(false);
    cas_mpsc_recv_future_repolled => recv_future_repolled::<Mpsc, Cas>(false);
    updt_mpsc_recv_future_repolled => recv_future_repolled::<Mpsc, Updt>(false);
    cas_mpmc_recv_future_repolled => recv_future_repolled::<Mpmc, Cas>(false);
    updt_mpmc_recv_future_repolled => recv_future_repolled::<Mpmc, Updt>(false);

    cas_spsc_recv_future_fresh_waker => recv_future_repolled::<Spsc, Cas>(true);
    updt_spsc_recv_future_fresh_waker => recv_future_repolled::<Spsc, Updt>(true);
    cas_spmc_send_future_fresh_waker => send_future_repolled::<Spmc, Cas>(true);
    updt_spmc_send_future_fresh_waker => send_future_repolled::<Spmc, Updt>(true);
    cas_spsc_send_future_repolled => send_future_repolled::<Spsc, Cas>(false);
    updt_spsc_send_future_repolled => send_future_repolled::<Spsc, Updt>(false);
    cas_spmc_send_future_repolled => send_future_repolled::<Spmc, Cas>(false);
    updt_spmc_send_future_repolled => send_future_repolled::<Spmc, Updt>(false);
    cas_mpmc_send_future_repolled => send_future_repolled::<Mpmc, Cas>(false);
    updt_mpmc_send_future_repolled => send_future_repolled::<Mpmc, Updt>(false);
}
