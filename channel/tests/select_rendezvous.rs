//! Selects on zero-capacity (rendezvous) channels between OS threads, with
//! the semantics of crossbeam-channel's and Go's selects, both protocols:
//!
//! * a select blocked on a rendezvous send is a sender waiting in the
//!   rendezvous like any other: a `try_recv`, a `select!` with `default`, a
//!   `ready_timeout`, a `recv_timeout` and a `recv_async` on the other end
//!   find it and get its message (crossbeam's `ready.rs::fairness2` shape too: one side
//!   blocked in a select of sends, the other polling with `ready` and
//!   `try_recv`). A select send that only waits for a receiver to show up
//!   would leave both sides waiting for each other;
//! * a select with a send and a receive on the same rendezvous channel never
//!   meets itself (Go's `TestSelfSelect`), and alone it parks until its
//!   timeout rather than spinning, woken by its own receive;
//! * a selected rendezvous send owns the receiver that made it ready until
//!   it completes (crossbeam's `zero.rs::recv_in_send`,
//!   `select.rs::matching` and `matching_with_leftover`), and gives it back
//!   when its `SelectedOperation` is dropped unsent or while its message
//!   expression is slow and the receiver times out: no message is lost, none
//!   arrives twice (drop-counted).
//!
//! The coroutine versions are in the root crate's
//! `tests/select_rendezvous.rs`. A lost wake-up, a select meeting nobody or
//! a lost reservation would hang, so each test runs in a child process (this
//! binary, re-executed) that is killed after a hang guard
//! (`swco_test_support::in_child_process`); nothing asserts on how long
//! anything took.

mod common;

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::thread;
use std::time::Duration;

use common::{Census, Counted, Panic, TestPark};
use swco_channel::{
    bounded_in, hook, mpmc, select, Cas, Mode, Mpmc, Protocol, Receiver, RecvError,
    RecvTimeoutError, Select, SendError, Sender, Spsc, TryRecvError, Updt,
};
use swco_test_support::cas_and_updt;

// ---- helpers ---------------------------------------------------------------

/// How long a party waits at most for something that should happen at once
/// (a bound that turns a lost message into a failure, not a speed
/// assertion).
const LONG: Duration = Duration::from_secs(30);

/// How many times a non-blocking look is retried, [`PAUSE`] apart, before
/// the message it should find counts as lost. Normally the first finds it:
/// the tests look only once the select is parked.
const RETRIES: usize = 200;
const PAUSE: Duration = Duration::from_millis(10);

/// `f` until it returns something, at most [`RETRIES`] times.
fn retried<R>(what: &str, mut f: impl FnMut() -> Option<R>) -> R {
    for _ in 0..RETRIES {
        if let Some(r) = f() {
            return r;
        }
        thread::sleep(PAUSE);
    }
    panic!("{what}: found nothing in {RETRIES} tries");
}

/// Joins every thread, in whatever order they finish; the first panic found
/// is passed on at once, rather than after joining a peer it left blocked
/// for good.
fn join_all<R>(handles: Vec<thread::JoinHandle<R>>) -> Vec<R> {
    let mut pending: Vec<Option<thread::JoinHandle<R>>> = handles.into_iter().map(Some).collect();
    let mut results: Vec<Option<R>> = pending.iter().map(|_| None).collect();
    let mut left = pending.len();
    while left > 0 {
        let mut joined = false;
        for (slot, result) in pending.iter_mut().zip(results.iter_mut()) {
            if slot.as_ref().is_some_and(|h| h.is_finished()) {
                match slot.take().unwrap().join() {
                    Ok(r) => *result = Some(r),
                    Err(panic) => resume_unwind(panic),
                }
                left -= 1;
                joined = true;
            }
        }
        if !joined {
            thread::sleep(Duration::from_millis(1));
        }
    }
    results.into_iter().map(Option::unwrap).collect()
}

/// Installs a [`TestPark`] on this thread for the length of `f`.
fn with_park<R>(park: TestPark, f: impl FnOnce() -> R) -> R {
    hook::set_current(Some(Rc::new(park)));
    let r = f();
    // Drops the context, and with it the probe's sender: a probe waiting
    // for a park that never came then fails at once.
    hook::set_current(None);
    r
}

/// How a select's send is written.
#[derive(Clone, Copy, Debug)]
enum SendBy {
    /// `select! { send(tx, make()) -> res => res }`.
    Macro,
    /// A `Select` with one send; the selected operation sends `make()`.
    Struct,
}

