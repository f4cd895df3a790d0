//! A select's operations on zero-capacity channels: the packets a blocked
//! select waits with in their rendezvous (`rendezvous/mod.rs`, invariants 5
//! and 7), seen by the engine through one trait, [`InRendezvous`], that an
//! operation hands out ([`Op::in_rendezvous`](crate::select::Op::in_rendezvous))
//! only when its channel has capacity 0. The operations' own files call
//! the functions here for their rendezvous work, so that what a select
//! does in a rendezvous is in this one file.

use std::time::Instant;

use crate::chan::Chan;
use crate::error::SendError;
use crate::hook::Park;
use crate::lock::RawLock;
use crate::rendezvous::{Filled, Packet, Rendezvous, Reservation, Settled, Side, Token};
use crate::sync::Arc;
use crate::{Mode, Protocol, Sender};

/// The part of an operation that waits in a rendezvous while its select is
/// blocked, with a packet decided through the select's token.
pub(crate) trait InRendezvous {
    /// Queues this operation's packet, decided through `token`.
    fn queue_packet(&mut self, park: &dyn Park, token: &Arc<Token>, index: usize);

    /// Takes the packet back, once the token is decided. `served`: the
    /// token was decided for this operation, so keep what its packet got;
    /// otherwise (only while unwinding) a message it got anyway goes on to
    /// the next receiver, and a partner it was handed is let go.
    fn settle_packet(&mut self, served: bool) -> PacketOutcome;

    /// After [`PacketOutcome::Reserved`]: waits through `park` (if any;
    /// else gives up at once, as when unwinding), until `deadline`, for
    /// the select's send that reserved this receive to fill it. `true` if
    /// it got the message.
    fn await_fill(&mut self, _park: Option<&dyn Park>, _deadline: Option<Instant>) -> bool {
        false
    }
}

/// What an operation's rendezvous packet brought
/// ([`InRendezvous::settle_packet`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PacketOutcome {
    /// Nothing: withdrawn, dismissed, or let go.
    Nothing,
    /// The operation completed through it.
    Completed,
    /// A send was handed a receiver's packet to fill: it holds it, and its
    /// next attempt completes.
    Partner,
    /// A receive's packet was reserved by a select's send, which will fill
    /// it: [`InRendezvous::await_fill`].
    Reserved,
}

/// The rendezvous of `chan`, which an operation waiting in one is on.
fn zero_of<T, M: Mode, P: Protocol>(chan: &Chan<T, M, P>) -> &Rendezvous<T, P::Lock> {
    chan.zero().expect("a zero-capacity channel")
}

// ---- receives ----------------------------------------------------------------

/// A blocked select's receive queues its (empty) packet.
pub(crate) fn queue_recv_packet<T, M: Mode, P: Protocol>(
    chan: &Chan<T, M, P>,
    packet: &mut Option<Arc<Packet<T>>>,
    park: &dyn Park,
    token: &Arc<Token>,
    index: usize,
) {
    let zero = zero_of(chan);
    debug_assert!(packet.is_none());
    *packet = Some(zero.queue_select(Side::Recv, None, park.waker(), token, index));
    // Sends waiting in selects or futures may now meet us.
    chan.zero_queued(Side::Recv);
}

/// Takes a select's receive packet back: what it brought, and the message
/// if the receive completed with one (for the operation to keep). A
/// reserved packet stays, for [`await_recv_fill`], if `served`.
pub(crate) fn settle_recv_packet<T, M: Mode, P: Protocol>(
    chan: &Chan<T, M, P>,
    packet: &mut Option<Arc<Packet<T>>>,
    served: bool,
) -> (PacketOutcome, Option<T>) {
    let Some(taken) = packet.take() else {
        return (PacketOutcome::Nothing, None);
    };
    let zero = zero_of(chan);
    let settled = match zero.withdraw(Side::Recv, &taken) {
        Settled::Reserved if served => {
            *packet = Some(taken);
            return (PacketOutcome::Reserved, None);
        }
        Settled::Reserved => zero.give_up(Side::Recv, &taken),
        settled => settled,
    };
    match settled {
        Settled::Done(Some(msg)) => keep(chan, msg, served),
        _ => (PacketOutcome::Nothing, None),
    }
}

