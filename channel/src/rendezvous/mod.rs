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
//!    its [`Park`](crate::hook::Park) lends, [`Park::waker_ref`](crate::hook::Park::waker_ref), for the whole wait), and
//!    looks at the packet's state before every park; the peer settles the
//!    state under the lock, then wakes the owner. A wake that lands before
//!    the park makes the park return at once (the [`Park`](crate::hook::Park) contract).
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
//!    count): the peer settles it with the [`HANDING`](packet::HANDING) mark set, wakes the
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
//!    [`UpdtCell`](crate::updt::UpdtCell)s (loads and stores), so an `Updt` rendezvous channel
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
//!
//! # Where the parts are
//!
//! Everything about capacity 0 is in this folder. The meeting:
//! `packet.rs`: the packets, their states and the select's token;
//! `meeting.rs`: the queues and what arriving, reserving, filling, giving
//! up and leaving do; `wait.rs`: the blocking wait of a thread or
//! coroutine. None of them knows the channel but through [`Peers`], nor
//! imports anything of `chan`, `select` or `future`. Each layer's side of
//! the meeting: `chan.rs`, a channel's zero-capacity sends and receives
//! and the channel as [`Peers`]; `select.rs`, a select's packets, which
//! the engine sees through [`select::InRendezvous`]; `future.rs`, a
//! future's polls and drops. These import their layer and the meeting
//! (through this file), and this file imports none of them, so no import
//! goes round in a circle.

mod chan;
pub(crate) mod future;
mod meeting;
mod packet;
pub(crate) mod select;
mod wait;

// Deferred unwinding lives in the blocking layer (`swco_wait::deferred`),
// which every block and every coroutine suspension consults.
pub(crate) use swco_wait::deferred::{defer, rethrow as rethrow_deferred};

pub(crate) use meeting::{Rendezvous, Side};
pub(crate) use packet::{Arrival, Filled, Packet, Reservation, Settled, Token};
pub(crate) use wait::Peers;
