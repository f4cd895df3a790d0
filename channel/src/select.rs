//! Waiting on several channel operations at once: [`Select`] and the
//! [`select!`](crate::select!) macro, shaped like crossbeam-channel's, so
//! that code moves over by changing an import.
//!
//! # How a select runs
//!
//! Every operation (a receive or a send, on a channel of any mode and
//! protocol) is seen through one object-safe, crate-private trait, `Op`:
//! a readiness check, a try, and registration on the waiter list of the
//! side it would block on. A select
//!
//! 1. looks at every operation's readiness (loads only) and tries one of
//!    the ready ones, chosen uniformly at random (a xorshift: the thread's
//!    for the macro, the `Select`'s own for a `Select`), so that each ready
//!    operation is as likely as any other wherever it sits among the arms;
//!    if that try fails, or nothing looked ready, it tries its operations
//!    once each from a random start, and completes the first that succeeds;
//!    a disconnected channel counts as ready (`look` says why it looks
//!    first). When only one operation looks ready, no random number is
//!    drawn. A biased select ([`Select::new_biased`],
//!    [`select_biased!`](crate::select_biased!)) skips the look and tries
//!    its operations in the order they were added;
//! 2. if none succeeds (and it may block), spins a little where the park
//!    context says that is worth it (threads, or a coroutine with nothing
//!    else to run), but unlike a blocking `recv` never yields the thread
//!    before parking: its peers may be spinning on tries, and a yield would
//!    hand the core to one of them until the scheduler's next tick;
//! 3. then (after queuing its rendezvous packets, below) registers on
//!    every involved channel's waiter list with the current park context
//!    ([`hook::with_current`]), issues
//!    `fence(SeqCst)`, re-checks every operation, and parks only if all of
//!    them are still blocked: the same register / fence / re-check as a
//!    blocking `send` or `recv` (invariant 3 of `chan.rs`), so no wake-up is
//!    lost. In a coroutine only the coroutine suspends.
//! 4. On the way out it picks one ready operation (if any; uniformly
//!    again), *leaves* that channel's list (it is about to retry that
//!    operation, which uses any wake it was chosen for) and *abandons*
//!    every other registration: a wake-one that chose this select on a
//!    channel whose operation it will not complete is handed on to that
//!    channel's next waiter. Then it goes back to 1, starting with the
//!    operation it left. A guard abandons every registration if the park
//!    unwinds (a coroutine cancelled at shutdown), so nothing a select
//!    registered outlives it.
//!
//! # Rendezvous channels
//!
//! On a zero-capacity channel a receive is ready when a sender waits in the
//! rendezvous, and a send when a receiver does. A blocked select also waits
//! *in* the rendezvous for each of its operations, with a packet each, all
//! sharing one token, queued in a random order (a peer serves the first
//! packet it finds, so the order chooses among several operations on one
//! channel): a peer that arrives (a thread, a coroutine, a future, or
//! another select) decides the token for the packet it serves, and the
//! select decides it for itself before it completes anything else, so
//! exactly one operation completes (`rendezvous.rs`, invariant 5). A
//! send's packet holds its message if it is made; else (a `Select` send,
//! or a `select!` send whose message is made only once chosen) the
//! receiver that serves it hands the select a packet of its own and waits
//! there while the select wakes, makes the message and fills it, so that a
//! blocked select's send is seen by every receive, `try_recv` and readiness
//! included. The packets are queued before the select registers on the
//! waiter lists: queuing one wakes a waiter of the other side, which must
//! not be the select itself; and the select's own packets are no partner
//! of its operations. `ready` queues no packets (a served packet
//! consumes). A biased select queues its packets in the order of its
//! operations.
//!
//! A send chosen on a zero-capacity channel owns the receiver that made it
//! ready, as in crossbeam and Go: it is *reserved* (taken out of its queue)
//! until the send fills it, or lets it go (a dropped
//! [`SelectedOperation`], a message expression that panics: the receiver
//! then waits on as before). So `select!{send(s, r.recv().unwrap()) -> ..}`
//! sends to the receiver that was waiting when it was chosen, whoever
//! else arrives while the message is made (`rendezvous.rs`, invariant 7).
//!
//! # Exactly once
//!
//! A receive is selected by receiving: the message is taken out of the
//! channel when the operation is selected. The macro hands it straight to
//! its arm; [`Select`] keeps it in the operation's own typed slot (made once,
//! when [`Select::recv`] added the operation: no allocation per message)
//! until [`SelectedOperation::recv`] collects it, so nobody can take it in
//! between. A send is selected when the channel has room (or has lost its
//! receivers); see [`SelectedOperation::send`] for what that promises.

use std::fmt;
use std::ops::ControlFlow;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use crate::backoff::Backoff;
use crate::chan::Chan;
use crate::error::{RecvError, SendError, TryRecvError, TrySendError};
use crate::hook::{self, Describe, Op as OpKind, Park, WaitingOn};
use crate::lock::RawLock;
use crate::rendezvous::{Filled, Packet, Rendezvous, Reservation, Settled, Side, Token};
use crate::sync::Arc;
use crate::sync::{fence, Ordering};
use crate::wait_list::Waiters;
use crate::{Mode, Protocol, Receiver, Sender};

// ---- randomness ------------------------------------------------------------

/// A random index below `n` (0 when `n` is 0), from the thread's xorshift.
#[inline]
fn random_below(n: usize) -> usize {
    #[cfg(loom)]
    {
        // Loom needs every execution of a model to be deterministic.
        let _ = n;
        0
    }
    #[cfg(not(loom))]
    {
        if n <= 1 {
            0
        } else {
            // Multiply-shift: maps a 32-bit random number onto 0..n.
            ((u64::from(crate::backoff::next_random()) * n as u64) >> 32) as usize
        }
    }
}

/// A random `u32` from the thread's xorshift (0 under loom, which needs
/// every execution of a model to be deterministic).
#[inline]
fn random_u32() -> u32 {
    #[cfg(loom)]
    {
        0
    }
    #[cfg(not(loom))]
    {
        crate::backoff::next_random()
    }
}

/// One of the set bits of `ready` (not 0), chosen uniformly by `random`:
/// the index of the `k`th lowest, `k` being `random` scaled onto the number
/// of bits set (multiply-shift, as in [`random_below`]). This is what makes
/// a select fair: every ready operation is equally likely wherever it sits.
/// Picking the first ready operation at or after a random start is not: an
/// operation after a run of never-ready ones is picked for every start in
/// that run (Go's `TestSelectFairness` shape, two idle arms and then two
/// ready ones, picks the first ready one for three starts of four).
///
/// The loop runs `k` times, and `k` is below the number of ready
/// operations: nothing when one is ready, at most once for two.
#[inline]
fn nth_ready(ready: u64, random: u32) -> usize {
    debug_assert!(ready != 0);
    let count = u64::from(ready.count_ones());
    let k = (u64::from(random) * count) >> 32;
    let mut rest = ready;
    for _ in 0..k {
        // Clear the lowest set bit.
        rest &= rest - 1;
    }
    rest.trailing_zeros() as usize
}

/// Shuffles `order` uniformly (Fisher-Yates) with the thread's xorshift.
fn shuffle(order: &mut [usize]) {
    for i in (1..order.len()).rev() {
        order.swap(i, random_below(i + 1));
    }
}

/// A seed for a [`Select`]'s own sequence (a constant under loom, which
/// needs every execution of a model to be deterministic).
fn seed() -> u32 {
    #[cfg(loom)]
    {
        1
    }
    #[cfg(not(loom))]
    {
        crate::backoff::next_random()
    }
}

// ---- one operation ---------------------------------------------------------

/// Which way an operation goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    Recv,
    Send,
}

/// One operation of a select, whatever its channel's message type, mode and
/// protocol.
pub(crate) trait Op {
    /// Whether the operation would not block now (a message or a free slot
    /// is there, or the peer side is gone). Plain loads: a hint.
    fn ready(&self) -> bool;

    /// Tries to complete the operation now; `true` if it is selected. A
    /// receive keeps what it received (a message, or the disconnection).
    fn attempt(&mut self) -> bool;

    /// Registers on the waiter list of the side this operation blocks on.
    fn register(&mut self, park: &dyn Park);

