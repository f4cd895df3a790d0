//! The one blocking protocol, register → re-check → park, as the channels
//! and the `swco::sync` types use it.
//!
//! A party that cannot go on:
//!
//! 1. **registers** on a waiter list, with the waker of its park context
//!    ([`Park::waker`]), or a task's waker for a future;
//! 2. issues **`fence(SeqCst)`** and **re-checks** its condition: a peer
//!    that made progress before seeing the registration has also fenced
//!    (or read-modify-written a word the re-check reads), so one of the two
//!    sees the other, and no wake-up is lost;
//! 3. **parks** (or returns `Pending`) if still blocked, and on every way
//!    out **leaves** the list. Being removed by a waker is how a waiter
//!    learns it was chosen: a chosen waiter either uses what it was chosen
//!    for or hands it on, unwinding (a cancellation) included.
//!
//! Three shapes of wait are built on [`WaitList`] here:
//!
//! * **hand-off** ([`wait_for_grant`], [`GrantWait`]): what the waiter waits
//!   for (a lock, a permit) is handed to it by the waker, in the same step
//!   that chooses it ([`WaitList::wake_one_if`]); a waiter that finds it
//!   was chosen owns it, and one that leaves (or is cancelled) while chosen
//!   gives it back, so that nothing is lost;
//! * **broadcast** ([`wait_until`], [`UntilWait`]): the waiter waits for a
//!   condition that, once true for it, stays true (a barrier's generation
//!   moved on, a count reached zero); the party that makes it true fences
//!   and wakes everyone ([`Waiters::notify_all`]).
//!
//! * **notice** ([`wait_for_notice`]: a condition variable): the waiter
//!   registers *before* it lets go of what guards its condition (a mutex),
//!   then parks once; a notifier that changes the condition under that
//!   mutex and then notifies finds it listed. Being chosen is the notice; a
//!   chosen waiter that unwinds instead hands it on.
//!
//! The channels' waits are the fourth shape, **retry** ([`wait_on`], and
//! [`register`] for their futures): wake-one on the [`Waiters`] of a side
//! (a [`WaitList`] or a [`WaiterSlot`]); a woken waiter retries its
//! operation, and one unwinding out of its park hands the wake on.
//!
//! [`WaiterSlot`]: crate::wait_list::WaiterSlot

use std::task::{Poll, Waker};
use std::time::Instant;

use crate::hook::{self, Park, WaitingOn};
use crate::lock::RawLock;
use crate::sync::{fence, Ordering};
use crate::wait_list::{Key, WaitList, Waiters};

/// The [`Park`] of a task: hands a waiter list the waker of the poll in
/// progress. A future never parks; it returns `Pending` instead.
pub struct TaskPark<'a>(pub &'a Waker);

impl Park for TaskPark<'_> {
    fn waker(&self) -> Waker {
        self.0.clone()
    }

    fn will_wake(&self, waker: &Waker) -> bool {
        waker.will_wake(self.0)
    }

    fn park(&self, _deadline: Option<Instant>) {
        // Never called: futures register and return `Pending` rather than
        // park. Returning at once is a spurious wake-up, which `park`'s
        // contract allows anyway.
    }
}

/// Steps 1 and 2: registers `park` on `waiters`, fences, and re-checks.
/// Returns the ticket if the party is still blocked (it parks, or returns
/// `Pending`, next), or `None` after leaving if the condition changed in
/// between (the caller retries).
#[inline]
pub fn register<W: Waiters>(
    waiters: &W,
    park: &dyn Park,
    still_blocked: impl FnOnce() -> bool,
) -> Option<W::Ticket> {
    let ticket = waiters.register(park);
    fence(Ordering::SeqCst);
    if still_blocked() {
        Some(ticket)
    } else {
        waiters.leave(ticket);
        None
    }
}

// The retrying shape, the channels' (wake-one: a woken waiter retries its
// operation, and one unwinding out of its park hands the wake on).

