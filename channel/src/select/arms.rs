//! The operations on channels: a receive (`RecvArm`) and a send
//! (`SendArm`, and `SendReady` for a `Select`), each an `Op`, and how a
//! receiver becomes a select's operation (`SelectRecv`).

use std::time::Instant;

use crate::chan::Chan;
use crate::error::{RecvError, SendError, TryRecvError, TrySendError};
use crate::hook::{Park, WaitingOn};
use crate::lock::RawLock;
use crate::rendezvous::{Filled, Packet, Rendezvous, Reservation, Settled, Side, Token};
use crate::sync::Arc;
use crate::wait_list::Waiters;
use crate::{Mode, Protocol, Receiver, Sender};

use super::op::{Kind, Op, OpRef, PacketOutcome, Probe};

type RxTicket<M, P> = <<M as Mode>::RxWait<P> as Waiters>::Ticket;
type TxTicket<M, P> = <<M as Mode>::TxWait<P> as Waiters>::Ticket;

/// The two methods through which the macro's [`FirstTry`](super::expansion::FirstTry) reaches an arm's
/// [`Op`] methods with static dispatch (the macro cannot name `Op`).
macro_rules! first_try {
    () => {
        /// For the macro's [`FirstTry`](super::expansion::FirstTry): [`Op::ready`], statically dispatched.
        #[inline]
        pub fn probe(&self) -> bool {
            Op::ready(self)
        }

        /// For the macro's [`FirstTry`](super::expansion::FirstTry): [`Op::attempt`], statically
        /// dispatched.
        #[inline]
        pub fn try_now(&mut self) -> bool {
            Op::attempt(self)
        }
    };
}

/// A receive operation. Used by [`Select`](crate::Select) and by the macro.
///
/// `repr(C)` with `result` first, so that the arm's address is its
/// result's: [`SelectedOperation::recv`] reaches the result from the
/// type-erased operation without a call through the vtable.
#[doc(hidden)]
#[repr(C)]
pub struct RecvArm<'a, T, M: Mode, P: Protocol> {
    /// What the selected receive got, until its taker collects it.
    result: Option<Result<T, RecvError>>,
    /// The receiver's channel, borrowed straight (not through the
    /// receiver's `Arc`): a readiness probe is a chain of dependent loads,
    /// and this takes one off it.
    chan: &'a Chan<T, M, P>,
    ticket: Option<RxTicket<M, P>>,
    /// On a zero-capacity channel, while the select is blocked (or waits
    /// for a reserving send to fill it): its packet in the rendezvous.
    packet: Option<Arc<Packet<T>>>,
}

impl<'a, T, M: Mode, P: Protocol> RecvArm<'a, T, M, P> {
    /// A receive on `rx`.
    #[inline]
    #[must_use]
    pub fn new(rx: &'a Receiver<T, M, P>) -> Self {
        RecvArm {
            result: None,
            chan: &rx.chan,
            ticket: None,
            packet: None,
        }
    }

    /// For the macro's driver.
    #[inline]
    pub fn as_op(&mut self) -> OpRef<'_> {
        OpRef(self)
    }

    /// The outcome, if this receive was selected.
    #[inline]
    pub fn take(&mut self) -> Option<Result<T, RecvError>> {
        self.result.take()
    }

    first_try!();
}

/// Whether an operation of `side` on `chan` would not block now (plain
/// loads: a hint): a receive finds a message (at zero capacity, a waiting
/// sender), a send finds room (a waiting receiver), or the other side is
/// gone. The operation holds an endpoint of its own side, so
/// "disconnected" means the other side is gone: one flag to load, not both.
#[inline]
fn ready_on<T, M: Mode, P: Protocol>(chan: &Chan<T, M, P>, side: Side) -> bool {
    let peer = match (chan.zero(), side) {
        (Some(zero), Side::Recv) => zero.has_senders(),
        (Some(zero), Side::Send) => zero.has_receivers(),
        (None, Side::Recv) => chan.message_at_head(),
        (None, Side::Send) => chan.room_at_tail(),
    };
    peer || chan.peers_gone(side)
}

