//! The zero-capacity paths of a channel: what its sends and receives do
//! in its [`Rendezvous`] instead of the ring, and the channel as the
//! rendezvous's blocking `wait` sees it ([`Peers`]). The endpoint, select
//! and future paths reach these through one test of `Chan::zero`, made
//! where each path starts; the meeting itself is in `meeting.rs`,
//! `packet.rs` and `wait.rs`, beside this file.

use std::time::Instant;

use crate::chan::{Chan, Unsent};
use crate::error::RecvTimeoutError;
use crate::hook::{self, Describe, Op, Park, WaitingOn};
use crate::rendezvous::{Arrival, Filled, Packet, Peers, Rendezvous, Side};
use crate::sync::Arc;
use crate::wait_list::Waiters;
use crate::{Mode, Protocol};

/// A receive on a rendezvous channel waiting for a selecting send to fill
/// its packet: reserved by that send while queued in a select
/// (`RESERVED`, [`Rendezvous::wait_filled`] from the select), or handed to
/// it as a partner when the receive met its message-less packet
/// (`PARTNER`, from a try). Told apart from a plain receive in a dump,
/// since a receive that waits here depends on one particular sender.
#[repr(transparent)]
pub(crate) struct AwaitingFill<C, const PARTNER: bool>(C);

impl<T, M: Mode, P: Protocol, const PARTNER: bool> Describe
    for AwaitingFill<Chan<T, M, P>, PARTNER>
{
    fn op(&self) -> Op {
        Op::Recv
    }

    fn describe(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let op = if PARTNER {
            "recv (handed as a partner to a selecting send, awaiting its fill)"
        } else {
            "recv (reserved by a selecting send, awaiting its fill)"
        };
        let chan = &self.0;
        crate::waiting_on::describe_channel(f, op, M::NAME, P::NAME, chan.capacity(), chan.made_at)
    }
}

