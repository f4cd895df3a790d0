//! The park/wake hook: how a blocked channel operation waits, and how the
//! peer that makes progress possible wakes it.
//!
//! The channel crate knows nothing of executors. A blocking `send` or `recv`
//! asks the calling thread's *current* [`Park`] context for a [`Waker`],
//! registers that waker on the channel's waiter list, and then calls
//! [`Park::park`]. The default context parks the OS thread; the executor
//! installs its own context on each executor thread with [`set_current`], and
//! there `park` suspends only the running coroutine.
//!
//! The blocking path borrows the context ([`with_current`]) rather than
//! cloning its `Rc`, and a side with one endpoint keeps the waker it
//! registered last, asking [`Park::will_wake`] whether it still serves
//! instead of taking a fresh one: a coroutine that blocks again and again on
//! the same channel touches no reference count.
//!
//! A blocking operation in a thread-local's destructor, while its thread
//! exits, works too: once this module's own thread-locals are gone, it
//! parks the OS thread with a parker made for it.
//!
//! # Contract for implementors
//!
//! * `waker()` returns a waker for the party that will call `park` next;
//!   `will_wake(w)` says whether `w` already wakes that party.
//! * A wake that arrives *before* `park` is called (or while the party is
//!   still on its way into `park`) is remembered: the next `park` returns at
//!   once. This is what makes "register, then re-check, then park" free of
//!   lost wake-ups.
//! * `park` may return spuriously; callers always re-check their condition.
//! * A waker only makes the party's `park` return (or its next one): it does
//!   not run the party inline, wait for it, or suspend (a short lock is
//!   fine). A single-endpoint side's waiter, replacing its kept waker, waits
//!   for any waker still reading the old one.
//!
//! ```
//! use swco_wait::hook::{self, Park};
//! use std::rc::Rc;
//! use std::sync::Arc;
//! use std::task::{Wake, Waker};
//!
//! // A waker that does nothing (`Waker::noop` needs Rust 1.85).
//! struct Noop;
//! impl Wake for Noop {
//!     fn wake(self: Arc<Self>) {}
//! }
//!
//! // A context that never sleeps: a waiter just spins through its retry loop.
//! struct Spin;
//! impl Park for Spin {
//!     fn waker(&self) -> Waker { Waker::from(Arc::new(Noop)) }
//!     fn park(&self, _deadline: Option<std::time::Instant>) { std::thread::yield_now() }
//! }
//!
//! let previous = hook::set_current(Some(Rc::new(Spin)));
//! assert!(previous.is_none());
//! hook::set_current(previous); // back to parking the OS thread
//! ```

use std::cell::{Cell, RefCell};
use std::ptr::NonNull;
use std::rc::Rc;
use std::task::{Wake, Waker};
use std::time::Instant;

use crate::sync::thread_local;
/// The thread parker the default hook blocks with: crossbeam-utils' token
/// parker, or under `--cfg loom` one the model checker sees. The swco
/// executor parks its threads with it too, so both choose `std` or loom in
/// one place.
pub use crate::sync::{Parker, Unparker};
pub use crate::waiting_on::{Describe, Op, WaitingOn};

/// How the current thread (or coroutine) blocks and is woken.
pub trait Park {
    /// A waker that makes the next (or current) [`park`](Park::park) of this
    /// context return.
    fn waker(&self) -> Waker;

    /// Whether `waker` (one this context or another handed out earlier)
    /// wakes the party that will call [`park`](Park::park) next, so that it
    /// can be used again instead of a fresh [`waker`](Park::waker). A false
    /// `false` only costs a fresh waker; a false `true` loses wake-ups.
    ///
    /// The default asks [`Waker::will_wake`] against a fresh waker; an
    /// implementation that can tell without making one should.
    fn will_wake(&self, waker: &Waker) -> bool {
        waker.will_wake(&self.waker())
    }

    /// A waker like [`waker`](Park::waker)'s, lent rather than made, for as
    /// long as this context is borrowed: a blocking operation that waits
    /// through this borrow uses it instead of making (and later dropping) a
    /// waker of its own, which for a reference-counted waker is two atomic
    /// read-modify-writes per block. `None` (the default) when there is
    /// none to lend; the caller then asks [`waker`](Park::waker).
    fn waker_ref(&self) -> Option<&Waker> {
        None
    }