/// Waits for the send that reserved this receive's packet to fill it (see
/// [`InRendezvous::await_fill`]); the message, if it came.
pub(crate) fn await_recv_fill<T, M: Mode, P: Protocol>(
    chan: &Chan<T, M, P>,
    packet: &mut Option<Arc<Packet<T>>>,
    park: Option<&dyn Park>,
    deadline: Option<Instant>,
) -> Option<T> {
    let packet = packet.take().expect("a reserved packet");
    let zero = zero_of(chan);
    match park {
        Some(park) => {
            match zero.wait_filled(&packet, park, chan.awaiting_fill::<false>(), deadline) {
                Filled::Got(msg) => Some(msg),
                Filled::Released | Filled::GaveUp => None,
            }
        }
        None => match zero.give_up(Side::Recv, &packet) {
            Settled::Done(msg) => msg,
            _ => None,
        },
    }
}

/// A message a receive's packet got: the select's outcome if it was
/// `served` for it, else (unwinding) on to the next receiver.
fn keep<T, M: Mode, P: Protocol>(
    chan: &Chan<T, M, P>,
    msg: T,
    served: bool,
) -> (PacketOutcome, Option<T>) {
    if served {
        return (PacketOutcome::Completed, Some(msg));
    }
    if zero_of(chan).reoffer(msg, &|| false) {
        chan.zero_queued(Side::Send);
    }
    (PacketOutcome::Nothing, None)
}

// ---- sends -------------------------------------------------------------------

/// A `Select` send's try on a zero-capacity channel: selected if it holds
/// a receiver (reserved now, or handed over while blocked), or if the
/// receivers are gone.
pub(crate) fn attempt_select_send<T, M: Mode, P: Protocol>(
    tx: &Sender<T, M, P>,
    zero: &Rendezvous<T, P::Lock>,
    partner: &mut Option<Arc<Packet<T>>>,
) -> bool {
    if partner.is_some() {
        return true;
    }
    match zero.reserve(&|| tx.chan.peers_gone(Side::Send)) {
        Reservation::Reserved(reserved) => {
            *partner = Some(reserved);
            true
        }
        Reservation::Nobody => false,
        // Selected to fail: `SelectedOperation::send` gives it back.
        Reservation::Disconnected => true,
    }
}

/// Lets go of a receiver a send reserved but will not fill.
pub(crate) fn release_partner<T, M: Mode, P: Protocol>(
    tx: &Sender<T, M, P>,
    partner: &mut Option<Arc<Packet<T>>>,
) {
    if let Some(partner) = partner.take() {
        let zero = tx.chan.zero().expect("a partner is on a rendezvous");
        zero.release(&partner);
    }
}

/// A blocked select's send queues its packet in the rendezvous: with its
/// message if it is made, else message-less (a receiver that serves it
/// hands over a packet of its own to fill).
pub(crate) fn queue_send_packet<T, M: Mode, P: Protocol>(
    tx: &Sender<T, M, P>,
    msg: Option<T>,
    park: &dyn Park,
    token: &Arc<Token>,
    index: usize,
) -> Arc<Packet<T>> {
    let chan = &tx.chan;
    let packet = zero_of(chan).queue_select(Side::Send, msg, park.waker(), token, index);
    // Receives waiting in selects, futures or readiness probes may now
    // meet us.
    chan.zero_queued(Side::Send);
    packet
}

