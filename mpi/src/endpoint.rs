//! Remote endpoints: what coroutines and threads hold.
//!
//! Invariants:
//! * A [`RemoteSender`] sends a message only while holding one *credit*: a
//!   `()` token taken from its route's token channel, which only the bridge
//!   fills, with credit the receiver granted. Waiting for a token is a
//!   blocking `recv` on a swco channel, so it suspends just the calling
//!   coroutine (or parks a plain thread); nothing here spins or takes a
//!   std lock.
//! * A sender that finds no token sets `hungry` (edge: "someone wanted
//!   credit") and, if it is going to wait, counts itself in `waiting`
//!   (level: "someone is waiting now"), then rings the bridge's bell
//!   *before* it blocks; the bridge asks the receiver for credit while
//!   either holds and it has none to hand out, so no waiter is forgotten
//!   when a grant covers only some of them.
//! * `handles` counts the live `RemoteSender`s of a route; it never goes
//!   from 0 back to 1 (clones come from a live handle; the bridge hands out
//!   a new handle only by a compare-and-swap from a non-zero count). When it
//!   reaches 0 the route is closed for good.
//! * A message a sender queued while the route was open goes out, even
//!   when the world finalises at that moment: a sender counts itself in
//!   `enqueuing` before it checks `disconnected` and out after its message
//!   is in the queue, and the bridge, once it has raised `disconnected`,
//!   keeps draining the queue until `enqueuing` reads 0 (a Dekker pair,
//!   `SeqCst` on both sides). So a `send` that returned `Ok` is never in a
//!   queue the bridge has stopped reading.
//! * A [`RemoteReceiver`] reads from a local swco channel of the receiver's
//!   capacity, which only the bridge fills; every message it takes is added
//!   to `consumed`, which the bridge turns back into credit.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use swco::channel::{
    mpmc, mpsc, RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError,
    TrySendError,
};

/// Rings the bridge awake; never blocks.
#[derive(Clone, Debug)]
pub(crate) struct Bell(pub(crate) mpsc::Sender<()>);

impl Bell {
    pub(crate) fn ring(&self) {
        let _ = self.0.try_send(());
    }
}

/// Capacity of a route's token channel; credit beyond it waits in the
/// bridge's bank for that route.
pub(crate) const TOKEN_CAP: usize = 1024;
/// Capacity of a route's queue to the bridge: every message in it holds a
/// credit, so it is bounded by the credit a receiver grants; twice the token
/// capacity covers a sender preempted between taking a token and queueing.
pub(crate) const QUEUE_CAP: usize = 2 * TOKEN_CAP;

/// State shared by the senders of one (destination, tag) route and the bridge.
pub(crate) struct OutShared<T> {
    pub(crate) tokens: mpmc::Receiver<()>,
    pub(crate) queue: mpsc::Sender<T>,
    pub(crate) handles: AtomicUsize,
    pub(crate) hungry: AtomicBool,
    pub(crate) waiting: AtomicUsize,
    pub(crate) disconnected: AtomicBool,
    /// Senders between their last look at `disconnected` and the end of
    /// their queue push (see the invariants).
    pub(crate) enqueuing: AtomicUsize,
    pub(crate) bell: Bell,
    pub(crate) dest: i32,
    pub(crate) tag: u16,
}

impl<T> OutShared<T> {
    /// Adds a handle unless the count already reached 0.
    pub(crate) fn try_add_handle(&self) -> bool {
        self.handles
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n > 0).then_some(n + 1)
            })
            .is_ok()
    }
}

enum Wait {
    Now,
    Until(Instant),
    Forever,
}

enum NoCredit {
    Full,
    Timeout,
    Disconnected,
}

/// The sending end of a remote channel to (`dest` rank, `tag`).
///
/// `Send + Sync + Clone`: clone it into as many coroutines as you like;
/// each clone's messages arrive in the order it sent them. The channel is
/// closed from this rank when the last clone is dropped (or the [`World`]
/// finalises); after that, a new `world.sender` for the same route is born
/// disconnected.
///
/// [`World`]: crate::World
pub struct RemoteSender<T> {
    pub(crate) shared: Arc<OutShared<T>>,
}

