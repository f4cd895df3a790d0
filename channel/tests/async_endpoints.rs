//! The async endpoints, `Sender::send_async` and `Receiver::recv_async` (and
//! their `_mut` forms, whose futures are `Send` for every mode), in every
//! mode and both protocols: exact counts on capacity-1 channels (so the
//! futures really suspend), interop with blocking threads in both
//! directions, disconnection in both directions, and cancel safety (a
//! dropped pending future loses no message and no wake-up, and leaves no
//! waiter behind).

mod common;

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use common::{Census, Counted, Panic, TestPark, HANG_GUARD};
use swco_channel::{
    bounded_in, hook, Cas, ManyConsumers, ManyProducers, Mode, Mpmc, Mpsc, Protocol, Receiver,
    RecvError, RecvFuture, RecvFutureMut, SendFuture, SendFutureMut, Sender, Spmc, Spsc,
    TryRecvError, Updt,
};
use swco_test_support::{clones, mode_tests, one};

// ---- harness -----------------------------------------------------------------

/// How many endpoints each side of a mode may have, as code.
trait Fan: Mode + Sized {
    fn fan_tx<T, P: Protocol>(tx: Sender<T, Self, P>, n: usize) -> Vec<Sender<T, Self, P>>;
    fn fan_rx<T, P: Protocol>(rx: Receiver<T, Self, P>, n: usize) -> Vec<Receiver<T, Self, P>>;
}

/// `Fan` for each mode: `Mode: senders, receivers;` with `one` or `clones`.
macro_rules! impl_fan {
    ($($mode:ty: $tx:ident, $rx:ident;)*) => {
        $(
            impl Fan for $mode {
                fn fan_tx<T, P: Protocol>(
                    tx: Sender<T, Self, P>,
                    n: usize,
                ) -> Vec<Sender<T, Self, P>> {
                    $tx(tx, n)
                }
                fn fan_rx<T, P: Protocol>(
                    rx: Receiver<T, Self, P>,
                    n: usize,
                ) -> Vec<Receiver<T, Self, P>> {
                    $rx(rx, n)
                }
            }
        )*
    };
}

impl_fan! {
    Spsc: one, one;
    Spmc: one, clones;
    Mpsc: clones, one;
    Mpmc: clones, clones;
}

/// Runs `f` on a fresh tokio `current_thread` runtime, inside a `LocalSet`
/// (the futures of a lone side borrow an endpoint that is not `Sync`, so
/// their tasks are not `Send`).
fn run_local<F: Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&rt, f)
}

/// A waker that counts its wakes, for polling by hand.
#[derive(Default)]
struct CountWake(AtomicUsize);

impl Wake for CountWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn count_waker() -> (Arc<CountWake>, Waker) {
    let count = Arc::new(CountWake::default());
    (count.clone(), Waker::from(count))
}

fn poll_once<F: Future + Unpin>(fut: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(waker))
}

/// `fut`, polled once: it must be pending (registered with the channel).
fn polled_pending<F: Future + Unpin>(mut fut: F, waker: &Waker) -> F {
    assert!(poll_once(&mut fut, waker).is_pending());
    fut
}

/// Message `i` of producer `p`.
fn msg(p: usize, i: u64, per: u64) -> u64 {
    p as u64 * per + i
}

/// Each value in `0..total` exactly once, and each consumer saw each
/// producer's messages in order. Except on a rendezvous with several
/// consumers: there a message handed to a receive future that is then
/// dropped goes on to the next receiver, and a later message of the same
/// producer that another receiver took meanwhile has overtaken it (see
/// `Rendezvous::reoffer`).
fn check_exactly_once(received: &[Vec<u64>], total: u64, per: u64) {
    let fifo = capacity() != 0 || received.len() == 1;
    for got in received.iter().filter(|_| fifo) {
        let mut last: Vec<Option<u64>> = Vec::new();
        for &v in got {
            let p = (v / per) as usize;
            if last.len() <= p {
                last.resize(p + 1, None);
            }
            if let Some(prev) = last[p] {
                assert!(prev < v, "FIFO per producer broken: {v} after {prev}");
            }
            last[p] = Some(v);
        }
    }
    let mut all: Vec<u64> = received.iter().flatten().copied().collect();
    assert_eq!(all.iter().sum::<u64>(), total * (total - 1) / 2, "sum");
    all.sort_unstable();
    assert_eq!(all, (0..total).collect::<Vec<_>>(), "not exactly once");
}

thread_local! {
    /// The capacity the exchange and race tests run at: 1, or 0 (a
    /// rendezvous) in their `_rendezvous` variants.
    static CAPACITY: std::cell::Cell<usize> = const { std::cell::Cell::new(1) };
}

fn capacity() -> usize {
    CAPACITY.with(|c| c.get())
}

/// Runs `f` with the tests' channels made zero-capacity (rendezvous).
fn rendezvous(f: impl FnOnce()) {
    CAPACITY.with(|c| c.set(0));
    f();
    CAPACITY.with(|c| c.set(1));
}

/// Producer `p`'s `per` messages (made from their numbers by `make`), sent
/// with `send_async`.
async fn send_all_async<T, M: Mode, P: Protocol>(
    tx: &Sender<T, M, P>,
    p: usize,
    per: u64,
    make: impl Fn(u64) -> T,
) {
    for i in 0..per {
        tx.send_async(make(msg(p, i, per)))
            .await
            .expect("receivers alive");
    }
}

/// Everything `rx` receives with `recv_async` until the channel disconnects.
async fn recv_all<T, M: Mode, P: Protocol>(rx: &Receiver<T, M, P>) -> Vec<T> {
    let mut got = Vec::new();
    while let Ok(v) = rx.recv_async().await {
        got.push(v);
    }
    got
}