/// Blocks once, without losing a wake-up (invariant 3): registers on
/// `waiters`, fences, and parks only if `still_blocked` says the peer has not
/// made progress in between. Returns after a wake, a timeout or a spurious
/// return; the caller retries its operation either way.
///
/// `recheck_syncs`: the re-check reads the peer side's position through a
/// read-modify-write that the peer's claim also read-modify-writes (the
/// peer's `Cursor::CLAIM_SYNCS_WITH_WAITERS`). On a locked list
/// (`Waiters::LOCKED`) the fence is then left out: the re-check's RMW
/// releases the registration to any claim that comes after it in the word's
/// order and reads any claim that comes before, and the disconnection flag
/// is ordered by the list's lock, which `notify_all` takes too (see
/// [`wait_list`](crate::wait_list)). On x86 that RMW is itself compiled to a fence and a
/// load, so the fence left out was a second one in a row.
///
/// If `park` unwinds (a coroutine cancelled at shutdown is unwound from
/// inside its park), the waiter still leaves; see `Registered`.
#[inline]
pub fn wait_on<W: Waiters>(
    waiters: &W,
    park: &dyn Park,
    on: WaitingOn<'_>,
    deadline: Option<Instant>,
    recheck_syncs: bool,
    still_blocked: impl FnOnce() -> bool,
) {
    let registered = Registered {
        waiters,
        ticket: waiters.register(park),
    };
    if !(W::LOCKED && recheck_syncs) {
        fence(Ordering::SeqCst);
    }
    if still_blocked() {
        park.park_on(deadline, on);
    }
    registered.leave();
}

/// A registered waiter, which leaves on every way out of `wait_on`. On a
/// normal return ([`leave`](Registered::leave)) the caller retries its
/// operation, which uses any wake it was chosen for. On unwind (`Drop`)
/// there is no retry: a registration left behind would swallow the next
/// wake-one (a dead waiter "woken" while a live one sleeps through a
/// buffered message or a free slot), and a wake already taken would be
/// lost, so the list hands it on ([`Waiters::abandon`]).
struct Registered<'a, W: Waiters> {
    waiters: &'a W,
    ticket: W::Ticket,
}

impl<W: Waiters> Registered<'_, W> {
    /// The normal way out.
    #[inline]
    fn leave(self) {
        let this = std::mem::ManuallyDrop::new(self);
        this.waiters.leave(this.ticket);
    }
}

impl<W: Waiters> Drop for Registered<'_, W> {
    /// Only reached when unwinding out of `park` (or the re-check).
    fn drop(&mut self) {
        self.waiters.abandon(self.ticket);
    }
}

/// Leaves `list` on every way out of a hand-off wait, unwinding included:
/// a waiter that was chosen (no longer listed) owns what it was handed and,
/// if it is not going to use it, gives it back.
struct Leave<'a, L: RawLock, G: Fn()> {
    list: &'a WaitList<L>,
    key: Option<Key>,
    give_back: &'a G,
}

impl<L: RawLock, G: Fn()> Drop for Leave<'_, L, G> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            if !self.list.remove(key) {
                (self.give_back)();
            }
        }
    }
}

/// A blocking hand-off wait: returns once `acquire()` succeeded or a waker
/// chose this party from `list` (and so handed it what it waits for). Blocks
/// only the calling coroutine (or the thread, outside one), showing `on`
/// in a dump while parked.
///
/// `acquire` takes what the party waits for if it is free; `give_back`
/// returns it, handing it on to the next waiter if there is one: called
/// when the party both took it and was chosen, or unwinds out of its park
/// (a cancellation) after being chosen, so that nothing is lost. The waker
/// side hands over with [`WaitList::wake_one_if`] after its own
/// `fence(SeqCst)`.
///
/// The caller has tried `acquire` already (its fast path): this registers
/// first, then tries. FIFO among the parties that register; a party
/// re-registers at the back after a spurious wake-up.
pub fn wait_for_grant<L: RawLock>(
    list: &WaitList<L>,
    on: WaitingOn<'_>,
    acquire: impl Fn() -> bool,
    give_back: impl Fn(),
) {
    hook::with_current(|park| loop {
        let (waker, home) = park.waiter();
        let mut leave = Leave {
            list,
            key: Some(list.add_at(waker, home)),
            give_back: &give_back,
        };
        fence(Ordering::SeqCst);
        if acquire() {
            // Also chosen? Then one of the two goes back (`leave`'s drop).
            return;
        }
        park.park_on(None, on);
        if let Some(key) = leave.key.take() {
            if !list.remove(key) {
                return; // chosen: handed over
            }
        }
        // A spurious wake-up: try again.
    })
}