    /// The re-check after registering and `fence(SeqCst)`: whether the
    /// operation would still block. `own`: the token of the select's own
    /// rendezvous packets, which are no partner of its operations.
    fn still_blocked(&self, own: Option<&Arc<Token>>) -> bool;

    /// Ends a registration, if there is one: [`Waiters::leave`] if `retry`
    /// (the caller tries this operation next), else [`Waiters::abandon`].
    fn unregister(&mut self, retry: bool);

    /// Whether this is the stand-in for a removed operation ([`Removed`]).
    fn removed(&self) -> bool {
        false
    }

    /// The way and the channel of this operation, for what a blocked
    /// select waits on (a runtime's dump).
    fn waits_on(&self) -> Option<WaitingOn<'_>> {
        None
    }

    /// Drops whatever a selected receive still holds.
    fn discard(&mut self);

    /// When this operation becomes ready by itself, with nobody to wake
    /// the select (a timer's due time): a blocked select parks no later.
    fn deadline(&self) -> Option<Instant> {
        None
    }

    /// Whether the operation is on a zero-capacity channel: a blocked
    /// select then waits for it with a packet in the rendezvous (see
    /// `rendezvous.rs`, invariant 5), so that a peer select, future or
    /// thread on the other end can meet it.
    fn waits_in_rendezvous(&self) -> bool {
        false
    }

    /// Queues this operation's packet, decided through `token`.
    fn queue_packet(&mut self, _park: &dyn Park, _token: &Arc<Token>, _index: usize) {}

    /// Takes the packet back, once the token is decided. `served`: the
    /// token was decided for this operation, so keep what its packet got;
    /// otherwise (only while unwinding) a message it got anyway goes on to
    /// the next receiver, and a partner it was handed is let go.
    fn settle_packet(&mut self, _served: bool) -> PacketOutcome {
        PacketOutcome::Nothing
    }

    /// After [`PacketOutcome::Reserved`]: waits through `park` (if any;
    /// else gives up at once, as when unwinding), until `deadline`, for
    /// the select's send that reserved this receive to fill it. `true` if
    /// it got the message.
    fn await_fill(&mut self, _park: Option<&dyn Park>, _deadline: Option<Instant>) -> bool {
        false
    }
}

/// What an operation's rendezvous packet brought ([`Op::settle_packet`]).
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
    /// it: [`Op::await_fill`].
    Reserved,
}

type RxTicket<M, P> = <<M as Mode>::RxWait<P> as Waiters>::Ticket;
type TxTicket<M, P> = <<M as Mode>::TxWait<P> as Waiters>::Ticket;

/// The two methods through which the macro's [`FirstTry`] reaches an arm's
/// [`Op`] methods with static dispatch (the macro cannot name `Op`).
macro_rules! first_try {
    () => {
        /// For the macro's [`FirstTry`]: [`Op::ready`], statically dispatched.
        #[inline]
        pub fn probe(&self) -> bool {
            Op::ready(self)
        }

        /// For the macro's [`FirstTry`]: [`Op::attempt`], statically
        /// dispatched.
        #[inline]
        pub fn try_now(&mut self) -> bool {
            Op::attempt(self)
        }
    };
}

/// A receive operation. Used by [`Select`] and by the macro.
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

/// A send operation of [`Select`]: selected when the channel has room (or
/// no receiver); the caller then sends through [`SelectedOperation::send`].
/// On a zero-capacity channel it is selected holding the receiver it will
/// send to (`rendezvous.rs`, invariant 7).
///
/// `repr(C)` with `partner` first, so that [`SelectedOperation::send`]
/// reaches it from the type-erased operation, as `recv` reaches a
/// [`RecvArm`]'s result.
#[repr(C)]
struct SendReady<'a, T, M: Mode, P: Protocol> {
    /// The receiver's packet this send reserved, or was handed, until
    /// filled or let go.
    partner: Option<Arc<Packet<T>>>,
    tx: &'a Sender<T, M, P>,
    ticket: Option<TxTicket<M, P>>,
    /// On a zero-capacity channel, while the select is blocked: its
    /// message-less packet in the rendezvous.
    packet: Option<Arc<Packet<T>>>,
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

/// What [`Select::recv`] and [`SelectedOperation::recv`] take: a
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

    /// A receive on a receiver, for a [`Select`](super::Select).
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
        /// [`SelectedOperation::recv`](super::SelectedOperation::recv)
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

/// A borrowed operation, as the macro hands its arms to [`run`].
#[doc(hidden)]
pub struct OpRef<'r>(pub(crate) &'r mut (dyn Op + 'r));

// ---- the driver ------------------------------------------------------------

/// How long a select may wait.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum Wait {
    /// Not at all: one try of every operation.
    Now,
    /// Until an operation completes.
    Forever,
    /// Until an operation completes or the deadline passes.
    Until(Instant),
}

impl Wait {
    /// For at most `timeout` (for ever if that is too far to represent).
    #[inline]
    #[must_use]
    pub fn timeout(timeout: Duration) -> Wait {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => Wait::Until(deadline),
            None => Wait::Forever,
        }
    }
}

/// The address that names a channel: what a [`SelectedOperation`] checks
/// its endpoint against (a clone of the endpoint added names the same).
fn channel_of<T, M: Mode, P: Protocol>(chan: &Chan<T, M, P>) -> *const () {
    (chan as *const Chan<T, M, P>).cast()
}

