//! What a blocked operation waits on ([`WaitingOn`]): the descriptor a
//! blocking operation hands its park context, so that a runtime can say,
//! for each parked coroutine, which operation on which channel holds it.
//!
//! # Why it is cheap
//!
//! A blocking operation builds the descriptor only on its way into a park
//! (never on a path that completes at once), and building it is storing
//! two words: the operation's kind and a pointer to what it waits on (the
//! channel itself, which knows its mode, protocol, capacity and creation
//! site). Nothing is formatted until someone asks ([`fmt::Display`]), and
//! the borrow in the descriptor is only as long as the park: a runtime that
//! keeps it must read it only while the operation is still parked, on the
//! parked party's own thread.

use std::fmt;
use std::panic::Location;

/// Something an operation can wait on, that can say what it is: a channel
/// (`spsc channel (cas, capacity 4) made at src/main.rs:10`), a coroutine
/// to join, or a synchronisation type.
pub trait Describe {
    /// Writes a short description, without the operation.
    ///
    /// # Errors
    ///
    /// Only those of the formatter.
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// The kind of a blocking operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// A send (blocking, timed, or the send half of a rendezvous).
    Send,
    /// A receive.
    Recv,
    /// A select over several operations.
    Select,
    /// A wait for a coroutine to finish.
    Join,
    /// A sleep or a wait for a deadline.
    Sleep,
    /// A wait on a synchronisation type (a mutex, a barrier…), which
    /// describes itself.
    Sync,
    /// A park whose operation said nothing about itself.
    Park,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Send => "send",
            Op::Recv => "recv",
            Op::Select => "select",
            Op::Join => "join",
            Op::Sleep => "sleep",
            Op::Sync => "wait",
            Op::Park => "park",
        })
    }
}

/// What a blocked operation waits on: its kind and, for a channel or a
/// synchronisation type, that object. Handed to
/// [`Park::park_on`](crate::hook::Park::park_on); shown as text
/// (`"recv on mpmc channel (cas, capacity 0) made at src/main.rs:7"`).
///
/// ```
/// use swco_channel::hook::{Op, WaitingOn};
/// assert_eq!(WaitingOn::op(Op::Join).to_string(), "join");
/// ```
#[derive(Clone, Copy)]
pub struct WaitingOn<'a> {
    op: Op,
    on: Option<&'a dyn Describe>,
}

impl<'a> WaitingOn<'a> {
    /// An operation that waits on nothing it can describe.
    #[must_use]
    pub const fn op(op: Op) -> Self {
        WaitingOn { op, on: None }
    }

    /// Operation `op` waiting on `on`.
    #[must_use]
    pub fn on(op: Op, on: &'a dyn Describe) -> Self {
        WaitingOn { op, on: Some(on) }
    }

    /// The kind of operation.
    #[must_use]
    pub fn kind(&self) -> Op {
        self.op
    }
}

impl fmt::Display for WaitingOn<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.op, f)?;
        if let Some(on) = self.on {
            f.write_str(" on ")?;
            on.describe(f)?;
        }
        Ok(())
    }
}

impl fmt::Debug for WaitingOn<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WaitingOn({self})")
    }
}

/// Describes a channel of mode `mode` and protocol `protocol`.
pub(crate) fn describe_channel(
    f: &mut fmt::Formatter<'_>,
    mode: &str,
    protocol: &str,
    capacity: usize,
    made_at: &Location<'_>,
) -> fmt::Result {
    write!(
        f,
        "{mode} channel ({protocol}, capacity {capacity}) made at {}:{}",
        made_at.file(),
        made_at.line()
    )
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    struct Thing;
    impl Describe for Thing {
        fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a thing")
        }
    }

    #[test]
    fn shows_the_operation_and_what_it_waits_on() {
        assert_eq!(WaitingOn::op(Op::Sleep).to_string(), "sleep");
        assert_eq!(
            WaitingOn::on(Op::Recv, &Thing).to_string(),
            "recv on a thing"
        );
        assert_eq!(
            WaitingOn::on(Op::Sync, &Thing).to_string(),
            "wait on a thing"
        );
        assert_eq!(WaitingOn::on(Op::Send, &Thing).kind(), Op::Send);
    }
}
