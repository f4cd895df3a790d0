//! Zero-capacity (rendezvous) channels: Go's unbuffered semantics.
//!
//! A `bounded(0)` channel has no ring to hold a message: a send completes
//! only when a receiver takes the value. A party that cannot complete at
//! once waits with a [`Packet`] queued here: a blocked sender's packet holds
//! its message, a blocked receiver's an empty place for one. The peer that
//! arrives next pops the oldest packet of the other side, moves the message
//! (into or out of the packet), marks the packet done and wakes its owner.
//!
//! # Invariants
//!
//! 1. **Exactly once.** A message moves only under the rendezvous lock, and
//!    a packet is taken by at most one peer: it sits in one queue at most,
//!    and leaves it under the lock, popped by a peer (then `DONE`), taken
//!    back by its owner (timeout, unwinding), or dismissed by
//!    disconnection (then `DISMISSED`).
//! 2. **No lost wake-up.** A packet's owner puts its waker in the packet
//!    before queuing it (a blocking `wait` in a coroutine borrows the one
//!    its [`Park`] lends, [`Park::waker_ref`], for the whole wait), and
//!    looks at the packet's state before every park; the peer settles the
//!    state under the lock, then wakes the owner. A wake that lands before
//!    the park makes the park return at once (the [`Park`] contract).
//!    Selects and futures of the other side waiting on a waiter list for a
//!    partner to appear re-check under the lock
//!    ([`Rendezvous::has_peers_locked`]), and a blocking `wait` looks for
//!    them under the lock right after queuing ([`Peers::watched`]): the
//!    lock orders the two, so one of them sees the other without a fence.
//! 3. **An owner leaves only with its packet settled:** it saw `DONE` or
//!    `DISMISSED`, or took the packet out of its queue itself, under the
//!    lock. So no peer touches a packet after its owner has let go of it.
//!    A future's or a select's packet is reference-counted all the same, so
//!    an owner that is gone (a dropped future) never leaves a peer with a
//!    dangling pointer. A blocking `wait` cannot be gone while it waits, so
//!    its packet lives in its own frame (no allocation, no reference
//!    count): the peer settles it with the [`HANDING`] mark set, wakes the
//!    owner through it, and only then clears the mark, and the owner does
//!    not leave (nor let the packet go) while the mark is set.
//! 4. **Disconnection** stores the side's flag, then dismisses every packet
//!    of the other side under the lock. A party checks the flag under the
//!    same lock before queuing, so it either sees the flag or is dismissed.
//! 5. **A select waits with one packet per rendezvous operation**, all
//!    sharing one [`Token`]. A peer that pops such a packet first decides
//!    the token for it; if the token was already decided (the select
//!    completed another operation, or another peer served another of its
//!    packets), the packet is stale: the peer marks it `DISMISSED` and
//!    moves on. The select decides the token itself (`CLOSED`) before it
//!    completes anything else, so at most one of its operations completes.
//!    Its own packets are no partner of its other operations
//!    ([`Rendezvous::has_peers_locked`] skips them), so a select with a
//!    send and a receive on one channel never meets itself.
//! 6. **Add-only friendly.** The lock is the protocol's lock (an add-only
//!    claim for `Updt`), and the only words read outside it are
//!    [`UpdtCell`]s (loads and stores), so an `Updt` rendezvous channel
//!    uses no CAS, swap or fetch-and-add-with-result.
//!
//! 7. **A selected send owns its partner** (crossbeam's and Go's
//!    semantics). A select's send has no message when it is chosen (a
//!    `Select` send gets it from `SelectedOperation::send`, a `select!`
//!    send makes it only once chosen), yet the receiver that made it ready
//!    must be the one that gets it: else `select!{send(s, r.recv()?)}`, or
//!    two selects each with a send and a receive on one channel, hang with
//!    the chosen receiver served by somebody else. So:
//!    * a select's send that finds a receiver waiting *reserves* it
//!      ([`Rendezvous::reserve`]): the packet leaves its queue (its token,
//!      if any, decided for it) and is `RESERVED`; a framed packet cannot
//!      be (its owner must be free to give up, and its frame would then be
//!      gone), so the reservation *moves* to a shared packet made with the
//!      same waker, and the framed one is settled `MOVED`, naming it;
//!    * a receiver that meets a blocked select's message-less send packet
//!      serves it by handing over a reserved packet of its own (its
//!      `partner`), on which it then waits;
//!    * the holder [`fill`](Rendezvous::fill)s the reserved packet (`DONE`)
//!      or [`release`](Rendezvous::release)s it (`RETRY`: its owner
//!      arrives again, nothing received); its owner may give up on it at a
//!      deadline, when dropped or unwinding (`ABANDONED`, under the lock),
//!      and the holder's fill then fails and it sends as an unreserved
//!      send would. Every change of a reserved packet's state is made
//!      under the lock, so exactly one of fill, release and give-up takes
//!      effect. A reserved packet is shared (reference-counted), so
//!      neither party's leaving frees it under the other.
//!
//!    A `try_recv` that meets a message-less select send waits (parks) for
//!    the select to wake and make its message, as crossbeam's does: the
//!    select was chosen, and letting it go would make a try that cannot
//!    see a blocked select's send, which two selecting parties need.

use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::task::Waker;
use std::time::Instant;

use crate::backoff::Backoff;
use crate::hook::{Describe, Op, Park, WaitingOn};
use crate::lock::RawLock;
use crate::sync::{Arc, Ordering, UnsafeCell};
use crate::updt::{UpdtCell, UpdtClaim};

// Deferred unwinding lives in the blocking layer (`swco_wait::deferred`),
// which every block and every coroutine suspension consults.
pub(crate) use swco_wait::deferred::{defer, rethrow as rethrow_deferred};

/// A queued packet's owner has not been served yet.
const WAITING: usize = 0;
/// A peer took the message (a sender's packet) or put one in (a
/// receiver's).
const DONE: usize = 1;
/// The other side disconnected while the packet was queued.
const DISMISSED: usize = 2;
/// A framed packet's reservation moved to a shared packet (its `partner`):
/// a select's send reserved this receiver (invariant 7).
const MOVED: usize = 3;
/// Added to `DONE` or `DISMISSED` on a packet in its owner's frame while
/// the peer that settled it still reads its waker (invariant 3).
const HANDING: usize = 4;
/// A shared receiver's packet out of its queue, held by a select's send
/// that will fill it ([`Rendezvous::fill`]) or let it go
/// ([`Rendezvous::release`]) (invariant 7).
const RESERVED: usize = 8;
/// A reserved packet whose owner gave up on it (a deadline, a dropped
/// future, unwinding): its filler sends elsewhere.
const ABANDONED: usize = 9;
/// A reserved packet let go without a message: its owner arrives again.
const RETRY: usize = 10;

