//! Selects on zero-capacity (rendezvous) channels between swco coroutines,
//! on one executor and on two, both protocols: the scenarios of
//! `channel/tests/select_rendezvous.rs` (which runs them between OS
//! threads), where a party that spins instead of suspending starves its
//! neighbours on the same executor, and a party that must wait for another
//! coroutine of its executor can only do so by suspending:
//!
//! * a coroutine blocked in a select of a rendezvous send is a waiting
//!   sender: a `try_recv`, a `select!` with `default`, a `ready_timeout`
//!   and a `recv_timeout` in another coroutine get its message, and a
//!   coroutine polling with `ready` and `try_recv` meets a select of sends
//!   (crossbeam's `ready.rs::fairness2` shape);
//! * a select with a send and a receive on one rendezvous channel never
//!   meets itself (Go's `TestSelfSelect`), waits suspended (alone, until its
//!   timeout, without being woken over and over), and completes with a
//!   plain `recv` or `send` of another coroutine;
//! * a selected rendezvous send owns the receiver that made it ready
//!   (crossbeam's `recv_in_send`, `matching`, `matching_with_leftover`) and
//!   gives it back if its `SelectedOperation` is dropped unsent, or if the
//!   receiver times out while the send's message expression is slow: no
//!   message lost, none received twice (drop-counted).
//!
//! A lost wake-up or a spinning coroutine would hang, so each test runs in
//! a child process (this binary, re-executed, with a hang guard:
//! `swco_test_support::in_child_process`). Nothing asserts on how long anything took.

#[path = "../channel/tests/common/mod.rs"]
mod chan_common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread;
use std::time::{Duration, Instant};

use chan_common::{Census, Counted};
use swco::channel::{
    bounded_in, mpmc, Cas, Mode, Mpmc, Protocol, Receiver, RecvError, RecvTimeoutError, Select,
    SendError, Sender, Spsc, TryRecvError, Updt,
};
use swco::{select, JoinHandle, Runtime};
use swco_test_support::cas_and_updt;

/// Runs a scenario on a runtime of one executor and then of two: the
/// `each` of this file's `cas_and_updt!` tests, each in a child process.
fn on_one_and_two(scenario: impl Fn(usize)) {
    for executors in [1, 2] {
        // Says which runtime a hang was on.
        eprintln!("{} executor(s)", executors);
        scenario(executors);
    }
}

// ---- helpers ---------------------------------------------------------------

/// How long a party waits at most for something that should happen at once
/// (a bound that turns a lost message into a failure, not a speed
/// assertion).
const LONG: Duration = Duration::from_secs(30);

/// How many times a non-blocking look is retried, [`PAUSE`] apart (the
/// coroutine sleeping in between, so that its neighbours run), before the
/// message it should find counts as lost.
const RETRIES: usize = 200;
const PAUSE: Duration = Duration::from_millis(10);

/// A runtime that is never dropped: when a scenario fails it leaves
/// coroutines blocked for good, and dropping the runtime would wait for
/// them, turning the failure into a hang. A passing scenario shuts it down.
fn runtime(executors: usize) -> &'static Runtime {
    Box::leak(Box::new(
        Runtime::builder().executors(executors).build().unwrap(),
    ))
}

/// The last executor: the first one again on a one-executor runtime.
fn other(executors: usize) -> usize {
    executors - 1
}

/// Spawns `f` on executor `cpe`.
fn spawn_on<T: Send + 'static>(
    rt: &Runtime,
    cpe: usize,
    f: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<T> {
    rt.spawn_on(cpe, f).unwrap()
}