impl<T, M: Mode, P: Protocol> Receiver<T, M, P> {
    /// For the [`select!`](crate::select!) macro: a `recv` arm on this
    /// receiver (a method, so that the macro takes an endpoint, a
    /// reference to one, or a timer or oneshot receiver alike).
    #[doc(hidden)]
    #[inline]
    #[must_use]
    pub fn __select_recv_arm(&self) -> RecvArm<'_, T, M, P> {
        RecvArm::new(self)
    }
}

impl<T, M: Mode, P: Protocol> Op for RecvArm<'_, T, M, P> {
    #[inline]
    fn ready(&self) -> bool {
        ready_on(self.chan, Side::Recv)
    }

    fn waits_on(&self) -> Option<WaitingOn<'_>> {
        Some(self.chan.waiting_on::<true>())
    }

    // Always: the macro's first try (`try_now`) calls it statically, and a
    // call there costs the try a frame of its own.
    #[inline(always)]
    fn attempt(&mut self) -> bool {
        debug_assert!(self.result.is_none());
        match self.chan.try_recv() {
            Ok(msg) => self.result = Some(Ok(msg)),
            Err(TryRecvError::Disconnected) => self.result = Some(Err(RecvError)),
            Err(TryRecvError::Empty) => return false,
        }
        true
    }

    #[inline]
    fn register(&mut self, park: &dyn Park) {
        debug_assert!(self.ticket.is_none());
        self.ticket = Some(self.chan.receivers.register(park));
    }

    #[inline]
    fn still_blocked(&self, own: Option<&Arc<Token>>) -> bool {
        self.chan.still_empty_for(own)
    }

    #[inline]
    fn unregister(&mut self, retry: bool) {
        if let Some(ticket) = self.ticket.take() {
            if retry {
                self.chan.receivers.leave(ticket);
            } else {
                self.chan.receivers.abandon(ticket);
            }
        }
    }

    fn discard(&mut self) {
        drop(self.result.take());
    }

    fn waits_in_rendezvous(&self) -> bool {
        self.chan.zero().is_some()
    }

    fn queue_packet(&mut self, park: &dyn Park, token: &Arc<Token>, index: usize) {
        let chan = self.chan;
        let zero = chan.zero().expect("a zero-capacity channel");
        debug_assert!(self.packet.is_none());
        self.packet = Some(zero.queue_select(Side::Recv, None, park.waker(), token, index));
        // Sends waiting in selects or futures may now meet us.
        chan.zero_queued(Side::Recv);
    }

    fn settle_packet(&mut self, served: bool) -> PacketOutcome {
        let Some(packet) = self.packet.take() else {
            return PacketOutcome::Nothing;
        };
        let zero = self.chan.zero().expect("a zero-capacity channel");
        let settled = match zero.withdraw(Side::Recv, &packet) {
            Settled::Reserved if served => {
                self.packet = Some(packet);
                return PacketOutcome::Reserved;
            }
            Settled::Reserved => zero.give_up(Side::Recv, &packet),
            settled => settled,
        };
        match settled {
            Settled::Done(Some(msg)) => self.keep(msg, served),
            _ => PacketOutcome::Nothing,
        }
    }

    fn await_fill(&mut self, park: Option<&dyn Park>, deadline: Option<Instant>) -> bool {
        let packet = self.packet.take().expect("a reserved packet");
        let zero = self.chan.zero().expect("a zero-capacity channel");
        let got = match park {
            Some(park) => {
                match zero.wait_filled(&packet, park, self.chan.awaiting_fill::<false>(), deadline)
                {
                    Filled::Got(msg) => Some(msg),
                    Filled::Released | Filled::GaveUp => None,
                }
            }
            None => match zero.give_up(Side::Recv, &packet) {
                Settled::Done(msg) => msg,
                _ => None,
            },
        };
        got.is_some_and(|msg| self.keep(msg, true) == PacketOutcome::Completed)
    }
}

impl<T, M: Mode, P: Protocol> RecvArm<'_, T, M, P> {
    /// A message this receive's packet got: the select's outcome if it
    /// was `served` for it, else (unwinding) on to the next receiver.
    fn keep(&mut self, msg: T, served: bool) -> PacketOutcome {
        if served {
            self.result = Some(Ok(msg));
            return PacketOutcome::Completed;
        }
        let zero = self.chan.zero().expect("a zero-capacity channel");
        if zero.reoffer(msg, &|| false) {
            self.chan.zero_queued(Side::Send);
        }
        PacketOutcome::Nothing
    }
}