/// One blocked select's claim on its outcome, shared by the packets it
/// queued (invariant 5). An add-only claim guards it, whatever the
/// channels' protocols, so no CAS is reachable from an `Updt` channel.
pub(crate) struct Token {
    claim: UpdtClaim,
    /// 0 while open; `i + 1` once a peer served the packet of operation
    /// `i`; [`CLOSED`] once the select decided for itself.
    decided: UpdtCell,
}

const CLOSED: usize = usize::MAX;

impl Token {
    pub(crate) fn new() -> Arc<Token> {
        Arc::new(Token {
            claim: UpdtClaim::new(),
            decided: UpdtCell::new(0),
        })
    }

    /// Decides the token for `value` if it is still open.
    fn decide(&self, value: usize) -> bool {
        self.claim.claim();
        // Relaxed: under the claim, which orders every store to it.
        let open = self.decided.load(Ordering::Relaxed) == 0;
        if open {
            self.decided.store(value, Ordering::Relaxed);
        }
        self.claim.undo();
        open
    }

    /// The select decides for itself: `Ok` if nobody served one of its
    /// packets first, else `Err(i)`: operation `i`'s packet was served (its
    /// peer holds that rendezvous's lock until the packet is settled, so
    /// withdrawing it returns what it got).
    pub(crate) fn close(&self) -> Result<(), usize> {
        if self.decide(CLOSED) {
            return Ok(());
        }
        self.claim.claim();
        let decided = self.decided.load(Ordering::Relaxed);
        self.claim.undo();
        debug_assert!(decided != 0 && decided != CLOSED);
        Err(decided - 1)
    }
}

/// A waiting party's place in the rendezvous.
pub(crate) struct Packet<T> {
    /// `WAITING`, `DONE` or `DISMISSED`; stored under the lock (Release),
    /// loaded by the owner without it (Acquire).
    state: UpdtCell,
    /// A sender's message, or the place for a receiver's. Touched under the
    /// lock, or by the owner once `state` is no longer `WAITING`.
    msg: UnsafeCell<Option<T>>,
    /// Wakes the owner. Replaced (under the lock) when an async owner is
    /// polled with another waker.
    waker: UnsafeCell<PacketWaker>,
    /// A select's packet: its token and the operation's index.
    token: Option<(Arc<Token>, usize)>,
    /// The reserved packet this one leads to (invariant 7): on a select's
    /// message-less send packet, the receiver's that served it; on a framed
    /// receiver's packet settled `MOVED`, the shared one its reservation
    /// moved to. Written under the lock before the state leaves `WAITING`,
    /// taken by the owner after. Held as `Arc::into_raw` (null: none), so
    /// that dropping a packet with none (a blocking `wait`'s, every hop)
    /// is one test, not the drop of an `Option<Arc>`.
    partner: UnsafeCell<*const Packet<T>>,
}

impl<T> Drop for Packet<T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: `&mut self`: ours alone.
        if !self.partner.with(|p| unsafe { *p }).is_null() {
            self.drop_partner();
        }
    }
}

impl<T> Packet<T> {
    /// Out of line: a packet dropped with a partner is a select's that
    /// unwound, never a hop's.
    #[cold]
    #[inline(never)]
    fn drop_partner(&self) {
        drop(self.take_partner());
    }
}

// SAFETY: the cells are touched under the rendezvous lock, or by the owner
// alone once a peer has settled the packet (invariant 3); `T: Send` moves
// between threads, never shared.
unsafe impl<T: Send> Sync for Packet<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Packet<T> {}

impl<T> Packet<T> {
    /// A packet for a blocking `wait`'s frame.
    fn framed(msg: Option<T>, waker: PacketWaker) -> Self {
        Packet {
            state: UpdtCell::new(WAITING),
            msg: UnsafeCell::new(msg),
            waker: UnsafeCell::new(waker),
            token: None,
            partner: UnsafeCell::new(std::ptr::null()),
        }
    }

    /// A packet shared with its owner (a future, a select, a re-offer).
    fn new(msg: Option<T>, waker: Waker, token: Option<(Arc<Token>, usize)>) -> Arc<Self> {
        Arc::new(Packet {
            state: UpdtCell::new(WAITING),
            msg: UnsafeCell::new(msg),
            waker: UnsafeCell::new(PacketWaker::owned(waker)),
            token,
            partner: UnsafeCell::new(std::ptr::null()),
        })
    }

    /// Takes the message out of a packet its owner holds alone (settled,
    /// or never queued).
    fn take_settled(&self) -> Option<T> {
        // SAFETY: the state is no longer WAITING (Acquire load by our
        // caller, or under the lock), or the packet was never queued: no
        // peer touches it.
        self.msg.with_mut(|m| unsafe { (*m).take() })
    }

    /// Takes the partner out of a packet its owner holds alone (settled).
    pub(crate) fn take_partner(&self) -> Option<Arc<Packet<T>>> {
        // SAFETY: as in `take_settled`: written under the lock before the
        // state left WAITING, which our caller loaded (Acquire).
        let raw = self
            .partner
            .with_mut(|p| unsafe { std::mem::replace(&mut *p, std::ptr::null()) });
        // SAFETY: a non-null pointer came from `Arc::into_raw` in
        // `set_partner`, and is taken back once (it was just replaced).
        (!raw.is_null()).then(|| unsafe { Arc::from_raw(raw) })
    }

    /// Names the packet this one leads to (invariant 7).
    ///
    /// # Safety
    /// Under the lock, on a packet still `WAITING` with no partner.
    unsafe fn set_partner(&self, partner: Arc<Packet<T>>) {
        // SAFETY: our caller's contract: nobody else touches the cell.
        self.partner
            .with_mut(|p| unsafe { *p = Arc::into_raw(partner) });
    }