/// The operations of a select, some perhaps removed.
trait OpList {
    fn count(&self) -> usize;
    fn get(&mut self, i: usize) -> Option<&mut (dyn Op + '_)>;
    fn peek(&self, i: usize) -> Option<&(dyn Op + '_)>;
    /// Bit `i` set if operation `i` is [`ready`](Op::ready); for at most 64
    /// operations.
    fn ready_bits(&self) -> u64;
}

impl OpList for [OpRef<'_>] {
    #[inline]
    fn count(&self) -> usize {
        self.len()
    }
    #[inline]
    fn get(&mut self, i: usize) -> Option<&mut (dyn Op + '_)> {
        Some(&mut *self[i].0)
    }
    fn peek(&self, i: usize) -> Option<&(dyn Op + '_)> {
        Some(&*self[i].0)
    }
    #[inline]
    fn ready_bits(&self) -> u64 {
        self.iter()
            .enumerate()
            .fold(0, |bits, (i, op)| bits | u64::from(op.0.ready()) << i)
    }
}

impl<'a> OpList for [Box<dyn Op + 'a>] {
    #[inline]
    fn count(&self) -> usize {
        self.len()
    }
    #[inline]
    fn get(&mut self, i: usize) -> Option<&mut (dyn Op + '_)> {
        Some(&mut *self[i])
    }
    fn peek(&self, i: usize) -> Option<&(dyn Op + '_)> {
        Some(&*self[i])
    }
    #[inline]
    fn ready_bits(&self) -> u64 {
        self.iter()
            .enumerate()
            .fold(0, |bits, (i, op)| bits | u64::from(op.ready()) << i)
    }
}

/// A channel's readiness, as a [`Select`] looks at it before trying
/// anything: asked of the channel itself rather than of the operation, so
/// that the look is one call per operation on a flat list, with one load
/// fewer before the channel's words (the operation would first load its
/// channel pointer).
pub(crate) trait Probe {
    /// Whether an operation going `kind` would not block now.
    fn ready(&self, kind: Kind) -> bool;
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

/// What a [`Select`] keeps where an operation was removed, so that the
/// indices of the others stay and the list needs no `Option` (one branch
/// less per operation looked at): never ready, never completes, waits
/// nowhere.
struct Removed;

impl Probe for Removed {
    fn ready(&self, _kind: Kind) -> bool {
        false
    }
}

impl Op for Removed {
    fn ready(&self) -> bool {
        false
    }
    fn attempt(&mut self) -> bool {
        false
    }
    fn register(&mut self, _park: &dyn Park) {}
    fn still_blocked(&self, _own: Option<&Arc<Token>>) -> bool {
        true
    }
    fn unregister(&mut self, _retry: bool) {}
    fn removed(&self) -> bool {
        true
    }
    fn discard(&mut self) {}
}

/// The first operation, from `start` on (cyclically), that completes
/// (`consume`) or is ready (not `consume`).
#[inline]
fn scan<L: OpList + ?Sized>(ops: &mut L, start: usize, consume: bool) -> Option<usize> {
    let n = ops.count();
    // A wrapping step, not `% n`: a division per operation would cost as
    // much as the try itself.
    let mut i = start;
    for _ in 0..n {
        if let Some(op) = ops.get(i) {
            if if consume { op.attempt() } else { op.ready() } {
                return Some(i);
            }
        }
        i += 1;
        if i == n {
            i = 0;
        }
    }
    None
}

/// What [`look`] saw.
enum Look {
    /// The operation picked among those that looked ready.
    Ready(usize),
    /// None looked ready.
    NoneReady,
    /// Not looked: one operation, or a loom model.
    Skipped,
}

/// Looks at every operation's readiness (loads only, no claim) and picks
/// one of the ready ones uniformly at random ([`pick_ready`]).
///
/// Why look before trying: trying in order from a random start makes "did
/// this try succeed" a coin toss for the branch predictor whenever some
/// operations are ready and others are not (the common case: one channel
/// has a message), and the try that follows a failed one calls another
/// operation's code through its vtable. A mispredicted branch and an
/// indirect call to a cold target cost about as much as the try itself
/// (`examples/select_cost.rs` times a select against a plain receive). Here the
/// loads run in a fixed order, the choice is
/// arithmetic, and the one try that follows usually succeeds. Looking
/// first is also what makes the choice fair: tries in order from a random
/// start would favour an operation that follows never-ready ones.
///
/// Not under loom: it is a pure shortcut (if the chosen try fails, the
/// ordinary scan follows), and its extra loads would only multiply the
/// interleavings a model explores.
#[inline]
fn look<L: OpList + ?Sized>(ops: &mut L) -> Look {
    let n = ops.count();
    if cfg!(loom) || n < 2 {
        return Look::Skipped;
    }
    if n > 64 {
        return match pick_where(ops, &|op| op.ready()) {
            Some(i) => Look::Ready(i),
            None => Look::NoneReady,
        };
    }
    pick_ready(ops.ready_bits(), random_u32)
}

/// The pick among the operations whose bits are set in `ready` (bit `i`:
/// operation `i` looked ready): uniform, drawing a number from `random`
/// only when there is a choice to make.
#[inline]
fn pick_ready(ready: u64, random: impl FnOnce() -> u32) -> Look {
    if ready == 0 {
        Look::NoneReady
    } else if ready & (ready - 1) == 0 {
        // One ready: no choice to make.
        Look::Ready(ready.trailing_zeros() as usize)
    } else {
        Look::Ready(nth_ready(ready, random()))
    }
}

/// One of the operations that satisfy `pred`, chosen uniformly at random:
/// counts them, draws, then walks to the chosen one. Two passes of calls
/// through the vtable, for the paths that are slow anyway (more operations
/// than a bit set holds; a select on its way out of a park). If fewer
/// satisfy `pred` on the second pass (readiness only ever is a snapshot),
/// the last one found.
fn pick_where<L: OpList + ?Sized>(ops: &mut L, pred: &dyn Fn(&dyn Op) -> bool) -> Option<usize> {
    let n = ops.count();
    let mut test = |i: usize| ops.get(i).is_some_and(|op| pred(op));
    let count = (0..n).filter(|&i| test(i)).count();
    if count == 0 {
        return None;
    }
    let mut k = random_below(count);
    let mut last = None;
    for i in 0..n {
        if test(i) {
            if k == 0 {
                return Some(i);
            }
            k -= 1;
            last = Some(i);
        }
    }
    last
}

/// Where a scan of `n` operations starts: the first if `biased`, else a
/// random one.
#[inline]
fn first_op(n: usize, biased: bool) -> usize {
    if biased {
        0
    } else {
        random_below(n)
    }
}

/// Runs a select: completes (`consume`) or finds ready (not `consume`) one
/// operation, waiting as `wait` allows. `None`: none within the wait.
#[inline(always)]
fn drive<L: OpList + ?Sized>(
    ops: &mut L,
    wait: Wait,
    consume: bool,
    biased: bool,
    start: usize,
) -> Option<usize> {
    if !biased {
        let first = look(ops);
        if let ControlFlow::Break(answer) = act_on_look(ops, first, wait, consume) {
            return answer;
        }
    }
    drive_after_look(ops, wait, consume, biased, start)
}

/// What the first look at readiness settles: `Break` with the select's
/// answer if the operation it picked completed (or, for a readiness probe
/// that may not wait, if nothing looked ready); `Continue` to try them all.
/// The macro's driver looks with [`look`], a [`Select`] with its own.
#[inline(always)]
fn act_on_look<L: OpList + ?Sized>(
    ops: &mut L,
    look: Look,
    wait: Wait,
    consume: bool,
) -> ControlFlow<Option<usize>> {
    match look {
        Look::Ready(i) => {
            if !consume || ops.get(i).is_some_and(|op| op.attempt()) {
                return ControlFlow::Break(Some(i));
            }
        }
        // A readiness probe that may not wait has its answer.
        Look::NoneReady if !consume && matches!(wait, Wait::Now) => {
            return ControlFlow::Break(None)
        }
        Look::NoneReady | Look::Skipped => {}
    }
    ControlFlow::Continue(())
}

/// [`drive`] after its first look: tries every operation once from `start`,
/// then waits as `wait` allows.
#[inline(always)]
fn drive_after_look<L: OpList + ?Sized>(
    ops: &mut L,
    wait: Wait,
    consume: bool,
    biased: bool,
    start: usize,
) -> Option<usize> {
    if let Some(i) = scan(ops, start, consume) {
        return Some(i);
    }
    let deadline = match wait {
        Wait::Now => return None,
        Wait::Forever => None,
        Wait::Until(deadline) => Some(deadline),
    };
    wait_for(ops, deadline, consume, biased)
}

/// The rest of [`drive`] once every operation was tried and failed: spin,
/// block and retry until one completes or `deadline` passes. Out of line,
/// so that a select that completes at once pays for none of it.
#[cold]
#[inline(never)]
fn wait_for<L: OpList + ?Sized>(
    ops: &mut L,
    deadline: Option<Instant>,
    consume: bool,
    biased: bool,
) -> Option<usize> {
    let n = ops.count();
    let mut backoff = Backoff::new();
    loop {
        // Every attempt so far failed. The deadline is checked after an
        // attempt, so a select woken just as it passes still uses the wake.
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        // Borrowed, not cloned, and only around the wait: the attempts
        // (which may run a send arm's message expression) happen outside.
        // Spin a little, but never yield the thread before parking: the
        // peers a select waits for are often spinning themselves (on
        // non-blocking selects or tries), and a yield hands the core to one
        // of them until the scheduler's next tick (milliseconds), while the
        // message that select could take arrives with nobody registered to
        // wake it. At capacity 0 no spin can succeed at all: a peer's try
        // completes only against the packets `block` queues.
        // (`examples/select_latency.rs` measures it.)
        let blocked = hook::with_current(|park| {
            if !backoff.is_spun() && park.spin_before_park() {
                backoff.snooze();
                Blocked::Retry(None)
            } else {
                block(ops, park, deadline, biased, consume)
            }
        });
        let preferred = match blocked {
            Blocked::Completed(i) => return Some(i),
            Blocked::Retry(preferred) => preferred,
        };
        // Start with the ready operation `block` picked, else with one
        // picked now: the scan tries its start first.
        let from = match preferred {
            Some(i) => i,
            None if biased => 0,
            None => match look(ops) {
                Look::Ready(i) => i,
                Look::NoneReady | Look::Skipped => first_op(n, false),
            },
        };
        if let Some(i) = scan(ops, from, consume) {
            return Some(i);
        }
    }
}

/// What a blocked select waits on: each of its operations.
struct Waits<'a, L: ?Sized>(&'a L);

impl<L: OpList + ?Sized> Describe for Waits<'_, L> {
    fn op(&self) -> OpKind {
        OpKind::Select
    }

    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.count();
        write!(
            f,
            "select on {n} operation{}",
            if n == 1 { "" } else { "s" }
        )?;
        let mut first = true;
        for i in 0..n {
            if let Some(on) = self.0.peek(i).and_then(|op| op.waits_on()) {
                f.write_str(if first { ": " } else { "; " })?;
                first = false;
                fmt::Display::fmt(&on, f)?;
            }
        }
        Ok(())
    }
}