/// A send operation of [`Select`](crate::Select): selected when the channel has room (or
/// no receiver); the caller then sends through [`SelectedOperation::send`](crate::SelectedOperation::send).
/// On a zero-capacity channel it is selected holding the receiver it will
/// send to (`rendezvous.rs`, invariant 7).
///
/// `repr(C)` with `partner` first, so that [`SelectedOperation::send`](crate::SelectedOperation::send)
/// reaches it from the type-erased operation, as `recv` reaches a
/// [`RecvArm`]'s result.
#[repr(C)]
pub(super) struct SendReady<'a, T, M: Mode, P: Protocol> {
    /// The receiver's packet this send reserved, or was handed, until
    /// filled or let go.
    partner: Option<Arc<Packet<T>>>,
    tx: &'a Sender<T, M, P>,
    ticket: Option<TxTicket<M, P>>,
    /// On a zero-capacity channel, while the select is blocked: its
    /// message-less packet in the rendezvous.
    packet: Option<Arc<Packet<T>>>,
}

impl<'a, T, M: Mode, P: Protocol> SendReady<'a, T, M, P> {
    /// A send on `tx`, for [`Select::send`](crate::Select::send).
    pub(super) fn new(tx: &'a Sender<T, M, P>) -> Self {
        SendReady {
            partner: None,
            tx,
            ticket: None,
            packet: None,
        }
    }
}

/// Whether a send on `tx` would not block now.
#[inline]
fn send_ready<T, M: Mode, P: Protocol>(tx: &Sender<T, M, P>) -> bool {
    ready_on(&tx.chan, Side::Send)
}

macro_rules! send_waiting {
    () => {
        #[inline]
        fn register(&mut self, park: &dyn Park) {
            debug_assert!(self.ticket.is_none());
            self.ticket = Some(self.tx.chan.senders.register(park));
        }

        #[inline]
        fn still_blocked(&self, own: Option<&Arc<Token>>) -> bool {
            self.tx.chan.still_full_for(own)
        }

        #[inline]
        fn unregister(&mut self, retry: bool) {
            if let Some(ticket) = self.ticket.take() {
                if retry {
                    self.tx.chan.senders.leave(ticket);
                } else {
                    self.tx.chan.senders.abandon(ticket);
                }
            }
        }

        fn discard(&mut self) {
            release_partner(self.tx, &mut self.partner);
        }

        fn waits_in_rendezvous(&self) -> bool {
            self.tx.chan.zero().is_some()
        }
    };
}

impl<T, M: Mode, P: Protocol> Op for SendReady<'_, T, M, P> {
    #[inline]
    fn ready(&self) -> bool {
        send_ready(self.tx)
    }

    fn waits_on(&self) -> Option<WaitingOn<'_>> {
        Some(self.tx.chan.waiting_on::<false>())
    }

    #[inline]
    fn attempt(&mut self) -> bool {
        let Some(zero) = self.tx.chan.zero() else {
            return send_ready(self.tx);
        };
        if self.partner.is_some() {
            return true;
        }
        match zero.reserve(&|| self.tx.chan.peers_gone(Side::Send)) {
            Reservation::Reserved(partner) => {
                self.partner = Some(partner);
                true
            }
            Reservation::Nobody => false,
            // Selected to fail: `SelectedOperation::send` gives it back.
            Reservation::Disconnected => true,
        }
    }

    send_waiting!();

    fn queue_packet(&mut self, park: &dyn Park, token: &Arc<Token>, index: usize) {
        self.packet = Some(queue_send_packet(self.tx, None, park, token, index));
    }

    fn settle_packet(&mut self, served: bool) -> PacketOutcome {
        settle_send_packet(self.tx, &mut self.packet, &mut self.partner, served).0
    }
}

impl<T, M: Mode, P: Protocol> Drop for SendReady<'_, T, M, P> {
    fn drop(&mut self) {
        release_partner(self.tx, &mut self.partner);
    }
}