    /// A receiver's packet, shared, already reserved (invariant 7).
    fn reserved(waker: Waker) -> Arc<Self> {
        let packet = Packet::new(None, waker, None);
        packet.state.store(RESERVED, Ordering::Relaxed);
        packet
    }
}

/// Wakes the owner of a reserved packet just filled or let go; a waker
/// that panics goes on at this thread's next blocking operation (the
/// message, if any, is the owner's now).
fn wake_reserved<T>(packet: &Packet<T>) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: settled: no one replaces the waker any more; the
        // caller's reference keeps the packet alive.
        packet.waker.with(|w| unsafe { (*w).wake_by_ref() });
    })) {
        defer(payload);
    }
}

/// A waker that wakes nobody: for a packet made where no waker is at hand
/// (a `try_recv` that becomes a reserved partner), until its owner sets
/// its own ([`Rendezvous::rewake`]) and looks again.
fn no_waker() -> Waker {
    struct Nobody;
    impl std::task::Wake for Nobody {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    Waker::from(std::sync::Arc::new(Nobody))
}

/// A packet's waker: its own, or one its framed owner's [`Park`] lends for
/// the whole wait ([`Park::waker_ref`]), which saves a coroutine the
/// reference count a waker of its own would move twice per block.
pub(crate) struct PacketWaker {
    waker: ManuallyDrop<Waker>,
    /// Whether `waker` is ours to drop.
    owned: bool,
}

impl PacketWaker {
    fn owned(waker: Waker) -> Self {
        PacketWaker {
            waker: ManuallyDrop::new(waker),
            owned: true,
        }
    }

    /// A copy of `waker` that is never dropped.
    ///
    /// # Safety
    /// `waker` must stay alive while the copy is used: the packet that holds
    /// it is framed in the `wait` of the park that lent it (invariant 3).
    unsafe fn lent(waker: &Waker) -> Self {
        PacketWaker {
            // SAFETY: a bitwise copy that is never dropped (`owned` is
            // false), so the count it does not own never moves; the caller
            // keeps the original alive while it is used.
            waker: ManuallyDrop::new(unsafe { std::ptr::read(waker) }),
            owned: false,
        }
    }
}

impl std::ops::Deref for PacketWaker {
    type Target = Waker;

    #[inline]
    fn deref(&self) -> &Waker {
        &self.waker
    }
}

impl Drop for PacketWaker {
    #[inline]
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: ours, and dropped once: this is the only place.
            unsafe { ManuallyDrop::drop(&mut self.waker) }
        }
    }
}

/// What a party waiting with a packet learns when it looks again.
pub(crate) enum Settled<T> {
    /// Still queued.
    Waiting,
    /// Served: a sender's message was taken (`None`), or a receiver got one.
    Done(Option<T>),
    /// The other side disconnected: a sender gets its message back.
    Dismissed(Option<T>),
    /// A framed receiver's packet: a select's send reserved it, and the
    /// wait goes on on this shared packet (invariant 7).
    Moved(Arc<Packet<T>>),
    /// A reserved packet let go by its select's send without a message:
    /// nothing was received; arrive again.
    Retry,
    /// Out of its queue but not settled: a select's send reserved it and
    /// will fill it ([`Rendezvous::withdraw`] only).
    Reserved,
}

/// The outcome of arriving at the rendezvous.
pub(crate) enum Arrival<T> {
    /// A peer was waiting: served at once (a receiver gets the message).
    Served(Option<T>),
    /// Nobody was waiting; the packet is queued (only when asked to wait).
    Queued(Arc<Packet<T>>),
    /// Nobody was waiting and the caller does not wait: a sender's message
    /// comes back.
    Nobody(Option<T>),
    /// The other side is gone: a sender's message comes back.
    Disconnected(Option<T>),
    /// A receiver met a select's send that has no message yet: it waits on
    /// this reserved packet for the select to fill it (invariant 7).
    Partner(Arc<Packet<T>>),
}

/// What a select's send found to reserve ([`Rendezvous::reserve`]).
pub(crate) enum Reservation<T> {
    /// A receiver's packet, now the caller's to fill or let go.
    Reserved(Arc<Packet<T>>),
    /// No receiver waits.
    Nobody,
    /// No receiver waits, and the receivers are gone.
    Disconnected,
}

/// What a receive waiting on a reserved packet waits on, as a dump shows
/// it: its operation, then the packet's state, read when the dump is made.
/// A receive still parked on a packet that reads "filled" was not woken by
/// its filler: a lost wake-up, told at a glance rather than inferred.
struct FillWait<'a> {
    on: WaitingOn<'a>,
    state: &'a UpdtCell,
}

impl Describe for FillWait<'_> {
    fn op(&self) -> Op {
        self.on.kind()
    }

    fn describe(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Relaxed: a snapshot for a report.
        let state = match self.state.load(Ordering::Relaxed) {
            RESERVED => "not filled yet",
            DONE => "filled",
            RETRY => "let go",
            ABANDONED => "given up",
            _ => "settled",
        };
        write!(f, "{}; its packet: {state}", self.on)
    }
}

/// How a wait on a reserved packet ended ([`Rendezvous::wait_filled`]).
pub(crate) enum Filled<T> {
    /// Filled: the message.
    Got(T),
    /// Let go without a message: arrive again.
    Released,
    /// The deadline passed first, and the packet was abandoned.
    GaveUp,
}

/// A queued packet: shared with its owner (a future's, a select's, or a
/// re-offered message's), or in the frame of a blocking `wait`
/// (invariant 3).
enum Entry<T> {
    Shared(Arc<Packet<T>>),
    Framed(NonNull<Packet<T>>),
}

impl<T> Entry<T> {
    fn packet(&self) -> &Packet<T> {
        match self {
            Entry::Shared(p) => p,
            // SAFETY: a framed packet's owner is blocked in `wait` until the
            // packet is out of its queue and settled with no `HANDING` mark,
            // and an entry is only reached from its queue (or by the peer
            // that took it out, before it clears the mark).
            Entry::Framed(p) => unsafe { p.as_ref() },
        }
    }

    /// Settles the packet (under the lock) as `state`: marked `HANDING`
    /// if it is framed, for [`Entry::wake`] to clear.
    fn settle(&self, state: usize) {
        let mark = if matches!(self, Entry::Framed(_)) {
            HANDING
        } else {
            0
        };
        // Release: see `look`.
        self.packet().state.store(state | mark, Ordering::Release);
    }