/// Sends `make()` on `tx` through a select of that one send.
fn send_by_select<T, M: Mode, P: Protocol>(
    by: SendBy,
    tx: &Sender<T, M, P>,
    make: impl FnOnce() -> T,
) -> Result<(), SendError<T>> {
    match by {
        SendBy::Macro => select! {
            send(tx, make()) -> res => res,
        },
        SendBy::Struct => {
            let mut sel = Select::new();
            let i = sel.send(tx);
            let oper = sel.select();
            assert_eq!(oper.index(), i);
            oper.send(tx, make())
        }
    }
}

// ---- bug 1: a blocked select's send is a waiting sender --------------------

/// How the receiving side looks for the message of a select blocked on a
/// rendezvous send.
#[derive(Clone, Copy, Debug)]
enum Observe {
    /// `try_recv`, retried.
    TryRecv,
    /// `select! { recv(rx), default }`, retried.
    SelectDefault,
    /// `Select { recv(rx) }.ready_timeout(LONG)`, then a `try_recv`.
    ReadyTimeout,
    /// `recv_timeout(LONG)`.
    RecvTimeout,
    /// `recv_async()`, awaited on a current-thread tokio runtime: the
    /// future waits on the partner it hands the select.
    RecvAsync,
}

/// Receives one message on `rx` the way `how` says, failing if it finds
/// none.
fn observe<T, M: Mode, P: Protocol>(how: Observe, rx: &Receiver<T, M, P>) -> T {
    match how {
        Observe::TryRecv => retried("try_recv", || match rx.try_recv() {
            Ok(m) => Some(m),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => panic!("try_recv: disconnected"),
        }),
        Observe::SelectDefault => retried("select! with default", || {
            select! {
                recv(rx) -> m => Some(m.expect("the sender is alive")),
                default => None,
            }
        }),
        Observe::ReadyTimeout => {
            let mut sel = Select::new();
            let i = sel.recv(rx);
            assert_eq!(
                sel.ready_timeout(LONG),
                Ok(i),
                "ready_timeout did not see the blocked select's send"
            );
            drop(sel);
            retried("try_recv after ready", || rx.try_recv().ok())
        }
        Observe::RecvTimeout => rx
            .recv_timeout(LONG)
            .expect("recv_timeout did not meet the blocked select's send"),
        Observe::RecvAsync => tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(async { tokio::time::timeout(LONG, rx.recv_async()).await })
            .expect("recv_async did not meet the blocked select's send")
            .expect("the sender is alive"),
    }
}

/// A thread blocks in a select whose one operation is a send on a
/// rendezvous channel; once it has parked, this thread receives its message
/// the way `how` says: exactly once, and the select completes.
fn blocked_select_send_is_seen<M: Mode, P: Protocol>(by: SendBy, how: Observe)
where
    Sender<Counted<u32>, M, P>: Send,
{
    let census = Census::new();
    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(0);
    let (park, probe) = TestPark::new(Panic::Never);
    let c = census.clone();
    let selector = thread::spawn(move || {
        with_park(park, || {
            send_by_select(by, &tx, || Counted::new(7, &c))
                .map_err(|e| e.into_inner().value)
                .expect("the receiver is alive");
        });
        // Kept alive until the end, so that the channel stays connected.
        tx
    });
    probe.wait_parked();
    let got = observe(how, &rx);
    assert_eq!(got.value, 7, "{by:?}, {how:?}");
    drop(got);
    let tx = join_all(vec![selector]).pop().unwrap();
    assert!(
        matches!(rx.try_recv(), Err(TryRecvError::Empty)),
        "{by:?}, {how:?}: a second message"
    );
    drop((tx, rx));
    assert_eq!((census.made(), census.dropped()), (1, 1), "{by:?}, {how:?}");
}

/// [`blocked_select_send_is_seen`] with both ways of selecting, on an mpmc
/// and an spsc channel (whose sides wait in single slots).
fn blocked_select_send_is_seen_by<P: Protocol>(how: Observe) {
    for by in [SendBy::Macro, SendBy::Struct] {
        blocked_select_send_is_seen::<Mpmc, P>(by, how);
        blocked_select_send_is_seen::<Spsc, P>(by, how);
    }
}

fn seen_by_try_recv<P: Protocol>() {
    blocked_select_send_is_seen_by::<P>(Observe::TryRecv);
}

fn seen_by_select_with_default<P: Protocol>() {
    blocked_select_send_is_seen_by::<P>(Observe::SelectDefault);
}

