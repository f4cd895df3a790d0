//! A future's `poll` and drop on a zero-capacity channel: a pending future
//! waits with a packet queued in the rendezvous rather than on a waiter
//! list (see `future/mod.rs` and `rendezvous/mod.rs`).

use std::task::{Context, Poll};

use crate::chan::Chan;
use crate::error::{RecvError, SendError};
use crate::rendezvous::{rethrow_deferred, Arrival, Packet, Settled, Side};
use crate::sync::Arc;
use crate::{Mode, Protocol};

/// A send future's `poll` on a zero-capacity channel: `msg` until it is
/// in the channel or handed back, `packet` while one is queued. (The
/// future's fields, passed in: this file sees no future type, so that the
/// futures' module alone reaches down to it.)
pub(crate) fn poll_send<T, M: Mode, P: Protocol>(
    chan: &Chan<T, M, P>,
    msg: &mut Option<T>,
    packet: &mut Option<Arc<Packet<T>>>,
    cx: &mut Context<'_>,
) -> Poll<Result<(), SendError<T>>> {
    poll_rendezvous(chan, Side::Send, packet, cx, || {
        Some(msg.take().expect("SendFuture polled after completion"))
    })
    .map(|outcome| {
        outcome
            .map(drop)
            .map_err(|back| SendError(back.expect("a sender's message")))
    })
}

/// A future's `poll` on a zero-capacity channel, for either side: looks at
/// the packet a previous poll queued (making this poll's waker the one a
/// peer wakes), or arrives at the rendezvous with `msg()` (a sender's
/// message). `Ok`: served (a receiver's message); `Err`: the other side is
/// gone (a sender's message comes back).
fn poll_rendezvous<T, M: Mode, P: Protocol>(
    chan: &Chan<T, M, P>,
    side: Side,
    packet: &mut Option<Arc<Packet<T>>>,
    cx: &mut Context<'_>,
    msg: impl FnOnce() -> Option<T>,
) -> Poll<Result<Option<T>, Option<T>>> {
    let zero = chan.zero().expect("a zero-capacity channel");
    if let Some(queued) = packet {
        loop {
            match zero.look(queued) {
                Settled::Waiting => {
                    if zero.rewake(queued, cx.waker()) {
                        return Poll::Pending;
                    }
                }
                Settled::Done(got) => {
                    *packet = None;
                    return Poll::Ready(Ok(got));
                }
                Settled::Dismissed(back) => {
                    *packet = None;
                    return Poll::Ready(Err(back));
                }
                // A select's send reserved this receiver, then let it go:
                // nothing was received; arrive again.
                Settled::Retry => {
                    *packet = None;
                    break;
                }
                Settled::Moved(_) | Settled::Reserved => {
                    unreachable!("a future's packet is shared, and looked at")
                }
            }
        }
    }
    let waker = || cx.waker().clone();
    let gone = || chan.peers_gone(side);
    match zero.arrive(side, msg(), Some(&waker), &gone) {
        Arrival::Served(got) => {
            // A waker that panicked goes on once the message is settled: at
            // once for a send (ours moved into the channel), at the thread's
            // next blocking operation for a receive (its message is ours).
            if side == Side::Send {
                rethrow_deferred();
            }
            Poll::Ready(Ok(got))
        }
        Arrival::Disconnected(back) => Poll::Ready(Err(back)),
        Arrival::Queued(queued) => {
            *packet = Some(queued);
            chan.zero_queued(side);
            Poll::Pending
        }
        // A receiver that met a select's send with no message yet: the
        // select fills this packet (made with our waker) once it wakes.
        Arrival::Partner(partner) => {
            *packet = Some(partner);
            Poll::Pending
        }
        Arrival::Nobody(_) => unreachable!("a shared waiter was asked for"),
    }
}

/// A receive future's `poll` on a zero-capacity channel, `packet` while
/// one is queued; as [`poll_send`].
#[inline]
pub(crate) fn poll_recv<T, M: Mode, P: Protocol>(
    chan: &Chan<T, M, P>,
    packet: &mut Option<Arc<Packet<T>>>,
    cx: &mut Context<'_>,
) -> Poll<Result<T, RecvError>> {
    poll_rendezvous(chan, Side::Recv, packet, cx, || None).map(|outcome| {
        outcome
            .map(|got| got.expect("a served receiver has a message"))
            .map_err(|_| RecvError)
    })
}

/// A send future dropped with its packet queued: the packet is taken back
/// unless a receiver took it first; an unsent message is dropped here,
/// with the future.
pub(crate) fn drop_send_packet<T, M: Mode, P: Protocol>(
    chan: &Chan<T, M, P>,
    packet: &Arc<Packet<T>>,
) {
    let zero = chan.zero().expect("a zero-capacity channel");
    drop(zero.withdraw(Side::Send, packet));
}

/// A receive future dropped with its packet queued. Reserved by a select's
/// send: abandoned (it sends elsewhere). Handed a message, then dropped:
/// the message goes on to the next receiver rather than be lost (we are
/// still a receiver).
pub(crate) fn drop_recv_packet<T, M: Mode, P: Protocol>(
    chan: &Chan<T, M, P>,
    packet: &Arc<Packet<T>>,
) {
    let zero = chan.zero().expect("a zero-capacity channel");
    if let Settled::Done(Some(msg)) = zero.give_up(Side::Recv, packet) {
        if zero.reoffer(msg, &|| false) {
            chan.zero_queued(Side::Send);
        }
    }
}