    /// After the lock: wakes the owner of the packet settled as `state`,
    /// then lets a framed packet go. A waker that panics still lets it go,
    /// and the panic goes on (to be deferred or re-thrown by the caller).
    #[inline]
    fn wake(self, state: usize) {
        struct Release<'a>(&'a UpdtCell, usize);
        impl Drop for Release<'_> {
            #[inline]
            fn drop(&mut self) {
                // Release: the owner may reuse the frame once it loads this.
                self.0.store(self.1, Ordering::Release);
            }
        }
        let packet = self.packet();
        let _release = matches!(self, Entry::Framed(_)).then(|| Release(&packet.state, state));
        // SAFETY: a settled packet's waker is only replaced under the lock
        // by its owner while WAITING, which it no longer is.
        packet.waker.with(|w| unsafe { (*w).wake_by_ref() });
    }
}

impl<T> Entry<T> {
    /// Wakes the owner of a packet just served. A waker may panic, and a
    /// sender's caller still holds a copy of the message it just handed
    /// over: the panic goes on only once that copy is forgotten
    /// (`rethrow_deferred`).
    #[inline]
    fn wake_served(self) {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| self.wake(DONE))) {
            defer(payload);
        }
    }
}

// SAFETY: a framed entry points at a `Packet<T>`, which is `Send + Sync`
// for `T: Send`, and it is only reached under the rendezvous lock or by the
// peer that took it out.
unsafe impl<T: Send> Send for Entry<T> {}

struct Queues<T> {
    senders: VecDeque<Entry<T>>,
    receivers: VecDeque<Entry<T>>,
}

impl<T> Queues<T> {
    /// Where parties of `side` wait.
    fn of(&mut self, side: Side) -> &mut VecDeque<Entry<T>> {
        match side {
            Side::Send => &mut self.senders,
            Side::Recv => &mut self.receivers,
        }
    }
}

/// The meeting point of a zero-capacity channel.
pub(crate) struct Rendezvous<T, L> {
    lock: L,
    /// Guarded by `lock`.
    queues: UnsafeCell<Queues<T>>,
    /// Mirrors of the queues' lengths, stored under the lock, loaded without
    /// it by readiness checks (select, async re-checks).
    senders_len: UpdtCell,
    receivers_len: UpdtCell,
}

// SAFETY: the queues are only touched with `lock` held; packets are
// `Send + Sync` for `T: Send`.
unsafe impl<T: Send, L: RawLock> Sync for Rendezvous<T, L> {}
// SAFETY: as above.
unsafe impl<T: Send, L: RawLock> Send for Rendezvous<T, L> {}

/// Which side a party is on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Send,
    Recv,
}

impl Side {
    /// The side a party of this side meets.
    pub(crate) fn other(self) -> Side {
        match self {
            Side::Send => Side::Recv,
            Side::Recv => Side::Send,
        }
    }
}

impl<T, L: RawLock> Rendezvous<T, L> {
    pub(crate) fn new() -> Self {
        Rendezvous {
            lock: L::new(),
            queues: UnsafeCell::new(Queues {
                senders: VecDeque::new(),
                receivers: VecDeque::new(),
            }),
            senders_len: UpdtCell::new(0),
            receivers_len: UpdtCell::new(0),
        }
    }

    #[inline(always)]
    fn locked<R>(&self, f: impl FnOnce(&mut Queues<T>) -> R) -> R {
        self.lock.lock();
        // SAFETY: we hold the lock, so nobody else touches the queues.
        let r = self.queues.with_mut(|q| f(unsafe { &mut *q }));
        self.lock.unlock();
        r
    }

    fn store_lens(&self, q: &Queues<T>) {
        self.store_len(q, Side::Send);
        self.store_len(q, Side::Recv);
    }

    /// Mirrors the length of `side`'s queue, after a change to it.
    #[inline]
    fn store_len(&self, q: &Queues<T>, side: Side) {
        // Relaxed: hints for readiness checks; a waiter's re-check is
        // ordered by its registration's fence and the queuer's notify.
        match side {
            Side::Send => self.senders_len.store(q.senders.len(), Ordering::Relaxed),
            Side::Recv => self
                .receivers_len
                .store(q.receivers.len(), Ordering::Relaxed),
        }
    }

    /// Whether a party of `side` is queued, looked at under the lock: the
    /// re-check of a select or future of the other side, registered on its
    /// waiter list and waiting for a partner to appear. A blocking `wait`
    /// that queues looks at that list under the same lock (`watched`), so
    /// either this sees its packet or it sees the registration and
    /// notifies: the lock orders the two, and no fence is needed on the
    /// queuing side (an uncontended blocking hand-off, the common case,
    /// pays none).
    ///
    /// A select's own packets (`own`, its token) do not count: a select
    /// with a send and a receive on one channel waits with a packet on each
    /// side, and must not take itself for a partner. Nor, for a select's
    /// receive, does another select's message-less send: that select sees
    /// this one's receive packet in its own re-check (or is woken by its
    /// queuing) and reserves it. Were both to act, each would withdraw its
    /// packets to complete with the other's, find them withdrawn too, and
    /// block again, a dance that only timing ends (and that loom, which can
    /// schedule it for ever, never finishes exploring).
    pub(crate) fn has_peers_locked(&self, side: Side, own: Option<&Arc<Token>>) -> bool {
        self.locked(|q| match own {
            None => !q.of(side).is_empty(),
            Some(own) => q.of(side).iter().any(|e| {
                let packet = e.packet();
                match &packet.token {
                    None => true,
                    Some((token, _)) if Arc::ptr_eq(token, own) => false,
                    // SAFETY: under the lock, on a queued (WAITING) packet.
                    Some(_) => side == Side::Recv || packet.msg.with(|m| unsafe { (*m).is_some() }),
                }
            }),
        })
    }

    /// Whether a blocked sender is waiting (so a receive would complete).
    pub(crate) fn has_senders(&self) -> bool {
        self.senders_len.load(Ordering::Relaxed) != 0
    }

    /// Whether a blocked receiver is waiting (so a send would complete).
    pub(crate) fn has_receivers(&self) -> bool {
        self.receivers_len.load(Ordering::Relaxed) != 0
    }