/// Takes a select's send packet back: what it brought, and the message if
/// it came back unsent.
pub(crate) fn settle_send_packet<T, M: Mode, P: Protocol>(
    tx: &Sender<T, M, P>,
    packet: &mut Option<Arc<Packet<T>>>,
    partner: &mut Option<Arc<Packet<T>>>,
    served: bool,
) -> (PacketOutcome, Option<T>) {
    let Some(packet) = packet.take() else {
        return (PacketOutcome::Nothing, None);
    };
    let zero = zero_of(&tx.chan);
    match zero.withdraw(Side::Send, &packet) {
        Settled::Done(_) => match packet.take_partner() {
            Some(handed) if served => {
                *partner = Some(handed);
                (PacketOutcome::Partner, None)
            }
            Some(handed) => {
                zero.release(&handed);
                (PacketOutcome::Nothing, None)
            }
            // A receiver took the message.
            None => (PacketOutcome::Completed, None),
        },
        Settled::Dismissed(back) => (PacketOutcome::Nothing, back),
        _ => (PacketOutcome::Nothing, None),
    }
}

/// [`SelectedOperation::send`](crate::SelectedOperation::send) on a
/// zero-capacity channel, the send selected holding `partner`: fills it,
/// or, if the receiver gave up on it meanwhile (a deadline, a dropped
/// future), sends as an ordinary send.
pub(crate) fn send_to_partner<T, M: Mode, P: Protocol>(
    tx: &Sender<T, M, P>,
    partner: &Packet<T>,
    msg: T,
) -> Result<(), SendError<T>> {
    let zero = tx.chan.zero().expect("a partner is on a rendezvous");
    match zero.fill(partner, msg) {
        Ok(()) => {
            // A waker that panicked goes on, the message handed over.
            crate::rendezvous::rethrow_deferred();
            Ok(())
        }
        Err(msg) => tx.send(msg),
    }
}

/// How a macro send's reserving try ended ([`attempt_reserving`]).
pub(crate) enum Reserving<T> {
    /// No receiver waits: not selected, nothing made.
    Nobody,
    /// Selected: its outcome is in `result` (the receiver got the
    /// message, or the receivers are gone and the message is given back).
    Selected,
    /// The reserved receiver gave up on it meanwhile: the message, made,
    /// for an ordinary try.
    Unfilled(T),
}

/// A `select!` send on a zero-capacity channel whose message is not made
/// yet: reserves a waiting receiver first (or uses the one a receiver
/// handed over, `partner`), then makes the message (`msg` if it is made
/// already, else `make`) and fills the receiver's packet, so that the
/// receiver that made the send ready is the one that gets it, whatever the
/// message expression does meanwhile (crossbeam's and Go's semantics;
/// `rendezvous/mod.rs`, invariant 7).
#[cold]
pub(crate) fn attempt_reserving<T, M: Mode, P: Protocol>(
    tx: &Sender<T, M, P>,
    partner: &mut Option<Arc<Packet<T>>>,
    msg: &mut Option<T>,
    make: impl FnOnce() -> T,
    result: &mut Option<Result<(), SendError<T>>>,
) -> Reserving<T> {
    let zero = zero_of(&tx.chan);
    let partner = match partner.take() {
        Some(partner) => partner,
        None => match zero.reserve(&|| tx.chan.peers_gone(Side::Send)) {
            Reservation::Reserved(partner) => partner,
            Reservation::Nobody => return Reserving::Nobody,
            Reservation::Disconnected => {
                *result = Some(Err(SendError(make())));
                return Reserving::Selected;
            }
        },
    };
    // Held across the message expression (user code, which may block
    // or panic): let go if it unwinds.
    struct Held<'p, T, L: RawLock>(&'p Rendezvous<T, L>, Option<&'p Packet<T>>);
    impl<T, L: RawLock> Drop for Held<'_, T, L> {
        fn drop(&mut self) {
            if let Some(partner) = self.1 {
                self.0.release(partner);
            }
        }
    }
    let msg = match msg.take() {
        Some(msg) => msg,
        None => {
            let mut held = Held(zero, Some(&partner));
            let msg = make();
            held.1 = None;
            msg
        }
    };
    match zero.fill(&partner, msg) {
        Ok(()) => {
            *result = Some(Ok(()));
            // A waker that panicked goes on, now that the message is
            // the receiver's.
            crate::rendezvous::rethrow_deferred();
            Reserving::Selected
        }
        // The receiver gave up on it meanwhile: an ordinary try.
        Err(msg) => Reserving::Unfilled(msg),
    }
}