fn seen_by_ready_timeout<P: Protocol>() {
    blocked_select_send_is_seen_by::<P>(Observe::ReadyTimeout);
}

fn seen_by_recv_timeout<P: Protocol>() {
    blocked_select_send_is_seen_by::<P>(Observe::RecvTimeout);
}

fn seen_by_recv_async<P: Protocol>() {
    blocked_select_send_is_seen_by::<P>(Observe::RecvAsync);
}

cas_and_updt! {
    in_child_process;
    seen_by_try_recv():
        blocked_select_send_meets_try_recv_cas,
        blocked_select_send_meets_try_recv_updt;
    seen_by_select_with_default():
        blocked_select_send_meets_select_with_default_cas,
        blocked_select_send_meets_select_with_default_updt;
    seen_by_ready_timeout():
        blocked_select_send_is_ready_for_ready_timeout_cas,
        blocked_select_send_is_ready_for_ready_timeout_updt;
    seen_by_recv_timeout():
        blocked_select_send_meets_recv_timeout_cas,
        blocked_select_send_meets_recv_timeout_updt;
    seen_by_recv_async():
        blocked_select_send_meets_recv_async_cas,
        blocked_select_send_meets_recv_async_updt;
}

/// Crossbeam's `ready.rs::fairness2`, with a large buffered channel for its
/// unbounded one: a thread selects a send over a roomy channel (while it is
/// empty), a one-slot channel (while it is empty) and a rendezvous channel;
/// the other waits with `ready` over the three receives and `try_recv`s the
/// one it names. Whenever the sender runs two ahead, it blocks on the
/// rendezvous send alone, and only `ready` and `try_recv` seeing that send
/// can go on. Every round completes; every channel is used.
fn ready_polling_meets_blocked_select_sends<P: Protocol>() {
    const COUNT: usize = 10_000;
    let (s1, r1) = mpmc::bounded_with::<(), P>(COUNT);
    let (s2, r2) = mpmc::bounded_with::<(), P>(1);
    let (s3, r3) = mpmc::bounded_with::<(), P>(0);
    let sender = thread::spawn(move || {
        for _ in 0..COUNT {
            let mut sel = Select::new();
            let o1 = s1.is_empty().then(|| sel.send(&s1));
            let o2 = s2.is_empty().then(|| sel.send(&s2));
            let o3 = sel.send(&s3);
            let oper = sel.select();
            let i = oper.index();
            let sent = if Some(i) == o1 {
                oper.send(&s1, ())
            } else if Some(i) == o2 {
                oper.send(&s2, ())
            } else {
                assert_eq!(i, o3);
                oper.send(&s3, ())
            };
            sent.expect("the receivers are alive");
        }
        (s1, s2, s3)
    });
    let mut hits = [0usize; 3];
    for _ in 0..COUNT {
        let mut sel = Select::new();
        sel.recv(&r1);
        sel.recv(&r2);
        sel.recv(&r3);
        loop {
            let i = sel.ready();
            let got = match i {
                0 => r1.try_recv().is_ok(),
                1 => r2.try_recv().is_ok(),
                2 => r3.try_recv().is_ok(),
                _ => unreachable!("three operations"),
            };
            if got {
                hits[i] += 1;
                break;
            }
        }
    }
    let senders = join_all(vec![sender]).pop().unwrap();
    eprintln!("{}: hits {hits:?}", P::NAME);
    assert_eq!(hits.iter().sum::<usize>(), COUNT);
    assert!(
        hits.iter().all(|&h| h > 0),
        "a channel never used: {hits:?}"
    );
    assert!(r1.try_recv().is_err() && r2.try_recv().is_err() && r3.try_recv().is_err());
    drop(senders);
}

cas_and_updt! {
    in_child_process;
    ready_polling_meets_blocked_select_sends():
        ready_polling_meets_blocked_select_sends_cas,
        ready_polling_meets_blocked_select_sends_updt;
}

// ---- bug 2: a send and a receive on one rendezvous channel -----------------

