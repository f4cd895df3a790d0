//! The channel proper: a ring, a cursor per side, a waiter list per side,
//! and the blocking and disconnection logic that ties them together.
//!
//! Invariants:
//!
//! 1. **Exactly once.** A position is claimed by one producer and one
//!    consumer (the cursors), and a slot's stamp hands it from one to the
//!    other (the ring). Values left in the ring when the channel is freed are
//!    dropped by the ring.
//! 2. **No suspension inside a claim.** Between a won claim and its publish
//!    (`Ring::write`/`Ring::read`) nothing here can park or yield the
//!    coroutine.
//! 3. **No lost wake-ups.** A blocking operation registers its waker, issues
//!    `fence(SeqCst)`, re-checks (reading the other side's position through
//!    `Cursor::position_for_waiter`), and only then parks. Every operation
//!    that makes progress is ordered against that re-check before it looks
//!    for waiters: by `fence(SeqCst)` on a lone side, by its own claim (a
//!    read-modify-write that the re-check also read-modify-writes) on a
//!    `Cas` or `Updt` side (see `claim/mod.rs` and `waker.rs`).
//!    Disconnection stores its flag, fences, and wakes everyone.
//! 4. **Disconnection is a flag per side, set once (idempotently) by the last
//!    endpoint of the side.** After the receivers are gone, sends fail and
//!    buffered messages are dropped; after the senders are gone, receivers
//!    drain what is buffered, then fail.

use std::time::Instant;

use crossbeam_utils::CachePadded;

use crate::backoff::Backoff;
use crate::claim::Cursor;
use crate::error::{RecvTimeoutError, SendTimeoutError, TryRecvError, TrySendError};
use crate::hook::{self, Park};
use crate::lock::RawLock;
use crate::ring::{Ring, Turn};
use crate::sync::{fence, Ordering};
use crate::updt::UpdtCell;
use crate::waker::WaitList;
use crate::{Mode, Protocol};

pub(crate) struct Chan<T, M: Mode, P: Protocol> {
    tx: CachePadded<M::Tx<P>>,
    rx: CachePadded<M::Rx<P>>,
    /// Senders blocked on a full ring.
    senders: CachePadded<WaitList<P::Lock>>,
    /// Receivers blocked on an empty ring.
    receivers: CachePadded<WaitList<P::Lock>>,
    /// 1 once every sender is gone.
    tx_gone: UpdtCell,
    /// 1 once every receiver is gone.
    rx_gone: UpdtCell,
    ring: Ring<T>,
}

impl<T, M: Mode, P: Protocol> Chan<T, M, P> {
    pub(crate) fn new(capacity: usize) -> Self {
        Chan {
            tx: CachePadded::new(Cursor::new()),
            rx: CachePadded::new(Cursor::new()),
            senders: CachePadded::new(WaitList::new()),
            receivers: CachePadded::new(WaitList::new()),
            tx_gone: UpdtCell::new(0),
            rx_gone: UpdtCell::new(0),
            ring: Ring::new(capacity),
        }
    }

    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// Number of messages in the ring, from a consistent snapshot of the two
    /// positions (claimed, not necessarily published).
    pub(crate) fn len(&self) -> usize {
        loop {
            let tail = self.tx.position();
            let head = self.rx.position();
            // The tail did not move while we read the head, so the pair was
            // true at one instant, when `tail - head <= capacity` held.
            if self.tx.position() == tail {
                return self.ring.distance(head, tail);
            }
        }
    }

    /// A blocked sender's re-check, after registering and `fence(SeqCst)`.
    #[inline]
    fn still_full(&self) -> bool {
        let head = self.rx.position_for_waiter();
        let tail = self.tx.position();
        self.ring.is_full_at(head, tail) && !self.receivers_gone()
    }

    /// A blocked receiver's re-check, after registering and `fence(SeqCst)`.
    #[inline]
    fn still_empty(&self) -> bool {
        self.tx.position_for_waiter() == self.rx.position() && !self.senders_gone()
    }

    #[inline]
    fn receivers_gone(&self) -> bool {
        self.rx_gone.load(Ordering::SeqCst) != 0
    }

    #[inline]
    fn senders_gone(&self) -> bool {
        self.tx_gone.load(Ordering::SeqCst) != 0
    }

    // ---- sending ---------------------------------------------------------

    #[inline]
    pub(crate) fn try_send(&self, msg: T) -> Result<(), TrySendError<T>> {
        if self.receivers_gone() {
            return Err(TrySendError::Disconnected(msg));
        }
        let mut backoff = Backoff::new();
        loop {
            match self.tx.claim(&self.ring, Turn::Produce) {
                Ok(pos) => {
                    // SAFETY: the cursor gave us `pos` as a producer.
                    unsafe { self.ring.write(pos, msg) };
                    // The message is published; a receiver may be waiting for it.
                    if !<M::Tx<P> as Cursor>::CLAIM_SYNCS_WITH_WAITERS {
                        fence(Ordering::SeqCst);
                    }
                    if self.receivers.has_waiters() {
                        self.receivers.notify_one();
                    }
                    return Ok(());
                }
                Err(tail) => {
                    if self.ring.is_full_at(self.rx.position(), tail) {
                        return Err(TrySendError::Full(msg));
                    }
                    // A receiver holds the slot between its claim and its
                    // publish: it cannot suspend there, so wait it out.
                    backoff.snooze();
                }
            }
        }
    }