/// Lets go of a receiver a send reserved but will not fill.
fn release_partner<T, M: Mode, P: Protocol>(
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
fn queue_send_packet<T, M: Mode, P: Protocol>(
    tx: &Sender<T, M, P>,
    msg: Option<T>,
    park: &dyn Park,
    token: &Arc<Token>,
    index: usize,
) -> Arc<Packet<T>> {
    let chan = &tx.chan;
    let zero = chan.zero().expect("a zero-capacity channel");
    let packet = zero.queue_select(Side::Send, msg, park.waker(), token, index);
    // Receives waiting in selects, futures or readiness probes may now
    // meet us.
    chan.zero_queued(Side::Send);
    packet
}

/// Takes a select's send packet back: what it brought, and the message if
/// it came back unsent.
fn settle_send_packet<T, M: Mode, P: Protocol>(
    tx: &Sender<T, M, P>,
    packet: &mut Option<Arc<Packet<T>>>,
    partner: &mut Option<Arc<Packet<T>>>,
    served: bool,
) -> (PacketOutcome, Option<T>) {
    let Some(packet) = packet.take() else {
        return (PacketOutcome::Nothing, None);
    };
    let zero = tx.chan.zero().expect("a zero-capacity channel");
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

/// A send operation of the macro: the message is made (by `make`, the arm's
/// message expression) when the send first looks ready, and kept across
/// retries if another sender takes the room first.
#[doc(hidden)]
pub struct SendArm<'a, T, M: Mode, P: Protocol, F> {
    tx: &'a Sender<T, M, P>,
    ticket: Option<TxTicket<M, P>>,
    make: Option<F>,
    msg: Option<T>,
    result: Option<Result<(), SendError<T>>>,
    /// On a zero-capacity channel, while the select is blocked: its packet
    /// in the rendezvous.
    packet: Option<Arc<Packet<T>>>,
    /// The receiver's packet this send reserved, or was handed, until
    /// filled or let go (`rendezvous.rs`, invariant 7).
    partner: Option<Arc<Packet<T>>>,
}

impl<'a, T, M: Mode, P: Protocol, F: FnOnce() -> T> SendArm<'a, T, M, P, F> {
    /// A send on `tx` of the message `make` makes.
    #[inline]
    pub fn new(tx: &'a Sender<T, M, P>, make: F) -> Self {
        SendArm {
            tx,
            ticket: None,
            make: Some(make),
            msg: None,
            result: None,
            packet: None,
            partner: None,
        }
    }

    /// For the macro's driver.
    #[inline]
    pub fn as_op(&mut self) -> OpRef<'_> {
        OpRef(self)
    }

    /// The outcome, if this send was selected.
    #[inline]
    pub fn take(&mut self) -> Option<Result<(), SendError<T>>> {
        self.result.take()
    }

    first_try!();
}

impl<T, M: Mode, P: Protocol, F: FnOnce() -> T> Op for SendArm<'_, T, M, P, F> {
    #[inline]
    fn ready(&self) -> bool {
        send_ready(self.tx)
    }

    fn waits_on(&self) -> Option<WaitingOn<'_>> {
        Some(self.tx.chan.waiting_on::<false>())
    }

    #[inline]
    fn attempt(&mut self) -> bool {
        if self.tx.chan.zero().is_some() && (self.msg.is_none() || self.partner.is_some()) {
            return self.attempt_reserving();
        }
        let msg = match self.msg.take() {
            Some(msg) => msg,
            None => {
                if !send_ready(self.tx) {
                    return false;
                }
                self.make()
            }
        };
        self.try_send(msg)
    }

    send_waiting!();

    fn queue_packet(&mut self, park: &dyn Park, token: &Arc<Token>, index: usize) {
        let msg = self.msg.take();
        self.packet = Some(queue_send_packet(self.tx, msg, park, token, index));
    }

    fn settle_packet(&mut self, served: bool) -> PacketOutcome {
        let (outcome, back) =
            settle_send_packet(self.tx, &mut self.packet, &mut self.partner, served);
        if back.is_some() {
            self.msg = back;
        }
        if outcome == PacketOutcome::Completed {
            self.result = Some(Ok(()));
        }
        outcome
    }
}