/// Joins every coroutine, in whatever order they finish; the first failure
/// found fails the test at once, rather than after joining a peer it left
/// blocked for good.
fn join_all<R>(handles: Vec<JoinHandle<R>>) -> Vec<R> {
    let mut pending: Vec<Option<JoinHandle<R>>> = handles.into_iter().map(Some).collect();
    let mut results: Vec<Option<R>> = pending.iter().map(|_| None).collect();
    let mut left = pending.len();
    while left > 0 {
        let mut joined = false;
        for (slot, result) in pending.iter_mut().zip(results.iter_mut()) {
            if slot.as_ref().is_some_and(JoinHandle::is_finished) {
                match slot.take().unwrap().join() {
                    Ok(r) => *result = Some(r),
                    Err(e) => panic!("{e}"),
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

/// Joins one coroutine, as [`join_all`].
fn join<R>(handle: JoinHandle<R>) -> R {
    join_all(vec![handle]).pop().unwrap()
}

/// Suspensions so far of the coroutines of executor `cpe`.
fn blocks(rt: &Runtime, cpe: usize) -> u64 {
    rt.stats().executors[cpe].blocks
}

/// Waits until a coroutine of executor `cpe` has suspended since `before`
/// suspensions (the one `handle` runs, the only one there), or `handle` has
/// finished; fails if it does neither in [`LONG`] (it spins).
fn wait_suspended<R>(rt: &Runtime, cpe: usize, before: u64, handle: &JoinHandle<R>) {
    let deadline = Instant::now() + LONG;
    while blocks(rt, cpe) == before && !handle.is_finished() {
        assert!(
            Instant::now() < deadline,
            "the coroutine never suspended (it spins)"
        );
        thread::yield_now();
    }
}

/// `f` until it returns something, at most [`RETRIES`] times.
fn retried<R>(what: &str, mut f: impl FnMut() -> Option<R>) -> R {
    for _ in 0..RETRIES {
        if let Some(r) = f() {
            return r;
        }
        swco::sleep(PAUSE);
    }
    panic!("{what}: found nothing in {RETRIES} tries");
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

/// How the receiving coroutine looks for the message of a select blocked on
/// a rendezvous send.
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
    }
}

/// A coroutine blocks in a select whose one operation is a send on a
/// rendezvous channel; once it has suspended, another coroutine (same
/// executor or the other) receives its message the way `how` says: exactly
/// once, and the select completes.
fn blocked_select_send_is_seen<M: Mode, P: Protocol>(executors: usize, by: SendBy, how: Observe)
where
    Sender<Counted<u32>, M, P>: Send,
    Receiver<Counted<u32>, M, P>: Send,
{
    let what = format!("{executors} executor(s), {by:?}, {how:?}");
    let rt = runtime(executors);
    let census = Census::new();
    let (tx, rx) = bounded_in::<Counted<u32>, M, P>(0);
    let c = census.clone();
    let before = blocks(rt, 0);
    let selector = spawn_on(rt, 0, move || {
        send_by_select(by, &tx, || Counted::new(7, &c))
            .map_err(|e| e.into_inner().value)
            .expect("the receiver is alive");
        // Kept alive until the end, so that the channel stays connected.
        tx
    });
    wait_suspended(rt, 0, before, &selector);
    let receiver = spawn_on(rt, other(executors), move || {
        let got = observe(how, &rx).value;
        (got, rx)
    });
    let (got, rx) = join(receiver);
    assert_eq!(got, 7, "{what}");
    let tx = join(selector);
    assert!(
        matches!(rx.try_recv(), Err(TryRecvError::Empty)),
        "{what}: a second message"
    );
    drop((tx, rx));
    assert_eq!((census.made(), census.dropped()), (1, 1), "{what}");
    rt.shutdown();
}

/// [`blocked_select_send_is_seen`] with both ways of selecting, on an mpmc
/// and an spsc channel.
fn blocked_select_send_is_seen_by<P: Protocol>(executors: usize, how: Observe) {
    for by in [SendBy::Macro, SendBy::Struct] {
        blocked_select_send_is_seen::<Mpmc, P>(executors, by, how);
        blocked_select_send_is_seen::<Spsc, P>(executors, by, how);
    }
}

fn seen_by_try_recv<P: Protocol>(executors: usize) {
    blocked_select_send_is_seen_by::<P>(executors, Observe::TryRecv);
}

fn seen_by_select_with_default<P: Protocol>(executors: usize) {
    blocked_select_send_is_seen_by::<P>(executors, Observe::SelectDefault);
}

fn seen_by_ready_timeout<P: Protocol>(executors: usize) {
    blocked_select_send_is_seen_by::<P>(executors, Observe::ReadyTimeout);
}

fn seen_by_recv_timeout<P: Protocol>(executors: usize) {
    blocked_select_send_is_seen_by::<P>(executors, Observe::RecvTimeout);
}

cas_and_updt! {
    in_child_process, each(on_one_and_two);
    seen_by_try_recv:
        blocked_select_send_meets_try_recv_cas,
        blocked_select_send_meets_try_recv_updt;
    seen_by_select_with_default:
        blocked_select_send_meets_select_with_default_cas,
        blocked_select_send_meets_select_with_default_updt;
    seen_by_ready_timeout:
        blocked_select_send_is_ready_for_ready_timeout_cas,
        blocked_select_send_is_ready_for_ready_timeout_updt;
    seen_by_recv_timeout:
        blocked_select_send_meets_recv_timeout_cas,
        blocked_select_send_meets_recv_timeout_updt;
}

/// Crossbeam's `ready.rs::fairness2` between two coroutines (a large
/// buffered channel for its unbounded one): one selects a send over a roomy
/// channel (while it is empty), a one-slot channel (while it is empty) and
/// a rendezvous channel; the other waits with `ready` over the three
/// receives and `try_recv`s the one it names. Whenever the sender runs two
/// ahead it blocks on the rendezvous send alone, and only `ready` and
/// `try_recv` seeing that send can go on. Every round completes; every
/// channel is used.
fn ready_polling_meets_blocked_select_sends<P: Protocol>(executors: usize) {
    const COUNT: usize = 2_000;
    let rt = runtime(executors);
    let (s1, r1) = mpmc::bounded_with::<(), P>(COUNT);
    let (s2, r2) = mpmc::bounded_with::<(), P>(1);
    let (s3, r3) = mpmc::bounded_with::<(), P>(0);
    let sender = spawn_on(rt, 0, move || {
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
    let receiver = spawn_on(rt, other(executors), move || {
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
        (hits, r1, r2, r3)
    });
    let (hits, r1, r2, r3) = join(receiver);
    let senders = join(sender);
    eprintln!("{} on {executors}: hits {hits:?}", P::NAME);
    assert_eq!(hits.iter().sum::<usize>(), COUNT);
    assert!(
        hits.iter().all(|&h| h > 0),
        "a channel never used: {hits:?}"
    );
    assert!(r1.try_recv().is_err() && r2.try_recv().is_err() && r3.try_recv().is_err());
    drop(senders);
    rt.shutdown();
}

cas_and_updt! {
    in_child_process, each(on_one_and_two);
    ready_polling_meets_blocked_select_sends:
        ready_polling_meets_blocked_select_sends_cas,
        ready_polling_meets_blocked_select_sends_updt;
}

// ---- bug 2: a send and a receive on one rendezvous channel -----------------

/// Go's `TestSelfSelect` on a rendezvous channel: two coroutines, each
/// 1 000 times a select of a send of its id and a receive on the same
/// channel (the arms in either order). Every round completes, with a
/// message from the other coroutine, never its own; what one sent the
/// other received.
fn self_select_never_meets_itself<P: Protocol>(executors: usize) {
    const ROUNDS: usize = 1000;
    let rt = runtime(executors);
    let census = Census::new();
    let (tx, rx) = mpmc::bounded_with::<Counted<usize>, P>(0);
    let coroutines = (0..2)
        .map(|id| {
            let (tx, rx, c) = (tx.clone(), rx.clone(), census.clone());
            spawn_on(rt, id % executors, move || {
                let from_the_other = |m: Result<Counted<usize>, RecvError>| {
                    let m = m.expect("the other coroutine is alive");
                    assert_ne!(m.value, id, "a select received its own send");
                };
                let (mut sent, mut received) = (0, 0);
                for round in 0..ROUNDS {
                    if round % 2 == 0 {
                        select! {
                            send(tx, Counted::new(id, &c)) -> res => {
                                res.expect("the other coroutine is alive");
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
                                res.expect("the other coroutine is alive");
                                sent += 1;
                            }
                        }
                    }
                }
                (sent, received)
            })
        })
        .collect();
    let counts = join_all(coroutines);
    assert_eq!(counts[0].0, counts[1].1, "{counts:?}");
    assert_eq!(counts[1].0, counts[0].1, "{counts:?}");
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
    drop((tx, rx));
    assert_eq!(census.made(), census.dropped());
    rt.shutdown();
}

cas_and_updt! {
    in_child_process, each(on_one_and_two);
    self_select_never_meets_itself:
        self_select_never_meets_itself_cas,
        self_select_never_meets_itself_updt;
}

/// A select of a receive and a send on one rendezvous channel, in a
/// coroutine with nobody else on the channel, waits for its timeout: it
/// suspends (at least once), and is not woken over and over by its own
/// receive (a select parked and woken again at once, thousands of times
/// in its 200 ms, spins; a correct one suspends once, or a few times).
fn lone_self_select_suspends_until_its_timeout<P: Protocol>(executors: usize) {
    const WAIT: Duration = Duration::from_millis(200);
    /// Far more suspensions than waiting for one timeout takes.
    const FEW: u64 = 100;
    let rt = runtime(executors);
    for by_macro in [true, false] {
        let how = if by_macro { "select!" } else { "Select" };
        let before = blocks(rt, 0);
        let selector = spawn_on(rt, 0, move || {
            let (tx, rx) = mpmc::bounded_with::<u32, P>(0);
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
        });
        let outcome = join(selector);
        let suspended = blocks(rt, 0) - before;
        assert_eq!(outcome, "timed out", "{how} on {executors}");
        assert!(
            (1..=FEW).contains(&suspended),
            "{how} on {executors}: suspended {suspended} times while it waited"
        );
    }
    rt.shutdown();
}

cas_and_updt! {
    in_child_process, each(on_one_and_two);
    lone_self_select_suspends_until_its_timeout:
        lone_self_select_suspends_until_its_timeout_cas,
        lone_self_select_suspends_until_its_timeout_updt;
}

/// What a select of a receive and a send on one channel did.
#[derive(Debug, PartialEq, Eq)]
enum Did {
    Sent,
    Received(u32),
}

/// A select of both ends of one rendezvous channel, blocked in coroutine X;
/// then coroutine Y does a plain `recv` (`y_receives`) or a plain `send`
/// (of 8) on it. Both complete, with the right value: X's send meets Y's
/// receive, or Y's send X's receive.
fn both_ends_select_meets_a_plain_party<P: Protocol>(executors: usize, y_receives: bool) {
    let rt = runtime(executors);
    let census = Census::new();
    let (tx, rx) = mpmc::bounded_with::<Counted<u32>, P>(0);
    let before = blocks(rt, 0);
    let x = {
        let (tx, rx, c) = (tx.clone(), rx.clone(), census.clone());
        spawn_on(rt, 0, move || {
            select! {
                recv(rx) -> m => Did::Received(m.expect("Y is alive").value),
                send(tx, Counted::new(5, &c)) -> res => {
                    res.map_err(|_| ()).expect("Y is alive");
                    Did::Sent
                }
            }
        })
    };
    wait_suspended(rt, 0, before, &x);
    let c = census.clone();
    let y = spawn_on(rt, other(executors), move || {
        if y_receives {
            Did::Received(rx.recv().expect("X is alive").value)
        } else {
            tx.send(Counted::new(8, &c))
                .map_err(|_| ())
                .expect("X is alive");
            Did::Sent
        }
    });
    let did = join_all(vec![x, y]);
    let expected = if y_receives {
        [Did::Sent, Did::Received(5)]
    } else {
        [Did::Received(8), Did::Sent]
    };
    assert_eq!(did, expected, "{executors} executor(s)");
    assert_eq!(census.made(), census.dropped());
    rt.shutdown();
}

fn both_ends_select_meets_a_plain_recv<P: Protocol>(executors: usize) {
    both_ends_select_meets_a_plain_party::<P>(executors, true);
}

fn both_ends_select_meets_a_plain_send<P: Protocol>(executors: usize) {
    both_ends_select_meets_a_plain_party::<P>(executors, false);
}

cas_and_updt! {
    in_child_process, each(on_one_and_two);
    both_ends_select_meets_a_plain_recv:
        both_ends_select_meets_a_plain_recv_cas,
        both_ends_select_meets_a_plain_recv_updt;
    both_ends_select_meets_a_plain_send:
        both_ends_select_meets_a_plain_send_cas,
        both_ends_select_meets_a_plain_send_updt;
}

// ---- reservation -----------------------------------------------------------

/// Crossbeam's `zero.rs::recv_in_send` in coroutines: a select's send whose
/// message expression receives on the same rendezvous channel. A receiver
/// arrives at 100 ms (making the send ready: the expression runs), a sender
/// at 500 ms. The sender's message must go to the expression's receive, not
/// to the receiver the select's send is about to serve, which then gets it.
fn recv_in_send<P: Protocol>(executors: usize) {
    let rt = runtime(executors);
    let census = Census::new();
    let (tx, rx) = mpmc::bounded_with::<Counted<u32>, P>(0);
    // Each coroutine's outcome: the value it received, or 0 for a send.
    let receiver = {
        let rx = rx.clone();
        spawn_on(rt, other(executors), move || {
            swco::sleep(Duration::from_millis(100));
            rx.recv().map(|m| m.value).map_err(|e| e.to_string())
        })
    };
    let sender = {
        let (tx, c) = (tx.clone(), census.clone());
        spawn_on(rt, 0, move || {
            swco::sleep(Duration::from_millis(500));
            tx.send(Counted::new(3, &c))
                .map(|()| 0)
                .map_err(|e| e.to_string())
        })
    };
    let selector = spawn_on(rt, 0, move || {
        select! {
            send(tx, rx.recv().expect("the sender coroutine sends")) -> res => {
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
    rt.shutdown();
}

cas_and_updt! {
    in_child_process, each(on_one_and_two);
    recv_in_send: recv_in_send_completes_cas, recv_in_send_completes_updt;
}

/// What one coroutine of [`matching`] did.
#[derive(Debug)]
enum Met {
    Sent(usize),
    Received(usize),
}

/// A plain party added to [`matching`]'s selecting coroutines.
#[derive(Clone, Copy, Debug)]
enum Leftover {
    None,
    Sender,
    Receiver,
}

/// The value the leftover plain sender sends.
const LEFTOVER: usize = usize::MAX;

/// Crossbeam's `select.rs::matching` and `matching_with_leftover` in
/// coroutines (spread over the executors): `count` coroutines each select
/// once over a receive and a send on one rendezvous channel; with a
/// leftover, one plain sender or receiver more. Every coroutine completes,
/// never receiving its own value; what was sent was received, once.
/// Repeated, since a lost pairing shows only in some interleavings.
fn matching<P: Protocol>(executors: usize, count: usize, leftover: Leftover) {
    const ROUNDS: usize = 10;
    let rt = runtime(executors);
    for round in 0..ROUNDS {
        let (tx, rx) = mpmc::bounded_with::<usize, P>(0);
        let mut handles: Vec<_> = (0..count)
            .map(|i| {
                let (tx, rx) = (tx.clone(), rx.clone());
                spawn_on(rt, i % executors, move || {
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
        let last = other(executors);
        match leftover {
            Leftover::None => {}
            Leftover::Sender => {
                let tx = tx.clone();
                handles.push(spawn_on(rt, last, move || {
                    tx.send(LEFTOVER).expect("the receivers are alive");
                    Met::Sent(LEFTOVER)
                }));
            }
            Leftover::Receiver => {
                let rx = rx.clone();
                handles.push(spawn_on(rt, last, move || {
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
        assert_eq!(
            sent, received,
            "{executors} executor(s), round {round}: every value received once"
        );
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
    }
    rt.shutdown();
}

fn matching_even<P: Protocol>(executors: usize) {
    matching::<P>(executors, 44, Leftover::None);
}

fn matching_with_leftover_sender<P: Protocol>(executors: usize) {
    matching::<P>(executors, 55, Leftover::Sender);
}

fn matching_with_leftover_receiver<P: Protocol>(executors: usize) {
    matching::<P>(executors, 55, Leftover::Receiver);
}

cas_and_updt! {
    in_child_process, each(on_one_and_two);
    matching_even: matching_selects_all_complete_cas, matching_selects_all_complete_updt;
    matching_with_leftover_sender:
        matching_with_leftover_sender_cas,
        matching_with_leftover_sender_updt;
    matching_with_leftover_receiver:
        matching_with_leftover_receiver_cas,
        matching_with_leftover_receiver_updt;
}

/// Who sends the message after the dropped selection.
#[derive(Clone, Copy, Debug)]
enum Next {
    Plain,
    Select(SendBy),
}

/// A `Select` send on a rendezvous channel, selected because a receiving
/// coroutine waits (in a blocking `recv`, or a blocked `select!`), whose
/// `SelectedOperation` is dropped without sending (a bug in the caller:
/// a debug build panics, a release build just drops it). The receiver it
/// reserved is given back: the next message, sent by another coroutine,
/// reaches it. One message made, received once, dropped once.
fn dropped_selected_send_releases_its_receiver<P: Protocol>(executors: usize) {
    let rt = runtime(executors);
    let nexts = [
        Next::Plain,
        Next::Select(SendBy::Macro),
        Next::Select(SendBy::Struct),
    ];
    for next in nexts {
        for receive_by_select in [false, true] {
            let what = format!(
                "{executors} executor(s), next send {next:?}, receive by select: \
                 {receive_by_select}"
            );
            let census = Census::new();
            let (tx, rx) = mpmc::bounded_with::<Counted<u32>, P>(0);
            let last = other(executors);
            let before = blocks(rt, last);
            // Each coroutine's outcome: the value it received, or 0 for a
            // send.
            let receiver = spawn_on(rt, last, move || {
                let m = if receive_by_select {
                    select! { recv(rx) -> m => m }
                } else {
                    rx.recv()
                };
                m.map(|m| m.value).map_err(|e| e.to_string())
            });
            wait_suspended(rt, last, before, &receiver);
            let dropper = {
                let tx = tx.clone();
                spawn_on(rt, 0, move || {
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
                            "unexpected panic: {message}"
                        );
                    }
                })
            };
            join(dropper);
            let c = census.clone();
            let sender = spawn_on(rt, 0, move || {
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
    rt.shutdown();
}

cas_and_updt! {
    in_child_process, each(on_one_and_two);
    dropped_selected_send_releases_its_receiver:
        dropped_selected_send_releases_its_receiver_cas,
        dropped_selected_send_releases_its_receiver_updt;
}

/// A select's send on a rendezvous channel whose message expression is slow
/// (it sleeps 300 ms, suspending its coroutine) while the receiver that made
/// it ready waits only 50 ms (`recv_timeout`). The receiver gets the
/// message or times out; if it times out, the message is not lost: a
/// receiver that comes later gets it, and the select completes. Exactly
/// once, drop-counted.
fn reserved_receiver_may_time_out<P: Protocol>(executors: usize) {
    const SLOW: Duration = Duration::from_millis(300);
    const SHORT: Duration = Duration::from_millis(50);
    let rt = runtime(executors);
    for by in [SendBy::Macro, SendBy::Struct] {
        let what = format!("{executors} executor(s), {by:?}");
        let census = Census::new();
        let (tx, rx) = mpmc::bounded_with::<Counted<u32>, P>(0);
        let late = rx.clone();
        let c = census.clone();
        let before = blocks(rt, 0);
        let selector = spawn_on(rt, 0, move || {
            send_by_select(by, &tx, || {
                swco::sleep(SLOW);
                Counted::new(9, &c)
            })
            .map_err(|e| e.into_inner().value)
            .expect("a receiver is alive");
            tx
        });
        // The select waits; the first receiver makes its send ready.
        wait_suspended(rt, 0, before, &selector);
        let first = join(spawn_on(rt, other(executors), move || {
            rx.recv_timeout(SHORT).map(|m| m.value)
        }));
        let late = match first {
            Ok(v) => {
                assert_eq!(v, 9, "{what}");
                eprintln!("{} {what}: the first receiver got the message", P::NAME);
                late
            }
            Err(RecvTimeoutError::Timeout) => {
                eprintln!("{} {what}: the first receiver timed out", P::NAME);
                let (v, late) = join(spawn_on(rt, other(executors), move || {
                    let v = late.recv_timeout(LONG).map(|m| m.value);
                    (v, late)
                }));
                assert_eq!(
                    v,
                    Ok(9),
                    "{what}: the timed-out receiver's message was lost"
                );
                late
            }
            Err(e) => panic!("{what}: {e:?}"),
        };
        let tx = join(selector);
        assert!(
            matches!(late.try_recv(), Err(TryRecvError::Empty)),
            "{what}: a second message"
        );
        drop((tx, late));
        assert_eq!((census.made(), census.dropped()), (1, 1), "{what}");
    }
    rt.shutdown();
}

cas_and_updt! {
    in_child_process, each(on_one_and_two);
    reserved_receiver_may_time_out:
        reserved_receiver_times_out_without_losing_the_message_cas,
        reserved_receiver_times_out_without_losing_the_message_updt;
}
