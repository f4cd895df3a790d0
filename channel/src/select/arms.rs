//! The operations on channels: a receive (`RecvArm`) and a send
//! (`SendArm`, and `SendReady` for a `Select`), each an `Op`, and how a
//! receiver becomes a select's operation (`SelectRecv`).

use std::time::Instant;

use crate::chan::Chan;
use crate::error::{RecvError, SendError, TryRecvError, TrySendError};
use crate::hook::{Park, WaitingOn};
use crate::rendezvous::{Packet, Side, Token};
use crate::sync::Arc;
use crate::wait_list::Waiters;
use crate::{Mode, Protocol, Receiver, Sender};

use super::op::{Kind, Op, OpRef, Probe};
use crate::rendezvous::select::{self as zero, InRendezvous, PacketOutcome, Reserving};

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

    fn in_rendezvous(&mut self) -> Option<&mut dyn InRendezvous> {
        self.chan.zero()?;
        Some(self)
    }
}

impl<T, M: Mode, P: Protocol> InRendezvous for RecvArm<'_, T, M, P> {
    fn queue_packet(&mut self, park: &dyn Park, token: &Arc<Token>, index: usize) {
        zero::queue_recv_packet(self.chan, &mut self.packet, park, token, index);
    }

    fn settle_packet(&mut self, served: bool) -> PacketOutcome {
        let (outcome, msg) = zero::settle_recv_packet(self.chan, &mut self.packet, served);
        if let Some(msg) = msg {
            self.result = Some(Ok(msg));
        }
        outcome
    }

    fn await_fill(&mut self, park: Option<&dyn Park>, deadline: Option<Instant>) -> bool {
        let Some(msg) = zero::await_recv_fill(self.chan, &mut self.packet, park, deadline) else {
            return false;
        };
        self.result = Some(Ok(msg));
        true
    }
}

/// A send operation of [`Select`](crate::Select): selected when the channel has room (or
/// no receiver); the caller then sends through [`SelectedOperation::send`](crate::SelectedOperation::send).
/// On a zero-capacity channel it is selected holding the receiver it will
/// send to (`rendezvous/`, invariant 7).
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
            zero::release_partner(self.tx, &mut self.partner);
        }

        fn in_rendezvous(&mut self) -> Option<&mut dyn InRendezvous> {
            self.tx.chan.zero()?;
            Some(self)
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
        zero::attempt_select_send(self.tx, zero, &mut self.partner)
    }

    send_waiting!();
}

impl<T, M: Mode, P: Protocol> InRendezvous for SendReady<'_, T, M, P> {
    fn queue_packet(&mut self, park: &dyn Park, token: &Arc<Token>, index: usize) {
        self.packet = Some(zero::queue_send_packet(self.tx, None, park, token, index));
    }

    fn settle_packet(&mut self, served: bool) -> PacketOutcome {
        zero::settle_send_packet(self.tx, &mut self.packet, &mut self.partner, served).0
    }
}

impl<T, M: Mode, P: Protocol> Drop for SendReady<'_, T, M, P> {
    fn drop(&mut self) {
        zero::release_partner(self.tx, &mut self.partner);
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
    /// filled or let go (`rendezvous/`, invariant 7).
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
}

impl<T, M: Mode, P: Protocol, F: FnOnce() -> T> InRendezvous for SendArm<'_, T, M, P, F> {
    fn queue_packet(&mut self, park: &dyn Park, token: &Arc<Token>, index: usize) {
        let msg = self.msg.take();
        self.packet = Some(zero::queue_send_packet(self.tx, msg, park, token, index));
    }

    fn settle_packet(&mut self, served: bool) -> PacketOutcome {
        let (outcome, back) =
            zero::settle_send_packet(self.tx, &mut self.packet, &mut self.partner, served);
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

    /// A send on a zero-capacity channel whose message is not made yet, or
    /// that holds a receiver: see [`zero::attempt_reserving`].
    #[cold]
    fn attempt_reserving(&mut self) -> bool {
        let make = &mut self.make;
        let make = || make.take().expect("a send arm's message is made once")();
        match zero::attempt_reserving(
            self.tx,
            &mut self.partner,
            &mut self.msg,
            make,
            &mut self.result,
        ) {
            Reserving::Nobody => false,
            Reserving::Selected => true,
            Reserving::Unfilled(msg) => self.try_send(msg),
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
/// [`oneshot::Receiver`](crate::oneshot::Receiver), or one of these behind
/// an `Arc`, `Rc` or `Box`. Sealed: implemented by this crate's receivers
/// only.
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

/// A receiver behind a pointer selects as the receiver itself: the
/// builder's `recv` is generic, so a `&Arc<Receiver>` would not deref to a
/// `&Receiver` on its own, as it does with a method that names the type.
macro_rules! select_recv_through {
    ($($ptr:ident)::+) => {
        impl<R: SelectRecv + ?Sized> SelectRecv for $($ptr)::+<R> {
            type Msg = R::Msg;
        }

        impl<R: SelectRecv + ?Sized> recv_op::RecvOp for $($ptr)::+<R> {
            fn parts(&self) -> recv_op::Parts<'_> {
                (**self).parts()
            }
            fn end(&self) -> *const () {
                (**self).end()
            }
        }
    };
}

select_recv_through!(std::sync::Arc);
select_recv_through!(std::rc::Rc);
select_recv_through!(Box);

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