    #[inline]
    pub(crate) fn send(
        &self,
        msg: T,
        deadline: Option<Instant>,
    ) -> Result<(), SendTimeoutError<T>> {
        match self.try_send(msg) {
            Ok(()) => Ok(()),
            Err(TrySendError::Disconnected(m)) => Err(SendTimeoutError::Disconnected(m)),
            Err(TrySendError::Full(m)) => self.send_blocking(m, deadline),
        }
    }

    /// The slow path of `send`: spin a little (threads only), then park.
    #[cold]
    fn send_blocking(
        &self,
        mut msg: T,
        deadline: Option<Instant>,
    ) -> Result<(), SendTimeoutError<T>> {
        let park = hook::current();
        let spin = park.spin_before_park();
        let mut backoff = Backoff::new();
        loop {
            // The attempt just made found the ring full. The deadline is
            // checked after an attempt, so a sender woken just as its
            // deadline passes still uses the room it was woken for.
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(SendTimeoutError::Timeout(msg));
            }
            if spin && !backoff.is_completed() {
                backoff.snooze();
            } else {
                wait_on(&self.senders, &*park, deadline, || self.still_full());
            }
            match self.try_send(msg) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Disconnected(m)) => {
                    return Err(SendTimeoutError::Disconnected(m))
                }
                Err(TrySendError::Full(m)) => msg = m,
            }
        }
    }

    // ---- receiving -------------------------------------------------------

    #[inline]
    pub(crate) fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut backoff = Backoff::new();
        loop {
            match self.rx.claim(&self.ring, Turn::Consume) {
                Ok(pos) => {
                    // SAFETY: the cursor gave us `pos` as a consumer.
                    let msg = unsafe { self.ring.read(pos) };
                    // A slot is free; a sender may be waiting for it.
                    if !<M::Rx<P> as Cursor>::CLAIM_SYNCS_WITH_WAITERS {
                        fence(Ordering::SeqCst);
                    }
                    if self.senders.has_waiters() {
                        self.senders.notify_one();
                    }
                    return Ok(msg);
                }
                Err(head) => {
                    if self.tx.position() == head {
                        if !self.senders_gone() {
                            return Err(TryRecvError::Empty);
                        }
                        // The last sender published everything before it set
                        // the flag we just loaded: look once more.
                        if self.tx.position() == head {
                            return Err(TryRecvError::Disconnected);
                        }
                    } else {
                        // A sender holds the slot between its claim and its
                        // publish: it cannot suspend there, so wait it out.
                        backoff.snooze();
                    }
                }
            }
        }
    }

    #[inline]
    pub(crate) fn recv(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        match self.try_recv() {
            Ok(msg) => Ok(msg),
            Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) => self.recv_blocking(deadline),
        }
    }

    /// The slow path of `recv`: spin a little (threads only), then park.
    #[cold]
    fn recv_blocking(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        let park = hook::current();
        let spin = park.spin_before_park();
        let mut backoff = Backoff::new();
        loop {
            // The attempt just made found the ring empty.
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(RecvTimeoutError::Timeout);
            }
            if spin && !backoff.is_completed() {
                backoff.snooze();
            } else {
                wait_on(&self.receivers, &*park, deadline, || self.still_empty());
            }
            match self.try_recv() {
                Ok(msg) => return Ok(msg),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
        }
    }

    // ---- endpoints -------------------------------------------------------

    pub(crate) fn attach_sender(&self) {
        self.tx.attach();
    }

    pub(crate) fn attach_receiver(&self) {
        self.rx.attach();
    }

    pub(crate) fn detach_sender(&self) {
        if self.tx.detach() {
            self.tx_gone.store(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            self.receivers.notify_all();
        }
    }

    pub(crate) fn detach_receiver(&self) {
        if self.rx.detach() {
            self.rx_gone.store(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            self.senders.notify_all();
            // Nobody will receive what is buffered: drop it now rather than
            // when the last sender goes. Draining through the cursor keeps
            // this safe even if two "last" receivers race here.
            while self.try_recv().is_ok() {}
        }
    }

    pub(crate) fn is_disconnected(&self) -> bool {
        self.senders_gone() || self.receivers_gone()
    }
}

/// Blocks once, without losing a wake-up (invariant 3): registers on `list`,
/// fences, and parks only if `still_blocked` says the peer has not made
/// progress in between. Returns after a wake, a timeout or a spurious
/// return; the caller retries its operation either way.
fn wait_on<L: RawLock>(
    list: &WaitList<L>,
    park: &dyn Park,
    deadline: Option<Instant>,
    still_blocked: impl FnOnce() -> bool,
) {
    let key = list.register(park.waker());
    fence(Ordering::SeqCst);
    if still_blocked() {
        park.park(deadline);
    }
    list.unregister(key);
}
