//! The blocking wait of a thread or coroutine in a rendezvous (one copy per
//! side), and the channel as that wait sees it (`Peers`).

use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::time::Instant;

use crate::hook::{Park, WaitingOn};
use crate::lock::RawLock;
use crate::sync::Arc;

use super::meeting::{Rendezvous, Side};
use super::packet::{Entry, Filled, Packet, PacketWaker, Settled};
use swco_wait::deferred::defer;

impl<T, L: RawLock> Rendezvous<T, L> {
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
    pub(super) fn wait_partner(
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
pub(super) enum Met<T> {
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
pub(super) struct StaysQueued<'a, T, L: RawLock> {
    pub(super) rendezvous: &'a Rendezvous<T, L>,
    pub(super) side: Side,
    pub(super) packet: &'a Packet<T>,
    pub(super) armed: bool,
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
pub(super) fn leave<T, L: RawLock>(rendezvous: &Rendezvous<T, L>, side: Side, packet: &Packet<T>) {
    if let Settled::Moved(partner) = rendezvous.withdraw(side, packet) {
        drop(rendezvous.give_up(side, &partner));
    }
}