/// Go's `TestSelfSelect` on a rendezvous channel: two threads, each 1 000
/// times a select of a send of its id and a receive on the same channel
/// (the arms in either order). Every round completes, with a message from
/// the other thread, never its own; what one sent the other received.
fn self_select_never_meets_itself<P: Protocol>() {
    const ROUNDS: usize = 1000;
    let census = Census::new();
    let (tx, rx) = mpmc::bounded_with::<Counted<usize>, P>(0);
    let threads = (0..2)
        .map(|id| {
            let (tx, rx, c) = (tx.clone(), rx.clone(), census.clone());
            thread::spawn(move || {
                let from_the_other = |m: Result<Counted<usize>, RecvError>| {
                    let m = m.expect("the other thread is alive");
                    assert_ne!(m.value, id, "a select received its own send");
                };
                let (mut sent, mut received) = (0, 0);
                for round in 0..ROUNDS {
                    if round % 2 == 0 {
                        select! {
                            send(tx, Counted::new(id, &c)) -> res => {
                                res.expect("the other thread is alive");
                                sent += 1;
                            }
                            recv(rx) -> m => {
                                from_the_other(m);
                                received += 1;
                            }
                        }
                    } else {
                        select! {
                            recv(rx) -> m => {
                                from_the_other(m);
                                received += 1;
                            }
                            send(tx, Counted::new(id, &c)) -> res => {
                                res.expect("the other thread is alive");
                                sent += 1;
                            }
                        }
                    }
                }
                (sent, received)
            })
        })
        .collect();
    let counts = join_all(threads);
    assert_eq!(counts[0].0, counts[1].1, "{counts:?}");
    assert_eq!(counts[1].0, counts[0].1, "{counts:?}");
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
    drop((tx, rx));
    assert_eq!(census.made(), census.dropped());
}

cas_and_updt! {
    in_child_process;
    self_select_never_meets_itself():
        self_select_never_meets_itself_cas,
        self_select_never_meets_itself_updt;
}

/// A select of a receive and a send on one rendezvous channel, with nobody
/// else on it, waits for its timeout: its own waiting receive does not make
/// its send ready (nor wake it to spin), so it parks, until the deadline.
fn lone_self_select_parks_until_its_timeout<P: Protocol>() {
    const WAIT: Duration = Duration::from_millis(200);
    for by_macro in [true, false] {
        let (tx, rx) = mpmc::bounded_with::<u32, P>(0);
        let (park, probe) = TestPark::new(Panic::Never);
        let selector = thread::spawn(move || {
            with_park(park, || {
                if by_macro {
                    select! {
                        recv(rx) -> m => format!("received {m:?}"),
                        send(tx, 1) -> res => format!("sent: {res:?}"),
                        default(WAIT) => "timed out".to_string(),
                    }
                } else {
                    let mut sel = Select::new();
                    sel.recv(&rx);
                    sel.send(&tx);
                    let outcome = match sel.select_timeout(WAIT) {
                        Ok(oper) => {
                            let what = format!("selected operation {}", oper.index());
                            // Not completed: a send would wait for ever.
                            std::mem::forget(oper);
                            what
                        }
                        Err(_) => "timed out".to_string(),
                    };
                    outcome
                }
            })
        });
        let outcome = join_all(vec![selector]).pop().unwrap();
        let how = if by_macro { "select!" } else { "Select" };
        assert_eq!(outcome, "timed out", "{how}");
        assert!(
            probe.timed_out(),
            "{how}: no park lasted until the deadline: the select spun (parking \
             and being woken again at once counts as spinning)"
        );
        // At least one park (the context is gone, so this does not wait).
        probe.wait_parked();
    }
}

cas_and_updt! {
    in_child_process;
    lone_self_select_parks_until_its_timeout():
        lone_self_select_parks_until_its_timeout_cas,
        lone_self_select_parks_until_its_timeout_updt;
}

// ---- reservation -----------------------------------------------------------

/// Crossbeam's `zero.rs::recv_in_send`: a select's send whose message
/// expression receives on the same rendezvous channel. A receiver arrives
/// at 100 ms (making the send ready: the expression runs), a sender at
/// 500 ms. The sender's message must go to the expression's receive, not
/// to the receiver the select's send is about to serve, which then gets it.
fn recv_in_send<P: Protocol>() {
    let census = Census::new();
    let (tx, rx) = mpmc::bounded_with::<Counted<u32>, P>(0);
    // Each thread's outcome: the value it received, or 0 for a send.
    let receiver = {
        let rx = rx.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            rx.recv().map(|m| m.value).map_err(|e| e.to_string())
        })
    };
    let sender = {
        let (tx, c) = (tx.clone(), census.clone());
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(500));
            tx.send(Counted::new(3, &c))
                .map(|()| 0)
                .map_err(|e| e.to_string())
        })
    };
    let selector = thread::spawn(move || {
        select! {
            send(tx, rx.recv().expect("the sender thread sends")) -> res => {
                res.map(|()| 0).map_err(|e| e.to_string())
            }
        }
    });
    let outcomes = join_all(vec![receiver, sender, selector]);
    assert_eq!(outcomes[1], Ok(0), "the plain send");
    assert_eq!(outcomes[2], Ok(0), "the select's send");
    assert_eq!(
        outcomes[0],
        Ok(3),
        "the receiver gets what the select forwarded"
    );
    assert_eq!((census.made(), census.dropped()), (1, 1));
}

