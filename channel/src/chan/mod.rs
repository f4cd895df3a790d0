//! The channel proper: a ring, a cursor per side, a waiter list per side,
//! and the blocking and disconnection logic that ties them together.
//!
//! Invariants:
//!
//! 1. **Exactly once.** A position is claimed by one producer and one
//!    consumer (the cursors), and a slot's stamp hands it from one to the
//!    other (the ring). Values left in the ring when the channel is freed are
//!    dropped by the ring. Wakers are user code and may panic: a send
//!    wakes only after its caller has forgotten its copy, and a receive's
//!    wake of the senders puts a panic off until its messages are its
//!    caller's (`wake_senders`).
//! 2. **No suspension inside a claim.** Between a won claim and its publish
//!    (`Ring::write`/`Ring::read`) nothing here can park or yield the
//!    coroutine.
//! 3. **No lost wake-ups.** A blocking operation registers its waker, issues
//!    `fence(SeqCst)` (left out on a locked list whose re-check is a
//!    read-modify-write the peer's claim also makes, which orders the same
//!    things: see `wait_on`), re-checks (reading the other side's position
//!    through `Cursor::position_for_waiter`), and only then parks; it leaves the
//!    waiter list on every way out, unwinding included. Every operation
//!    that makes progress is ordered against that re-check before it looks
//!    for waiters: by `fence(SeqCst)` on a lone side, by its own claim (a
//!    read-modify-write that the re-check also read-modify-writes) on a
//!    `Cas` or `Updt` side (see `claim/mod.rs` and `wait_list.rs`).
//!    Disconnection stores its flag, fences, and wakes everyone. A side with
//!    one endpoint has one waiter at a time, and waits in a `WaiterSlot`
//!    rather than a `WaitList` (`Mode::TxWait`, `Mode::RxWait`).
//! 4. **Disconnection is a flag per side, set once (idempotently) by the last
//!    endpoint of the side.** After the receivers are gone, sends fail and
//!    buffered messages are dropped; after the senders are gone, receivers
//!    drain what is buffered, then fail.
//! 5. **Zero capacity is a rendezvous.** A `bounded(0)` channel leaves its
//!    ring unused and meets senders with receivers in its [`Rendezvous`]
//!    (`rendezvous/`, with its own invariants; the channel's zero-capacity
//!    paths are there too, in `rendezvous/chan.rs`). Its sends take the
//!    message by pointer like the others; a sender cancelled out of its
//!    park after a receiver took the message reports success first and
//!    unwinds after, so no copy is dropped twice. A party queuing there
//!    also wakes the other side's waiter list, where selects and futures
//!    wait.

use std::panic::Location;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use crate::backoff::Backoff;
use crate::claim::Cursor;
use crate::error::{RecvTimeoutError, TryRecvError};
use crate::hook::{self, Describe, Op, WaitingOn};
use crate::rendezvous::{defer, rethrow_deferred, Arrival, Rendezvous, Side, Token};
use crate::ring::{Readiness, Ring, Turn};
use crate::spaced::{gap, Gap, Spaced};
use crate::sync::{fence, Arc, Ordering};
use crate::updt::UpdtCell;
use crate::wait_list::Waiters;
use crate::{Mode, Protocol};
use swco_wait::protocol::wait_on;

/// Why a send left the message with its caller.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Unsent {
    /// The ring was full (only a send that does not block reports it).
    Full,
    /// Every receiver is gone.
    Disconnected,
    /// The ring stayed full until the deadline.
    Timeout,
}

// `repr(C)`: the fields stay in this order, so each `Spaced` word is
// `GAP` bytes from the next (see `spaced.rs`), and `front` keeps `tx` as far
// from whatever the allocator put before the channel.
#[repr(C)]
pub(crate) struct Chan<T, M: Mode, P: Protocol> {
    front: Gap,
    tx: Spaced<M::Tx<P>>,
    rx: Spaced<M::Rx<P>>,
    /// Senders blocked on a full ring.
    pub(crate) senders: Spaced<M::TxWait<P>>,
    /// Receivers blocked on an empty ring.
    pub(crate) receivers: Spaced<M::RxWait<P>>,
    /// 1 once every sender is gone.
    tx_gone: UpdtCell,
    /// 1 once every receiver is gone.
    rx_gone: UpdtCell,
    ring: Ring<T>,
    /// The meeting point of a zero-capacity channel (whose ring, one slot,
    /// stays unused); `None` for every other capacity.
    zero: Option<Box<Rendezvous<T, P::Lock>>>,
    /// Where the channel was made, for what its blocked parties wait on
    /// ([`WaitingOn`]).
    pub(crate) made_at: &'static Location<'static>,
}