    /// A party arrives: a sender with `msg` (`Some`), a receiver with
    /// `None`. If a peer of the other side waits, serves it (or is served
    /// by it); else, if `waker` is given, queues a packet with it.
    /// `other_gone` is read under the lock (invariant 4).
    #[inline]
    pub(crate) fn arrive(
        &self,
        side: Side,
        msg: Option<T>,
        waker: Option<&dyn Fn() -> Waker>,
        other_gone: &impl Fn() -> bool,
    ) -> Arrival<T> {
        if waker.is_none() {
            // A try that finds no peer queued changes nothing, so it need
            // not take the lock to say so: every blocking send tries first,
            // and a sender that comes before its receiver finds nobody. The
            // mirror may lag a peer that is queuing just now; the try then
            // takes effect before that peer queued, and a caller that goes
            // on to wait arrives again under the lock (and a select
            // re-checks under the lock, or is notified: invariant 2).
            let peers_waiting = match side {
                Side::Send => self.has_receivers(),
                Side::Recv => self.has_senders(),
            };
            if !peers_waiting {
                return if other_gone() {
                    Arrival::Disconnected(msg)
                } else {
                    Arrival::Nobody(msg)
                };
            }
        }
        self.arrive_at(side, msg, waker, &other_gone, false)
    }

    /// [`arrive`](Self::arrive), queuing a shared packet with the waker
    /// `wait` makes, if given, at the front of the side's queue if `first`.
    #[inline(always)]
    fn arrive_at<W: FnOnce() -> Waker>(
        &self,
        side: Side,
        msg: Option<T>,
        wait: Option<W>,
        other_gone: &impl Fn() -> bool,
        first: bool,
    ) -> Arrival<T> {
        let mut msg = msg;
        let mut wait = wait;
        let mut partner = None;
        let served = self.locked(|q| {
            // A receiver that meets a select's message-less send waits for
            // it on a packet of its own, with the waker it would queue with
            // (a try has none: its caller sets one, `Arrival::Partner`).
            let partner_waker = || match wait.take() {
                Some(make_waker) => make_waker(),
                None => no_waker(),
            };
            if let Some(peer) = self.serve_locked(q, side, &mut msg, (partner_waker, &mut partner))
            {
                return Ok(peer);
            }
            if other_gone() {
                return Err(None);
            }
            let make_waker = wait.take().ok_or(None)?;
            let packet = Packet::new(msg.take(), make_waker(), None);
            let entry = Entry::Shared(packet.clone());
            let queue = q.of(side);
            if first {
                queue.push_front(entry);
            } else {
                queue.push_back(entry);
            }
            self.store_len(q, side);
            Err(Some(packet))
        });
        match served {
            Ok(peer) => {
                peer.wake_served();
                match partner {
                    Some(partner) => Arrival::Partner(partner),
                    None => Arrival::Served(msg),
                }
            }
            Err(Some(packet)) => Arrival::Queued(packet),
            Err(None) if other_gone() => Arrival::Disconnected(msg),
            Err(None) => Arrival::Nobody(msg),
        }
    }

    /// Under the lock, a party of `side` meets the oldest live packet of the
    /// other side, if one waits: moves the message (`msg` into a receiver's
    /// packet, or a sender's into `msg`) and settles the packet `DONE`, to be
    /// woken ([`Entry::wake_served`]) once the lock is released. Stale
    /// select packets met on the way are dismissed (invariant 5).
    ///
    /// A receiver that meets a select's send with no message yet (a
    /// `Select` send, or a `select!` send whose message is not made) cannot
    /// take one: it hands the select a reserved packet of its own, made with
    /// the waker `partner.0` makes, to fill once it wakes, and finds that
    /// packet in `partner.1` (invariant 7). (An out-parameter, not a part
    /// of the result: every hop returns its entry, and a wider result costs
    /// each one.)
    #[inline(always)]
    fn serve_locked(
        &self,
        q: &mut Queues<T>,
        side: Side,
        msg: &mut Option<T>,
        partner: (impl FnOnce() -> Waker, &mut Option<Arc<Packet<T>>>),
    ) -> Option<Entry<T>> {
        let peers = q.of(side.other());
        if peers.is_empty() {
            return None;
        }
        while let Some(peer) = peers.pop_front() {
            let packet = peer.packet();
            if let Some((token, index)) = &packet.token {
                if !token.decide(index + 1) {
                    // Stale: its select completed something else (a
                    // select's packet is shared: nobody to hand to).
                    peer.settle(DISMISSED);
                    continue;
                }
                // SAFETY: under the lock, on a packet still WAITING.
                let empty = packet.msg.with(|m| unsafe { (*m).is_none() });
                if side == Side::Recv && empty {
                    let (make_waker, slot) = partner;
                    let reserved = Packet::reserved(make_waker());
                    // SAFETY: as above; the owner takes it once DONE.
                    unsafe { packet.set_partner(reserved.clone()) };
                    *slot = Some(reserved);
                    peer.settle(DONE);
                    self.store_len(q, side.other());
                    return Some(peer);
                }
            }
            // SAFETY: under the lock, on a packet still WAITING (a queued
            // packet is WAITING): nobody else touches it.
            packet.msg.with_mut(|m| unsafe {
                match side {
                    Side::Send => *m = msg.take(),
                    Side::Recv => *msg = (*m).take(),
                }
            });
            // The message moved above is the owner's once it loads DONE
            // (Acquire).
            peer.settle(DONE);
            self.store_len(q, side.other());
            return Some(peer);
        }
        // Only stale packets were there.
        self.store_len(q, side.other());
        None
    }

    /// A blocked select queues a packet of `side` for its operation
    /// `index`, decided through `token` (invariant 5): a receive's, or a
    /// send's with its message if it is made (else a receiver that serves
    /// it hands over a partner to fill, invariant 7). It does not serve a
    /// waiting peer: the select's re-check sees one.
    pub(crate) fn queue_select(
        &self,
        side: Side,
        msg: Option<T>,
        waker: Waker,
        token: &Arc<Token>,
        index: usize,
    ) -> Arc<Packet<T>> {
        let packet = Packet::new(msg, waker, Some((token.clone(), index)));
        self.locked(|q| {
            q.of(side).push_back(Entry::Shared(packet.clone()));
            self.store_len(q, side);
        });
        packet
    }