impl<T, M: Mode, P: Protocol, F: FnOnce() -> T> SendArm<'_, T, M, P, F> {
    /// The arm's message, made now.
    fn make(&mut self) -> T {
        let make = self.make.take().expect("a send arm's message is made once");
        make()
    }

    /// A send on a zero-capacity channel whose message is not made yet:
    /// reserves a waiting receiver first (or uses the one a receiver
    /// handed over), then makes the message and fills the receiver's
    /// packet, so that the receiver that made the send ready is the one
    /// that gets it, whatever the message expression does meanwhile
    /// (crossbeam's and Go's semantics; `rendezvous.rs`, invariant 7).
    #[cold]
    fn attempt_reserving(&mut self) -> bool {
        let zero = self.tx.chan.zero().expect("a zero-capacity channel");
        let partner = match self.partner.take() {
            Some(partner) => partner,
            None => match zero.reserve(&|| self.tx.chan.peers_gone(Side::Send)) {
                Reservation::Reserved(partner) => partner,
                Reservation::Nobody => return false,
                Reservation::Disconnected => {
                    let msg = self.make();
                    self.result = Some(Err(SendError(msg)));
                    return true;
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
        let msg = match self.msg.take() {
            Some(msg) => msg,
            None => {
                let mut held = Held(zero, Some(&partner));
                let msg = self.make();
                held.1 = None;
                msg
            }
        };
        match zero.fill(&partner, msg) {
            Ok(()) => {
                self.result = Some(Ok(()));
                // A waker that panicked goes on, now that the message is
                // the receiver's.
                crate::rendezvous::rethrow_deferred();
                true
            }
            // The receiver gave up on it meanwhile: an ordinary try.
            Err(msg) => self.try_send(msg),
        }
    }

    /// Tries to send a made message; keeps it for the next attempt if the
    /// channel is full.
    #[inline]
    fn try_send(&mut self, msg: T) -> bool {
        match self.tx.try_send(msg) {
            Ok(()) => self.result = Some(Ok(())),
            Err(TrySendError::Disconnected(msg)) => self.result = Some(Err(SendError(msg))),
            Err(TrySendError::Full(msg)) => {
                // Another sender took the room: keep the message for the
                // next attempt.
                self.msg = Some(msg);
                return false;
            }
        }
        true
    }
}

/// What [`Select::recv`](crate::Select::recv) and
/// [`SelectedOperation::recv`](crate::SelectedOperation::recv) take: a
/// channel's [`Receiver`] (any mode and protocol), a
/// [`TimerReceiver`](crate::TimerReceiver), or a
/// [`oneshot::Receiver`](crate::oneshot::Receiver). Sealed: implemented
/// by this crate's receivers only.
pub trait SelectRecv: recv_op::RecvOp {
    /// The type of the messages received.
    type Msg;
}

/// The sealed half of [`SelectRecv`]: how a receiver becomes a select's
/// operation.
pub(crate) mod recv_op {
    use super::{Op, Probe};

    /// A receive on a receiver, for a [`Select`](crate::Select).
    pub struct Parts<'a> {
        /// The operation.
        pub(crate) arm: Box<dyn Op + 'a>,
        /// Its readiness, for the select's first look.
        pub(crate) probe: &'a (dyn Probe + 'a),
    }

    pub trait RecvOp {
        /// A receive on this receiver.
        fn parts(&self) -> Parts<'_>;
        /// The address that names its channel (or timer): what
        /// [`SelectedOperation::recv`](crate::SelectedOperation::recv)
        /// checks.
        fn end(&self) -> *const ();
    }
}

impl<T, M: Mode, P: Protocol> SelectRecv for Receiver<T, M, P> {
    type Msg = T;
}

impl<T, M: Mode, P: Protocol> recv_op::RecvOp for Receiver<T, M, P> {
    fn parts(&self) -> recv_op::Parts<'_> {
        recv_op::Parts {
            arm: Box::new(RecvArm::new(self)),
            probe: &*self.chan,
        }
    }
    fn end(&self) -> *const () {
        channel_of(&self.chan)
    }
}

/// The address that names a channel: what a [`SelectedOperation`](crate::SelectedOperation) checks
/// its endpoint against (a clone of the endpoint added names the same).
pub(super) fn channel_of<T, M: Mode, P: Protocol>(chan: &Chan<T, M, P>) -> *const () {
    (chan as *const Chan<T, M, P>).cast()
}

impl<T, M: Mode, P: Protocol> Probe for Chan<T, M, P> {
    #[inline]
    fn ready(&self, kind: Kind) -> bool {
        let side = match kind {
            Kind::Recv => Side::Recv,
            Kind::Send => Side::Send,
        };
        ready_on(self, side)
    }
}