cas_and_updt! {
    in_child_process;
    recv_in_send(): recv_in_send_completes_cas, recv_in_send_completes_updt;
}

/// What one thread of [`matching`] did.
#[derive(Debug)]
enum Met {
    Sent(usize),
    Received(usize),
}

/// A plain party added to [`matching`]'s selecting threads.
#[derive(Clone, Copy, Debug)]
enum Leftover {
    None,
    Sender,
    Receiver,
}

/// The value the leftover plain sender sends.
const LEFTOVER: usize = usize::MAX;

/// Crossbeam's `select.rs::matching` and `matching_with_leftover`:
/// `threads` threads each select once over a receive and a send on one
/// rendezvous channel; with a leftover, one plain sender or receiver more
/// (the count being odd then). Every thread completes, never receiving its
/// own value; what was sent was received, once. Repeated, since a lost
/// pairing shows only in some interleavings.
fn matching<P: Protocol>(threads: usize, leftover: Leftover) {
    const ROUNDS: usize = 10;
    for round in 0..ROUNDS {
        let (tx, rx) = mpmc::bounded_with::<usize, P>(0);
        let mut handles: Vec<_> = (0..threads)
            .map(|i| {
                let (tx, rx) = (tx.clone(), rx.clone());
                thread::spawn(move || {
                    let mut sel = Select::new();
                    let receive = sel.recv(&rx);
                    let send = sel.send(&tx);
                    let oper = sel.select();
                    match oper.index() {
                        ix if ix == receive => {
                            let v = oper.recv(&rx).expect("the senders are alive");
                            assert_ne!(v, i, "a select received its own send");
                            Met::Received(v)
                        }
                        ix if ix == send => {
                            oper.send(&tx, i).expect("the receivers are alive");
                            Met::Sent(i)
                        }
                        ix => unreachable!("operation {ix}"),
                    }
                })
            })
            .collect();
        match leftover {
            Leftover::None => {}
            Leftover::Sender => {
                let tx = tx.clone();
                handles.push(thread::spawn(move || {
                    tx.send(LEFTOVER).expect("the receivers are alive");
                    Met::Sent(LEFTOVER)
                }));
            }
            Leftover::Receiver => {
                let rx = rx.clone();
                handles.push(thread::spawn(move || {
                    Met::Received(rx.recv().expect("the senders are alive"))
                }));
            }
        }
        let (mut sent, mut received) = (Vec::new(), Vec::new());
        for met in join_all(handles) {
            match met {
                Met::Sent(v) => sent.push(v),
                Met::Received(v) => received.push(v),
            }
        }
        sent.sort_unstable();
        received.sort_unstable();
        assert_eq!(sent, received, "round {round}: every value received once");
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
    }
}

fn matching_even<P: Protocol>() {
    matching::<P>(44, Leftover::None);
}

fn matching_with_leftover_sender<P: Protocol>() {
    matching::<P>(55, Leftover::Sender);
}

fn matching_with_leftover_receiver<P: Protocol>() {
    matching::<P>(55, Leftover::Receiver);
}

cas_and_updt! {
    in_child_process;
    matching_even(): matching_selects_all_complete_cas, matching_selects_all_complete_updt;
    matching_with_leftover_sender():
        matching_with_leftover_sender_cas,
        matching_with_leftover_sender_updt;
    matching_with_leftover_receiver():
        matching_with_leftover_receiver_cas,
        matching_with_leftover_receiver_updt;
}

/// Who sends the message after the dropped selection.
#[derive(Clone, Copy, Debug)]
enum Next {
    Plain,
    Select(SendBy),
}