/// A local task sending producer `p`'s messages (see [`send_all_async`]).
fn sending_task<T: 'static, M: Mode, P: Protocol>(
    tx: Sender<T, M, P>,
    p: usize,
    per: u64,
    make: impl Fn(u64) -> T + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::task::spawn_local(async move { send_all_async(&tx, p, per, make).await })
}

/// A local task receiving until the channel disconnects.
fn receiving_task<T: 'static, M: Mode, P: Protocol>(
    rx: Receiver<T, M, P>,
) -> tokio::task::JoinHandle<Vec<T>> {
    tokio::task::spawn_local(async move { recv_all(&rx).await })
}

/// A thread sending producer `p`'s `per` messages with the blocking `send`.
fn sending_thread<M: Mode, P: Protocol>(
    tx: Sender<u64, M, P>,
    p: usize,
    per: u64,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        for i in 0..per {
            tx.send(msg(p, i, per)).unwrap();
        }
    })
}

/// Awaits the tasks in order; what each returned.
async fn join_tasks<T>(tasks: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// Joins the threads in order; what each returned.
fn join_threads<T>(threads: Vec<thread::JoinHandle<T>>) -> Vec<T> {
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// Polls `fut` once from the current task and drops it (cancelling it if
/// it was pending).
async fn poll_once_then_drop<F: Future + Unpin>(mut fut: F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut fut).poll(cx))).await
}

fn report_cancelled<M: Mode, P: Protocol>(cancelled: impl std::fmt::Display) {
    eprintln!(
        "{} {}: {cancelled} pending futures cancelled",
        M::NAME,
        P::NAME
    );
}

// ---- exact counts, async on both sides ---------------------------------------

/// `np` async producers send `per` messages each through a capacity-1
/// channel to `nc` async consumers, all tasks of one current-thread runtime.
fn async_exchange<M: Fan, P: Protocol>(np: usize, nc: usize, per: u64) {
    let census = Census::new();
    let (tx, rx) = bounded_in::<Counted<u64>, M, P>(capacity());
    let received = run_local({
        let census = census.clone();
        async move {
            let producers: Vec<_> = M::fan_tx(tx, np)
                .into_iter()
                .enumerate()
                .map(|(p, tx)| {
                    let census = census.clone();
                    sending_task(tx, p, per, move |v| Counted::new(v, &census))
                })
                .collect();
            let consumers: Vec<_> = M::fan_rx(rx, nc).into_iter().map(receiving_task).collect();
            join_tasks(producers).await;
            join_tasks(consumers).await
        }
    });
    let received: Vec<Vec<u64>> = received
        .into_iter()
        .map(|got| got.into_iter().map(|m| m.value).collect())
        .collect();
    check_exactly_once(&received, np as u64 * per, per);
    assert_eq!(census.made(), census.dropped(), "a message leaked");
}

/// [`mode_tests!`] over all four modes and both protocols, for a body that
/// takes no arguments.
macro_rules! every_mode {
    ($test:ident, $body:ident) => {
        mode_tests! {
            mod $test;
            spsc_cas: $body::<Spsc, Cas>(); spsc_updt: $body::<Spsc, Updt>();
            spmc_cas: $body::<Spmc, Cas>(); spmc_updt: $body::<Spmc, Updt>();
            mpsc_cas: $body::<Mpsc, Cas>(); mpsc_updt: $body::<Mpsc, Updt>();
            mpmc_cas: $body::<Mpmc, Cas>(); mpmc_updt: $body::<Mpmc, Updt>();
        }
    };
}

/// [`mode_tests!`] over all four modes and both protocols, for a body taking
/// `(producers, consumers, per)`: one or three on each side as the mode
/// allows, `$single` messages per producer where there is one producer and
/// `$multi` where there are three.
macro_rules! every_mode_fanned {
    ($test:ident, $body:ident, $single:expr, $multi:expr) => {
        mode_tests! {
            mod $test;
            spsc_cas: $body::<Spsc, Cas>(1, 1, $single);
            spsc_updt: $body::<Spsc, Updt>(1, 1, $single);
            spmc_cas: $body::<Spmc, Cas>(1, 3, $single);
            spmc_updt: $body::<Spmc, Updt>(1, 3, $single);
            mpsc_cas: $body::<Mpsc, Cas>(3, 1, $multi);
            mpsc_updt: $body::<Mpsc, Updt>(3, 1, $multi);
            mpmc_cas: $body::<Mpmc, Cas>(3, 3, $multi);
            mpmc_updt: $body::<Mpmc, Updt>(3, 3, $multi);
        }
    };
}

every_mode_fanned!(exchange, async_exchange, 2000, 1000);

// ---- interop with blocking threads -------------------------------------------

/// Async producers (tasks of one current-thread runtime), blocking consumers
/// on OS threads.
fn async_to_threads<M: Fan, P: Protocol>(np: usize, nc: usize, per: u64) {
    let (tx, rx) = bounded_in::<u64, M, P>(capacity());
    let consumers: Vec<_> = M::fan_rx(rx, nc)
        .into_iter()
        .map(|rx| thread::spawn(move || rx.iter().collect::<Vec<_>>()))
        .collect();
    run_local(async move {
        let producers: Vec<_> = M::fan_tx(tx, np)
            .into_iter()
            .enumerate()
            .map(|(p, tx)| sending_task(tx, p, per, |v| v))
            .collect();
        join_tasks(producers).await;
    });
    let received = join_threads(consumers);
    check_exactly_once(&received, np as u64 * per, per);
}

