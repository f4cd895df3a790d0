//! State shared between the endpoints (`endpoint.rs`) and the bridge: what
//! a route's senders and the bridge hold in common (credit, queue, flags),
//! what a receiver and the bridge hold in common (consumed credit, counters),
//! and the bell that wakes the bridge. The invariants these obey are stated
//! in `endpoint.rs`; the protocol they serve in `bridge.rs`.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use swco::channel::{mpmc, mpsc};

/// Rings the bridge awake; never blocks.
#[derive(Clone, Debug)]
pub(crate) struct Bell(pub(crate) mpsc::Sender<()>);

impl Bell {
    pub(crate) fn ring(&self) {
        let _ = self.0.try_send(());
    }
}

/// What travels through a route's queue to the bridge, and from the bridge
/// to a receiver: one message, or a run of them that moves as one channel
/// element (one claim, one wake, and a `Vec` moved rather than its
/// messages copied one by one).
pub(crate) enum Run<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> Run<T> {
    /// The run for `v`: `One` for a single message, so that the common
    /// case allocates nothing more.
    pub(crate) fn of(mut v: Vec<T>) -> Run<T> {
        if v.len() == 1 {
            Run::One(v.pop().expect("one message"))
        } else {
            Run::Many(v)
        }
    }

    /// Appends the run's messages to `out`.
    pub(crate) fn append_to(self, out: &mut Vec<T>) {
        match self {
            Run::One(m) => out.push(m),
            Run::Many(mut v) => {
                if out.is_empty() {
                    *out = v; // take the allocation, copy nothing
                } else {
                    out.append(&mut v);
                }
            }
        }
    }
}

/// Capacity of a route's token channel, in grants (each any amount).
pub(crate) const TOKEN_CAP: usize = 64;
/// Capacity of a route's queue to the bridge, in runs. Every message in it
/// holds a credit, so credit bounds it too; a sender that finds it full
/// waits only until the bridge's next drain.
pub(crate) const QUEUE_CAP: usize = 2048;

/// State shared by the senders of one (destination, tag) route and the bridge.
pub(crate) struct OutShared<T> {
    /// Grants of credit, each an amount (at least 1); only the bridge
    /// sends them.
    pub(crate) tokens: mpmc::Receiver<usize>,
    /// Credit a sender took in a grant and did not need: any sender of the
    /// route takes it before the token channel.
    pub(crate) spare: AtomicUsize,
    pub(crate) queue: mpsc::Sender<Run<T>>,
    pub(crate) handles: AtomicUsize,
    pub(crate) hungry: AtomicBool,
    pub(crate) waiting: AtomicUsize,
    pub(crate) disconnected: AtomicBool,
    /// Senders between their last look at `disconnected` and the end of
    /// their queue push (see `endpoint.rs`'s invariants).
    pub(crate) enqueuing: AtomicUsize,
    pub(crate) bell: Bell,
    pub(crate) dest: i32,
    pub(crate) tag: u16,
}

impl<T> OutShared<T> {
    /// Takes up to `need` credits from `spare`; how many (maybe 0).
    pub(crate) fn take_spare(&self, need: usize) -> usize {
        // SeqCst: the second look of a sender about to wait pairs with
        // `deposit` (see `endpoint.rs`'s invariants); a plain take needs no more.
        let mut took = 0;
        let _ = self
            .spare
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |have| {
                took = have.min(need);
                (took > 0).then_some(have - took)
            });
        took
    }

    /// Leaves `n` unused credits in `spare`; if a sender waits, rings the
    /// bridge, which moves them into the token channel.
    pub(crate) fn deposit(&self, n: usize) {
        // SeqCst, both: the Dekker pair with a waiting sender's count-in
        // and second look at `spare`.
        self.spare.fetch_add(n, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.bell.ring();
        }
    }

    /// Adds a handle unless the count already reached 0.
    pub(crate) fn try_add_handle(&self) -> bool {
        // AcqRel/Acquire: as a clone's add and a drop's sub; the CAS from a
        // non-zero count is what keeps a closed route from reopening.
        self.handles
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n > 0).then_some(n + 1)
            })
            .is_ok()
    }
}

/// Counters of one remote receiver, kept by the bridge.
#[derive(Debug, Default)]
pub(crate) struct InStats {
    pub(crate) received: AtomicU64,
    pub(crate) max_in_flight: AtomicUsize,
    pub(crate) max_buffered: AtomicUsize,
    pub(crate) grants: AtomicU64,
    pub(crate) batches: AtomicU64,
}

/// State shared by a remote receiver and the bridge.
#[derive(Debug)]
pub(crate) struct InShared {
    pub(crate) consumed: AtomicUsize,
    /// Messages the bridge has put in the local channel, counted before
    /// each push (for `RemoteReceiver::len`).
    pub(crate) delivered: AtomicU64,
    pub(crate) dropped: AtomicBool,
    pub(crate) bell: Bell,
    pub(crate) stats: InStats,
    pub(crate) capacity: usize,
    pub(crate) tag: u16,
}

/// Adds `n` to a counter that only the bridge's thread writes: a plain load
/// and store, not a locked read-modify-write. Readers elsewhere see a
/// figure, not a hand-off (Relaxed).
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

/// Raises a high-water mark that only the bridge's thread writes to `v`.
pub(crate) fn raise(mark: &AtomicUsize, v: usize) {
    if v > mark.load(Ordering::Relaxed) {
        mark.store(v, Ordering::Relaxed);
    }
}