/// A `Select` send on a rendezvous channel, selected because a receiver
/// waits (a blocking `recv`, or a blocked `select!`), whose
/// `SelectedOperation` is dropped without sending (a bug in the caller:
/// crossbeam panics in a debug build, and so do we; a release build just
/// drops it). The receiver it reserved is given back: the next message,
/// sent by another thread, reaches it. One message made, received once,
/// dropped once.
fn dropped_selected_send_releases_its_receiver<P: Protocol>() {
    let nexts = [
        Next::Plain,
        Next::Select(SendBy::Macro),
        Next::Select(SendBy::Struct),
    ];
    for next in nexts {
        for receive_by_select in [false, true] {
            let what = format!("next send {next:?}, receive by select: {receive_by_select}");
            let census = Census::new();
            let (tx, rx) = mpmc::bounded_with::<Counted<u32>, P>(0);
            let (park, probe) = TestPark::new(Panic::Never);
            // Each thread's outcome: the value it received, or 0 for a send.
            let receiver = thread::spawn(move || {
                let m = with_park(park, || {
                    if receive_by_select {
                        select! { recv(rx) -> m => m }
                    } else {
                        rx.recv()
                    }
                });
                m.map(|m| m.value).map_err(|e| e.to_string())
            });
            probe.wait_parked();
            let mut sel = Select::new();
            let i = sel.send(&tx);
            let oper = sel.select();
            assert_eq!(oper.index(), i);
            let dropped = catch_unwind(AssertUnwindSafe(move || drop(oper)));
            if let Err(panic) = dropped {
                let message = panic
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("?");
                assert!(
                    message.contains("without completing"),
                    "{what}: unexpected panic: {message}"
                );
            }
            drop(sel);
            let c = census.clone();
            let sender = thread::spawn(move || {
                let make = || Counted::new(5, &c);
                let sent = match next {
                    Next::Plain => tx.send(make()),
                    Next::Select(by) => send_by_select(by, &tx, make),
                };
                sent.map(|()| 0).map_err(|e| e.to_string())
            });
            let outcomes = join_all(vec![receiver, sender]);
            assert_eq!(outcomes[1], Ok(0), "{what}: the next send");
            assert_eq!(outcomes[0], Ok(5), "{what}: the reserved receiver");
            assert_eq!((census.made(), census.dropped()), (1, 1), "{what}");
        }
    }
}

cas_and_updt! {
    in_child_process;
    dropped_selected_send_releases_its_receiver():
        dropped_selected_send_releases_its_receiver_cas,
        dropped_selected_send_releases_its_receiver_updt;
}

/// A select's send on a rendezvous channel whose message expression is slow
/// (300 ms) while the receiver that made it ready waits only 50 ms
/// (`recv_timeout`). The receiver gets the message or times out; if it times
/// out, the message is not lost: a receiver that comes later gets it, and
/// the select completes. Exactly once, drop-counted.
fn reserved_receiver_may_time_out<P: Protocol>() {
    const SLOW: Duration = Duration::from_millis(300);
    const SHORT: Duration = Duration::from_millis(50);
    for by in [SendBy::Macro, SendBy::Struct] {
        let census = Census::new();
        let (tx, rx) = mpmc::bounded_with::<Counted<u32>, P>(0);
        let late = rx.clone();
        let (park, probe) = TestPark::new(Panic::Never);
        let c = census.clone();
        let selector = thread::spawn(move || {
            with_park(park, || {
                send_by_select(by, &tx, || {
                    thread::sleep(SLOW);
                    Counted::new(9, &c)
                })
                .map_err(|e| e.into_inner().value)
                .expect("a receiver is alive");
            });
            tx
        });
        // The select waits; the first receiver makes its send ready.
        probe.wait_parked();
        let first = thread::spawn(move || rx.recv_timeout(SHORT).map(|m| m.value))
            .join()
            .unwrap();
        let second = match first {
            Ok(v) => {
                assert_eq!(v, 9, "{by:?}");
                None
            }
            Err(RecvTimeoutError::Timeout) => Some(
                late.recv_timeout(LONG)
                    .map(|m| m.value)
                    .expect("the timed-out receiver's message was lost"),
            ),
            Err(e) => panic!("{by:?}: {e:?}"),
        };
        eprintln!(
            "{} {by:?}: the first receiver {}",
            P::NAME,
            if second.is_none() {
                "got the message"
            } else {
                "timed out"
            }
        );
        assert!(second.is_none() || second == Some(9), "{by:?}: {second:?}");
        let tx = join_all(vec![selector]).pop().unwrap();
        assert!(
            matches!(late.try_recv(), Err(TryRecvError::Empty)),
            "{by:?}: a second message"
        );
        drop((tx, late));
        assert_eq!((census.made(), census.dropped()), (1, 1), "{by:?}");
    }
}

cas_and_updt! {
    in_child_process;
    reserved_receiver_may_time_out():
        reserved_receiver_times_out_without_losing_the_message_cas,
        reserved_receiver_times_out_without_losing_the_message_updt;
}
