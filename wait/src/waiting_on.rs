//! What a blocked operation waits on ([`WaitingOn`]): the descriptor a
//! blocking operation hands its park context, so that a runtime can say,
//! for each parked coroutine, which operation on which channel holds it.
//!
//! # Why it is cheap
//!
//! A blocking operation builds the descriptor only on its way into a park
//! (never on a path that completes at once), and it is two words: a
//! pointer to what it waits on and the table that says which operation
//! it is and how to describe it (for a channel, the channel itself seen as
//! a receive or a send, which knows its mode, protocol, capacity and
//! creation site). A descriptor of three words (the operation apart) was
//! passed through memory rather than registers, and showed in the
//! instruction count of a blocking hop. Nothing is formatted until someone asks ([`fmt::Display`]), and
//! the borrow in the descriptor is only as long as the park: a runtime that
//! keeps it must read it only while the operation is still parked, on the
//! parked party's own thread.

use std::fmt;

/// Something a blocked operation waits on, that can say what it is: the
/// operation and its object, as in `recv on spsc channel (cas, capacity 4)
/// made at src/main.rs:10`, `join on coroutine #3`, or just `sleep`.
pub trait Describe {
    /// The kind of operation.
    fn op(&self) -> Op;

    /// Writes the whole description, operation first.
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
    /// A wait on a synchronisation type (a barrier, a wait group…).
    Sync,
    /// A wait for a mutex (`swco::sync::Mutex::lock`).
    Lock,
    /// A wait for a semaphore's permit (`swco::sync::Semaphore::acquire`).
    Acquire,
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
            Op::Lock => "lock",
            Op::Acquire => "acquire",
            Op::Park => "park",
        })
    }
}

/// An operation with no object to describe.
struct Bare(Op);

impl Describe for Bare {
    fn op(&self) -> Op {
        self.0
    }
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

static BARE: [Bare; 9] = [
    Bare(Op::Send),
    Bare(Op::Recv),
    Bare(Op::Select),
    Bare(Op::Join),
    Bare(Op::Sleep),
    Bare(Op::Sync),
    Bare(Op::Park),
    Bare(Op::Lock),
    Bare(Op::Acquire),
];

/// What a blocked operation waits on: one borrowed [`Describe`], so two
/// words, passed in registers and stored as they are. Handed to
/// [`Park::park_on`](crate::hook::Park::park_on); shown as text.
///
/// ```
/// use swco_wait::hook::{Op, WaitingOn};
/// assert_eq!(WaitingOn::op(Op::Join).to_string(), "join");
/// assert_eq!(WaitingOn::op(Op::Sleep).kind(), Op::Sleep);
/// ```
#[derive(Clone, Copy)]
pub struct WaitingOn<'a>(&'a dyn Describe);

impl<'a> WaitingOn<'a> {
    /// An operation that waits on nothing it can describe.
    #[must_use]
    pub fn op(op: Op) -> WaitingOn<'static> {
        let i = match op {
            Op::Send => 0,
            Op::Recv => 1,
            Op::Select => 2,
            Op::Join => 3,
            Op::Sleep => 4,
            Op::Sync => 5,
            Op::Park => 6,
            Op::Lock => 7,
            Op::Acquire => 8,
        };
        WaitingOn(&BARE[i])
    }

    /// A wait on `on`, which says what it is.
    #[inline]
    #[must_use]
    pub fn on(on: &'a dyn Describe) -> Self {
        WaitingOn(on)
    }

    /// The kind of operation.
    #[must_use]
    pub fn kind(&self) -> Op {
        self.0.op()
    }

    /// Two descriptors with the same identity describe the same wait (the
    /// same object, seen as the same operation): a dump formats it once.
    #[must_use]
    pub fn identity(&self) -> (usize, Op) {
        let data = self.0 as *const dyn Describe as *const () as usize;
        (data, self.kind())
    }
}

impl fmt::Display for WaitingOn<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.describe(f)
    }
}

impl fmt::Debug for WaitingOn<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WaitingOn({self})")
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    struct Thing;
    impl Describe for Thing {
        fn op(&self) -> Op {
            Op::Recv
        }
        fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("recv on a thing")
        }
    }

    #[test]
    fn shows_the_operation_and_what_it_waits_on() {
        for op in [
            Op::Send,
            Op::Recv,
            Op::Select,
            Op::Join,
            Op::Sleep,
            Op::Sync,
            Op::Park,
            Op::Lock,
            Op::Acquire,
        ] {
            assert_eq!(WaitingOn::op(op).kind(), op);
            assert_eq!(WaitingOn::op(op).to_string(), op.to_string());
        }
        assert_eq!(WaitingOn::on(&Thing).to_string(), "recv on a thing");
        assert_eq!(WaitingOn::on(&Thing).kind(), Op::Recv);
        assert_eq!(
            std::mem::size_of::<WaitingOn<'_>>(),
            2 * std::mem::size_of::<usize>()
        );
    }
}
