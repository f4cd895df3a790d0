//! Shared test helpers: a drop-counting message type, and a park context
//! that tells the test when a thread parks (and can be told to panic).
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use swco_channel::hook::Park;

/// How long a test waits for something that should happen promptly before
/// declaring it hung. Only a guard against hanging for ever: no test
/// asserts on how long anything took. Generous: on a loaded two-core
/// machine (a CI run beside other builds) a 3 000-round test that takes
/// 2 s idle took 8 s.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// The drop-counting message type, shared with the other crates' tests.
#[allow(unused_imports)]
pub use swco_test_support::{Census, Counted};

/// When a [`TestPark`] panics out of `park`, the way a coroutine cancelled
/// at shutdown is unwound from inside its park.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Panic {
    /// Parks and returns normally.
    Never,
    /// Panics on entering `park`, while still registered as a waiter.
    BeforeParking,
    /// Parks until woken, then panics: the waiter was chosen by a wake-one
    /// and unwinds without using the wake.
    AfterWake,
}

/// A one-token parker for plain threads (a wake before `park` is kept).
struct Token {
    set: Mutex<bool>,
    cond: Condvar,
}

impl Wake for Token {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        *self.set.lock().unwrap() = true;
        self.cond.notify_one();
    }
}

/// A park context for a plain thread that reports each park to a
/// [`ParkProbe`]. Install it with `hook::set_current(Some(Rc::new(park)))`
/// on the thread that will block.
pub struct TestPark {
    token: Arc<Token>,
    panic: Panic,
    parked: mpsc::Sender<()>,
    timed_out: Arc<AtomicBool>,
}

/// The test's side of a [`TestPark`].
pub struct ParkProbe {
    parked: mpsc::Receiver<()>,
    timed_out: Arc<AtomicBool>,
}

impl TestPark {
    pub fn new(panic: Panic) -> (TestPark, ParkProbe) {
        let (parked_tx, parked_rx) = mpsc::channel();
        let timed_out = Arc::new(AtomicBool::new(false));
        let park = TestPark {
            token: Arc::new(Token {
                set: Mutex::new(false),
                cond: Condvar::new(),
            }),
            panic,
            parked: parked_tx,
            timed_out: timed_out.clone(),
        };
        let probe = ParkProbe {
            parked: parked_rx,
            timed_out,
        };
        (park, probe)
    }
}

impl Park for TestPark {
    fn waker(&self) -> Waker {
        Waker::from(self.token.clone())
    }

    fn park(&self, deadline: Option<Instant>) {
        // The waiter is registered (and has re-checked) by now.
        let _ = self.parked.send(());
        if self.panic == Panic::BeforeParking {
            panic!("test park context: unwinding before parking");
        }
        let mut set = self.token.set.lock().unwrap();
        // No spurious returns: only a wake or the deadline ends the park, so
        // the probe can tell which one did.
        while !*set {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            set = match left {
                None => self.token.cond.wait(set).unwrap(),
                Some(left) if left.is_zero() => {
                    self.timed_out.store(true, Ordering::SeqCst);
                    return;
                }
                Some(left) => self.token.cond.wait_timeout(set, left).unwrap().0,
            };
        }
        *set = false;
        drop(set);
        if self.panic == Panic::AfterWake {
            panic!("test park context: unwinding after a wake");
        }
    }
}

impl ParkProbe {
    /// Blocks until the thread has entered `park` (once more).
    pub fn wait_parked(&self) {
        self.parked
            .recv_timeout(HANG_GUARD)
            .expect("the thread never parked");
    }

    /// Whether some park ended at its deadline rather than by a wake.
    pub fn timed_out(&self) -> bool {
        self.timed_out.load(Ordering::SeqCst)
    }
}

/// What one consumer saw of `(producer, sequence)` messages: checks, as
/// they arrive, that each producer's come in the order they were sent.
pub struct FifoPerProducer {
    last: Vec<Option<usize>>,
    pub got: Vec<(usize, usize)>,
}

impl FifoPerProducer {
    pub fn new(producers: usize) -> Self {
        FifoPerProducer {
            last: vec![None; producers],
            got: Vec::new(),
        }
    }

    /// Records message `seq` of producer `p`; panics if it came out of order.
    pub fn record(&mut self, (p, seq): (usize, usize)) {
        if let Some(prev) = self.last[p] {
            assert!(seq > prev, "producer {p}: {seq} after {prev}");
        }
        self.last[p] = Some(seq);
        self.got.push((p, seq));
    }
}

/// Every one of `per_producer` messages from each of `producers` was
/// received exactly once, over all the consumers' records.
pub fn assert_each_received_once(
    received: impl IntoIterator<Item = Vec<(usize, usize)>>,
    producers: usize,
    per_producer: usize,
) {
    let mut seen = vec![vec![0u8; per_producer]; producers];
    for (p, seq) in received.into_iter().flatten() {
        seen[p][seq] += 1;
    }
    for (p, row) in seen.iter().enumerate() {
        for (seq, &n) in row.iter().enumerate() {
            assert_eq!(n, 1, "producer {p} message {seq} received {n} times");
        }
    }
}