    /// A select's send picked on a zero-capacity channel reserves the
    /// oldest live receiver (invariant 7): out of its queue, to be filled
    /// ([`fill`](Self::fill)) or let go ([`release`](Self::release)).
    pub(crate) fn reserve(&self, receivers_gone: &impl Fn() -> bool) -> Reservation<T> {
        if !self.has_receivers() {
            return if receivers_gone() {
                Reservation::Disconnected
            } else {
                Reservation::Nobody
            };
        }
        let reserved = self.locked(|q| {
            while let Some(peer) = q.receivers.pop_front() {
                let packet = peer.packet();
                if let Some((token, index)) = &packet.token {
                    if !token.decide(index + 1) {
                        peer.settle(DISMISSED);
                        continue;
                    }
                }
                self.store_len(q, Side::Recv);
                return Some(match peer {
                    Entry::Shared(packet) => {
                        // Release: pairs with the owner's look, as a settle.
                        packet.state.store(RESERVED, Ordering::Release);
                        packet
                    }
                    Entry::Framed(_) => {
                        // Its frame cannot wait for us if its owner gives
                        // up: the reservation moves to a shared packet that
                        // wakes the same owner, and the framed one is
                        // settled `MOVED` (no mark: we touch it no more).
                        // SAFETY: under the lock, on a WAITING packet.
                        let waker = packet.waker.with(|w| unsafe { (**w).clone() });
                        let partner = Packet::reserved(waker);
                        // SAFETY: as above; the owner takes it once MOVED.
                        unsafe { packet.set_partner(partner.clone()) };
                        packet.state.store(MOVED, Ordering::Release);
                        partner
                    }
                });
            }
            self.store_len(q, Side::Recv);
            None
        });
        match reserved {
            Some(packet) => Reservation::Reserved(packet),
            None if receivers_gone() => Reservation::Disconnected,
            None => Reservation::Nobody,
        }
    }

    /// Fills a packet this party reserved (or was handed as a partner)
    /// with `msg` and wakes its owner; `Err(msg)` if the owner gave up on
    /// it first (then the message goes elsewhere, as an unreserved send).
    pub(crate) fn fill(&self, packet: &Packet<T>, msg: T) -> Result<(), T> {
        let mut msg = Some(msg);
        let filled = self.unreserve(packet, DONE, || {
            // SAFETY: under the lock, on a RESERVED packet: its owner only
            // looks at the state, and gives up under the lock.
            packet.msg.with_mut(|m| unsafe { *m = msg.take() });
        });
        match msg {
            Some(msg) if !filled => Err(msg),
            _ => {
                // The caller's copy is gone: a panicking waker goes on at
                // its next blocking operation, as for a served receiver.
                wake_reserved(packet);
                Ok(())
            }
        }
    }

    /// Lets a reserved packet go without a message: its owner arrives
    /// again (or, a select, retries).
    pub(crate) fn release(&self, packet: &Packet<T>) {
        if self.unreserve(packet, RETRY, || {}) {
            wake_reserved(packet);
        }
    }

    /// Under the lock, if `packet` is still `RESERVED`: runs `before` (which
    /// may touch the packet's cells, as the lock allows) and moves it to
    /// `state`. Whether it was reserved: every way out of a reservation
    /// (fill, release, give-up) goes through here, so exactly one wins.
    fn unreserve(&self, packet: &Packet<T>, state: usize, before: impl FnOnce()) -> bool {
        self.locked(|_| {
            // Relaxed: under the lock, which orders every store to it.
            let reserved = packet.state.load(Ordering::Relaxed) == RESERVED;
            if reserved {
                before();
                // Release: pairs with the owner's look.
                packet.state.store(state, Ordering::Release);
            }
            reserved
        })
    }

    /// The owner of a shared packet gives up on it: takes it out of its
    /// queue, or, reserved, abandons it (its filler sends elsewhere).
    /// Never `Waiting` or `Reserved`.
    pub(crate) fn give_up(&self, side: Side, packet: &Packet<T>) -> Settled<T> {
        match self.withdraw(side, packet) {
            Settled::Reserved => {
                if self.unreserve(packet, ABANDONED, || {}) {
                    Settled::Dismissed(None)
                } else {
                    // Filled or let go meanwhile.
                    self.look(packet)
                }
            }
            settled => settled,
        }
    }

