//! The packets a waiting party queues in a rendezvous, their states, the
//! token a select's packets share, and the entries of the queues.

use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::task::Waker;

use crate::hook::{Describe, Op, WaitingOn};
use crate::sync::{Arc, Ordering, UnsafeCell};
use crate::updt::{UpdtCell, UpdtClaim};

use swco_wait::deferred::defer;

/// A queued packet's owner has not been served yet.
pub(super) const WAITING: usize = 0;
/// A peer took the message (a sender's packet) or put one in (a
/// receiver's).
pub(super) const DONE: usize = 1;
/// The other side disconnected while the packet was queued.
pub(super) const DISMISSED: usize = 2;
/// A framed packet's reservation moved to a shared packet (its `partner`):
/// a select's send reserved this receiver (invariant 7).
pub(super) const MOVED: usize = 3;
/// Added to `DONE` or `DISMISSED` on a packet in its owner's frame while
/// the peer that settled it still reads its waker (invariant 3).
pub(super) const HANDING: usize = 4;
/// A shared receiver's packet out of its queue, held by a select's send
/// that will fill it ([`Rendezvous::fill`](super::Rendezvous::fill)) or let it go
/// ([`Rendezvous::release`](super::Rendezvous::release)) (invariant 7).
pub(super) const RESERVED: usize = 8;
/// A reserved packet whose owner gave up on it (a deadline, a dropped
/// future, unwinding): its filler sends elsewhere.
pub(super) const ABANDONED: usize = 9;
/// A reserved packet let go without a message: its owner arrives again.
pub(super) const RETRY: usize = 10;

/// One blocked select's claim on its outcome, shared by the packets it
/// queued (invariant 5). An add-only claim guards it, whatever the
/// channels' protocols, so no CAS is reachable from an `Updt` channel.
pub(crate) struct Token {
    pub(super) claim: UpdtClaim,
    /// 0 while open; `i + 1` once a peer served the packet of operation
    /// `i`; [`CLOSED`] once the select decided for itself.
    pub(super) decided: UpdtCell,
}

pub(super) const CLOSED: usize = usize::MAX;

impl Token {
    pub(crate) fn new() -> Arc<Token> {
        Arc::new(Token {
            claim: UpdtClaim::new(),
            decided: UpdtCell::new(0),
        })
    }

    /// Decides the token for `value` if it is still open.
    pub(super) fn decide(&self, value: usize) -> bool {
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
    pub(super) state: UpdtCell,
    /// A sender's message, or the place for a receiver's. Touched under the
    /// lock, or by the owner once `state` is no longer `WAITING`.
    pub(super) msg: UnsafeCell<Option<T>>,
    /// Wakes the owner. Replaced (under the lock) when an async owner is
    /// polled with another waker.
    pub(super) waker: UnsafeCell<PacketWaker>,
    /// A select's packet: its token and the operation's index.
    pub(super) token: Option<(Arc<Token>, usize)>,
    /// The reserved packet this one leads to (invariant 7): on a select's
    /// message-less send packet, the receiver's that served it; on a framed
    /// receiver's packet settled `MOVED`, the shared one its reservation
    /// moved to. Written under the lock before the state leaves `WAITING`,
    /// taken by the owner after. Held as `Arc::into_raw` (null: none), so
    /// that dropping a packet with none (a blocking `wait`'s, every hop)
    /// is one test, not the drop of an `Option<Arc>`.
    pub(super) partner: UnsafeCell<*const Packet<T>>,
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
    pub(super) fn drop_partner(&self) {
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
    pub(super) fn framed(msg: Option<T>, waker: PacketWaker) -> Self {
        Packet {
            state: UpdtCell::new(WAITING),
            msg: UnsafeCell::new(msg),
            waker: UnsafeCell::new(waker),
            token: None,
            partner: UnsafeCell::new(std::ptr::null()),
        }
    }

    /// A packet shared with its owner (a future, a select, a re-offer).
    pub(super) fn new(
        msg: Option<T>,
        waker: Waker,
        token: Option<(Arc<Token>, usize)>,
    ) -> Arc<Self> {
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
    pub(super) fn take_settled(&self) -> Option<T> {
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
    pub(super) unsafe fn set_partner(&self, partner: Arc<Packet<T>>) {
        // SAFETY: our caller's contract: nobody else touches the cell.
        self.partner
            .with_mut(|p| unsafe { *p = Arc::into_raw(partner) });
    }

    /// A receiver's packet, shared, already reserved (invariant 7).
    pub(super) fn reserved(waker: Waker) -> Arc<Self> {
        let packet = Packet::new(None, waker, None);
        packet.state.store(RESERVED, Ordering::Relaxed);
        packet
    }
}

/// Wakes the owner of a reserved packet just filled or let go; a waker
/// that panics goes on at this thread's next blocking operation (the
/// message, if any, is the owner's now).
pub(super) fn wake_reserved<T>(packet: &Packet<T>) {
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
/// its own ([`Rendezvous::rewake`](super::Rendezvous::rewake)) and looks again.
pub(super) fn no_waker() -> Waker {
    struct Nobody;
    impl std::task::Wake for Nobody {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    Waker::from(std::sync::Arc::new(Nobody))
}

/// A packet's waker: its own, or one its framed owner's [`Park`](crate::hook::Park) lends for
/// the whole wait ([`Park::waker_ref`](crate::hook::Park::waker_ref)), which saves a coroutine the
/// reference count a waker of its own would move twice per block.
pub(crate) struct PacketWaker {
    pub(super) waker: ManuallyDrop<Waker>,
    /// Whether `waker` is ours to drop.
    pub(super) owned: bool,
}

impl PacketWaker {
    pub(super) fn owned(waker: Waker) -> Self {
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
    pub(super) unsafe fn lent(waker: &Waker) -> Self {
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
    /// will fill it ([`Rendezvous::withdraw`](super::Rendezvous::withdraw) only).
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

/// What a select's send found to reserve ([`Rendezvous::reserve`](super::Rendezvous::reserve)).
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
pub(super) struct FillWait<'a> {
    pub(super) on: WaitingOn<'a>,
    pub(super) state: &'a UpdtCell,
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

/// How a wait on a reserved packet ended ([`Rendezvous::wait_filled`](super::Rendezvous::wait_filled)).
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
pub(super) enum Entry<T> {
    Shared(Arc<Packet<T>>),
    Framed(NonNull<Packet<T>>),
}

impl<T> Entry<T> {
    pub(super) fn packet(&self) -> &Packet<T> {
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
    pub(super) fn settle(&self, state: usize) {
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
    pub(super) fn wake(self, state: usize) {
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
    pub(super) fn wake_served(self) {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| self.wake(DONE))) {
            defer(payload);
        }
    }
}

// SAFETY: a framed entry points at a `Packet<T>`, which is `Send + Sync`
// for `T: Send`, and it is only reached under the rendezvous lock or by the
// peer that took it out.
unsafe impl<T: Send> Send for Entry<T> {}