/// Blocks once on every operation, without losing a wake-up: registers on
/// every operation's waiter list, fences, and parks only if every operation
/// is still blocked. On the way out, leaves the list of the one ready
/// operation it returns (to be retried first) and abandons the others.
fn block<L: OpList + ?Sized>(
    ops: &mut L,
    park: &dyn Park,
    deadline: Option<Instant>,
    biased: bool,
    consume: bool,
) -> Blocked {
    let n = ops.count();
    // Receives on rendezvous channels wait with packets, decided through
    // one token, so that they can be served while the select sleeps (not
    // when only looking for readiness: a served packet consumes).
    let token = (consume && (0..n).any(|i| ops.get(i).is_some_and(|op| op.waits_in_rendezvous())))
        .then(Token::new);
    let mut registered = Registered {
        ops,
        done: false,
        token: token.clone(),
    };
    if let Some(token) = &token {
        // A sender serves the first packet it finds, so where several
        // receives of this select wait on one channel, the queue order
        // picks among them; and a packet queued earlier can be served
        // earlier. So, unless biased, the packets go in a random order.
        let mut order: Vec<usize> = (0..n)
            .filter(|&i| {
                registered
                    .ops
                    .get(i)
                    .is_some_and(|op| op.waits_in_rendezvous())
            })
            .collect();
        if !biased {
            shuffle(&mut order);
        }
        for i in order {
            if let Some(op) = registered.ops.get(i) {
                op.queue_packet(park, token, i);
            }
        }
    }
    // Registered after the packets are queued: queuing one wakes a waiter
    // of the other side, which must not be this select (a select with a
    // send and a receive on one channel would wake itself, and spin).
    for i in 0..n {
        if let Some(op) = registered.ops.get(i) {
            op.register(park);
        }
    }
    fence(Ordering::SeqCst);
    // The ready operation to leave its list for (and retry first): the
    // first if biased, else one chosen uniformly.
    let find = |ops: &mut L, ready: &dyn Fn(&dyn Op) -> bool| {
        if biased {
            (0..n).find(|&i| ops.get(i).is_some_and(|op| ready(op)))
        } else {
            pick_where(ops, ready)
        }
    };
    let own = token.as_ref();
    let mut chosen = find(registered.ops, &|op| !op.still_blocked(own));
    if chosen.is_none() {
        // Cancelled (unwinding) out of the park after a peer served one of
        // our rendezvous packets: the hand-off stands, as for a plain
        // receive (`rendezvous.rs`); the unwinding goes on at the next
        // blocking operation or suspension.
        // A timer among the operations wakes the select when it is due:
        // nobody else would.
        let due = (0..n)
            .filter_map(|i| registered.ops.peek(i).and_then(|op| op.deadline()))
            .min();
        let wake_at = match (deadline, due) {
            (Some(deadline), Some(due)) => Some(deadline.min(due)),
            (deadline, due) => deadline.or(due),
        };
        let waits = Waits(&*registered.ops);
        let on = WaitingOn::on(&waits);
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| park.park_on(wake_at, on))) {
            if let Some(token) = registered.token.take() {
                let served = token.close().err();
                if let Some(i) = served {
                    // A send handed a partner lets it go; a reserved
                    // receive gives up unless it was filled already.
                    let completed = match registered.settle_packets(i) {
                        PacketOutcome::Completed => true,
                        PacketOutcome::Reserved => registered.await_fill(i, None, None),
                        PacketOutcome::Partner => {
                            registered.discard(i);
                            false
                        }
                        PacketOutcome::Nothing => false,
                    };
                    registered.finish(None);
                    if completed {
                        crate::rendezvous::defer(payload);
                        return Blocked::Completed(i);
                    }
                } else {
                    registered.settle_packets(usize::MAX);
                }
            }
            resume_unwind(payload);
        }
        // Only a choice of which registration to leave rather than abandon:
        // plain loads will do.
        chosen = find(registered.ops, &|op| op.ready());
    }
    // Before anything completes, decide the token: either a peer served
    // one of our packets (that operation is done, or about to be), or none
    // will.
    if let Some(token) = registered.token.take() {
        if let Err(i) = token.close() {
            // Registered nowhere from here: a wake-one meant for another
            // operation is handed on, not swallowed by a wait below. And
            // first: abandoning may run a waker (user code, which may
            // panic), and a partner taken below must reach the retry that
            // fills it with no user code in between (a `select!` arm, which
            // holds it, has no destructor to let it go: it would make the
            // borrows of its message expression outlive the select).
            registered.finish(None);
            match registered.settle_packets(i) {
                PacketOutcome::Completed => return Blocked::Completed(i),
                // A receiver handed this send its packet: the retry, which
                // starts with it, fills it.
                PacketOutcome::Partner => return Blocked::Retry(Some(i)),
                // A select's send reserved this receive: wait for its
                // message.
                PacketOutcome::Reserved => {
                    if registered.await_fill(i, Some(park), deadline) {
                        return Blocked::Completed(i);
                    }
                    return Blocked::Retry(None);
                }
                PacketOutcome::Nothing => return Blocked::Retry(None),
            }
        } else {
            registered.settle_packets(usize::MAX);
        }
    }
    registered.finish(chosen);
    Blocked::Retry(chosen)
}

/// How one [`block`] ended.
enum Blocked {
    /// Retry the operations, this ready one first if any.
    Retry(Option<usize>),
    /// A peer completed this receive through its rendezvous packet.
    Completed(usize),
}

/// The registrations of one [`block`]: ended on every way out. Normally by
/// [`finish`](Registered::finish); if the park (or a waker clone) unwinds,
/// by `Drop`, which abandons them all, so that none is left behind to
/// swallow a wake-one and none of the wakes taken is lost.
struct Registered<'o, L: OpList + ?Sized> {
    ops: &'o mut L,
    done: bool,
    /// The token of the rendezvous packets, until decided.
    token: Option<Arc<Token>>,
}

impl<L: OpList + ?Sized> Registered<'_, L> {
    /// Takes every rendezvous packet back; operation `served`'s keeps what
    /// its packet got (`usize::MAX`: none was served). Returns what that
    /// was.
    fn settle_packets(&mut self, served: usize) -> PacketOutcome {
        let mut outcome = PacketOutcome::Nothing;
        for i in 0..self.ops.count() {
            if let Some(op) = self.ops.get(i) {
                let settled = op.settle_packet(served == i);
                if served == i {
                    outcome = settled;
                }
            }
        }
        outcome
    }

    /// Lets go of what operation `i` holds (a partner), unwinding.
    fn discard(&mut self, i: usize) {
        if let Some(op) = self.ops.get(i) {
            op.discard();
        }
    }

    /// Operation `i`'s [`Op::await_fill`].
    fn await_fill(&mut self, i: usize, park: Option<&dyn Park>, deadline: Option<Instant>) -> bool {
        self.ops
            .get(i)
            .is_some_and(|op| op.await_fill(park, deadline))
    }

    fn finish(&mut self, retry: Option<usize>) {
        for i in 0..self.ops.count() {
            if let Some(op) = self.ops.get(i) {
                op.unregister(retry == Some(i));
            }
        }
        self.done = true;
    }
}

impl<L: OpList + ?Sized> Drop for Registered<'_, L> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            // Unwinding: nothing completes, a message a packet got anyway
            // goes on to the next receiver, and a partner is let go.
            let _ = token.close();
            self.settle_packets(usize::MAX);
        }
        if !self.done {
            self.finish(None);
        }
    }
}