/// Blocking producers on OS threads, async consumers (tasks of one
/// current-thread runtime).
fn threads_to_async<M: Fan, P: Protocol>(np: usize, nc: usize, per: u64) {
    let (tx, rx) = bounded_in::<u64, M, P>(capacity());
    let producers: Vec<_> = M::fan_tx(tx, np)
        .into_iter()
        .enumerate()
        .map(|(p, tx)| sending_thread(tx, p, per))
        .collect();
    let received = run_local(async move {
        let consumers: Vec<_> = M::fan_rx(rx, nc).into_iter().map(receiving_task).collect();
        join_tasks(consumers).await
    });
    join_threads(producers);
    check_exactly_once(&received, np as u64 * per, per);
}

every_mode_fanned!(async_to_threads_, async_to_threads, 2000, 1000);
every_mode_fanned!(threads_to_async_, threads_to_async, 2000, 1000);

/// Async tasks and blocking threads on *both* sides of one mpmc channel at
/// once: every waiter list holds wakers of both kinds.
fn mixed_sides<P: Protocol>() {
    const PER: u64 = 1000;
    let (tx, rx) = bounded_in::<u64, Mpmc, P>(1);
    // Producers 0, 1 are threads, 2, 3 tasks; consumers likewise.
    let thread_producers: Vec<_> = (0..2).map(|p| sending_thread(tx.clone(), p, PER)).collect();
    let thread_consumers: Vec<_> = (0..2)
        .map(|_| {
            let rx = rx.clone();
            thread::spawn(move || rx.iter().collect::<Vec<_>>())
        })
        .collect();
    let mut received = run_local(async move {
        let producers: Vec<_> = (2..4)
            .map(|p| sending_task(tx.clone(), p, PER, |v| v))
            .collect();
        drop(tx);
        let consumers: Vec<_> = (0..2).map(|_| receiving_task(rx.clone())).collect();
        drop(rx);
        join_tasks(producers).await;
        join_tasks(consumers).await
    });
    join_threads(thread_producers);
    received.extend(join_threads(thread_consumers));
    check_exactly_once(&received, 4 * PER, PER);
}

#[test]
fn mixed_sides_cas() {
    mixed_sides::<Cas>();
}

#[test]
fn mixed_sides_updt() {
    mixed_sides::<Updt>();
}

// ---- disconnection -----------------------------------------------------------

/// A pending receive future is woken by the last sender's drop; buffered
/// messages come first, then `RecvError`, and it stays an error.
fn recv_disconnected<M: Fan, P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, M, P>(2);
    tx.send(1).unwrap();
    let (count, waker) = count_waker();

    let mut fut = rx.recv_async();
    assert_eq!(poll_once(&mut fut, &waker), Poll::Ready(Ok(1)));
    let mut fut = polled_pending(rx.recv_async(), &waker);
    let senders = thread::spawn(move || drop(tx));
    senders.join().unwrap();
    assert!(count.0.load(Ordering::SeqCst) >= 1, "not woken by the drop");
    assert_eq!(poll_once(&mut fut, &waker), Poll::Ready(Err(RecvError)));
    let mut fut = rx.recv_async();
    assert_eq!(poll_once(&mut fut, &waker), Poll::Ready(Err(RecvError)));
}

/// A pending send future is woken by the last receiver's drop and gives its
/// message back; the buffered message is dropped with the channel, once.
fn send_disconnected<M: Fan, P: Protocol>() {
    let census = Census::new();
    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(1);
    tx.send(Counted::new(0, &census)).unwrap();
    let (count, waker) = count_waker();

    let mut fut = polled_pending(tx.send_async(Counted::new(1, &census)), &waker);
    thread::spawn(move || drop(rx)).join().unwrap();
    assert!(count.0.load(Ordering::SeqCst) >= 1, "not woken by the drop");
    match poll_once(&mut fut, &waker) {
        Poll::Ready(Err(e)) => assert_eq!(e.into_inner().value, 1, "another message"),
        other => panic!(
            "expected the message back, got {:?}",
            other.map(|r| r.is_ok())
        ),
    }
    drop(fut);
    // The buffered message went with the last receiver; the one handed back
    // was dropped just above.
    assert_eq!(census.dropped(), 2);
    // A fresh send fails at once, with its own message.
    let mut fut = tx.send_async(Counted::new(2, &census));
    match poll_once(&mut fut, &waker) {
        Poll::Ready(Err(e)) => assert_eq!(e.0.value, 2),
        _ => panic!("expected the message back"),
    }
    drop(fut);
    drop(tx);
    assert_eq!(census.made(), 3);
    assert_eq!(census.dropped(), 3);
}

every_mode!(recv_disconnected_, recv_disconnected);

every_mode!(send_disconnected_, send_disconnected);

/// The same through tokio, with `.await`: a task waiting on each side while
/// the other side's last endpoint goes away on a thread.
fn disconnect_awaited<M: Fan, P: Protocol>() {
    let census = Census::new();
    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(1);
    tx.send(Counted::new(0, &census)).unwrap();
    let census2 = census.clone();
    run_local(async move {
        let back = tx.send_async(Counted::new(1, &census2));
        let dropper = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            drop(rx);
        });
        let err = back.await.expect_err("receiver dropped");
        assert_eq!(err.into_inner().value, 1);
        dropper.join().unwrap();
    });
    assert_eq!((census.made(), census.dropped()), (2, 2));

    let (tx, rx) = bounded_in::<u32, M, P>(1);
    run_local(async move {
        let dropper = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            tx.send(5).unwrap();
            drop(tx);
        });
        assert_eq!(rx.recv_async().await, Ok(5));
        assert_eq!(rx.recv_async().await, Err(RecvError));
        dropper.join().unwrap();
    });
}

every_mode!(disconnect_awaited_, disconnect_awaited);

// ---- cancel safety -------------------------------------------------------------