/// A condition-variable wait: registers on `list`, then calls `release`
/// (which lets the notifier go on: a mutex's unlock), then parks once,
/// until a notifier chooses this party, `deadline` passes, or a spurious
/// wake-up. Returns whether a notifier chose it. Blocks only the calling
/// coroutine (or the thread, outside one), showing `on` in a dump.
///
/// Registering before `release` is what loses no notice: a notifier that
/// changes the condition under the same lock after `release` and then
/// notifies ([`Waiters::notify_one`] with its fence, or
/// [`Waiters::notify_all`]) finds this party listed; a wake that comes
/// between `release` and the park leaves the park context's wake pending,
/// so the park returns at once. A party that unwinds out of its park (a
/// cancellation) after being chosen hands the notice to the next waiter,
/// so a `notify_one` is not lost with it.
pub fn wait_for_notice<L: RawLock + 'static>(
    list: &WaitList<L>,
    on: WaitingOn<'_>,
    deadline: Option<Instant>,
    release: impl FnOnce(),
) -> bool {
    hook::with_current(|park| {
        // Unwinding out of the park, a chosen party hands its notice on.
        let hand_on = || list.notify_one(false);
        let mut leave = Leave {
            list,
            key: Some(list.add(park.waker())),
            give_back: &hand_on,
        };
        release();
        park.park_on(deadline, on);
        leave.key.take().is_some_and(|key| !list.remove(key))
    })
}

/// A blocking broadcast wait: returns once `done()` is true, which once
/// true stays true. The party that makes it true issues `fence(SeqCst)`
/// and then [`Waiters::notify_all`] on `list`.
pub fn wait_until<L: RawLock + 'static>(
    list: &WaitList<L>,
    on: WaitingOn<'_>,
    done: impl Fn() -> bool,
) {
    if done() {
        return;
    }
    hook::with_current(|park| loop {
        let give_back = || {};
        let mut leave = Leave {
            list,
            key: Some(list.add(park.waker())),
            give_back: &give_back,
        };
        fence(Ordering::SeqCst);
        if done() {
            return;
        }
        park.park_on(None, on);
        if let Some(key) = leave.key.take() {
            list.remove(key);
        }
        if done() {
            return;
        }
    })
}

/// The state of an asynchronous hand-off wait (a future's), the
/// counterpart of [`wait_for_grant`]. Poll with [`poll`](Self::poll); a
/// future dropped while pending calls [`cancel`](Self::cancel), which gives
/// back anything it was handed: cancel-safe.
#[derive(Debug, Default)]
pub struct GrantWait {
    key: Option<Key>,
}

impl GrantWait {
    /// Not registered yet.
    #[must_use]
    pub const fn new() -> Self {
        GrantWait { key: None }
    }

    /// Ready once `acquire()` succeeded or a waker chose this wait (see
    /// [`wait_for_grant`]); else registered with `waker`, and `Pending`.
    pub fn poll<L: RawLock>(
        &mut self,
        list: &WaitList<L>,
        waker: &Waker,
        acquire: impl Fn() -> bool,
        give_back: impl Fn(),
    ) -> Poll<()> {
        if let Some(key) = self.key.take() {
            if !list.remove(key) {
                return Poll::Ready(()); // chosen: handed over
            }
        }
        if acquire() {
            return Poll::Ready(());
        }
        let key = list.add(waker.clone());
        fence(Ordering::SeqCst);
        if acquire() {
            if !list.remove(key) {
                give_back();
            }
            return Poll::Ready(());
        }
        self.key = Some(key);
        Poll::Pending
    }

    /// Leaves the list if registered, giving back what a waker handed over
    /// meanwhile.
    pub fn cancel<L: RawLock>(&mut self, list: &WaitList<L>, give_back: impl Fn()) {
        if let Some(key) = self.key.take() {
            if !list.remove(key) {
                give_back();
            }
        }
    }
}

/// The state of an asynchronous broadcast wait, the counterpart of
/// [`wait_until`].
#[derive(Debug, Default)]
pub struct UntilWait {
    key: Option<Key>,
}

impl UntilWait {
    /// Not registered yet.
    #[must_use]
    pub const fn new() -> Self {
        UntilWait { key: None }
    }

    /// Ready once `done()` is true; else registered with `waker`, and
    /// `Pending`.
    pub fn poll<L: RawLock>(
        &mut self,
        list: &WaitList<L>,
        waker: &Waker,
        done: impl Fn() -> bool,
    ) -> Poll<()> {
        self.cancel(list);
        if done() {
            return Poll::Ready(());
        }
        let key = list.add(waker.clone());
        fence(Ordering::SeqCst);
        if done() {
            list.remove(key);
            return Poll::Ready(());
        }
        self.key = Some(key);
        Poll::Pending
    }

    /// Leaves the list if registered.
    pub fn cancel<L: RawLock>(&mut self, list: &WaitList<L>) {
        if let Some(key) = self.key.take() {
            list.remove(key);
        }
    }
}
