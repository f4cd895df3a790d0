//! Helpers: coroutines that share a hosted bridge's thread and do part of
//! its work themselves. One that waits for a remote message polls MPI
//! instead of suspending ([`Helper`]); the first send after such a wait
//! (taken for the answer) goes out with its own `MPI_Isend`
//! ([`send_now`]). See `bridge.rs` for why this keeps the protocol's order.

use std::any::Any;
use std::cell::Cell;

use crate::bridge::{Bridge, Step};
use crate::progress;
use crate::wire::Payload;

/// What a helper's iteration did.
pub(crate) enum Helped {
    /// Nothing.
    Idle,
    /// Local work only (a queued send went out, credit went back).
    Worked,
    /// MPI brought something: a delivery or a frame, which may have woken
    /// a coroutine of this executor.
    Incoming,
}

/// On the thread of a hosted bridge, runs one iteration of the bridge here,
/// in the calling coroutine, and says what it did; `None` (having done
/// nothing) on any other thread, or while an iteration is already under
/// way (the bridge's own, suspended in a yield, or another helper's).
///
/// This is how a coroutine that waits on a remote endpoint waits when it
/// shares the bridge's thread: it polls MPI itself, as a raw `MPI_Recv`
/// would, instead of suspending and leaving the poll to the bridge
/// coroutine. A message that arrives is then delivered by the coroutine
/// that wants it, with no wake and no switch, and what it queued before
/// waiting (a ping-pong's reply) went out at its first poll.
fn help() -> Option<Helped> {
    with_hosted(|bridge| match bridge.iterate(false) {
        Step::Busy { incoming: true } => Helped::Incoming,
        Step::Busy { incoming: false } => Helped::Worked,
        Step::Idle => Helped::Idle,
        Step::Done(_) => unreachable!("only the bridge's own iteration finalises"),
    })
}

/// Runs `f` on the bridge hosted on this thread, if there is one and no
/// iteration or poll holds it (the bridge's own, suspended in a yield or
/// parked on its bell, or a helper's); `None` otherwise, `f` not run.
fn with_hosted<R>(f: impl FnOnce(&mut Bridge) -> R) -> Option<R> {
    let cell = progress::hosted()?;
    let mut bridge = cell.try_borrow_mut().ok()?;
    Some(f(&mut bridge))
}

/// On the thread of a hosted bridge that no iteration holds: sends `msg`
/// (which holds a credit) on the open route to (`dest`, `tag`) with an
/// `MPI_Isend` of its own, as the bridge's next iteration would have, and
/// counts the batch. A coroutine beside the bridge so puts its message on
/// the wire in its own call: no queue, no bell, no look over every route.
///
/// Gives `msg` back (to be queued) on any other thread, while the bridge
/// is taken, when the route is not open, is closing or lost its receiver,
/// at shutdown, or when `queued` says the sender's earlier messages wait in
/// the route's queue (they go first, so this one queues behind them).
pub(crate) fn send_now<T: Payload>(dest: i32, tag: u16, msg: T, queued: bool) -> Result<(), T> {
    // Only an answer goes out at once: the first send after this
    // coroutine's receive found its message by polling. A sender that is
    // not waiting for anything (a stream) has its messages batched.
    if !REPLY_DUE.with(|r| r.replace(false)) || queued {
        return Err(msg);
    }
    let Some(cell) = progress::hosted() else {
        return Err(msg);
    };
    let Ok(mut bridge) = cell.try_borrow_mut() else {
        return Err(msg);
    };
    bridge.send_direct(dest, tag, msg)
}

thread_local! {
    /// Whether a coroutine of this thread is polling as a [`Helper`].
    static HELPING: Cell<bool> = const { Cell::new(false) };
    /// A helper found its own message by polling, and no send on this
    /// thread has come since: the next one is taken for an answer
    /// (`send_now`). A heuristic only: if another coroutine of the thread
    /// sends first, that send goes out directly instead, which is as
    /// correct, just unbatched.
    static REPLY_DUE: Cell<bool> = const { Cell::new(false) };
}

/// A waiting coroutine's turn to poll MPI on the bridge's thread (see
/// [`help`]). One waiter at a time: a second would only poll the same
/// queues again between the first one's polls, and hold up the coroutines
/// their deliveries wake; it waits as it would on any other thread.
pub(crate) struct Helper(());

impl Helper {
    /// The turn, on a hosted bridge's thread when no other coroutine has it.
    pub(crate) fn enlist() -> Option<Helper> {
        let hosted = progress::hosted_here();
        if !hosted || HELPING.with(|h| h.replace(true)) {
            return None;
        }
        Some(Helper(()))
    }

    /// Marks the coroutine's next send as the answer to the message this
    /// helper just found (see `send_now`).
    pub(crate) fn reply_due(&self) {
        REPLY_DUE.with(|r| r.set(true));
    }

    /// Runs one bridge iteration (see [`help`]); `None` if the bridge is
    /// taken (an iteration is under way) or gone.
    pub(crate) fn poll(&self) -> Option<Helped> {
        help()
    }

    /// Tests only the posted receive of the route with user tag `tag` (the
    /// waiter's own). A waiter alternates these with whole iterations
    /// (`poll`), so its own batch is found within a test of its arrival,
    /// while the rest of the bridge (local work flagged by `look_next`
    /// included) is served at the next whole iteration, its own or the
    /// bridge coroutine's. Escalating to a whole iteration whenever
    /// `look_next` was set made every wait run two of them, and a reply
    /// that arrived during one waited for it.
    ///
    /// A batch for the route goes straight into `waiter` (the polling
    /// receiver's, of the route's type), not through its channel.
    pub(crate) fn poll_route(&self, tag: u16, waiter: &mut dyn Any) -> Option<Helped> {
        with_hosted(|bridge| {
            if bridge.poll_route(tag, waiter) {
                Helped::Incoming
            } else {
                Helped::Idle
            }
        })
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        HELPING.with(|h| h.set(false));
    }
}