/// Blocks a receiver on a plain thread (parked, reported by its probe),
/// sends one message, and checks that the receiver was *woken* for it, not
/// merely let through by its hang guard.
fn blocked_receiver_gets_next_send<M: Mode, P: Protocol>(
    tx: &Sender<Counted<u32>, M, P>,
    rx: Receiver<Counted<u32>, M, P>,
    census: &Arc<Census>,
    value: u32,
) -> Receiver<Counted<u32>, M, P> {
    let (park, probe) = TestPark::new(Panic::Never);
    let live = thread::spawn(move || {
        hook::set_current(Some(Rc::new(park)));
        let got = rx.recv_timeout(HANG_GUARD).map(|m| m.value);
        (got, rx)
    });
    probe.wait_parked();
    tx.send(Counted::new(value, census)).unwrap();
    let (got, rx) = live.join().unwrap();
    assert_eq!(got, Ok(value));
    assert!(
        !probe.timed_out(),
        "a stale waiter took the wake-up: the blocked receiver slept through a send"
    );
    rx
}

/// A receive future polled once (pending, registered) and dropped leaves no
/// waiter behind: a receiver that blocks next (on a thread; in the
/// lone-receiver modes the same endpoint, the only one there is) is woken by
/// the next send.
fn dropped_recv_leaves_no_waiter<M: Mode, P: Protocol>() {
    let census = Census::new();
    let (tx, mut rx) = bounded_in::<Counted<u32>, M, P>(1);
    let (count, waker) = count_waker();
    for round in 0..3 {
        let fut = polled_pending(rx.recv_async(), &waker);
        drop(fut);
        rx = blocked_receiver_gets_next_send(&tx, rx, &census, round);
    }
    // Nobody but the blocked receivers was woken for those sends.
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        0,
        "a dropped future was woken"
    );
    drop((tx, rx));
    assert_eq!(census.made(), census.dropped());
}

/// The same on the send side: a send future polled once on a full channel
/// and dropped (its message with it) leaves no waiter behind: a sender that
/// blocks next is woken by the next receive.
fn dropped_send_leaves_no_waiter<M: Mode, P: Protocol>() {
    let census = Census::new();
    let (mut tx, rx) = bounded_in::<Counted<u32>, M, P>(1);
    tx.send(Counted::new(100, &census)).unwrap();
    let (count, waker) = count_waker();
    let mut expected = 100;
    for round in 0..3 {
        let fut = polled_pending(tx.send_async(Counted::new(round, &census)), &waker);
        let before = census.dropped();
        drop(fut);
        assert_eq!(census.dropped(), before + 1, "unsent message not dropped");

        let (park, probe) = TestPark::new(Panic::Never);
        let c = census.clone();
        let live = thread::spawn(move || {
            hook::set_current(Some(Rc::new(park)));
            let sent = tx
                .send_timeout(Counted::new(10 + round, &c), HANG_GUARD)
                .map_err(|e| e.into_inner().value);
            (sent, tx)
        });
        probe.wait_parked();
        assert_eq!(rx.recv().unwrap().value, expected);
        let (sent, back) = live.join().unwrap();
        assert_eq!(sent, Ok(()));
        assert!(
            !probe.timed_out(),
            "a stale waiter took the wake-up: the blocked sender slept through a free slot"
        );
        tx = back;
        expected = 10 + round;
    }
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        0,
        "a dropped future was woken"
    );
    drop((tx, rx));
    assert_eq!(census.made(), census.dropped());
}

every_mode!(
    dropped_recv_leaves_no_waiter_,
    dropped_recv_leaves_no_waiter
);

every_mode!(
    dropped_send_leaves_no_waiter_,
    dropped_send_leaves_no_waiter
);

/// A receive future woken for a message and dropped before it is polled
/// again leaves the message in the channel.
fn woken_then_dropped_recv_keeps_message<M: Mode, P: Protocol>() {
    let census = Census::new();
    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(1);
    let (count, waker) = count_waker();
    let fut = polled_pending(rx.recv_async(), &waker);
    let c = census.clone();
    let tx = thread::spawn(move || {
        tx.send(Counted::new(7, &c)).unwrap();
        tx
    })
    .join()
    .unwrap();
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        1,
        "the pending future was not woken"
    );
    drop(fut);
    assert_eq!(
        rx.try_recv().map(|m| m.value),
        Ok(7),
        "the message was lost"
    );
    drop((tx, rx));
    assert_eq!(census.made(), census.dropped());
}

every_mode!(
    woken_then_dropped_recv_keeps_message_,
    woken_then_dropped_recv_keeps_message
);

/// Several receivers: a pending future registers first, a blocking receiver
/// second; a send chooses the future (the oldest waiter); the future is
/// dropped without being polled again, and must hand its wake to the
/// blocking receiver, which would otherwise sleep through the message.
fn chosen_recv_future_hands_on<M: ManyConsumers, P: Protocol>() {
    let census = Census::new();
    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(1);
    let (count, waker) = count_waker();
    let fut = polled_pending(rx.recv_async(), &waker);

    let (park, probe) = TestPark::new(Panic::Never);
    let rx2 = rx.clone();
    let live = thread::spawn(move || {
        hook::set_current(Some(Rc::new(park)));
        rx2.recv_timeout(HANG_GUARD).map(|m| m.value)
    });
    probe.wait_parked();
    tx.send(Counted::new(7, &census)).unwrap();
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        1,
        "the oldest waiter was not chosen"
    );
    drop(fut);
    assert_eq!(live.join().unwrap(), Ok(7));
    assert!(
        !probe.timed_out(),
        "the dropped future kept its wake: the blocked receiver slept through a message"
    );
    drop((tx, rx));
    assert_eq!(census.made(), census.dropped());
}