impl<T, M: Mode, P: Protocol> Chan<T, M, P> {
    /// What a receive waiting for a selecting send's fill waits on
    /// (`PARTNER`: see [`AwaitingFill`]).
    pub(crate) fn awaiting_fill<const PARTNER: bool>(&self) -> WaitingOn<'_> {
        // SAFETY: `AwaitingFill` is a `repr(transparent)` wrapper of the
        // channel, so the cast reference points at a valid value of it, for
        // as long as `self` is borrowed.
        let view = unsafe { &*(self as *const Self).cast::<AwaitingFill<Self, PARTNER>>() };
        WaitingOn::on(view)
    }

    /// A send on a zero-capacity channel that does not wait: it completes
    /// only if a receiver is waiting. By pointer as `try_send_from` and
    /// `send_from` are: a receiver that takes the message gets a bitwise
    /// copy, and the caller forgets its own on `Ok`. One call, with the
    /// arrival inlined in it (every blocking send on a rendezvous tries
    /// this first, and on a ping-pong it succeeds on every hop), out of a
    /// ring's send path, which stays as small as it was.
    ///
    /// # Safety
    /// As for [`try_send_from`](Chan::try_send_from).
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn zero_try_send_from(
        &self,
        zero: &Rendezvous<T, P::Lock>,
        msg: *const T,
    ) -> Result<(), Unsent> {
        // SAFETY: the caller vouches for `msg`; this copy is a duplicate
        // that is either handed over (then the caller forgets its own) or
        // forgotten below.
        let copy = unsafe { std::ptr::read(msg) };
        match zero.arrive(Side::Send, Some(copy), None, &|| {
            self.peers_gone(Side::Send)
        }) {
            Arrival::Served(_) => Ok(()),
            Arrival::Nobody(back) => {
                std::mem::forget(back);
                Err(Unsent::Full)
            }
            Arrival::Disconnected(back) => {
                std::mem::forget(back);
                Err(Unsent::Disconnected)
            }
            Arrival::Queued(_) => unreachable!("no waker was given"),
            Arrival::Partner(_) => unreachable!("only a receiver is handed a partner"),
        }
    }

    /// A try that met a select's send with no message yet: the select was
    /// chosen (as crossbeam's and Go's receivers choose a waiting sender),
    /// and this waits, through the thread's or coroutine's park, for it to
    /// make its message and fill `partner`. `None` if it let the partner go
    /// instead (its `SelectedOperation` dropped): nothing was received.
    #[cold]
    #[inline(never)]
    pub(crate) fn zero_await_partner(
        &self,
        zero: &Rendezvous<T, P::Lock>,
        partner: &Arc<Packet<T>>,
    ) -> Option<T> {
        hook::with_current(|park| {
            // The packet was made with a waker that wakes nobody: ours from
            // now on, or it was settled meanwhile (then the look below sees
            // it).
            zero.rewake(partner, &park.waker());
            match zero.wait_filled(partner, park, self.awaiting_fill::<true>(), None) {
                Filled::Got(msg) => Some(msg),
                Filled::Released | Filled::GaveUp => None,
            }
        })
    }

    /// [`zero_try_send_from`](Chan::zero_try_send_from), waiting through
    /// `park` until a receiver takes the message, until `deadline` if
    /// there is one.
    ///
    /// # Safety
    /// As for [`try_send_from`](Chan::try_send_from).
    #[cold]
    pub(crate) unsafe fn zero_send_from(
        &self,
        zero: &Rendezvous<T, P::Lock>,
        msg: *const T,
        park: &dyn Park,
        deadline: Option<Instant>,
    ) -> Result<(), Unsent> {
        // SAFETY: as in `zero_try_send_from`.
        let copy = unsafe { std::ptr::read(msg) };
        match zero.wait::<false>(Some(copy), park, deadline, self) {
            Ok(_) => Ok(()),
            Err((back, timed_out)) => {
                std::mem::forget(back);
                Err(if timed_out {
                    Unsent::Timeout
                } else {
                    Unsent::Disconnected
                })
            }
        }
    }

    /// A packet of `side` was queued in the rendezvous: selects and futures
    /// of the other side wait on its waiter list for a partner to appear.
    pub(crate) fn zero_queued(&self, side: Side) {
        match side {
            Side::Send => self.receivers.notify_one(true),
            Side::Recv => self.senders.notify_one(true),
        }
    }

    /// A blocking receive on a zero-capacity channel: inlined into `recv`,
    /// so that a receive is one call (the wait), which seems to matter on
    /// a switch (perf samples cluster after the returns a resumed coroutine
    /// takes, as if each frame between the caller and its park cost a
    /// mispredicted return). The wait itself is not
    /// inlined: with a large message type that made `rustc` take minutes.
    #[inline(always)]
    pub(crate) fn zero_recv(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        let zero = self.zero().expect("a zero-capacity channel");
        hook::with_current(|park| zero.wait::<true>(None, park, deadline, self))
            .map(|got| got.expect("a served receiver has a message"))
            .map_err(|(_, timed_out)| {
                if timed_out {
                    RecvTimeoutError::Timeout
                } else {
                    RecvTimeoutError::Disconnected
                }
            })
    }
}

/// A zero-capacity channel, as its rendezvous's blocking `wait` sees it.
impl<T, M: Mode, P: Protocol> Peers for Chan<T, M, P> {
    #[inline(always)]
    fn waiting_on<const RECV: bool>(&self) -> WaitingOn<'_> {
        Chan::waiting_on::<RECV>(self)
    }

    fn awaiting_fill(&self) -> WaitingOn<'_> {
        Chan::awaiting_fill::<false>(self)
    }

    #[inline]
    fn gone(&self, side: Side) -> bool {
        self.peers_gone(side)
    }

    /// Whether a select or future of the other side may be waiting on its
    /// waiter list for a partner: a plain look, under the rendezvous lock,
    /// whose re-check (`Rendezvous::has_peers_locked`) takes the same lock.
    #[inline]
    fn watched(&self, side: Side) -> bool {
        match side {
            Side::Send => self.receivers.may_have_waiters(),
            Side::Recv => self.senders.may_have_waiters(),
        }
    }

    #[inline]
    fn notify(&self, side: Side) {
        self.zero_queued(side);
    }
}
