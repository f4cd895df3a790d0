//! One operation of a select, as the engine sees it: the object-safe `Op`
//! trait (whatever the channel's message type, mode and protocol), the
//! `Probe` a `Select` looks at readiness through, and the stand-in for a
//! removed operation.

use std::time::Instant;

use crate::hook::{Park, WaitingOn};
use crate::rendezvous::Token;
use crate::sync::Arc;

use crate::rendezvous::select::InRendezvous;

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

    /// Ends a registration, if there is one: [`Waiters::leave`](crate::wait_list::Waiters::leave) if `retry`
    /// (the caller tries this operation next), else [`Waiters::abandon`](crate::wait_list::Waiters::abandon).
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

    /// The operation's part in a rendezvous, if its channel has zero
    /// capacity: a blocked select then waits for it with a packet in the
    /// rendezvous (see `rendezvous/`, invariant 5), so that a peer select,
    /// future or thread on the other end can meet it.
    fn in_rendezvous(&mut self) -> Option<&mut dyn InRendezvous> {
        None
    }
}

/// A borrowed operation, as the macro hands its arms to [`run`].
#[doc(hidden)]
pub struct OpRef<'r>(pub(crate) &'r mut (dyn Op + 'r));

/// A channel's readiness, as a [`Select`](crate::Select) looks at it before trying
/// anything: asked of the channel itself rather than of the operation, so
/// that the look is one call per operation on a flat list, with one load
/// fewer before the channel's words (the operation would first load its
/// channel pointer).
pub(crate) trait Probe {
    /// Whether an operation going `kind` would not block now.
    fn ready(&self, kind: Kind) -> bool;
}

/// What a [`Select`](crate::Select) keeps where an operation was removed, so that the
/// indices of the others stay and the list needs no `Option` (one branch
/// less per operation looked at): never ready, never completes, waits
/// nowhere.
pub(super) struct Removed;

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