/// The macros' driver: completes one of `ops` (each at most once), waiting
/// as `wait` allows; `None` if none completed. `biased`: the first that can
/// complete, in order ([`select_biased!`](crate::select_biased!)), rather
/// than one chosen at random.
#[doc(hidden)]
#[inline]
pub fn run(ops: &mut [OpRef<'_>], wait: Wait, biased: bool) -> Option<usize> {
    drive(ops, wait, true, biased, first_op(ops.len(), biased))
}

/// The macro's first try, made before [`run`] with each arm's own methods
/// rather than through `&mut dyn Op`: the arms' readiness probes and the
/// one try that follows are then inlined at the call site, with no call
/// through a vtable (a plain `recv` is short enough that indirect calls
/// per arm would cost a select as much as the receive itself). It makes the same pick as [`look`]: a ready arm chosen
/// uniformly at random, or, made [`biased`](FirstTry::biased), the first
/// ready arm. The expansion probes every arm in order
/// ([`probe`](FirstTry::probe)), asks for the pick
/// ([`pick`](FirstTry::pick)), then offers each arm its turn
/// ([`turn`](FirstTry::turn)); only the picked one is tried. If nothing
/// looked ready or the try failed, [`run`] does the whole select as before
/// (a failed try has changed nothing: a receive took nothing, a send made
/// its message and keeps it for its next try).
///
/// Not under loom, as [`look`], and not past 64 arms.
#[doc(hidden)]
#[derive(Default)]
pub struct FirstTry {
    /// The arm the next `probe` or `turn` is for (after the probes, the
    /// number of arms).
    k: usize,
    ready: u64,
    /// Set by a `pick` that returns `true`, before any `turn`.
    picked: usize,
    /// Picks the first ready arm rather than a random one.
    biased: bool,
}

impl FirstTry {
    /// A first try that picks the first ready arm, for
    /// [`select_biased!`](crate::select_biased!).
    #[inline]
    #[must_use]
    pub fn biased() -> Self {
        FirstTry {
            biased: true,
            ..FirstTry::default()
        }
    }

    /// Records the next arm's readiness.
    #[inline]
    pub fn probe(&mut self, ready: bool) {
        self.ready |= u64::from(ready) << (self.k & 63);
        self.k += 1;
    }

    /// Picks the arm to try; `false` if there is none (or no first try).
    #[inline]
    pub fn pick(&mut self) -> bool {
        // Every arm was probed, so `k` is their number.
        let n = std::mem::replace(&mut self.k, 0);
        if cfg!(loom) || !(1..=64).contains(&n) {
            return false;
        }
        let look = if self.biased {
            pick_ready(self.ready & self.ready.wrapping_neg(), || 0)
        } else {
            // One arm ready (the common case: a message on one channel)
            // draws no random number.
            pick_ready(self.ready, random_u32)
        };
        match look {
            Look::Ready(i) => {
                self.picked = i;
                true
            }
            Look::NoneReady | Look::Skipped => false,
        }
    }

    /// Whether the next arm is the picked one.
    #[inline]
    pub fn turn(&mut self) -> bool {
        let mine = self.k == self.picked;
        self.k += 1;
        mine
    }
}

/// What the [`select!`](crate::select!) macro expands to uses. Not API.
#[doc(hidden)]
pub mod __private {
    pub use super::{run, FirstTry, OpRef, RecvArm, SendArm, Wait};
}

// ---- Select ----------------------------------------------------------------

/// A set of channel operations to wait on, built at run time; crossbeam's
/// `Select`. Operations may be on channels of any mode and protocol, mixed.
///
/// Add operations with [`recv`](Select::recv) and [`send`](Select::send),
/// each returning the operation's index, then call
/// [`select`](Select::select) (or [`try_select`](Select::try_select),
/// [`select_timeout`](Select::select_timeout)) to wait until one is
/// selected, and complete it on the [`SelectedOperation`]. If several are
/// ready, one of them is selected uniformly at random, wherever it was
/// added ([`new_biased`](Select::new_biased): the first added). An
/// operation on a disconnected channel is ready (it fails).
///
/// In a swco coroutine, waiting suspends only the coroutine.
///
/// ```
/// use swco_channel::{mpmc, spsc, Select, Updt};
///
/// let (tx1, rx1) = spsc::bounded_with::<u32, Updt>(1);
/// let (tx2, rx2) = mpmc::bounded::<&str>(1);
/// std::thread::spawn(move || tx2.send("hello").unwrap());
///
/// let mut sel = Select::new();
/// let a = sel.recv(&rx1);
/// let b = sel.recv(&rx2);
/// let oper = sel.select();
/// match oper.index() {
///     i if i == a => println!("{:?}", oper.recv(&rx1)),
///     i if i == b => assert_eq!(oper.recv(&rx2), Ok("hello")),
///     _ => unreachable!(),
/// }
/// # drop(tx1);
/// ```
pub struct Select<'a> {
    /// Removed operations are [`Removed`] stand-ins.
    ops: Vec<Box<dyn Op + 'a>>,
    /// For each operation, its channel and the way it goes, for the first
    /// look at readiness ([`Select::look`]); [`Removed`] for a removed one.
    probes: Vec<(&'a (dyn Probe + 'a), Kind)>,
    /// For each operation, the channel it was added for and which way it
    /// goes: what [`SelectedOperation`] checks its caller's endpoint
    /// against, kept here rather than asked of the operation.
    ends: Vec<(*const (), Kind)>,
    live: usize,
    biased: bool,
    /// This select's own xorshift state for its random start: no
    /// thread-local access per select.
    rng: u32,
}

/// A selected operation of a [`Select`], to be completed with
/// [`recv`](SelectedOperation::recv) or [`send`](SelectedOperation::send)
/// on the endpoint it was added for (or a clone of it).
///
/// A selected receive has already taken its message (or found the channel
/// disconnected): [`recv`](SelectedOperation::recv) hands it over.
///
/// # Dropped without completing
///
/// Like crossbeam's, that is a bug: in a debug build the drop panics (only
/// there: crossbeam panics in every build). The
/// message a selected receive took cannot go back into the channel (not in
/// its FIFO place), so it is dropped, never leaked, and in a release build
/// that is all that happens; a selected send on a rendezvous channel lets
/// the receiver it held go, still waiting.
#[must_use = "a selected operation must be completed with `recv` or `send`"]
pub struct SelectedOperation<'s> {
    op: &'s mut (dyn Op + 's),
    /// The endpoint the operation was added for, and which way it goes.
    end: (*const (), Kind),
    index: usize,
    done: bool,
}

/// [`Select::try_select`] found no operation ready.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct TrySelectError;

/// [`Select::select_timeout`] found no operation ready before the deadline.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct SelectTimeoutError;

/// [`Select::try_ready`] found no operation ready.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct TryReadyError;

/// [`Select::ready_timeout`] found no operation ready before the deadline.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct ReadyTimeoutError;

impl fmt::Display for TrySelectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("all operations in select would block")
    }
}

impl fmt::Display for SelectTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("timed out waiting on select")
    }
}

impl fmt::Display for TryReadyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("all operations in select would block")
    }
}

impl fmt::Display for ReadyTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("timed out waiting on select")
    }
}

impl std::error::Error for TrySelectError {}
impl std::error::Error for SelectTimeoutError {}
impl std::error::Error for TryReadyError {}
impl std::error::Error for ReadyTimeoutError {}

impl<'a> Select<'a> {
    /// An empty set; when several operations are ready, one of them is
    /// selected uniformly at random.
    #[must_use]
    pub fn new() -> Self {
        Select {
            ops: Vec::new(),
            probes: Vec::new(),
            ends: Vec::new(),
            live: 0,
            biased: false,
            // Seeded from the thread's sequence; never 0 (xorshift's fixed
            // point).
            rng: seed() | 1,
        }
    }

    /// An empty set that, when several operations are ready, selects the
    /// one added first.
    #[must_use]
    pub fn new_biased() -> Self {
        Select {
            biased: true,
            ..Select::new()
        }
    }