/// The send side of [`chosen_recv_future_hands_on`]: a pending send future
/// chosen for a free slot and dropped hands the slot's wake to a blocked
/// sender; its own message is dropped, once.
fn chosen_send_future_hands_on<M: ManyProducers, P: Protocol>() {
    let census = Census::new();
    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(1);
    tx.send(Counted::new(0, &census)).unwrap();
    let (count, waker) = count_waker();
    let fut = polled_pending(tx.send_async(Counted::new(1, &census)), &waker);

    let (park, probe) = TestPark::new(Panic::Never);
    let tx2 = tx.clone();
    let c = census.clone();
    let live = thread::spawn(move || {
        hook::set_current(Some(Rc::new(park)));
        tx2.send_timeout(Counted::new(2, &c), HANG_GUARD)
            .map_err(|e| e.into_inner().value)
    });
    probe.wait_parked();
    assert_eq!(rx.recv().unwrap().value, 0);
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        1,
        "the oldest waiter was not chosen"
    );
    drop(fut);
    assert_eq!(census.dropped(), 2, "the unsent message was not dropped");
    assert_eq!(live.join().unwrap(), Ok(()));
    assert!(
        !probe.timed_out(),
        "the dropped future kept its wake: the blocked sender slept through a free slot"
    );
    assert_eq!(rx.recv().unwrap().value, 2);
    drop((tx, rx));
    assert_eq!((census.made(), census.dropped()), (3, 3));
}

mode_tests! {
    mod chosen_recv_future_hands_on_;
    spmc_cas: chosen_recv_future_hands_on::<Spmc, Cas>();
    spmc_updt: chosen_recv_future_hands_on::<Spmc, Updt>();
    mpmc_cas: chosen_recv_future_hands_on::<Mpmc, Cas>();
    mpmc_updt: chosen_recv_future_hands_on::<Mpmc, Updt>();
}

mode_tests! {
    mod chosen_send_future_hands_on_;
    mpsc_cas: chosen_send_future_hands_on::<Mpsc, Cas>();
    mpsc_updt: chosen_send_future_hands_on::<Mpsc, Updt>();
    mpmc_cas: chosen_send_future_hands_on::<Mpmc, Cas>();
    mpmc_updt: chosen_send_future_hands_on::<Mpmc, Updt>();
}

/// Receive futures cancelled over and over (polled once and dropped, or
/// losing a `select!` against a short timer) while producer threads send
/// for real into a capacity-1 channel: every message arrives exactly once,
/// none leaks or is dropped twice, and afterwards a blocked receiver is
/// woken by the next send (no stale waiter).
fn cancelled_recvs_race_sends<M: Fan, P: Protocol>(np: usize, nc: usize, per: u64) {
    let census = Census::new();
    let total = np as u64 * per;
    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(capacity());
    let producers: Vec<_> = M::fan_tx(tx, np)
        .into_iter()
        .enumerate()
        .map(|(p, tx)| {
            let census = census.clone();
            thread::spawn(move || {
                for i in 0..per {
                    tx.send(Counted::new(msg(p, i, per) as u32, &census))
                        .unwrap();
                    if i % 16 == 0 {
                        thread::yield_now();
                    }
                }
                tx
            })
        })
        .collect();

    let received_count = Rc::new(std::cell::Cell::new(0u64));
    let (received, cancelled, mut rxs) = run_local(async move {
        let consumers: Vec<_> = M::fan_rx(rx, nc)
            .into_iter()
            .map(|rx| {
                let received_count = received_count.clone();
                tokio::task::spawn_local(async move {
                    let mut got = Vec::new();
                    let mut cancelled = 0u64;
                    let mut turn = 0u64;
                    while received_count.get() < total {
                        turn += 1;
                        let outcome = if turn % 2 == 0 {
                            // Poll once, and drop it if pending.
                            match poll_once_then_drop(rx.recv_async()).await {
                                Poll::Ready(r) => Some(r),
                                Poll::Pending => {
                                    cancelled += 1;
                                    tokio::task::yield_now().await;
                                    None
                                }
                            }
                        } else {
                            tokio::select! {
                                r = rx.recv_async() => Some(r),
                                _ = tokio::time::sleep(Duration::from_micros(50)) => {
                                    cancelled += 1;
                                    None
                                }
                            }
                        };
                        match outcome {
                            Some(Ok(m)) => {
                                got.push(u64::from(m.value));
                                received_count.set(received_count.get() + 1);
                            }
                            Some(Err(RecvError)) => panic!("senders alive"),
                            None => {}
                        }
                    }
                    (got, cancelled, rx)
                })
            })
            .collect();
        let mut received = Vec::new();
        let mut cancelled = 0;
        let mut rxs = Vec::new();
        for (got, n, rx) in join_tasks(consumers).await {
            received.push(got);
            cancelled += n;
            rxs.push(rx);
        }
        (received, cancelled, rxs)
    });
    let mut txs = join_threads(producers);
    check_exactly_once(&received, total, per);
    report_cancelled::<M, P>(cancelled);

    // No stale waiter: a receiver blocked now is woken by the next send.
    let tx = txs.pop().unwrap();
    let rx = rxs.pop().unwrap();
    let rx = blocked_receiver_gets_next_send(&tx, rx, &census, 1_000_000);
    assert!(rx.is_empty());
    drop((tx, txs, rx, rxs));
    assert_eq!(census.made(), census.dropped(), "a message leaked");
}

every_mode_fanned!(
    cancelled_recvs_race_sends_,
    cancelled_recvs_race_sends,
    2000,
    700
);

