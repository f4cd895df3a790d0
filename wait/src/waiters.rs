//! The [`Waiters`] trait: one side's waiters (blocked senders, or blocked
//! receivers, or the parties of a `swco::sync` type) as the blocking path
//! and the waking path see them. Its two implementations are
//! [`WaitList`](crate::wait_list::WaitList) (several endpoints: a queue
//! under a lock) and [`WaiterSlot`](crate::wait_list::WaiterSlot) (one
//! endpoint: a word and a kept waker); see `wait_list.rs` for the protocol
//! they share.

use crate::hook::Park;

/// The waiters of one side of a channel (blocked senders, or blocked
/// receivers), as the blocking path and the peer's wake path see them.
pub trait Waiters: Send + Sync + 'static {
    /// What a registered waiter holds until it leaves. Plain data, which a
    /// pending future holds: `Send` and `Sync`, so that the future's auto
    /// traits depend only on its endpoint and message, in generic code too.
    type Ticket: Copy + Send + Sync;

    /// Whether registering and [`notify_all`](Waiters::notify_all) take
    /// the same lock, so that a waiter and a disconnection that race are
    /// ordered by it: whichever takes the lock second sees the other (the
    /// waiter in the list, or the flag stored before the lock).
    const LOCKED: bool;

    /// An empty list (or slot).
    fn new() -> Self;

    /// Adds the caller, to be woken through `park`'s waker. Follow with
    /// `fence(SeqCst)`, a re-check, and then (if still blocked) the park;
    /// and on every way out, [`leave`](Waiters::leave) or (unwinding)
    /// [`abandon`](Waiters::abandon).
    fn register(&self, park: &dyn Park) -> Self::Ticket;

    /// The normal way out of a wait; the caller retries its operation next,
    /// which uses any wake it was chosen for.
    fn leave(&self, ticket: Self::Ticket);

    /// The way out when unwinding out of the park: there is no retry, so a
    /// wake this waiter was chosen for is handed on.
    fn abandon(&self, ticket: Self::Ticket);

    /// For a waiter that polls instead of parking (an async future), which
    /// still holds `ticket` when polled again: whether that registration
    /// still stands and wakes `park`, so that the poll may retry its
    /// operation while registered and, if still blocked, keep the ticket
    /// rather than leave and register again. A registration whose waker
    /// does not wake `park` may be renewed in place with `park`'s waker;
    /// it then takes the same register / `fence(SeqCst)` / re-check steps
    /// as a fresh one, with `still_blocked` (the caller's re-check, as for
    /// [`register`](Waiters::register)) as the re-check. `false` (the
    /// default) always makes it leave first.
    fn stands(
        &self,
        ticket: Self::Ticket,
        park: &dyn Park,
        still_blocked: &dyn Fn() -> bool,
    ) -> bool {
        let _ = (ticket, park, still_blocked);
        false
    }

    /// Called by the peer after it made progress: wakes one waiter, if any.
    /// `fence` is `true` when the progress was a plain store (a lone side):
    /// the list then issues the `fence(SeqCst)` of invariant 3 itself,
    /// between the progress and its look at the waiters.
    fn notify_one(&self, fence: bool);

    /// Whether a waiter may be registered: a plain look, for a caller that
    /// is ordered against registrations by other means than a fence (a
    /// zero-capacity channel's queuer, under the rendezvous lock that a
    /// waiter's re-check takes after registering). `false` means no waiter
    /// registered before that ordering point; `true` is only a hint, to be
    /// followed by [`notify_one`](Waiters::notify_one).
    fn may_have_waiters(&self) -> bool;

    /// Wakes every waiter (disconnection). The caller has already issued
    /// `fence(SeqCst)` after storing its flag.
    fn notify_all(&self);

    /// [`notify_one`](Waiters::notify_one), for progress that `k` waiters
    /// could each use (a batch): wakes up to `k`, fencing once.
    #[inline]
    fn notify_many(&self, fence_first: bool, k: usize) {
        self.notify_one(fence_first);
        for _ in 1..k {
            self.notify_one(false);
        }
    }

    /// The side's last endpoint is gone: nobody will wait here again, so let
    /// go of anything kept for the next waiter.
    fn retire(&self);
}