    fn add(
        &mut self,
        op: Box<dyn Op + 'a>,
        probe: &'a (dyn Probe + 'a),
        end: (*const (), Kind),
    ) -> usize {
        self.ops.push(op);
        self.probes.push((probe, end.1));
        self.ends.push(end);
        self.live += 1;
        self.ops.len() - 1
    }

    /// Adds a receive on `rx`; returns its index. The same receiver may be
    /// added more than once. `rx` is a channel's [`Receiver`] of any mode
    /// and protocol, a [`TimerReceiver`](crate::TimerReceiver) (ready when
    /// its message is due) or a
    /// [`oneshot::Receiver`](crate::oneshot::Receiver).
    ///
    /// Allocates once, here: the operation's slot for the message it takes
    /// when selected. On a zero-capacity (rendezvous) channel it is ready
    /// when a sender waits, and a blocked select waits there too, so any
    /// sender (a thread, coroutine, future or another select) can meet it.
    pub fn recv<R: SelectRecv + ?Sized>(&mut self, rx: &'a R) -> usize {
        let end = (rx.end(), Kind::Recv);
        let parts = rx.parts();
        self.add(parts.arm, parts.probe, end)
    }

    /// Adds a send on `tx`; returns its index. It is selected when the
    /// channel has room (or every receiver is gone); on a zero-capacity
    /// (rendezvous) channel, when a receiver waits, which it then holds for
    /// [`SelectedOperation::send`]. A blocked select waits in the
    /// rendezvous for it too, so any receiver (a `try_recv` included) can
    /// meet it.
    pub fn send<T, M: Mode, P: Protocol>(&mut self, tx: &'a Sender<T, M, P>) -> usize {
        let end = (channel_of(&tx.chan), Kind::Send);
        let op = SendReady {
            partner: None,
            tx,
            ticket: None,
            packet: None,
        };
        self.add(Box::new(op), &*tx.chan, end)
    }

    /// Removes the operation at `index` (indices of the others stay).
    ///
    /// # Panics
    /// If there is no operation at `index`, or it was removed already.
    pub fn remove(&mut self, index: usize) {
        assert!(
            self.ops.get(index).is_some_and(|op| !op.removed()),
            "no operation has the specified index"
        );
        self.ops[index] = Box::new(Removed);
        self.probes[index].0 = &Removed;
        self.live -= 1;
    }

    fn selected(&mut self, index: usize) -> SelectedOperation<'_> {
        let op = &mut *self.ops[index];
        debug_assert!(!op.removed(), "the driver selects a live operation");
        SelectedOperation {
            op,
            end: self.ends[index],
            index,
            done: false,
        }
    }

    /// The next number of this select's own xorshift sequence.
    #[inline]
    fn next_random(&mut self) -> u32 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        x
    }

    /// Where this select's scan starts: the first operation if biased,
    /// else a random one, as [`first_op`] picks but from `self.rng`.
    #[inline]
    fn first_op(&mut self) -> usize {
        let n = self.ops.len();
        if self.biased || n <= 1 || cfg!(loom) {
            return 0;
        }
        // Multiply-shift, as in `random_below`.
        ((u64::from(self.next_random()) * n as u64) >> 32) as usize
    }

    /// The first look at readiness ([`look`]'s, made from the flat list of
    /// probes): a ready operation chosen uniformly, drawing no random
    /// number when only one is ready.
    #[inline]
    fn look(&mut self) -> Look {
        let n = self.probes.len();
        if self.biased || cfg!(loom) || n < 2 {
            return Look::Skipped;
        }
        if n > 64 {
            return look(&mut self.ops[..]);
        }
        let ready = self
            .probes
            .iter()
            .enumerate()
            .fold(0u64, |bits, (i, (probe, kind))| {
                bits | u64::from(probe.ready(*kind)) << i
            });
        pick_ready(ready, || self.next_random())
    }

    #[inline(always)]
    fn run(&mut self, wait: Wait, consume: bool) -> Option<usize> {
        let look = self.look();
        if let ControlFlow::Break(answer) = act_on_look(&mut self.ops[..], look, wait, consume) {
            return answer;
        }
        let start = self.first_op();
        let biased = self.biased;
        drive_after_look(&mut self.ops[..], wait, consume, biased, start)
    }

    /// Selects an operation that is ready now, if there is one.
    ///
    /// ```
    /// use swco_channel::{mpsc, Select, TrySelectError};
    /// let (tx, rx) = mpsc::bounded::<i32>(1);
    /// let mut sel = Select::new();
    /// sel.recv(&rx);
    /// assert_eq!(sel.try_select().err(), Some(TrySelectError));
    /// tx.send(7).unwrap();
    /// assert_eq!(sel.try_select().unwrap().recv(&rx), Ok(7));
    /// ```
    ///
    /// # Errors
    ///
    /// [`TrySelectError`] if no operation completes now: every receive
    /// finds its channel empty (on a zero-capacity channel, no sender
    /// waiting) and every send finds its channel full (no receiver
    /// waiting), or the set has no operations. Every operation is tried
    /// once; nothing blocks.
    /// An operation on a disconnected channel counts as ready and is
    /// selected: its failure is reported by [`SelectedOperation::recv`] or
    /// [`SelectedOperation::send`], not here.
    pub fn try_select(&mut self) -> Result<SelectedOperation<'_>, TrySelectError> {
        match self.run(Wait::Now, true) {
            Some(i) => Ok(self.selected(i)),
            None => Err(TrySelectError),
        }
    }

    /// Waits until an operation is selected. With no operations, waits for
    /// ever.
    // The `expect` states an internal invariant; callers cannot reach it.
    #[allow(clippy::missing_panics_doc)]
    pub fn select(&mut self) -> SelectedOperation<'_> {
        let i = self
            .run(Wait::Forever, true)
            .expect("a select without deadline returns selected");
        self.selected(i)
    }

    /// Waits at most `timeout` for an operation to be selected.
    ///
    /// ```
    /// use std::time::Duration;
    /// use swco_channel::{spsc, Select, SelectTimeoutError};
    /// let (tx, rx) = spsc::bounded::<i32>(1);
    /// let mut sel = Select::new();
    /// sel.recv(&rx);
    /// let r = sel.select_timeout(Duration::from_millis(1));
    /// assert_eq!(r.err(), Some(SelectTimeoutError));
    /// # drop(tx);
    /// ```
    ///
    /// # Errors
    ///
    /// [`SelectTimeoutError`] if no operation was selected when `timeout`
    /// had passed (always so, once it passes, for a set with no
    /// operations). Every operation is tried at least once before the
    /// deadline is checked, so a zero `timeout` acts as
    /// [`try_select`](Select::try_select); a `timeout` too large to
    /// represent as an [`Instant`] never expires.
    /// An operation on a disconnected channel counts as ready and is
    /// selected: its failure is reported by [`SelectedOperation::recv`] or
    /// [`SelectedOperation::send`], not here.
    pub fn select_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<SelectedOperation<'_>, SelectTimeoutError> {
        match self.run(Wait::timeout(timeout), true) {
            Some(i) => Ok(self.selected(i)),
            None => Err(SelectTimeoutError),
        }
    }

    /// Waits until `deadline` at most for an operation to be selected.
    ///
    /// # Errors
    ///
    /// [`SelectTimeoutError`] if no operation was selected by `deadline`,
    /// as for [`select_timeout`](Select::select_timeout); a `deadline`
    /// already past still tries every operation once.
    /// An operation on a disconnected channel counts as ready and is
    /// selected: its failure is reported by [`SelectedOperation::recv`] or
    /// [`SelectedOperation::send`], not here.
    pub fn select_deadline(
        &mut self,
        deadline: Instant,
    ) -> Result<SelectedOperation<'_>, SelectTimeoutError> {
        match self.run(Wait::Until(deadline), true) {
            Some(i) => Ok(self.selected(i)),
            None => Err(SelectTimeoutError),
        }
    }

    /// The index of an operation that is ready now, without performing it.
    /// (By the time the caller performs it, it may no longer be ready.)
    ///
    /// # Errors
    ///
    /// [`TryReadyError`] if no operation is ready now (every receive's
    /// channel empty, every send's channel full, none of them
    /// disconnected), or the set has no operations. Nothing blocks.
    pub fn try_ready(&mut self) -> Result<usize, TryReadyError> {
        self.run(Wait::Now, false).ok_or(TryReadyError)
    }

    /// Waits until an operation is ready and returns its index, without
    /// performing it. (By the time the caller performs it, it may no longer
    /// be ready.)
    // The `expect` states an internal invariant; callers cannot reach it.
    #[allow(clippy::missing_panics_doc)]
    pub fn ready(&mut self) -> usize {
        self.run(Wait::Forever, false)
            .expect("a wait without deadline returns ready")
    }

    /// Waits at most `timeout` until an operation is ready; returns its
    /// index without performing it.
    ///
    /// # Errors
    ///
    /// [`ReadyTimeoutError`] if no operation was ready when `timeout` had
    /// passed (an operation on a disconnected channel counts as ready).
    /// Readiness is checked at least once before the deadline is; a
    /// `timeout` too large to represent as an [`Instant`] never expires.
    pub fn ready_timeout(&mut self, timeout: Duration) -> Result<usize, ReadyTimeoutError> {
        self.run(Wait::timeout(timeout), false)
            .ok_or(ReadyTimeoutError)
    }

    /// Waits until `deadline` at most until an operation is ready; returns
    /// its index without performing it.
    ///
    /// # Errors
    ///
    /// [`ReadyTimeoutError`] if no operation was ready by `deadline`, as for
    /// [`ready_timeout`](Select::ready_timeout); a `deadline` already past
    /// still checks once.
    pub fn ready_deadline(&mut self, deadline: Instant) -> Result<usize, ReadyTimeoutError> {
        self.run(Wait::Until(deadline), false)
            .ok_or(ReadyTimeoutError)
    }
}