/// Send futures cancelled over and over (polled once and dropped, their
/// message with it) while blocking receiver threads drain the channel:
/// exactly the messages whose future completed arrive, each once.
fn cancelled_sends_race_recvs<M: Fan, P: Protocol>(nc: usize, per: u64) {
    let census = Census::new();
    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(1);
    let consumers: Vec<_> = M::fan_rx(rx, nc)
        .into_iter()
        .map(|rx| thread::spawn(move || rx.iter().map(|m| m.value).collect::<Vec<_>>()))
        .collect();
    let c = census.clone();
    let (sent, cancelled) = run_local(async move {
        let mut sent = Vec::new();
        let mut cancelled = 0u32;
        let mut next = 0u32;
        while (sent.len() as u64) < per {
            match poll_once_then_drop(tx.send_async(Counted::new(next, &c))).await {
                Poll::Ready(r) => {
                    r.unwrap();
                    sent.push(next);
                }
                Poll::Pending => {
                    cancelled += 1;
                    tokio::task::yield_now().await;
                }
            }
            next += 1;
        }
        (sent, cancelled)
    });
    let mut received: Vec<u32> = join_threads(consumers).into_iter().flatten().collect();
    received.sort_unstable();
    assert_eq!(received, sent, "not exactly the completed sends, once each");
    report_cancelled::<M, P>(cancelled);
    assert_eq!(census.made(), census.dropped(), "a message leaked");
}

mode_tests! {
    mod cancelled_sends_race_recvs_;
    spsc_cas: cancelled_sends_race_recvs::<Spsc, Cas>(1, 2000);
    spsc_updt: cancelled_sends_race_recvs::<Spsc, Updt>(1, 2000);
    spmc_cas: cancelled_sends_race_recvs::<Spmc, Cas>(3, 2000);
    spmc_updt: cancelled_sends_race_recvs::<Spmc, Updt>(3, 2000);
    mpsc_cas: cancelled_sends_race_recvs::<Mpsc, Cas>(1, 2000);
    mpsc_updt: cancelled_sends_race_recvs::<Mpsc, Updt>(1, 2000);
    mpmc_cas: cancelled_sends_race_recvs::<Mpmc, Cas>(3, 2000);
    mpmc_updt: cancelled_sends_race_recvs::<Mpmc, Updt>(3, 2000);
}

// ---- an endpoint shared by several futures of one thread -------------------------

/// Several futures of one thread share one receiver (through an `Rc`): two
/// of one task (`join!`), then three tasks. On a lone receiver (`spsc`,
/// `mpsc`) one waits in the side's slot and the others queue behind it.
fn shared_receiver<M: Fan, P: Protocol>() {
    const PER: u64 = 1000;
    let (tx, rx) = bounded_in::<u64, M, P>(1);
    let producer = thread::spawn(move || {
        for i in 0..PER {
            tx.send(i).unwrap();
        }
    });
    let received = run_local(async move {
        let rx = Rc::new(rx);
        let (a, b) = tokio::join!(rx.recv_async(), rx.recv_async());
        let mut received = vec![vec![a.unwrap().min(b.unwrap()), a.unwrap().max(b.unwrap())]];
        let tasks: Vec<_> = (0..3)
            .map(|_| {
                let rx = rx.clone();
                tokio::task::spawn_local(async move { recv_all(&rx).await })
            })
            .collect();
        received.extend(join_tasks(tasks).await);
        received
    });
    producer.join().unwrap();
    check_exactly_once(&received, PER, PER);
}

/// Several tasks of one thread share one sender (through an `Rc`); on a
/// lone sender (`spsc`, `spmc`) they share the side's slot.
fn shared_sender<M: Fan, P: Protocol>() {
    const PER: u64 = 1000;
    const TASKS: usize = 3;
    let (tx, rx) = bounded_in::<u64, M, P>(1);
    let consumer = thread::spawn(move || rx.iter().collect::<Vec<_>>());
    run_local(async move {
        let tx = Rc::new(tx);
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let tx = tx.clone();
                tokio::task::spawn_local(async move { send_all_async(&tx, t, PER, |v| v).await })
            })
            .collect();
        join_tasks(tasks).await;
    });
    let received = vec![consumer.join().unwrap()];
    check_exactly_once(&received, TASKS as u64 * PER, PER);
}

every_mode!(shared_receiver_, shared_receiver);

every_mode!(shared_sender_, shared_sender);

/// Polls `a` and `b` from one task, along with a 5 ms ticker, for 60 ms;
/// neither may complete. Returns how many times the task was polled.
async fn idle_polls<A, B>(mut a: A, mut b: B) -> u64
where
    A: Future + Unpin,
    B: Future + Unpin,
{
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    let stop = tokio::time::sleep(Duration::from_millis(60));
    tokio::pin!(stop);
    let mut polls = 0;
    std::future::poll_fn(|cx| {
        polls += 1;
        assert!(Pin::new(&mut a).poll(cx).is_pending());
        assert!(Pin::new(&mut b).poll(cx).is_pending());
        let _ = tick.poll_tick(cx);
        stop.as_mut().poll(cx)
    })
    .await;
    polls
}

/// Two pending futures of one task on one endpoint, polled again and again
/// (here because a timer of the same task fires): on a lone side one holds
/// the side's slot and the other queues behind it. Polling them must not
/// make the task wake itself for ever (the one in the slot leaving and
/// waking the queued one, which is this task, and so on): a dozen polls in
/// 60 ms, not thousands.
fn two_futures_one_task_idle<M: Mode, P: Protocol>() {
    let (tx, rx) = bounded_in::<u32, M, P>(1);
    let polls = run_local(idle_polls(rx.recv_async(), rx.recv_async()));
    assert!(
        polls < 100,
        "two receives: the task was polled {polls} times in 60 ms"
    );
    tx.send(0).unwrap();
    let polls = run_local(idle_polls(tx.send_async(1), tx.send_async(2)));
    assert!(
        polls < 100,
        "two sends: the task was polled {polls} times in 60 ms"
    );
    assert_eq!(rx.try_recv(), Ok(0));
}

every_mode!(two_futures_one_task_idle_, two_futures_one_task_idle);