    /// Blocks until woken through a waker from [`waker`](Park::waker), or
    /// until `deadline` has passed. May return spuriously. A wake delivered
    /// before this call makes it return at once.
    fn park(&self, deadline: Option<Instant>);

    /// [`park`](Park::park), saying what the party waits on: a context
    /// that shows its parked parties (a runtime's dump) keeps `on` for as
    /// long as this call is parked, and must not use it after. The default
    /// forgets it.
    #[inline]
    fn park_on(&self, deadline: Option<Instant>, on: WaitingOn<'_>) {
        let _ = on;
        self.park(deadline);
    }

    /// Whether a blocked operation should spin (and yield the thread) a
    /// little longer before parking; asked before every spin step. Worth it
    /// when parking is a system call (OS threads), or when nothing else
    /// could use the thread meanwhile; not when parking is a cheap coroutine
    /// switch that lets a neighbour run. The default is `false`.
    fn spin_before_park(&self) -> bool {
        false
    }

    /// Who will call [`park`](Park::park) next, as a number: the same for
    /// every call made by one party (a thread, or a coroutine wherever it
    /// runs) for as long as it lives, and different from every other live
    /// party's. `0` means "cannot tell" (the default). A lock uses it to
    /// recognise a party locking what it already holds.
    fn party(&self) -> usize {
        0
    }

    /// Where the party that parks here runs when woken, as a number: the
    /// same for every party woken onto one run queue (the coroutines of one
    /// executor thread), `0` if there is no such queue (a plain thread, the
    /// default). A hand-off ([`WaitList::wake_one_if`]) prefers, within a
    /// bound, a waiter with the giver's home: waking it is a push onto the
    /// giver's own run queue, where any other choice is a remote wake.
    ///
    /// [`WaitList::wake_one_if`]: crate::wait_list::WaitList::wake_one_if
    fn home(&self) -> usize {
        0
    }

    /// The home of this context's thread as a giver sees it: where the
    /// parties it wakes would run if they were its own (an executor thread:
    /// that executor), `0` for none (the default). Read once, when the
    /// context is installed ([`set_current`]), and answered by
    /// [`current_home`] without a call: a hand-off asks it every time.
    /// Unlike [`home`](Park::home) it does not depend on what runs at the
    /// moment, which a giver's preference need not know.
    fn thread_home(&self) -> usize {
        0
    }

    /// [`waker`](Park::waker) and [`home`](Park::home) at once, for a
    /// waiter about to register: an implementation that finds both through
    /// one lookup (an executor's running coroutine) answers with one.
    #[inline]
    fn waiter(&self) -> (Waker, usize) {
        (self.waker(), self.home())
    }
}

/// The default context: parks the OS thread with a token parker.
struct ThreadPark {
    parker: Parker,
    waker: Waker,
}

struct UnparkOnWake(Unparker);