impl Default for Select<'_> {
    fn default() -> Self {
        Select::new()
    }
}

impl fmt::Debug for Select<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Select")
            .field("operations", &self.live)
            .field("biased", &self.biased)
            .finish()
    }
}

impl SelectedOperation<'_> {
    /// The index [`Select::recv`] or [`Select::send`] returned for this
    /// operation.
    #[must_use]
    pub fn index(&self) -> usize {
        self.index
    }

    /// Completes a selected receive: the message it took, or `RecvError` if
    /// the channel was empty and disconnected.
    ///
    /// # Errors
    ///
    /// [`RecvError`] if the receive was selected because its channel was
    /// empty and every sender was gone (a disconnected channel counts as
    /// ready). The outcome was fixed when the operation was selected: a
    /// message it took then is returned even if the senders have gone
    /// since.
    ///
    /// # Panics
    /// If `rx` is not a receiver of the channel this operation was added
    /// for (the receiver added, or a clone of it, as crossbeam accepts).
    pub fn recv<R: SelectRecv + ?Sized>(mut self, rx: &R) -> Result<R::Msg, RecvError> {
        let (channel, kind) = self.end;
        assert!(
            kind == Kind::Recv && channel == rx.end(),
            "passed a receiver that wasn't selected"
        );
        // The arm's address, which is its result's (`RecvArm` and
        // `TimerArm` are `repr(C)` with `result` first).
        let stash = (self.op as *mut (dyn Op + '_)).cast::<Option<Result<R::Msg, RecvError>>>();
        // SAFETY: the operation is a receive (`Kind::Recv`), so `Select::recv`
        // made it (`RecvOp::arm`) for a receiver whose `end` is `channel`:
        // a `RecvArm` if that is the address of a channel, a `TimerArm` if
        // it is that of a timer. The select borrows that receiver (so the
        // channel or timer) for its whole life, and the arm's first field
        // (at `stash`) is its `Option<Result<M', RecvError>>` slot, `M'`
        // being the message type of that channel (of a timer, `Instant`).
        // `rx`'s end is a live channel or timer at the same address; two
        // live channels or timers cannot share an address (none is
        // zero-sized nor contains another), so it is that same one, and
        // `R::Msg` is `M'`. `self.op` is borrowed mutably, so nothing else
        // touches the slot.
        let outcome = unsafe { (*stash).take() };
        self.done = true;
        outcome.expect("a selected receive holds its outcome")
    }

    /// Completes a selected send: sends `msg` on `tx`, or gives it back if
    /// every receiver is gone.
    ///
    /// On a zero-capacity (rendezvous) channel the send was selected
    /// holding the receiver that made it ready (reserved: no other sender
    /// can serve it meanwhile), and `msg` goes to that receiver, as in
    /// crossbeam and Go; it does not block. If that receiver gave up in
    /// between (a `recv_timeout` whose deadline passed, a dropped receive
    /// future), this sends as [`Sender::send`] does. Dropping the
    /// `SelectedOperation` instead lets the receiver go, still waiting.
    ///
    /// On a channel with capacity, the send was selected because the
    /// channel had room. On a side with
    /// one sender (`spsc`, `spmc`) that room cannot vanish before this call,
    /// and it does not block. On a side with several senders (`mpsc`,
    /// `mpmc`) another sender may take the room in between; then this waits
    /// for room as [`Sender::send`] does. (Holding the room by claiming the
    /// slot at selection time is not an option: a claimed slot must be
    /// published without suspending, since receivers wait for it by
    /// spinning.)
    ///
    /// # Errors
    ///
    /// [`SendError`], holding `msg`, if every receiver is gone: when this
    /// is called (a send selected because its channel was disconnected
    /// always fails here), or while it waits for room on a side with
    /// several senders. The message is then not in the channel.
    ///
    /// # Panics
    /// If `tx` is not a sender of the channel this operation was added for
    /// (the sender added, or a clone of it).
    pub fn send<T, M: Mode, P: Protocol>(
        mut self,
        tx: &Sender<T, M, P>,
        msg: T,
    ) -> Result<(), SendError<T>> {
        let (channel, kind) = self.end;
        assert!(
            kind == Kind::Send && channel == channel_of(&tx.chan),
            "passed a sender that wasn't selected"
        );
        // The operation's address, which is its partner's (`SendReady` is
        // `repr(C)` with `partner` first).
        let slot = (self.op as *mut (dyn Op + '_)).cast::<Option<Arc<Packet<T>>>>();
        // SAFETY: the operation is a send (`Kind::Send`), so `Select::send`
        // made it as a `SendReady` for a sender of the channel at
        // `channel`, which the select borrows for its whole life, and whose
        // first field (at `slot`) is its `Option<Arc<Packet<T'>>>`, `T'`
        // being that channel's message type. `tx`'s channel is a live
        // channel at the same address, so it is that channel and `T` is
        // `T'` (as in `recv`). `self.op` is borrowed mutably, so nothing
        // else touches the slot.
        let partner = unsafe { (*slot).take() };
        self.done = true;
        if let Some(partner) = partner {
            let zero = tx.chan.zero().expect("a partner is on a rendezvous");
            match zero.fill(&partner, msg) {
                Ok(()) => {
                    // A waker that panicked goes on, the message handed over.
                    crate::rendezvous::rethrow_deferred();
                    return Ok(());
                }
                // The receiver gave up on it meanwhile (a deadline, a
                // dropped future): an ordinary send.
                Err(msg) => return tx.send(msg),
            }
        }
        tx.send(msg)
    }
}

impl Drop for SelectedOperation<'_> {
    fn drop(&mut self) {
        if !self.done {
            // Whatever a selected receive took is dropped, not leaked, and
            // the slot is clean for the next select.
            self.op.discard();
            if cfg!(debug_assertions) && !std::thread::panicking() {
                panic!("dropped a `SelectedOperation` without completing the operation");
            }
        }
    }
}

impl fmt::Debug for SelectedOperation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelectedOperation")
            .field("index", &self.index)
            .finish()
    }
}

// ---- the macro -------------------------------------------------------------

/// Waits on a set of channel operations and runs the arm of the one
/// selected; crossbeam's `select!`, with the same syntax:
///
/// ```text
/// select! {
///     recv(rx) -> msg => body,        // msg: Result<T, RecvError>
///     send(tx, value) -> res => body, // res: Result<(), SendError<T>>
///     default => body,                // if nothing is ready now (also `default()`), or
///     default(timeout) => body,       // if nothing is ready within `timeout`
/// }
/// ```
///
/// Any number of `recv` and `send` arms, in any order, over channels of any
/// mode and protocol, mixed, capacity 0 (rendezvous) included; at most one
/// `default` arm. An arm's body is an expression (a block needs no comma
/// after it); an arm's arguments may end with a comma (`recv(rx,)`). `rx`
/// and `tx` are endpoints or references to them, each evaluated once.
///
/// If several operations are ready, one of them is selected uniformly at
/// random, wherever it sits among the arms
/// ([`select_biased!`](crate::select_biased!) takes the first instead). An
/// operation on a disconnected channel is ready (it fails: a `send` arm then
/// gets its value back in the `SendError`). Without a `default` arm the
/// select waits as long as it takes; in a swco coroutine, only the
/// coroutine waits. The bodies run after the select is over, so `break`,
/// `continue`, `return` and `?` in them act on the enclosing code.
///
/// A selected `recv` arm's message is received exactly once, and only by
/// that arm. A `send` arm's value expression is evaluated (inside a
/// closure, so no `?` or `return` in it) when that send first finds room,
/// at most once; if another sender takes the room before the value is in
/// and another arm is then selected, the value is dropped unsent.
///
/// ```
/// use std::time::Duration;
/// use swco_channel::{mpmc, select, spsc, Updt};
///
/// let (tx1, rx1) = spsc::bounded_with::<i32, Updt>(1);
/// let (tx2, rx2) = mpmc::bounded::<String>(1);
/// tx1.send(10).unwrap();
///
/// // Both operations are ready: either runs, each half of the time.
/// select! {
///     recv(rx1) -> msg => assert_eq!(msg, Ok(10)),
///     send(tx2, "hi".to_string()) -> res => {
///         assert!(res.is_ok());
///         assert_eq!(rx2.recv().unwrap(), "hi");
///     }
/// }
///
/// // Nothing ready within 1 ms.
/// let (_tx3, rx3) = spsc::bounded::<i32>(1);
/// let timed_out = select! {
///     recv(rx3) -> _ => false,
///     default(Duration::from_millis(1)) => true,
/// };
/// assert!(timed_out);
/// ```
#[macro_export]
macro_rules! select {
    ($($tokens:tt)*) => {
        $crate::__select_internal!(@parse false [] [] $($tokens)*)
    };
}