/// A channel seen as the object of a receive (`RECV`) or a send: what an
/// operation blocked on it waits on. A view of the channel itself (no copy,
/// no allocation), so that the descriptor is the channel's address and
/// this view's table.
#[repr(transparent)]
pub(crate) struct BlockedOn<C, const RECV: bool>(C);

impl<T, M: Mode, P: Protocol, const RECV: bool> Describe for BlockedOn<Chan<T, M, P>, RECV> {
    fn op(&self) -> Op {
        if RECV {
            Op::Recv
        } else {
            Op::Send
        }
    }

    fn describe(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let chan = &self.0;
        crate::waiting_on::describe_channel(
            f,
            self.op(),
            M::NAME,
            P::NAME,
            chan.capacity(),
            chan.made_at,
        )
    }
}

impl<T, M: Mode, P: Protocol> Chan<T, M, P> {
    #[track_caller]
    pub(crate) fn new(capacity: usize) -> Self {
        Chan {
            front: gap(),
            tx: Spaced::new(Cursor::new()),
            rx: Spaced::new(Cursor::new()),
            senders: Spaced::new(Waiters::new()),
            receivers: Spaced::new(Waiters::new()),
            tx_gone: UpdtCell::new(0),
            rx_gone: UpdtCell::new(0),
            ring: Ring::new(capacity.max(1)),
            zero: (capacity == 0).then(|| Box::new(Rendezvous::new())),
            made_at: Location::caller(),
        }
    }