    /// Waits through `park`, until `deadline` if there is one, for the
    /// select that holds `partner` (a receiver's reserved packet) to fill
    /// it or let it go.
    #[cold]
    #[inline(never)]
    pub(crate) fn wait_filled(
        &self,
        partner: &Packet<T>,
        park: &dyn Park,
        on: WaitingOn<'_>,
        deadline: Option<Instant>,
    ) -> Filled<T> {
        let outcome = |settled: Settled<T>| match settled {
            Settled::Done(got) => Filled::Got(got.expect("a filled packet holds a message")),
            Settled::Retry => Filled::Released,
            _ => Filled::GaveUp,
        };
        let on = FillWait {
            on,
            state: &partner.state,
        };
        let on = WaitingOn::on(&on);
        loop {
            match self.look(partner) {
                Settled::Waiting => {}
                settled => return outcome(settled),
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return outcome(self.give_up(Side::Recv, partner));
            }
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| park.park_on(deadline, on))) {
                // As a plain receive unwinding: a message handed over
                // stands, and the unwinding goes on later.
                if let Filled::Got(msg) = outcome(self.give_up(Side::Recv, partner)) {
                    defer(payload);
                    return Filled::Got(msg);
                }
                resume_unwind(payload);
            }
        }
    }

    /// Looks at a queued packet's state, without the lock. A framed packet
    /// still marked `HANDING` is waited out (its peer is between two
    /// stores, the wake between them), so what comes back is final.
    pub(crate) fn look(&self, packet: &Packet<T>) -> Settled<T> {
        let mut backoff = Backoff::new();
        loop {
            // Acquire: pairs with the peer's (or the dismisser's) Release.
            match packet.state.load(Ordering::Acquire) {
                WAITING | RESERVED => return Settled::Waiting,
                DONE => return Settled::Done(packet.take_settled()),
                DISMISSED => return Settled::Dismissed(packet.take_settled()),
                MOVED => {
                    let partner = packet.take_partner();
                    return Settled::Moved(partner.expect("a moved packet has its partner"));
                }
                RETRY => return Settled::Retry,
                _ => backoff.snooze(),
            }
        }
    }

    /// The owner gives up waiting (timeout, a dropped future, unwinding):
    /// takes its packet out of its queue if it is still there. Returns the
    /// packet's settled state; `Waiting` never comes back.
    pub(crate) fn withdraw(&self, side: Side, packet: &Packet<T>) -> Settled<T> {
        let removed = self.locked(|q| {
            let queue = q.of(side);
            let Some(at) = queue.iter().position(|p| std::ptr::eq(p.packet(), packet)) else {
                // Relaxed: under the lock, which orders every store to it.
                return Err(packet.state.load(Ordering::Relaxed) == RESERVED);
            };
            queue.remove(at);
            self.store_lens(q);
            Ok(())
        });
        match removed {
            // Out of the queue, under the lock, while WAITING: ours alone.
            Ok(()) => Settled::Dismissed(packet.take_settled()),
            Err(true) => Settled::Reserved,
            // Settled before we got the lock; the lock ordered it.
            Err(false) => match self.look(packet) {
                Settled::Waiting => unreachable!("a packet out of its queue is settled"),
                settled => settled,
            },
        }
    }

    /// An async owner polled again with `waker`: makes it the one a peer
    /// wakes, if the packet is still queued (`true`). `false`: the packet
    /// was settled meanwhile; look again.
    pub(crate) fn rewake(&self, packet: &Packet<T>, waker: &Waker) -> bool {
        self.locked(|_| {
            // Relaxed: under the lock, which orders every store to it.
            let state = packet.state.load(Ordering::Relaxed);
            let waiting = state == WAITING || state == RESERVED;
            if waiting {
                // SAFETY: under the lock, on a WAITING packet: a peer reads
                // the waker only after settling the packet under the lock.
                packet.waker.with_mut(|w| unsafe {
                    if !(*w).will_wake(waker) {
                        *w = PacketWaker::owned(waker.clone());
                    }
                });
            }
            waiting
        })
    }

    /// A receiver that was handed `msg` but will not return it (a dropped
    /// future, a cancelled coroutine): the message goes on to a waiting
    /// receiver, or waits, ownerless, for the next one (dropped if the
    /// receivers all go). The sender was told it was delivered; it is never
    /// lost. It waits at the front, ahead of its sender's later messages if
    /// they are still waiting (one that another receiver took meanwhile has
    /// overtaken it). Returns whether it was queued (the caller then wakes
    /// the receivers' waiter list).
    pub(crate) fn reoffer(&self, msg: T, receivers_gone: &dyn Fn() -> bool) -> bool {
        match self.arrive_at(Side::Send, Some(msg), Some(no_waker), &receivers_gone, true) {
            Arrival::Queued(_) => true,
            // Served, or no receiver left: dropped with the channel's end.
            _ => false,
        }
    }

    /// One side disconnected: dismisses every packet of the other side
    /// (`Side::Send`: the receivers are gone, dismiss the senders).
    pub(crate) fn dismiss(&self, side: Side) {
        let dismissed = self.locked(|q| {
            let queue = q.of(side);
            let all = std::mem::take(queue);
            for p in &all {
                p.settle(DISMISSED);
            }
            self.store_lens(q);
            all
        });
        let mut panicked = None;
        for p in dismissed {
            // Every owner is woken and let go, even if a waker panics.
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| p.wake(DISMISSED))) {
                panicked.get_or_insert(payload);
            }
        }
        if let Some(payload) = panicked {
            resume_unwind(payload);
        }
    }

    /// A blocking send or receive on behalf of a thread or coroutine:
    /// arrives, and if it has to wait, parks through `park` until served,
    /// dismissed or past `deadline`. `Ok` carries what a receiver got;
    /// `Err` gives a sender's message back (`Err(None)` for a receiver),
    /// with `true` for a timeout and `false` for disconnection.
    ///
    /// One copy per side (`RECV`): every choice that depends on the side
    /// is made when it is compiled, and a sender's copy has none of a
    /// receiver's partner handling (invariant 7).
    pub(crate) fn wait<const RECV: bool>(
        &self,
        msg: Option<T>,
        park: &dyn Park,
        deadline: Option<Instant>,
        chan: &impl Peers,
    ) -> Result<Option<T>, (Option<T>, bool)> {
        let side = if RECV { Side::Recv } else { Side::Send };
        let other_gone = || chan.gone(side);
        // A park that lends its waker saves the reference count a waker of
        // its own would move twice per block; one that does not makes one,
        // kept here, beside the packet, rather than in it.
        let owned;
        let waker = match park.waker_ref() {
            Some(lent) => lent,
            None => {
                owned = park.waker();
                &owned
            }
        };
        // SAFETY: the waker is the park's (lent for as long as it is
        // borrowed, which is the whole of this call) or `owned` (declared
        // before the packet, so dropped after it), and the packet it goes
        // in is framed here: out of its queue, and no longer read by any
        // peer, before this call returns or unwinds (invariant 3).
        let waker = unsafe { PacketWaker::lent(waker) };
        // Made before the lock, in this frame, which it does not leave: a
        // peer reaches it only through its queue (invariant 3). Never
        // dropped: on every way out its message was taken (or, unwinding, a
        // sender's copy is forgotten anyway), its waker is lent, and it has
        // no token and no partner left (`look` takes a moved packet's), so
        // there is nothing to drop, and a hop pays no drop glue for it.
        let packet = &*ManuallyDrop::new(Packet::framed(msg, waker));
        let mut partner = None;
        let met = self.locked(
            #[inline(always)]
            |q| {
                let served = packet.msg.with_mut(|m| {
                    // SAFETY: the packet is not queued yet: ours alone.
                    let msg = unsafe { &mut *m };
                    // SAFETY: as above.
                    let waker = || packet.waker.with(|w| unsafe { (**w).clone() });
                    self.serve_locked(q, side, msg, (waker, &mut partner))
                });
                if let Some(peer) = served {
                    return Met::Served(peer);
                }
                if other_gone() {
                    return Met::Gone;
                }
                q.of(side).push_back(Entry::Framed(NonNull::from(packet)));
                self.store_len(q, side);
                // A plain look, ordered by this lock (see `has_peers_locked`).
                Met::Queued {
                    watched: chan.watched(side),
                }
            },
        );
        let watched = match met {
            // Served at once: a receiver's message is in its packet now.
            Met::Served(peer) => {
                peer.wake_served();
                if let Some(partner) = partner {
                    return self.wait_partner(partner, park, deadline, chan);
                }
                return Ok(packet.take_settled());
            }
            Met::Gone => return Err((packet.take_settled(), false)),
            Met::Queued { watched } => watched,
        };
        // Whatever happens from here (a panicking waker in `notify`, an
        // unwinding park), the packet leaves its queue before this frame
        // does (invariant 3).
        let guard = StaysQueued {
            rendezvous: self,
            side,
            packet,
            armed: true,
        };
        // A select of the other side may be waiting for a partner to
        // appear.
        if watched {
            chan.notify(side);
        }
        let settled = loop {
            match self.look(packet) {
                Settled::Waiting => {}
                settled => break settled,
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break self.withdraw(side, packet);
            }
            // A coroutine cancelled at shutdown unwinds out of its park. If
            // a peer served the packet first, the hand-off stands: a
            // sender reports success (its caller forgets its copy), a
            // receiver returns its message, and the unwinding goes on
            // later (`rethrow_deferred`: for a sender once its copy is
            // forgotten; for a receiver at its next blocking operation or
            // suspension, or never if it finishes first). Else the packet
            // leaves the queue and the unwinding goes on at once, the
            // message still the caller's.
            let on = chan.waiting_on::<RECV>();
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| park.park_on(deadline, on))) {
                let mut guard = guard;
                guard.armed = false;
                let settled = match self.withdraw(side, packet) {
                    // Reserved meanwhile: give the shared packet up too.
                    Settled::Moved(partner) => self.give_up(side, &partner),
                    settled => settled,
                };
                match settled {
                    Settled::Done(got) => {
                        defer(payload);
                        return Ok(got);
                    }
                    settled => {
                        // A sender's copy is the caller's duplicate.
                        if let Settled::Dismissed(Some(copy)) = settled {
                            std::mem::forget(copy);
                        }
                        resume_unwind(payload);
                    }
                }
            }
        };
        // Settled: out of its queue, no mark left.
        let mut guard = guard;
        guard.armed = false;
        match settled {
            Settled::Done(got) => Ok(got),
            // Reserved by a select's send: wait on the shared packet (past
            // the deadline, it gives up there).
            Settled::Moved(partner) => self.wait_partner(partner, park, deadline, chan),
            // Withdrawn at the deadline (or dismissed just then).
            Settled::Dismissed(back) if !other_gone() => Err((back, true)),
            Settled::Dismissed(back) => Err((back, false)),
            Settled::Waiting | Settled::Retry | Settled::Reserved => {
                unreachable!("a framed packet is never reserved itself")
            }
        }
    }

    /// The rest of a blocking receive that a select's send reserved, or
    /// that met a select's message-less send (invariant 7): waits on the
    /// shared packet for the message; let go unsent, arrives again, as a
    /// new receive. Out of line: no hop between plain parties comes here.
    #[cold]
    #[inline(never)]
    fn wait_partner(
        &self,
        partner: Arc<Packet<T>>,
        park: &dyn Park,
        deadline: Option<Instant>,
        chan: &impl Peers,
    ) -> Result<Option<T>, (Option<T>, bool)> {
        match self.wait_filled(&partner, park, chan.awaiting_fill(), deadline) {
            Filled::Got(got) => Ok(Some(got)),
            Filled::GaveUp => Err((None, !chan.gone(Side::Recv))),
            Filled::Released => self.wait::<true>(None, park, deadline, chan),
        }
    }
}

