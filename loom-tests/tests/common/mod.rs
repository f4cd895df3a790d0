//! The harness shared by the loom models: a model runner with the preemption
//! bound fixed in code, endpoint fan-out per mode, and the model bodies
//! themselves, generic over mode and protocol.
//!
//! Instrumentation (counters, received values, drop records) deliberately uses
//! `std` atomics and locks, not loom's: loom runs every modelled thread on the
//! one test thread, one at a time, so `std` state observes the execution in
//! the order loom scheduled it without adding branch points of its own. Only
//! the channel under test is explored.

// Each test binary uses a different part of the harness.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

use loom::thread;
use swco_channel::{
    bounded_in, Mode, Mpmc, Mpsc, Protocol, Receiver, Sender, Spmc, Spsc, TryRecvError,
    TrySendError,
};

/// Runs `f` under loom with at most `preemptions` preemptions per execution
/// (the shared runner of `swco-test-support`, which sets every bound of the
/// search in code). The channel numbers its threads' combining slots
/// afresh in each execution by itself.
pub fn check<F>(name: &str, preemptions: usize, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    swco_test_support::loom_check(name, Some(preemptions), f);
}

/// Defines a `#[test]` that model-checks `body` with the given preemption
/// bound. (Use with `#[macro_use] mod common;`.)
#[allow(unused_macros)] // not every test binary defines models with it
macro_rules! model {
    ($(#[$attr:meta])* $name:ident, $bound:expr, $body:expr) => {
        $(#[$attr])*
        #[test]
        fn $name() {
            common::check(stringify!($name), $bound, || $body);
        }
    };
}

/// How many endpoints each side of a mode may have, as code: single sides
/// refuse to fan out, many sides clone.
pub trait Fan: Mode + Sized {
    fn fan_tx<T, P: Protocol>(tx: Sender<T, Self, P>, n: usize) -> Vec<Sender<T, Self, P>>;
    fn fan_rx<T, P: Protocol>(rx: Receiver<T, Self, P>, n: usize) -> Vec<Receiver<T, Self, P>>;
}

fn one<E>(e: E, n: usize, side: &str, mode: &str) -> Vec<E> {
    assert_eq!(n, 1, "{mode} has a single {side}");
    vec![e]
}

fn many<E: Clone>(e: E, n: usize) -> Vec<E> {
    assert!(n >= 1);
    let mut v = vec![e];
    for _ in 1..n {
        let clone = v[0].clone();
        v.push(clone);
    }
    v
}

impl Fan for Spsc {
    fn fan_tx<T, P: Protocol>(tx: Sender<T, Self, P>, n: usize) -> Vec<Sender<T, Self, P>> {
        one(tx, n, "sender", "spsc")
    }
    fn fan_rx<T, P: Protocol>(rx: Receiver<T, Self, P>, n: usize) -> Vec<Receiver<T, Self, P>> {
        one(rx, n, "receiver", "spsc")
    }
}

impl Fan for Spmc {
    fn fan_tx<T, P: Protocol>(tx: Sender<T, Self, P>, n: usize) -> Vec<Sender<T, Self, P>> {
        one(tx, n, "sender", "spmc")
    }
    fn fan_rx<T, P: Protocol>(rx: Receiver<T, Self, P>, n: usize) -> Vec<Receiver<T, Self, P>> {
        many(rx, n)
    }
}

impl Fan for Mpsc {
    fn fan_tx<T, P: Protocol>(tx: Sender<T, Self, P>, n: usize) -> Vec<Sender<T, Self, P>> {
        many(tx, n)
    }
    fn fan_rx<T, P: Protocol>(rx: Receiver<T, Self, P>, n: usize) -> Vec<Receiver<T, Self, P>> {
        one(rx, n, "receiver", "mpsc")
    }
}

impl Fan for Mpmc {
    fn fan_tx<T, P: Protocol>(tx: Sender<T, Self, P>, n: usize) -> Vec<Sender<T, Self, P>> {
        many(tx, n)
    }
    fn fan_rx<T, P: Protocol>(rx: Receiver<T, Self, P>, n: usize) -> Vec<Receiver<T, Self, P>> {
        many(rx, n)
    }
}

/// Message `seq` of producer `p`: producer in the high bits, so a consumer can
/// check each producer's order.
pub fn msg(p: usize, seq: u32) -> u32 {
    ((p as u32) << 8) | seq
}

fn producer_of(v: u32) -> u32 {
    v >> 8
}

/// Every message of `producers` (as made by [`msg`]), sorted.
pub fn all_messages(producers: &[u32]) -> Vec<u32> {
    let mut all: Vec<u32> = producers
        .iter()
        .enumerate()
        .flat_map(|(p, &n)| (0..n).map(move |s| msg(p, s)))
        .collect();
    all.sort_unstable();
    all
}

/// FIFO per producer, as one consumer sees it: each producer's messages
/// arrive in the order they were sent. (Across consumers there is no order to
/// check: two consumers may finish their receives in either order.)
pub fn assert_fifo_per_producer(got: &[u32]) {
    let mut last: Vec<Option<u32>> = Vec::new();
    for &v in got {
        let p = producer_of(v) as usize;
        if last.len() <= p {
            last.resize(p + 1, None);
        }
        if let Some(prev) = last[p] {
            assert!(
                prev < v,
                "FIFO broken: {v:#x} received after {prev:#x} in {got:x?}"
            );
        }
        last[p] = Some(v);
    }
}

/// Exactly once: the union of everything received is everything sent.
pub fn assert_exactly_once(received: &[Vec<u32>], producers: &[u32]) {
    let mut all: Vec<u32> = received.iter().flatten().copied().collect();
    all.sort_unstable();
    assert_eq!(
        all,
        all_messages(producers),
        "not exactly once: received {received:x?}"
    );
}

/// The external view of the ring's occupancy, in the order loom ran things.
///
/// A send that has returned `Ok` occupies a slot until some receive frees it,
/// and a receive can only free a slot after it has begun. So at every moment
/// `sends completed <= capacity + receives begun` (a receive that found the
/// ring empty stops counting when it returns). A ring that overfills, as the
/// seed paper's protocols do, breaks this at the second producer's return.
#[derive(Default)]
pub struct Occupancy {
    sent: AtomicUsize,
    recv_begun: AtomicUsize,
    received: AtomicUsize,
}

impl Occupancy {
    pub fn sent(&self, capacity: usize) {
        let sent = self.sent.fetch_add(1, SeqCst) + 1;
        let begun = self.recv_begun.load(SeqCst);
        assert!(
            sent <= capacity + begun,
            "more than {capacity} buffered: {sent} sends done, {begun} receives begun"
        );
    }
    pub fn recv_begin(&self) {
        self.recv_begun.fetch_add(1, SeqCst);
    }
    pub fn recv_empty(&self) {
        self.recv_begun.fetch_sub(1, SeqCst);
    }
    pub fn recv_done(&self) {
        self.received.fetch_add(1, SeqCst);
    }
    pub fn received(&self) -> usize {
        self.received.load(SeqCst)
    }
}

/// One `try_recv`, counted in `occupancy`.
fn try_recv_once<M: Mode, P: Protocol>(
    rx: &Receiver<u32, M, P>,
    occupancy: &Occupancy,
) -> Option<u32> {
    occupancy.recv_begin();
    match rx.try_recv() {
        Ok(v) => {
            occupancy.recv_done();
            Some(v)
        }
        // Disconnected too: the producers may be done and the ring empty.
        Err(TryRecvError::Empty | TryRecvError::Disconnected) => {
            occupancy.recv_empty();
            None
        }
    }
}

/// **Data path.** Producer `p` makes `producers[p]` `try_send` attempts (its
/// messages in order), consumer `c` makes `consumers[c]` `try_recv`
/// attempts, all at once on a ring of `capacity`; the main thread is the last
/// consumer. Nobody waits or retries, so every thread is straight-line code
/// and loom explores every interleaving of exactly these operations (waiting
/// is the blocking models' business). A send that finds the ring full keeps
/// its message; the others race on.
///
/// Checks, over every interleaving:
/// * occupancy never above capacity ([`Occupancy`]), at every send;
/// * exactly once: after the threads are joined, the main thread drains the
///   ring, and what was received (during the race or the drain) is exactly
///   what was accepted;
/// * FIFO per producer, as each consumer saw it;
/// * no slot read before its write happened-before the read, nor written
///   while it is being read: loom's `UnsafeCell` tracking in the ring.
pub fn data_path<M: Fan, P: Protocol>(
    capacity: usize,
    producers: &'static [u32],
    consumers: &'static [u32],
) {
    let (tx, rx) = bounded_in::<u32, M, P>(capacity);
    let occupancy = std::sync::Arc::new(Occupancy::default());
    let accepted = std::sync::Arc::new(Mutex::new(Vec::new()));

    let producer_threads: Vec<_> = M::fan_tx(tx, producers.len())
        .into_iter()
        .zip(producers)
        .enumerate()
        .map(|(p, (tx, &n))| {
            let (occupancy, accepted) = (occupancy.clone(), accepted.clone());
            thread::spawn(move || {
                for seq in 0..n {
                    match tx.try_send(msg(p, seq)) {
                        Ok(()) => {
                            occupancy.sent(capacity);
                            accepted.lock().unwrap().push(msg(p, seq));
                        }
                        Err(TrySendError::Full(_)) => {}
                        Err(TrySendError::Disconnected(_)) => panic!("receivers gone"),
                    }
                }
            })
        })
        .collect();

    let mut rxs = M::fan_rx(rx, consumers.len());
    let main_rx = rxs.pop().expect("at least one consumer");
    let consumer_threads: Vec<_> = rxs
        .into_iter()
        .zip(consumers)
        .map(|(rx, &n)| {
            let occupancy = occupancy.clone();
            thread::spawn(move || {
                (0..n)
                    .filter_map(|_| try_recv_once(&rx, &occupancy))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let n_main = *consumers.last().expect("at least one consumer");
    let mut mine: Vec<u32> = (0..n_main)
        .filter_map(|_| try_recv_once(&main_rx, &occupancy))
        .collect();

    let mut received = Vec::new();
    for t in consumer_threads {
        received.push(t.join().expect("consumer panicked"));
    }
    for t in producer_threads {
        t.join().expect("producer panicked");
    }
    // What is still buffered comes after everything received so far.
    while let Ok(v) = main_rx.try_recv() {
        mine.push(v);
    }
    received.push(mine);
    for got in &received {
        assert_fifo_per_producer(got);
    }
    let mut all: Vec<u32> = received.iter().flatten().copied().collect();
    all.sort_unstable();
    let mut accepted = accepted.lock().unwrap().clone();
    accepted.sort_unstable();
    assert_eq!(
        all, accepted,
        "accepted messages not received exactly once: received {received:x?}"
    );
}

/// Receives `n` messages with blocking `recv`.
fn recv_n<M: Mode, P: Protocol>(rx: &Receiver<u32, M, P>, n: usize) -> Vec<u32> {
    (0..n).map(|_| rx.recv().expect("senders alive")).collect()
}

/// Sends producer `p`'s `n` messages with blocking `send`.
fn send_n<M: Mode, P: Protocol>(tx: &Sender<u32, M, P>, p: usize, n: u32) {
    for seq in 0..n {
        tx.send(msg(p, seq)).expect("receivers alive");
    }
}

/// Runs producers (blocking `send`) and consumers (blocking `recv`, the main
/// thread being the last), then checks exactly once and FIFO per producer.
/// `expected` lists every producer's message count, including any message
/// put in before the model's threads started.
fn blocking_exchange<M: Fan, P: Protocol>(
    tx: Sender<u32, M, P>,
    rx: Receiver<u32, M, P>,
    producers: &'static [u32],
    consumers: &'static [usize],
    expected: &[u32],
) {
    let producer_threads: Vec<_> = M::fan_tx(tx, producers.len())
        .into_iter()
        .zip(producers)
        .enumerate()
        .map(|(p, (tx, &n))| thread::spawn(move || send_n(&tx, p, n)))
        .collect();
    let mut rxs = M::fan_rx(rx, consumers.len());
    let main_rx = rxs.pop().expect("at least one consumer");
    let consumer_threads: Vec<_> = rxs
        .into_iter()
        .zip(consumers)
        .map(|(rx, &n)| thread::spawn(move || recv_n(&rx, n)))
        .collect();

    let mut received = vec![recv_n(&main_rx, *consumers.last().unwrap())];
    for t in consumer_threads {
        received.push(t.join().expect("consumer panicked"));
    }
    for t in producer_threads {
        t.join().expect("producer panicked");
    }
    for got in &received {
        assert_fifo_per_producer(got);
    }
    assert_exactly_once(&received, expected);
}

/// **Blocking receive.** Consumers block in `recv` on an empty ring (consumer
/// `c` receives `consumers[c]` messages) and the producers' sends must wake
/// them. The ring holds every message, so sends never block and only the
/// receive side parks. A lost wake-up leaves a consumer parked for ever,
/// which loom reports as a deadlock.
pub fn recv_woken_by_send<M: Fan, P: Protocol>(
    producers: &'static [u32],
    consumers: &'static [usize],
) {
    let total: usize = producers.iter().map(|&n| n as usize).sum();
    assert_eq!(total, consumers.iter().sum::<usize>());
    let (tx, rx) = bounded_in::<u32, M, P>(total);
    blocking_exchange(tx, rx, producers, consumers, producers);
}

/// **Blocking send.** A ring of one slot, filled before the model's threads
/// start, so every producer's first `send` blocks; the consumers' receives
/// (blocking `recv`, consumer `c` taking `consumers[c]` messages) must wake
/// them. A lost wake-up leaves a producer parked for ever: loom reports a
/// deadlock.
pub fn send_woken_by_recv<M: Fan, P: Protocol>(
    producers: &'static [u32],
    consumers: &'static [usize],
) {
    // The prefilled message is the only one of an extra, last "producer".
    let mut expected = producers.to_vec();
    expected.push(1);
    assert_eq!(
        expected.iter().map(|&n| n as usize).sum::<usize>(),
        consumers.iter().sum::<usize>()
    );
    let (tx, rx) = bounded_in::<u32, M, P>(1);
    tx.try_send(msg(producers.len(), 0))
        .expect("an empty ring has room");
    blocking_exchange(tx, rx, producers, consumers, &expected);
}

/// A value that records its drop, to check that disconnection neither leaks
/// nor double-drops what is buffered or handed back.
pub struct Tracked {
    id: u32,
    drops: std::sync::Arc<AtomicU64>,
}

impl Tracked {
    pub fn new(id: u32, drops: &std::sync::Arc<AtomicU64>) -> Self {
        Tracked {
            id,
            drops: drops.clone(),
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let bit = 1u64 << self.id;
        let before = self.drops.fetch_or(bit, SeqCst);
        assert_eq!(before & bit, 0, "message {} dropped twice", self.id);
    }
}

/// **Disconnect, sender side.** Every consumer loops on blocking `recv`
/// until it fails. Producer 0 sends one message and drops its sender; the
/// other producers (in the many-producer modes) just drop theirs, each on its
/// own thread, so the "last sender" is decided by the race. The last drop
/// must wake every blocked consumer, and they must first drain the message.
pub fn recv_woken_by_disconnect<M: Fan, P: Protocol>(producers: usize, consumers: usize) {
    let (tx, rx) = bounded_in::<u32, M, P>(1);

    let mut rxs = M::fan_rx(rx, consumers);
    let main_rx = rxs.pop().expect("at least one consumer");
    let drain = |rx: Receiver<u32, M, P>| {
        let got: Vec<u32> = rx.iter().collect();
        // `iter` ended: recv failed. It must keep failing.
        assert!(rx.recv().is_err());
        got
    };
    let consumer_threads: Vec<_> = rxs
        .into_iter()
        .map(|rx| thread::spawn(move || drain(rx)))
        .collect();
    let producer_threads: Vec<_> = M::fan_tx(tx, producers)
        .into_iter()
        .enumerate()
        .map(|(p, tx)| {
            thread::spawn(move || {
                if p == 0 {
                    tx.send(msg(0, 0)).expect("receivers alive");
                }
                drop(tx);
            })
        })
        .collect();

    let mut received = vec![drain(main_rx)];
    for t in consumer_threads {
        received.push(t.join().expect("consumer panicked"));
    }
    for t in producer_threads {
        t.join().expect("producer panicked");
    }
    assert_exactly_once(&received, &[1]);
}

/// **Disconnect, receiver side.** A ring of one slot, filled before the model
/// starts; producers block in `send`; every consumer drops its receiver, each
/// on its own thread (the main thread is one of them). The last drop must
/// wake every blocked producer, whose send then fails and hands its message
/// back (or, if it raced in before the disconnect, succeeds). Every message
/// is dropped exactly once: handed back, or buffered and dropped with the
/// channel.
pub fn send_woken_by_disconnect<M: Fan, P: Protocol>(producers: usize, consumers: usize) {
    let drops = std::sync::Arc::new(AtomicU64::new(0));
    let (tx, rx) = bounded_in::<Tracked, M, P>(1);
    assert!(
        tx.try_send(Tracked::new(0, &drops)).is_ok(),
        "an empty ring has room"
    );

    let producer_threads: Vec<_> = M::fan_tx(tx, producers)
        .into_iter()
        .enumerate()
        .map(|(p, tx)| {
            let drops = drops.clone();
            thread::spawn(move || {
                let id = p as u32 + 1;
                // `Ok` is possible too: the send raced in before the
                // disconnect, and the message is dropped with the channel.
                if let Err(e) = tx.send(Tracked::new(id, &drops)) {
                    assert_eq!(e.into_inner().id, id, "handed back another message");
                }
            })
        })
        .collect();
    let mut rxs = M::fan_rx(rx, consumers);
    let main_rx = rxs.pop().expect("at least one consumer");
    let consumer_threads: Vec<_> = rxs
        .into_iter()
        .map(|rx| thread::spawn(move || drop(rx)))
        .collect();
    drop(main_rx);

    for t in consumer_threads {
        t.join().expect("consumer panicked");
    }
    for t in producer_threads {
        t.join().expect("producer panicked");
    }
    // Every endpoint is gone, so the channel (and anything left in it) is.
    let all = (1u64 << (producers + 1)) - 1;
    assert_eq!(drops.load(SeqCst), all, "a message leaked");
}