// ---- leaks, and the futures' traits ---------------------------------------------

/// Leaking a pending future (`mem::forget`) is safe: its registration stays
/// behind, but dropping the endpoint afterwards (while the peer sends or
/// receives) neither panics nor races, and the channel still disconnects.
fn leaked_futures<M: Mode, P: Protocol>() {
    let (count, waker) = count_waker();

    let (tx, rx) = bounded_in::<u32, M, P>(1);
    let fut = polled_pending(rx.recv_async(), &waker);
    std::mem::forget(fut);
    let peer = thread::spawn(move || {
        let _ = tx.send(1);
        tx.send(2).is_err()
    });
    drop(rx);
    assert!(peer.join().unwrap(), "the sender never saw the receiver go");

    let (tx, rx) = bounded_in::<u32, M, P>(1);
    tx.send(0).unwrap();
    let fut = polled_pending(tx.send_async(1), &waker);
    std::mem::forget(fut);
    let peer = thread::spawn(move || {
        let got: Vec<_> = rx.iter().collect();
        assert_eq!(got, [0]);
    });
    drop(tx);
    peer.join().unwrap();
    let _ = count;
}

every_mode!(leaked_futures_, leaked_futures);

mod traits {
    use super::*;
    use static_assertions::{assert_impl_all, assert_not_impl_any};
    use std::marker::PhantomPinned;