/// What a blocking [`Rendezvous::wait`] needs of its channel, about the
/// side its party meets.
pub(crate) trait Peers {
    /// What a receive (`RECV`) or a send waiting on the channel waits on.
    fn waiting_on<const RECV: bool>(&self) -> WaitingOn<'_>;

    /// What a receive waiting for a selecting send's fill of a shared
    /// packet waits on.
    fn awaiting_fill(&self) -> WaitingOn<'_>;

    /// Whether the other side's endpoints are all gone; read under the lock
    /// (invariant 4).
    fn gone(&self, side: Side) -> bool;

    /// Under the lock, right after a packet of `side` was queued: whether a
    /// select or future of the other side may be registered on its waiter
    /// list, waiting for a partner (see [`Rendezvous::has_peers_locked`]).
    fn watched(&self, side: Side) -> bool;

    /// After the lock, if [`watched`](Peers::watched): wakes one of them.
    fn notify(&self, side: Side);
}

/// What a blocking `wait` found under the lock.
enum Met<T> {
    /// A peer of the other side, served (a receiver that met a select's
    /// message-less send then waits on the partner it handed over).
    Served(Entry<T>),
    /// Nobody, and the other side is gone.
    Gone,
    /// Nobody: the packet is queued; `watched` if a select or future of the
    /// other side may be registered on that side's waiter list.
    Queued { watched: bool },
}

/// Takes a framed packet out of its queue if its `wait` leaves early
/// (unwinds), so that no peer is left pointing into a dead frame.
struct StaysQueued<'a, T, L: RawLock> {
    rendezvous: &'a Rendezvous<T, L>,
    side: Side,
    packet: &'a Packet<T>,
    armed: bool,
}

impl<T, L: RawLock> Drop for StaysQueued<'_, T, L> {
    #[inline]
    fn drop(&mut self) {
        if self.armed {
            // Its fields, not `self`: a guard passed by reference would have
            // to live in memory on every hop.
            leave(self.rendezvous, self.side, self.packet);
        }
    }
}

/// [`StaysQueued`]'s work: a message the packet got or still held is
/// dropped with the frame (the caller is unwinding, as a panic in a
/// blocking send or receive always did).
#[cold]
#[inline(never)]
fn leave<T, L: RawLock>(rendezvous: &Rendezvous<T, L>, side: Side, packet: &Packet<T>) {
    if let Settled::Moved(partner) = rendezvous.withdraw(side, packet) {
        drop(rendezvous.give_up(side, &partner));
    }
}