impl<T: Send + 'static> RemoteSender<T> {
    fn credit(&self, wait: Wait) -> Result<(), NoCredit> {
        let s = &self.shared;
        if s.disconnected.load(Ordering::Acquire) {
            return Err(NoCredit::Disconnected);
        }
        match s.tokens.try_recv() {
            Ok(()) => {}
            Err(TryRecvError::Disconnected) => return Err(NoCredit::Disconnected),
            Err(TryRecvError::Empty) => {
                s.hungry.store(true, Ordering::Release);
                if let Wait::Now = wait {
                    s.bell.ring();
                    return Err(NoCredit::Full);
                }
                s.waiting.fetch_add(1, Ordering::AcqRel);
                s.bell.ring();
                let got = match wait {
                    Wait::Until(d) => s.tokens.recv_deadline(d).map_err(|e| match e {
                        RecvTimeoutError::Timeout => NoCredit::Timeout,
                        RecvTimeoutError::Disconnected => NoCredit::Disconnected,
                    }),
                    _ => s.tokens.recv().map_err(|_| NoCredit::Disconnected),
                };
                s.waiting.fetch_sub(1, Ordering::AcqRel);
                got?;
            }
        }
        if s.disconnected.load(Ordering::Acquire) {
            return Err(NoCredit::Disconnected);
        }
        Ok(())
    }

    fn enqueue(&self, msg: T) -> Result<(), SendError<T>> {
        let s = &self.shared;
        // SeqCst, both: the sender's half of the Dekker pair with the
        // bridge's `disconnected` store and `enqueuing` load: either the
        // bridge sees us counted in (and drains until we are out), or we
        // see the route closed and keep the message.
        s.enqueuing.fetch_add(1, Ordering::SeqCst);
        let queued = if s.disconnected.load(Ordering::SeqCst) {
            Err(SendError(msg))
        } else {
            s.queue.send(msg)
        };
        // Release: the push comes before, for the bridge's Acquire load of 0.
        s.enqueuing.fetch_sub(1, Ordering::Release);
        queued?;
        s.bell.ring();
        Ok(())
    }

    /// Sends `msg`, waiting for credit if the receiver has none to spare:
    /// inside a coroutine only the coroutine waits. Fails, giving `msg`
    /// back, once the receiver is gone.
    pub fn send(&self, msg: T) -> Result<(), SendError<T>> {
        match self.credit(Wait::Forever) {
            Ok(()) => self.enqueue(msg),
            Err(_) => Err(SendError(msg)),
        }
    }

    /// Sends `msg` if credit is at hand now. A `Full` answer still asks
    /// the receiver for credit, so a later try may succeed.
    pub fn try_send(&self, msg: T) -> Result<(), TrySendError<T>> {
        match self.credit(Wait::Now) {
            Ok(()) => self
                .enqueue(msg)
                .map_err(|SendError(m)| TrySendError::Disconnected(m)),
            Err(NoCredit::Disconnected) => Err(TrySendError::Disconnected(msg)),
            Err(_) => Err(TrySendError::Full(msg)),
        }
    }

    /// Sends `msg`, waiting at most `timeout` for credit. A credit granted
    /// after the timeout stays on this rank for the route's next send.
    pub fn send_timeout(&self, msg: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        let wait = match Instant::now().checked_add(timeout) {
            Some(d) => Wait::Until(d),
            None => Wait::Forever,
        };
        match self.credit(wait) {
            Ok(()) => self
                .enqueue(msg)
                .map_err(|SendError(m)| SendTimeoutError::Disconnected(m)),
            Err(NoCredit::Timeout | NoCredit::Full) => Err(SendTimeoutError::Timeout(msg)),
            Err(NoCredit::Disconnected) => Err(SendTimeoutError::Disconnected(msg)),
        }
    }

    /// The destination rank.
    pub fn dest(&self) -> i32 {
        self.shared.dest
    }

    /// The channel's tag.
    pub fn tag(&self) -> u16 {
        self.shared.tag
    }

    /// True once the receiver is known to be gone (or the world finalised).
    pub fn is_disconnected(&self) -> bool {
        self.shared.disconnected.load(Ordering::Acquire)
    }
}