    /// What a receive (`RECV`) or a send blocked on this channel waits on.
    #[inline(always)]
    pub(crate) fn waiting_on<const RECV: bool>(&self) -> WaitingOn<'_> {
        // SAFETY: `BlockedOn` is a `repr(transparent)` wrapper of the
        // channel, so the cast reference points at a valid value of it, for
        // as long as `self` is borrowed.
        let view = unsafe { &*(self as *const Self).cast::<BlockedOn<Self, RECV>>() };
        WaitingOn::on(view)
    }

    /// Address and size of each word written by a different party, in
    /// field order (for the layout test in `lib.rs`, which is not built
    /// under loom).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn layout_probe(&self) -> [(*const u8, usize); 4] {
        fn word<W>(w: &W) -> (*const u8, usize) {
            (w as *const W as *const u8, std::mem::size_of::<W>())
        }
        [
            word(&*self.tx),
            word(&*self.rx),
            word(&*self.senders),
            word(&*self.receivers),
        ]
    }

    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        if self.zero.is_some() {
            return 0;
        }
        self.ring.capacity()
    }

    /// The rendezvous of a zero-capacity channel.
    #[inline]
    pub(crate) fn zero(&self) -> Option<&Rendezvous<T, P::Lock>> {
        self.zero.as_deref()
    }

    /// Number of messages in the ring, from a consistent snapshot of the two
    /// positions (claimed, not necessarily published).
    pub(crate) fn len(&self) -> usize {
        if self.zero.is_some() {
            // A rendezvous holds no message.
            return 0;
        }
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
    pub(crate) fn still_full(&self) -> bool {
        self.still_full_for(None)
    }

    /// [`still_full`](Chan::still_full) for a select whose own rendezvous
    /// packets carry the token `own`: they are no partner of its send.
    #[inline]
    pub(crate) fn still_full_for(&self, own: Option<&Arc<Token>>) -> bool {
        if let Some(zero) = self.zero() {
            return !zero.has_peers_locked(Side::Recv, own) && !self.receivers_gone();
        }
        let head = self.rx.position_for_waiter();
        let tail = self.tx.position();
        self.ring.is_full_at(head, tail) && !self.receivers_gone()
    }

    /// A blocked receiver's re-check, after registering and `fence(SeqCst)`.
    #[inline]
    pub(crate) fn still_empty(&self) -> bool {
        self.still_empty_for(None)
    }

    /// [`still_empty`](Chan::still_empty) for a select whose own
    /// rendezvous packets carry the token `own`.
    #[inline]
    pub(crate) fn still_empty_for(&self, own: Option<&Arc<Token>>) -> bool {
        if let Some(zero) = self.zero() {
            return !zero.has_peers_locked(Side::Send, own) && !self.senders_gone();
        }
        self.tx.position_for_waiter() == self.rx.position() && !self.senders_gone()
    }

    /// Whether a receive would find a message now: the slot at the
    /// receivers' position holds one. A snapshot by two loads, cheaper than
    /// [`len`](Chan::len) (which reads both positions and re-checks); for a
    /// select's look at its operations. Not for zero capacity.
    #[inline]
    pub(crate) fn message_at_head(&self) -> bool {
        self.ring.readiness(Turn::Consume, self.rx.position()) == Readiness::Ready
    }

    /// Whether a send would find room now, as
    /// [`message_at_head`](Chan::message_at_head) for the senders' slot.
    #[inline]
    pub(crate) fn room_at_tail(&self) -> bool {
        self.ring.readiness(Turn::Produce, self.tx.position()) == Readiness::Ready
    }

    #[inline]
    fn receivers_gone(&self) -> bool {
        self.rx_gone.load(Ordering::SeqCst) != 0
    }

    /// Whether the side that parties of `side` meet is gone (a sender's
    /// peers are the receivers).
    #[inline]
    pub(crate) fn peers_gone(&self, side: Side) -> bool {
        match side {
            Side::Send => self.receivers_gone(),
            Side::Recv => self.senders_gone(),
        }
    }

    #[inline]
    fn senders_gone(&self) -> bool {
        self.tx_gone.load(Ordering::SeqCst) != 0
    }

    // ---- sending ---------------------------------------------------------
    //
    // The message stays where the endpoint received it (its by-value
    // parameter, in its caller's frame) and only a pointer to it comes down
    // here: it is copied once, straight into the slot it claimed, and moved
    // back out into an error only by the endpoint. So the frames that stay
    // live while a sender is parked (`send_from`, `send_blocking`,
    // `wait_on`) hold no copy of it. Passing it down by value instead put a
    // copy in nearly every frame of the path: a blocking send of a 1 MiB
    // message needed 7 MiB of stack in a release build, 29 MiB in a debug
    // one (see `examples/send_stack.rs`).

    /// Moves the message at `msg` into the ring if there is room now.
    ///
    /// # Safety
    /// `msg` points to a valid message owned by the caller. On `Ok` it has
    /// been moved (bitwise) into the ring: the caller must forget its copy,
    /// then call [`wake_receiver`](Chan::wake_receiver). On `Err`, and if
    /// this unwinds, the message is still the caller's.
    #[inline]
    pub(crate) unsafe fn try_send_from(&self, msg: *const T) -> Result<(), Unsent> {
        // SAFETY: our caller's contract, for a run of one.
        unsafe { self.try_send_run_from(msg, 1) }.map(|_| ())
    }

    /// Moves as many of the `n` (at least 1) messages at `msgs` into the
    /// ring as there is room for now, in order, under one claim; returns how
    /// many (at least 1) moved. A zero-capacity channel moves one, if a
    /// receiver is waiting.
    ///
    /// # Safety
    /// `msgs` points to `n` contiguous valid messages owned by the caller.
    /// On `Ok(k)` the first `k` have been moved (bitwise) into the ring: the
    /// caller must forget its copies, then call
    /// [`wake_receivers(k)`](Chan::wake_receivers). The rest, and all of them
    /// on `Err` or if this unwinds, are still the caller's.
    #[inline(always)]
    pub(crate) unsafe fn try_send_run_from(
        &self,
        msgs: *const T,
        n: usize,
    ) -> Result<usize, Unsent> {
        debug_assert!(n >= 1);
        if let Some(zero) = self.zero() {
            // SAFETY: our caller's contract, for the first message.
            return unsafe { self.zero_try_send_from(zero, msgs) }.map(|()| 1);
        }
        if self.receivers_gone() {
            return Err(Unsent::Disconnected);
        }
        let mut backoff = Backoff::new();
        loop {
            match self.tx.claim_run(&self.ring, Turn::Produce, n) {
                Ok((first, k)) => {
                    // SAFETY: the cursor gave us the run of `k <= n`
                    // positions from `first` as a producer, and the caller
                    // vouches for `msgs` and treats the first `k` as moved
                    // on `Ok`. Nothing here can unwind or suspend, so the
                    // whole run is published (invariant 2).
                    unsafe {
                        // A constant at the single-message call sites, which
                        // then skip the run's bookkeeping.
                        if n == 1 {
                            self.ring.write_from(first, msgs);
                        } else {
                            self.ring.write_run_from(first, msgs, k);
                        }
                    }
                    return Ok(k);
                }
                Err(tail) => {
                    if self.ring.is_full_at(self.rx.position(), tail) {
                        return Err(Unsent::Full);
                    }
                    // A receiver holds the slot between its claim and its
                    // publish: it cannot suspend there, so wait it out.
                    backoff.snooze();
                }
            }
        }
    }

    /// Moves the message at `msg` into the ring, blocking while the ring is
    /// full, until `deadline` if there is one.
    ///
    /// # Safety
    /// As for [`try_send_from`](Chan::try_send_from). In particular, if a
    /// blocked sender unwinds out of its park, the message is still the
    /// caller's, to drop as it unwinds.
    #[inline]
    pub(crate) unsafe fn send_from(
        &self,
        msg: *const T,
        deadline: Option<Instant>,
    ) -> Result<(), Unsent> {
        // SAFETY: our caller's contract, for a run of one.
        unsafe { self.send_run_from(msg, 1, deadline) }.map(|_| ())
    }

    /// Moves a prefix (at least 1) of the `n` messages at `msgs` into the
    /// ring, blocking while the ring is full, until `deadline` if there is
    /// one; returns its length. A batch calls it until every message is in.
    ///
    /// # Safety
    /// As for [`try_send_run_from`](Chan::try_send_run_from); if a blocked
    /// sender unwinds out of its park, every message is still the caller's.
    #[inline]
    pub(crate) unsafe fn send_run_from(
        &self,
        msgs: *const T,
        n: usize,
        deadline: Option<Instant>,
    ) -> Result<usize, Unsent> {
        // SAFETY: our caller's contract.
        match unsafe { self.try_send_run_from(msgs, n) } {
            Err(Unsent::Full) => {
                // SAFETY: our caller's contract.
                unsafe { self.send_blocking(msgs, n, deadline) }
            }
            done => done,
        }
    }

    /// The slow path of `send_run_from`: spin a little (threads only), then
    /// park. Out of line, so that the fast path's frame stays small.
    ///
    /// # Safety
    /// As for [`send_run_from`](Chan::send_run_from).
    #[cold]
    #[inline(never)]
    unsafe fn send_blocking(
        &self,
        msgs: *const T,
        n: usize,
        deadline: Option<Instant>,
    ) -> Result<usize, Unsent> {
        // Borrowed, not cloned: no reference count moves per block.
        hook::with_current(|park| {
            if let Some(zero) = self.zero() {
                // SAFETY: our caller's contract, for the first message.
                return unsafe { self.zero_send_from(zero, msgs, park, deadline) }.map(|()| 1);
            }
            let mut backoff = Backoff::new();
            loop {
                // The attempt just made found the ring full. The deadline is
                // checked after an attempt, so a sender woken just as its
                // deadline passes still uses the room it was woken for.
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(Unsent::Timeout);
                }
                // Asked afresh each time: a coroutine spins only while its
                // executor has nothing else to run.
                if !backoff.is_completed() && park.spin_before_park() {
                    backoff.snooze();
                } else {
                    wait_on(
                        &*self.senders,
                        park,
                        self.waiting_on::<false>(),
                        deadline,
                        <M::Rx<P> as Cursor>::CLAIM_SYNCS_WITH_WAITERS,
                        || self.still_full(),
                    );
                }
                // SAFETY: our caller's contract.
                match unsafe { self.try_send_run_from(msgs, n) } {
                    Err(Unsent::Full) => {}
                    done => return done,
                }
            }
        })
    }

    /// The tail of a send that [`try_send_from`](Chan::try_send_from) or
    /// [`send_from`](Chan::send_from) reported done: wakes a receiver. Split
    /// off so that the caller can forget its copy of the message first (a
    /// waker may panic). The order of invariant 3 is kept (publish, fence,
    /// look for waiters), and nothing in between suspends, so a receiver
    /// that registered before the publish is woken at once, and one that
    /// registers after it finds the message in its re-check.
    #[inline]
    pub(crate) fn wake_receiver(&self) {
        self.wake_receivers(1);
    }

    /// [`wake_receiver`](Chan::wake_receiver) after a run of `k` messages:
    /// up to `k` receivers may each take one.
    #[inline]
    pub(crate) fn wake_receivers(&self, k: usize) {
        if self.zero.is_some() {
            // A rendezvous woke its receiver as it handed the message over;
            // a panic that had to wait for the caller to forget its copy
            // goes on now.
            rethrow_deferred();
            return;
        }
        // The messages are published; receivers may be waiting for them. A
        // lone side's publish is a plain store, so the list fences first.
        self.receivers
            .notify_many(!<M::Tx<P> as Cursor>::CLAIM_SYNCS_WITH_WAITERS, k);
    }

    // ---- receiving -------------------------------------------------------

    #[inline]
    pub(crate) fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut msg = std::mem::MaybeUninit::uninit();
        // SAFETY: room for one message, which is ours on `Ok`.
        unsafe { self.try_recv_into(msg.as_mut_ptr(), 1) }
            // SAFETY: on `Ok(k)`, `1 <= k <= max = 1` messages were moved in.
            .map(|_| unsafe { msg.assume_init() })
    }

    /// Moves up to `max` (at least 1) messages that are in the ring now to
    /// `dst`, in order, under one claim; returns how many (at least 1). A
    /// zero-capacity channel moves one, if a sender waits.
    ///
    /// # Safety
    /// `dst` is valid for `max` writes of `T`, outside the channel. On
    /// `Ok(k)` the first `k` hold messages the caller now owns.
    #[inline(always)]
    pub(crate) unsafe fn try_recv_into(
        &self,
        dst: *mut T,
        max: usize,
    ) -> Result<usize, TryRecvError> {
        debug_assert!(max >= 1);
        if let Some(zero) = self.zero() {
            return match zero.arrive(Side::Recv, None, None, &|| self.senders_gone()) {
                // A sender's waker that panicked goes on at our next
                // blocking operation (`hook::with_current`).
                Arrival::Served(Some(msg)) => {
                    // SAFETY: the caller vouches for `dst`.
                    unsafe { dst.write(msg) };
                    Ok(1)
                }
                Arrival::Disconnected(_) => Err(TryRecvError::Disconnected),
                Arrival::Partner(partner) => match self.zero_await_partner(zero, &partner) {
                    Some(msg) => {
                        // SAFETY: as above.
                        unsafe { dst.write(msg) };
                        Ok(1)
                    }
                    None => Err(TryRecvError::Empty),
                },
                _ => Err(TryRecvError::Empty),
            };
        }
        let mut backoff = Backoff::new();
        loop {
            match self.rx.claim_run(&self.ring, Turn::Consume, max) {
                Ok((first, k)) => {
                    // SAFETY: the cursor gave us the run of `k <= max`
                    // positions from `first` as a consumer; the caller
                    // vouches for `dst`.
                    unsafe {
                        // As in `try_send_run_from`.
                        if max == 1 {
                            dst.write(self.ring.read(first));
                        } else {
                            self.ring.read_run_into(first, dst, k);
                        }
                    }
                    self.wake_senders(k);
                    return Ok(k);
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

    /// The tail of a receive that took `k` messages out of the ring: wakes
    /// senders waiting for the slots it freed.
    ///
    /// A waker is user code and may panic. The messages are in `dst` by
    /// then, which its caller owns only once the receive returns `Ok`, so a
    /// panic unwinding from here would leave them nowhere: received by
    /// nobody, dropped by nobody. Dropping them as it unwinds would lose
    /// messages whose sends reported success. So the panic is put off, as a
    /// rendezvous receiver's is (`rendezvous::defer`): the receive returns
    /// its messages, and the panic goes on at this thread's next blocking
    /// operation (in a coroutine, at its next suspension; not at all if the
    /// coroutine finishes first). The other senders this call would have
    /// woken after the panicking one are not woken, as before.
    #[inline(always)]
    fn wake_senders(&self, k: usize) {
        // Slots are free; senders may be waiting for them. A lone side's
        // claim is a plain store, so the list fences first.
        let fence_first = !<M::Rx<P> as Cursor>::CLAIM_SYNCS_WITH_WAITERS;
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| {
            self.senders.notify_many(fence_first, k)
        })) {
            defer(payload);
        }
    }

    #[inline]
    pub(crate) fn recv(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        if self.zero.is_some() {
            return self.zero_recv(deadline);
        }
        match self.try_recv() {
            Ok(msg) => Ok(msg),
            Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) => {
                let mut msg = std::mem::MaybeUninit::uninit();
                // SAFETY: room for one message, ours on `Ok`.
                unsafe { self.recv_blocking(msg.as_mut_ptr(), 1, deadline) }
                    // SAFETY: as in `try_recv`.
                    .map(|_| unsafe { msg.assume_init() })
            }
        }
    }

    /// Moves up to `max` (at least 1) messages to `dst`, blocking while the
    /// ring is empty, until `deadline` if there is one: as
    /// [`recv`](Chan::recv), then whatever else is there. A zero-capacity
    /// channel moves one.
    ///
    /// # Safety
    /// As for [`try_recv_into`](Chan::try_recv_into).
    pub(crate) unsafe fn recv_into(
        &self,
        dst: *mut T,
        max: usize,
        deadline: Option<Instant>,
    ) -> Result<usize, RecvTimeoutError> {
        if self.zero.is_some() {
            // A rendezvous hands over one message per meeting (the batch
            // API caps `max` at 1 here).
            let msg = self.zero_recv(deadline)?;
            // SAFETY: our caller's contract.
            unsafe { dst.write(msg) };
            return Ok(1);
        }
        // SAFETY: our caller's contract.
        match unsafe { self.try_recv_into(dst, max) } {
            Ok(k) => Ok(k),
            Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
            // SAFETY: our caller's contract.
            Err(TryRecvError::Empty) => unsafe { self.recv_blocking(dst, max, deadline) },
        }
    }

    /// The slow path of `recv` and `recv_into`: spin a little (threads
    /// only), then park.
    ///
    /// # Safety
    /// As for [`try_recv_into`](Chan::try_recv_into).
    #[cold]
    unsafe fn recv_blocking(
        &self,
        dst: *mut T,
        max: usize,
        deadline: Option<Instant>,
    ) -> Result<usize, RecvTimeoutError> {
        // Borrowed, not cloned: no reference count moves per block.
        hook::with_current(|park| {
            let mut backoff = Backoff::new();
            loop {
                // The attempt just made found the ring empty.
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(RecvTimeoutError::Timeout);
                }
                // Asked afresh each time: a coroutine spins only while its
                // executor has nothing else to run.
                if !backoff.is_completed() && park.spin_before_park() {
                    backoff.snooze();
                } else {
                    wait_on(
                        &*self.receivers,
                        park,
                        self.waiting_on::<true>(),
                        deadline,
                        <M::Tx<P> as Cursor>::CLAIM_SYNCS_WITH_WAITERS,
                        || self.still_empty(),
                    );
                }
                // SAFETY: our caller's contract.
                match unsafe { self.try_recv_into(dst, max) } {
                    Ok(k) => return Ok(k),
                    Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                    Err(TryRecvError::Empty) => {}
                }
            }
        })
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
            if let Some(zero) = self.zero() {
                zero.dismiss(Side::Recv);
            }
            // No sender will wait again: let go of a kept waker.
            self.senders.retire();
        }
    }

    pub(crate) fn detach_receiver(&self) {
        if self.rx.detach() {
            self.rx_gone.store(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            self.senders.notify_all();
            if let Some(zero) = self.zero() {
                zero.dismiss(Side::Send);
            }
            // No receiver will wait again: let go of a kept waker.
            self.receivers.retire();
            // Nobody will receive what is buffered: drop it now rather than
            // when the last sender goes. Draining through the cursor keeps
            // this safe even if two "last" receivers race here.
            self.drain();
        }
    }

    /// Drops every buffered message. Like a `Vec`, if one message's drop
    /// panics, the rest are still dropped (by a guard, while unwinding) and
    /// then the panic goes on to the dropper; a second panicking drop during
    /// that aborts, as it does for a `Vec`.
    fn drain(&self) {
        struct Rest<'a, T, M: Mode, P: Protocol>(&'a Chan<T, M, P>);

        impl<T, M: Mode, P: Protocol> Drop for Rest<'_, T, M, P> {
            fn drop(&mut self) {
                self.0.drain();
            }
        }

        while let Ok(message) = self.try_recv() {
            // The guard is armed only while the message is dropped, not
            // across `try_recv`: a panic in `try_recv` itself (a broken
            // invariant, or loom ending a failed execution) would panic
            // again in the guard's `drain`, which would arm another guard,
            // and so on until the stack overflows. Unguarded, it leaves
            // `drain` at once (and aborts if it comes during an unwind).
            let rest = Rest(self);
            drop(message);
            std::mem::forget(rest);
        }
    }

    pub(crate) fn is_disconnected(&self) -> bool {
        self.senders_gone() || self.receivers_gone()
    }
}