    // Unpin whatever the message; Send exactly where the borrowed endpoint
    // is Sync (and the message Send).
    assert_impl_all!(SendFuture<'static, PhantomPinned, Spsc, Cas>: Unpin);
    assert_impl_all!(RecvFuture<'static, PhantomPinned, Mpmc, Updt>: Unpin);
    assert_impl_all!(SendFuture<'static, u8, Mpmc, Cas>: Send, Sync, std::fmt::Debug);
    assert_impl_all!(RecvFuture<'static, u8, Mpmc, Updt>: Send, Sync, std::fmt::Debug);
    assert_impl_all!(SendFuture<'static, u8, Mpsc, Updt>: Send);
    assert_impl_all!(RecvFuture<'static, u8, Spmc, Cas>: Send);
    assert_not_impl_any!(SendFuture<'static, u8, Spsc, Cas>: Send);
    assert_not_impl_any!(RecvFuture<'static, u8, Mpsc, Cas>: Send);
    assert_not_impl_any!(SendFuture<'static, Rc<u8>, Mpmc, Cas>: Send);
    assert_not_impl_any!(SendFuture<'static, u8, Spmc, Updt>: Send);
    assert_not_impl_any!(RecvFuture<'static, u8, Spsc, Updt>: Send);

    // The `_mut` forms hold their endpoint exclusively: Send wherever the
    // endpoint (and the message) is, a lone side's included.
    assert_impl_all!(SendFutureMut<'static, PhantomPinned, Spsc, Cas>: Unpin);
    assert_impl_all!(RecvFutureMut<'static, PhantomPinned, Mpsc, Updt>: Unpin);
    assert_impl_all!(SendFutureMut<'static, u8, Spsc, Cas>: Send, std::fmt::Debug);
    assert_impl_all!(SendFutureMut<'static, u8, Spmc, Updt>: Send);
    assert_impl_all!(SendFutureMut<'static, u8, Mpmc, Cas>: Send);
    assert_impl_all!(RecvFutureMut<'static, u8, Spsc, Updt>: Send, std::fmt::Debug);
    assert_impl_all!(RecvFutureMut<'static, u8, Mpsc, Cas>: Send);
    assert_impl_all!(RecvFutureMut<'static, u8, Mpmc, Updt>: Send);
    assert_not_impl_any!(SendFutureMut<'static, Rc<u8>, Spsc, Cas>: Send);
    assert_not_impl_any!(RecvFutureMut<'static, Rc<u8>, Mpsc, Cas>: Send);

    /// Tasks that own a lone endpoint and await its `_mut` future are
    /// `Send`: `tokio::spawn` on a multi-threaded runtime takes them, and
    /// they exchange every message exactly once, on a ring (capacity 1, so
    /// both sides really wait) and on a rendezvous.
    fn mut_futures_on_worker_threads<M: Mode, P: Protocol>() {
        const N: u32 = 500;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        for capacity in [1, 0] {
            let census = Census::new();
            let (mut tx, mut rx) = bounded_in::<Counted<u32>, M, P>(capacity);
            let c = census.clone();
            let sum = rt.block_on(async move {
                let producer = tokio::spawn(async move {
                    for i in 0..N {
                        let sent = tx.send_async_mut(Counted::new(i, &c)).await;
                        assert!(sent.is_ok(), "the receiver is alive");
                    }
                });
                let consumer = tokio::spawn(async move {
                    let mut sum = 0u64;
                    let mut count = 0;
                    while let Ok(m) = rx.recv_async_mut().await {
                        sum += u64::from(m.value);
                        count += 1;
                    }
                    assert_eq!(count, N);
                    sum
                });
                tokio::time::timeout(HANG_GUARD, async {
                    producer.await.unwrap();
                    consumer.await.unwrap()
                })
                .await
                .expect("hung (lost wake-up?)")
            });
            assert_eq!(
                sum,
                u64::from(N) * u64::from(N - 1) / 2,
                "capacity {capacity}"
            );
            assert_eq!(census.made(), N as usize);
            assert_eq!(census.dropped(), N as usize);
        }
    }

    #[test]
    fn spsc_mut_futures_are_spawnable_on_worker_threads() {
        mut_futures_on_worker_threads::<Spsc, Cas>();
        mut_futures_on_worker_threads::<Spsc, Updt>();
    }

    #[test]
    fn spmc_mut_send_future_is_spawnable_on_worker_threads() {
        mut_futures_on_worker_threads::<Spmc, Updt>();
    }

    #[test]
    fn mpsc_mut_recv_future_is_spawnable_on_worker_threads() {
        mut_futures_on_worker_threads::<Mpsc, Cas>();
    }

    #[test]
    fn mpmc_mut_futures_are_spawnable_on_worker_threads() {
        mut_futures_on_worker_threads::<Mpmc, Updt>();
    }

    /// An mpmc future can go to a multi-threaded executor's `spawn`.
    #[test]
    fn mpmc_futures_are_spawnable() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (tx, rx) = bounded_in::<u32, Mpmc, Cas>(1);
        let t = rt.spawn(async move {
            for i in 0..100 {
                tx.send_async(i).await.unwrap();
            }
        });
        let r = rt.spawn(async move {
            let mut sum = 0;
            while let Ok(i) = rx.recv_async().await {
                sum += i;
            }
            sum
        });
        rt.block_on(async {
            t.await.unwrap();
            assert_eq!(r.await.unwrap(), 4950);
        });
    }

    #[test]
    #[should_panic(expected = "polled after completion")]
    fn recv_future_polled_after_completion_panics() {
        let (tx, rx) = bounded_in::<u32, Mpmc, Cas>(1);
        tx.send(1).unwrap();
        let (_, waker) = count_waker();
        let mut fut = rx.recv_async();
        assert_eq!(poll_once(&mut fut, &waker), Poll::Ready(Ok(1)));
        let _ = poll_once(&mut fut, &waker);
    }
}

// ---- zero capacity (rendezvous) ------------------------------------------------
//
// The same exchanges and receive-cancellation races on rendezvous channels:
// there a pending future waits with a packet in the rendezvous, so futures
// meet futures as well as threads, and a receive future dropped after a
// sender handed it a message passes the message on (exact counts hold).

fn rendezvous_exchange<M: Fan, P: Protocol>(np: usize, nc: usize, per: u64) {
    rendezvous(|| async_exchange::<M, P>(np, nc, per));
}

fn rendezvous_async_to_threads<M: Fan, P: Protocol>(np: usize, nc: usize, per: u64) {
    rendezvous(|| async_to_threads::<M, P>(np, nc, per));
}

fn rendezvous_threads_to_async<M: Fan, P: Protocol>(np: usize, nc: usize, per: u64) {
    rendezvous(|| threads_to_async::<M, P>(np, nc, per));
}

fn rendezvous_cancelled_recvs<M: Fan, P: Protocol>(np: usize, nc: usize, per: u64) {
    rendezvous(|| cancelled_recvs_race_sends::<M, P>(np, nc, per));
}

every_mode_fanned!(exchange_rendezvous, rendezvous_exchange, 1000, 500);

mode_tests! {
    mod async_to_threads_rendezvous;
    mpmc_cas: rendezvous_async_to_threads::<Mpmc, Cas>(3, 2, 500);
    mpmc_updt: rendezvous_async_to_threads::<Mpmc, Updt>(3, 2, 500);
    spsc_cas: rendezvous_async_to_threads::<Spsc, Cas>(1, 1, 1000);
    spsc_updt: rendezvous_async_to_threads::<Spsc, Updt>(1, 1, 1000);
}

mode_tests! {
    mod threads_to_async_rendezvous;
    mpmc_cas: rendezvous_threads_to_async::<Mpmc, Cas>(2, 3, 500);
    mpmc_updt: rendezvous_threads_to_async::<Mpmc, Updt>(2, 3, 500);
    spsc_cas: rendezvous_threads_to_async::<Spsc, Cas>(1, 1, 1000);
    spsc_updt: rendezvous_threads_to_async::<Spsc, Updt>(1, 1, 1000);
}

mode_tests! {
    mod cancelled_recvs_rendezvous;
    spsc_cas: rendezvous_cancelled_recvs::<Spsc, Cas>(1, 1, 1000);
    spsc_updt: rendezvous_cancelled_recvs::<Spsc, Updt>(1, 1, 1000);
    mpmc_cas: rendezvous_cancelled_recvs::<Mpmc, Cas>(3, 3, 300);
    mpmc_updt: rendezvous_cancelled_recvs::<Mpmc, Updt>(3, 3, 300);
}

/// A send future dropped while pending on a rendezvous takes its message
/// back (dropped with the future) unless a receiver took it first: here
/// none was waiting, so nothing is left for a later receiver.
#[test]
fn rendezvous_dropped_send_future_takes_its_message_back() {
    let census = Census::new();
    let (tx, rx) = bounded_in::<Counted<u32>, Mpmc, Cas>(0);
    let (_count, waker) = count_waker();
    let fut = polled_pending(tx.send_async(Counted::new(1, &census)), &waker);
    drop(fut);
    assert_eq!(
        census.dropped(),
        1,
        "the unsent message went with its future"
    );
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
}

/// A receive future handed a message and then dropped without being
/// polled again passes it on: the next receiver gets it, exactly once.
#[test]
fn rendezvous_dropped_recv_future_passes_its_message_on() {
    let census = Census::new();
    let (tx, rx) = bounded_in::<Counted<u32>, Mpmc, Updt>(0);
    let (count, waker) = count_waker();
    let fut = polled_pending(rx.recv_async(), &waker);
    // The future waits in the rendezvous, so a try_send meets it.
    assert!(tx.try_send(Counted::new(7, &census)).is_ok());
    assert!(
        count.0.load(std::sync::atomic::Ordering::SeqCst) >= 1,
        "woken"
    );
    drop(fut);
    assert_eq!(census.dropped(), 0, "not dropped with the future");
    assert_eq!(rx.try_recv().map(|m| m.value).ok(), Some(7));
    assert_eq!(census.dropped(), 1);
}