impl<T> Clone for RemoteSender<T> {
    fn clone(&self) -> Self {
        self.shared.handles.fetch_add(1, Ordering::AcqRel);
        RemoteSender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for RemoteSender<T> {
    fn drop(&mut self) {
        if self.shared.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.bell.ring();
        }
    }
}

impl<T> std::fmt::Debug for RemoteSender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSender")
            .field("dest", &self.shared.dest)
            .field("tag", &self.shared.tag)
            .finish()
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
    pub(crate) dropped: AtomicBool,
    pub(crate) bell: Bell,
    pub(crate) stats: InStats,
    pub(crate) capacity: usize,
    pub(crate) tag: u16,
}

/// A snapshot of a [`RemoteReceiver`]'s counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverStats {
    /// The receiver's capacity: the credit it hands out.
    pub capacity: usize,
    /// Messages the bridge has delivered to this receiver.
    pub received: u64,
    /// High-water mark of messages in flight: credit granted and not yet
    /// returned, plus messages delivered and not yet taken. Never above
    /// `capacity`.
    pub max_in_flight: usize,
    /// High-water mark of messages delivered and not yet taken.
    pub max_buffered: usize,
    /// GRANT frames sent.
    pub grants: u64,
    /// Data batches (MPI messages) received.
    pub batches: u64,
}

/// The receiving end of a remote channel (this rank, `tag`), fed by the
/// senders of its source ranks.
///
/// Disconnected (`recv` gives [`RecvError`] once the buffer is drained)
/// when every source rank has closed: dropped all its senders for this
/// route, or finalised its [`World`](crate::World).
pub struct RemoteReceiver<T> {
    pub(crate) rx: mpsc::Receiver<T>,
    pub(crate) shared: Arc<InShared>,
}

impl<T> RemoteReceiver<T> {
    fn took(&self) {
        self.shared.consumed.fetch_add(1, Ordering::AcqRel);
        self.shared.bell.ring();
    }

    /// Waits for a message (suspending only the calling coroutine).
    pub fn recv(&self) -> Result<T, RecvError> {
        let m = self.rx.recv()?;
        self.took();
        Ok(m)
    }

    /// Takes a message if one is here.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let m = self.rx.try_recv()?;
        self.took();
        Ok(m)
    }

    /// Waits at most `timeout` for a message.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        let m = self.rx.recv_timeout(timeout)?;
        self.took();
        Ok(m)
    }

    /// A blocking iterator over messages, ending at disconnection.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// Messages delivered and not yet taken.
    pub fn len(&self) -> usize {
        self.rx.len()
    }

    /// True if no message is waiting here.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// The capacity: how much credit this receiver hands out.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// The channel's tag.
    pub fn tag(&self) -> u16 {
        self.shared.tag
    }

    /// The receiver's counters.
    pub fn stats(&self) -> ReceiverStats {
        let s = &self.shared.stats;
        ReceiverStats {
            capacity: self.shared.capacity,
            received: s.received.load(Ordering::Acquire),
            max_in_flight: s.max_in_flight.load(Ordering::Acquire),
            max_buffered: s.max_buffered.load(Ordering::Acquire),
            grants: s.grants.load(Ordering::Acquire),
            batches: s.batches.load(Ordering::Acquire),
        }
    }
}

impl<T> Drop for RemoteReceiver<T> {
    fn drop(&mut self) {
        self.shared.dropped.store(true, Ordering::Release);
        self.shared.bell.ring();
    }
}

impl<T> std::fmt::Debug for RemoteReceiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteReceiver")
            .field("tag", &self.shared.tag)
            .field("capacity", &self.shared.capacity)
            .finish()
    }
}

/// Blocking iterator of a [`RemoteReceiver`].
#[derive(Debug)]
pub struct Iter<'a, T> {
    rx: &'a RemoteReceiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<'a, T> IntoIterator for &'a RemoteReceiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}
