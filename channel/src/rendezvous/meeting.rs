//! The meeting point itself: the two queues under the protocol's lock, and
//! what a party that arrives, reserves, fills, gives up or leaves does
//! there.

use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::task::Waker;
use std::time::Instant;

use crate::backoff::Backoff;
use crate::hook::{Park, WaitingOn};
use crate::lock::RawLock;
use crate::sync::{Arc, Ordering, UnsafeCell};
use crate::updt::UpdtCell;

use super::packet::{
    no_waker, wake_reserved, Arrival, Entry, FillWait, Filled, Packet, PacketWaker, Reservation,
    Settled, Token, ABANDONED, DISMISSED, DONE, MOVED, RESERVED, RETRY, WAITING,
};
use swco_wait::deferred::defer;

pub(super) struct Queues<T> {
    pub(super) senders: VecDeque<Entry<T>>,
    pub(super) receivers: VecDeque<Entry<T>>,
}

impl<T> Queues<T> {
    /// Where parties of `side` wait.
    pub(super) fn of(&mut self, side: Side) -> &mut VecDeque<Entry<T>> {
        match side {
            Side::Send => &mut self.senders,
            Side::Recv => &mut self.receivers,
        }
    }
}

/// The meeting point of a zero-capacity channel.
pub(crate) struct Rendezvous<T, L> {
    pub(super) lock: L,
    /// Guarded by `lock`.
    pub(super) queues: UnsafeCell<Queues<T>>,
    /// Mirrors of the queues' lengths, stored under the lock, loaded without
    /// it by readiness checks (select, async re-checks).
    pub(super) senders_len: UpdtCell,
    pub(super) receivers_len: UpdtCell,
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
    pub(super) fn locked<R>(&self, f: impl FnOnce(&mut Queues<T>) -> R) -> R {
        self.lock.lock();
        // SAFETY: we hold the lock, so nobody else touches the queues.
        let r = self.queues.with_mut(|q| f(unsafe { &mut *q }));
        self.lock.unlock();
        r
    }

    pub(super) fn store_lens(&self, q: &Queues<T>) {
        self.store_len(q, Side::Send);
        self.store_len(q, Side::Recv);
    }

    /// Mirrors the length of `side`'s queue, after a change to it.
    #[inline]
    pub(super) fn store_len(&self, q: &Queues<T>, side: Side) {
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
    pub(super) fn arrive_at<W: FnOnce() -> Waker>(
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
    pub(super) fn serve_locked(
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
    pub(super) fn unreserve(
        &self,
        packet: &Packet<T>,
        state: usize,
        before: impl FnOnce(),
    ) -> bool {
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
}