/// [`select!`](crate::select!), but when several operations are ready, the
/// first of them in the order written is selected, not a random one
/// (crossbeam's `select_biased!`; [`Select::new_biased`] is its run-time
/// form). Same syntax and otherwise the same behaviour.
///
/// ```
/// use swco_channel::{mpmc, select_biased};
///
/// let (tx1, rx1) = mpmc::bounded::<i32>(1);
/// let (tx2, rx2) = mpmc::bounded::<i32>(1);
/// tx1.send(1).unwrap();
/// tx2.send(2).unwrap();
///
/// // Both ready: the first arm wins, every time.
/// let got = select_biased! {
///     recv(rx1) -> m => m.unwrap(),
///     recv(rx2) -> m => m.unwrap(),
/// };
/// assert_eq!(got, 1);
/// ```
#[macro_export]
macro_rules! select_biased {
    ($($tokens:tt)*) => {
        $crate::__select_internal!(@parse true [] [] $($tokens)*)
    };
}

/// What [`select!`](crate::select!) and
/// [`select_biased!`](crate::select_biased!) expand through. Not API.
///
/// Every rule carries `$b`, `false` for `select!` and `true` for
/// `select_biased!`, down to the code it emits.
#[doc(hidden)]
#[macro_export]
macro_rules! __select_internal {
    // ---- parsing: `@parse bias [arms] [default] tokens...` --------------
    (@parse $b:tt [$($a:tt)*] $d:tt) => {
        $crate::__select_internal!(@bind $b [] [$($a)*] $d)
    };
    (@parse $b:tt [$($a:tt)*] $d:tt recv($r:expr $(,)?) -> $p:pat => $body:expr, $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b [$($a)* (recv ($r) ($p) $body)] $d $($rest)*)
    };
    (@parse $b:tt [$($a:tt)*] $d:tt recv($r:expr $(,)?) -> $p:pat => $body:expr) => {
        $crate::__select_internal!(@parse $b [$($a)* (recv ($r) ($p) $body)] $d)
    };
    (@parse $b:tt [$($a:tt)*] $d:tt recv($r:expr $(,)?) -> $p:pat => $body:block $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b [$($a)* (recv ($r) ($p) $body)] $d $($rest)*)
    };
    (@parse $b:tt [$($a:tt)*] $d:tt send($s:expr, $m:expr $(,)?) -> $p:pat => $body:expr, $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b [$($a)* (send ($s) ($m) ($p) $body)] $d $($rest)*)
    };
    (@parse $b:tt [$($a:tt)*] $d:tt send($s:expr, $m:expr $(,)?) -> $p:pat => $body:expr) => {
        $crate::__select_internal!(@parse $b [$($a)* (send ($s) ($m) ($p) $body)] $d)
    };
    (@parse $b:tt [$($a:tt)*] $d:tt send($s:expr, $m:expr $(,)?) -> $p:pat => $body:block $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b [$($a)* (send ($s) ($m) ($p) $body)] $d $($rest)*)
    };
    // `default` and `default()` alike.
    (@parse $b:tt $a:tt [] default $(())? => $body:expr, $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b $a [(now) $body] $($rest)*)
    };
    (@parse $b:tt $a:tt [] default $(())? => $body:expr) => {
        $crate::__select_internal!(@parse $b $a [(now) $body])
    };
    (@parse $b:tt $a:tt [] default $(())? => $body:block $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b $a [(now) $body] $($rest)*)
    };
    (@parse $b:tt $a:tt [] default($t:expr $(,)?) => $body:expr, $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b $a [(timeout $t) $body] $($rest)*)
    };
    (@parse $b:tt $a:tt [] default($t:expr $(,)?) => $body:expr) => {
        $crate::__select_internal!(@parse $b $a [(timeout $t) $body])
    };
    (@parse $b:tt $a:tt [] default($t:expr $(,)?) => $body:block $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b $a [(timeout $t) $body] $($rest)*)
    };
    (@parse $b:tt $a:tt [$($d:tt)+] default $($rest:tt)*) => {
        ::core::compile_error!("select!: there can be only one `default` case")
    };
    (@parse $b:tt $a:tt $d:tt $($rest:tt)+) => {
        ::core::compile_error!(
            "select!: expected `recv(r) -> res => body`, `send(s, msg) -> res => body`, \
             `default => body` or `default(timeout) => body`"
        )
    };

    // ---- naming: one fresh identifier per arm (each expansion step has its
    // own hygiene, so the `__arm` of each step is a different variable) ----
    (@bind $b:tt [$($done:tt)*] [(recv ($r:expr) $p:tt $body:tt) $($rest:tt)*] $d:tt) => {
        $crate::__select_internal!(@bind $b
            [$($done)* (__arm [$r.__select_recv_arm()] $p $body)]
            [$($rest)*] $d)
    };
    (@bind $b:tt [$($done:tt)*] [(send ($s:expr) ($m:expr) $p:tt $body:tt) $($rest:tt)*] $d:tt) => {
        $crate::__select_internal!(@bind $b
            [$($done)* (__arm [$crate::__private::SendArm::new(&$s, || $m)] $p $body)]
            [$($rest)*] $d)
    };
    (@bind $b:tt [$($done:tt)*] [] $d:tt) => {
        $crate::__select_internal!(@emit $b [$($done)*] [$($done)*] $d)
    };

    // ---- code: each arm's state in a `match` (so temporaries in the
    // endpoint expressions live to the end), then the driver, then the
    // selected arm's body, outside any loop of ours --------------------------
    (@emit $b:tt [($arm:ident [$($ctor:tt)*] $p:tt $body:tt) $($rest:tt)*] $all:tt $d:tt) => {
        match $($ctor)* {
            mut $arm => $crate::__select_internal!(@emit $b [$($rest)*] $all $d),
        }
    };
    (@emit $b:tt [] [$(($arm:ident $ctor:tt $p:tt $body:tt))*] $d:tt) => {{
        // The first try, statically dispatched (see `FirstTry`), then, if it
        // did not complete an arm, the whole select.
        let mut __first = $crate::__select_internal!(@first $b);
        $( __first.probe($arm.probe()); )*
        let mut __done = false;
        if __first.pick() {
            $( if __first.turn() { __done = $arm.try_now(); } )*
        }
        if !__done {
            let _ = $crate::__private::run(
                &mut [$($arm.as_op()),*],
                $crate::__select_internal!(@wait $d),
                $b,
            );
        }
        $crate::__select_internal!(@dispatch [$(($arm $p $body))*] $d)
    }};

    (@first false) => {
        <$crate::__private::FirstTry as ::core::default::Default>::default()
    };
    (@first true) => { $crate::__private::FirstTry::biased() };

    (@wait []) => { $crate::__private::Wait::Forever };
    (@wait [(now) $body:tt]) => { $crate::__private::Wait::Now };
    (@wait [(timeout $t:expr) $body:tt]) => { $crate::__private::Wait::timeout($t) };

    (@dispatch [($arm:ident ($p:pat) $body:tt) $($rest:tt)*] $d:tt) => {
        if let ::core::option::Option::Some(__outcome) = $arm.take() {
            match __outcome {
                $p => $body,
            }
        } else {
            $crate::__select_internal!(@dispatch [$($rest)*] $d)
        }
    };
    (@dispatch [] []) => {
        ::core::unreachable!("select! without a default returned unselected")
    };
    (@dispatch [] [$kind:tt $body:tt]) => { $body };
}