impl Wake for UnparkOnWake {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

impl ThreadPark {
    fn new() -> Self {
        let parker = Parker::new();
        let waker = Waker::from(std::sync::Arc::new(UnparkOnWake(parker.unparker())));
        ThreadPark { parker, waker }
    }
}

impl Park for ThreadPark {
    fn waker(&self) -> Waker {
        self.waker.clone()
    }
    fn will_wake(&self, waker: &Waker) -> bool {
        waker.will_wake(&self.waker)
    }
    fn park(&self, deadline: Option<Instant>) {
        self.parker.park(deadline);
    }
    fn spin_before_park(&self) -> bool {
        // Under loom, spinning only multiplies the interleavings to explore.
        cfg!(not(loom))
    }
    fn party(&self) -> usize {
        // The address of a thread-local of this thread: no other live
        // thread shares it. Once it is gone (the thread is exiting), "cannot
        // tell".
        // (Under loom, thread-local addresses may repeat across the model's
        // threads: "cannot tell".)
        if cfg!(loom) {
            return 0;
        }
        PARTY.try_with(|p| p as *const u8 as usize).unwrap_or(0)
    }
}

thread_local! {
    /// The installed context: owned here, replaced only by `set_current`.
    static CURRENT: Current = Current(RefCell::new(None));
    static THREAD: Rc<dyn Park> = Rc::new(ThreadPark::new());
}

/// What `CURRENT` holds: the installed context, if any.
struct Current(RefCell<Option<Rc<dyn Park>>>);

impl Drop for Current {
    fn drop(&mut self) {
        // The thread is exiting and this context goes with it: `INSTALLED`
        // must not go on pointing at it, since a thread-local destroyed
        // later may still block (it then parks the OS thread, through
        // `thread_park`).
        let _ = INSTALLED.try_with(|i| i.set(None));
    }
}

/// The OS-thread parker, or, once this thread's has been destroyed (a
/// thread-local's destructor blocking while the thread exits), a fresh one.
/// A parker made on the spot serves as well: a blocking operation
/// registers the waker of the context it parks with, within one
/// [`with_current`], so the wakes meant for this park reach it; a waker of
/// an earlier parker still registered somewhere is not taken for this
/// one's ([`Park::will_wake`] says no).
fn thread_park() -> Rc<dyn Park> {
    THREAD
        .try_with(Rc::clone)
        .unwrap_or_else(|_| Rc::new(ThreadPark::new()))
}

// What `with_current` reads on every blocking operation: a pointer to the
// context `CURRENT` owns, and how many `with_current` calls on this thread
// are inside their closure (coroutines parked in a channel operation
// included). Neither has a destructor and, outside loom (whose macro has no
// `const` form), both are const-initialised, so reading them is a plain
// thread-local load: no lazy initialisation, no destructor registration,
// no `RefCell` flag.
#[cfg(not(loom))]
std::thread_local! {
    static INSTALLED: Cell<Option<NonNull<dyn Park>>> = const { Cell::new(None) };
    static USERS: Cell<usize> = const { Cell::new(0) };
    /// Only its address matters: this thread's [`Park::party`].
    static PARTY: u8 = const { 0 };
    /// The installed context's [`Park::thread_home`].
    static HOME: Cell<usize> = const { Cell::new(0) };
}
#[cfg(loom)]
thread_local! {
    static INSTALLED: Cell<Option<NonNull<dyn Park>>> = Cell::new(None);
    static USERS: Cell<usize> = Cell::new(0);
    static PARTY: u8 = 0;
    static HOME: Cell<usize> = Cell::new(0);
}

/// Installs `hook` as this thread's park context and returns the previous
/// one. `None` restores the default, which parks the OS thread.
///
/// From a thread-local's destructor, once this module's slot for the
/// context has been destroyed, nothing can be installed: `hook` is dropped
/// and `None` returned.
///
/// # Panics
///
/// If a blocking operation on this thread is inside [`with_current`] (a
/// coroutine parked in a channel operation, with another context running
/// on the thread): the context it is using must outlive its park.
// A setter: the previous hook is returned for those who restore it, and
// may be ignored (as `HashMap::insert`'s old value may).
#[allow(clippy::must_use_candidate)]
pub fn set_current(hook: Option<Rc<dyn Park>>) -> Option<Rc<dyn Park>> {
    assert!(
        USERS.try_with(Cell::get).unwrap_or(0) == 0,
        "swco: hook::set_current while a blocking operation is parked on this thread"
    );
    let installed = hook.as_deref().map(NonNull::from);
    let home = hook.as_deref().map_or(0, Park::thread_home);
    match CURRENT.try_with(|c| std::mem::replace(&mut *c.0.borrow_mut(), hook)) {
        Ok(previous) => {
            let _ = INSTALLED.try_with(|i| i.set(installed));
            let _ = HOME.try_with(|h| h.set(home));
            previous
        }
        // The thread is exiting and the slot that would own the context is
        // gone: nothing can be installed any more (`hook`, moved into the
        // closure that did not run, is dropped), and blocking operations
        // park the OS thread.
        Err(_) => None,
    }
}

/// For executors: goes on with an unwinding (a cancellation) that a
/// blocking operation on this thread put off (a rendezvous receive that had
/// already been handed its message; see [`crate::deferred`]). Call before
/// suspending a coroutine.
#[inline]
pub fn resume_deferred_unwind() {
    crate::deferred::rethrow();
}

/// For executors: forgets an unwinding put off as for
/// [`resume_deferred_unwind`], when the coroutine finished without
/// suspending again (it completed, so there is nothing left to cancel).
#[inline]
pub fn discard_deferred_unwind() {
    crate::deferred::discard();
}

/// The [`Park::party`] of this thread's park context (the installed one, or
/// the OS-thread parker): who would park if the caller blocked now. Unlike
/// [`with_current`], goes on with no deferred unwinding: it does not block.
#[must_use]
#[inline]
pub fn current_party() -> usize {
    match INSTALLED.try_with(Cell::get).ok().flatten() {
        // SAFETY: `INSTALLED` points at the context `CURRENT` owns, as in
        // `with_current`; `party` does not call out, so no `set_current`
        // can replace the context while we use it, and the reference does
        // not outlive this call.
        Some(installed) => unsafe { (*installed.as_ptr()).party() },
        None if cfg!(loom) => 0,
        None => PARTY.try_with(|p| p as *const u8 as usize).unwrap_or(0),
    }
}

/// The [`Park::thread_home`] of this thread's park context, `0` outside an
/// installed context: the home a hand-off from this thread prefers. Does
/// not block, like [`current_party`].
#[must_use]
#[inline]
pub fn current_home() -> usize {
    HOME.try_with(Cell::get).unwrap_or(0)
}

/// This thread's park context: the installed one, or the OS-thread parker.
#[must_use]
pub fn current() -> Rc<dyn Park> {
    let installed = CURRENT.try_with(|c| c.0.borrow().clone()).ok().flatten();
    installed.unwrap_or_else(thread_park)
}

/// Runs `f` with this thread's park context (the installed one, or the
/// OS-thread parker), borrowed rather than cloned: no reference count moves.
///
/// The context stays installed while `f` runs, parks included: until `f`
/// returns (or unwinds), [`set_current`] on this thread panics rather than
/// drop a context that a parked operation is still inside.
#[inline]
pub fn with_current<R>(f: impl FnOnce(&dyn Park) -> R) -> R {
    // A cancellation that a rendezvous receive put off (it had been handed
    // its message) goes on now, before this thread blocks again.
    crate::deferred::rethrow();
    /// Counts a `with_current` out, also when `f` unwinds.
    struct Using;
    impl Drop for Using {
        #[inline]
        fn drop(&mut self) {
            let _ = USERS.try_with(|u| u.set(u.get() - 1));
        }
    }
    let thread;
    // (`try_with`: outside loom these two have no destructor and are never
    // refused, even while the thread exits; loom's may be.)
    let park = match INSTALLED.try_with(Cell::get).ok().flatten() {
        // SAFETY: `INSTALLED` points at the context `CURRENT` owns (both
        // are set together, by `set_current` alone, and `CURRENT`'s
        // destructor clears it before the context goes), and `set_current`
        // refuses to replace it while `USERS` is not zero: we count
        // ourselves in below, before `f` runs, and out when it returns or
        // unwinds, so the context outlives our use of it. The pointer is
        // used on this thread only (thread-locals), as the `Rc` is.
        Some(installed) => unsafe { &*installed.as_ptr() },
        None => {
            // No context installed: a plain thread, about to make a system
            // call to park. One clone does not matter there.
            thread = thread_park();
            &*thread
        }
    };
    let _ = USERS.try_with(|u| u.set(u.get() + 1));
    let _using = Using;
    // One call site, so that `f` can be inlined here.
    f(park)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    /// A context that records that it was used.
    struct Marker(Cell<u32>);

    impl Park for Marker {
        fn waker(&self) -> Waker {
            THREAD.with(|t| t.waker())
        }
        fn park(&self, _deadline: Option<Instant>) {
            self.0.set(self.0.get() + 1);
        }
    }

    /// `with_current` hands out the installed context; replacing it from
    /// inside (a parked operation still using it) panics, and leaves it
    /// installed; once every user is out, even by unwinding, it can be
    /// replaced, and the thread's own parker comes back.
    #[test]
    fn the_installed_context_outlives_its_users() {
        let marker = Rc::new(Marker(Cell::new(0)));
        assert!(set_current(Some(marker.clone())).is_none());
        with_current(|park| park.park(None));
        assert_eq!(marker.0.get(), 1, "the installed context was not used");

        let replaced = catch_unwind(AssertUnwindSafe(|| {
            with_current(|_| set_current(None));
        }));
        assert!(replaced.is_err(), "replaced while a user was inside");
        with_current(|park| park.park(None));
        assert_eq!(marker.0.get(), 2, "the context did not stay installed");

        let unwound = catch_unwind(AssertUnwindSafe(|| {
            with_current(|_| panic!("a user unwinds"));
        }));
        assert!(unwound.is_err());
        let previous = set_current(None).expect("the context was installed");
        let marker_dyn: Rc<dyn Park> = marker.clone();
        assert!(Rc::ptr_eq(&previous, &marker_dyn));
        with_current(|park| assert!(park.spin_before_park(), "not the thread's parker"));
        assert_eq!(marker.0.get(), 2);
    }
}
