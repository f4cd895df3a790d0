//! A count of unfinished members and the one party that waits for it to
//! reach zero: how a [`GroupHandle`](crate::GroupHandle) and a
//! [`Scope`](crate::Scope) wait for all their coroutines with one wake.
//!
//! # Invariants
//!
//! * Each member calls [`Countdown::done`] exactly once; only the call that
//!   takes the count to zero touches the waiter, so the waiter is woken
//!   once for the whole group, not once per member.
//! * The waiter checks the count *under the waiter lock* and the last
//!   member takes the waker under the same lock after its decrement, so the
//!   zero is either seen by the check or the registered waker is woken (no
//!   lost wake).
//! * [`Countdown::wait`] does not return before the count is zero, not even
//!   when the waiting coroutine is cancelled while parked: the cancellation
//!   is caught, the wait goes on, and the payload is handed back for the
//!   caller to resume once nothing borrows its frame any more. This is what
//!   keeps a scope from unwinding while a child can still touch a borrow.
//! * The count lives behind an `Arc` each member holds, so the last member's
//!   wake never touches memory the waiter may already have freed.

use std::any::Any;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::task::Waker;

use swco_wait::hook::{self, Describe, Op, WaitingOn};

/// What a waiter on a [`Countdown`] is waiting for, for dumps.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WaitFor {
    /// [`GroupHandle::join`](crate::GroupHandle::join).
    Group,
    /// The end of a [`Scope`](crate::Scope).
    Scope,
}

pub(crate) struct Countdown {
    remaining: AtomicUsize,
    waiter: Mutex<Option<Waker>>,
    what: WaitFor,
}

impl Countdown {
    pub(crate) fn new(members: usize, what: WaitFor) -> Self {
        Countdown {
            remaining: AtomicUsize::new(members),
            waiter: Mutex::new(None),
            what,
        }
    }

    /// One more member (for a scope, whose children come one at a time).
    pub(crate) fn add(&self) {
        // Relaxed: the adder is the waiter itself (or a member that is
        // counted, keeping the count above zero), so no other party can see
        // zero in between.
        self.remaining.fetch_add(1, Ordering::Relaxed);
    }

    /// A member has finished: everything it did is published to the waiter
    /// (`Release`), and the last one wakes it.
    pub(crate) fn done(&self) {
        // AcqRel: Release publishes this member's writes; Acquire makes the
        // last member's wake follow every other member's writes as well.
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Taken under the lock the waiter checks the count under: see
            // the module invariants. (Nothing panics while holding it; a
            // poisoned lock is taken all the same, so no wake is lost.)
            let waker = self.waiter.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(w) = waker {
                w.wake();
            }
        }
    }

    /// Whether every member has finished.
    pub(crate) fn is_zero(&self) -> bool {
        // Acquire: pairs with `done`'s Release.
        self.remaining.load(Ordering::Acquire) == 0
    }

    /// Waits (suspending only the calling coroutine, or parking a plain
    /// thread) until every member has finished. A panic out of the park (a
    /// cancelling shutdown unwinding the waiting coroutine) does not end
    /// the wait: it is caught and returned once the count is zero, for the
    /// caller to resume.
    ///
    /// A second panic out of the park would mean the wait cannot be kept
    /// without unwinding: the process aborts rather than let borrowed data
    /// go while members may still use it.
    pub(crate) fn wait(&self) -> Option<Box<dyn Any + Send>> {
        let park = hook::current();
        let mut caught: Option<Box<dyn Any + Send>> = None;
        loop {
            {
                let mut w = self.waiter.lock().unwrap_or_else(|e| e.into_inner());
                if self.is_zero() {
                    // No stale waker left behind for a later member to wake.
                    *w = None;
                    return caught;
                }
                // Registered under the lock `done` takes: see the module
                // invariants.
                if !w.as_ref().is_some_and(|old| park.will_wake(old)) {
                    *w = Some(park.waker());
                }
            }
            let parked = catch_unwind(AssertUnwindSafe(|| {
                park.park_on(None, WaitingOn::on(self));
            }));
            if let Err(payload) = parked {
                if caught.is_some() {
                    eprintln!(
                        "swco: a wait for a scope's coroutines was unwound twice; aborting \
                         rather than free data they may still borrow"
                    );
                    std::process::abort();
                }
                caught = Some(payload);
            }
        }
    }
}

impl Describe for Countdown {
    fn op(&self) -> Op {
        Op::Join
    }

    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Relaxed: a snapshot for a dump.
        let n = self.remaining.load(Ordering::Relaxed);
        match self.what {
            WaitFor::Group => write!(f, "join on a group of coroutines ({n} unfinished)"),
            WaitFor::Scope => write!(f, "end of a scope ({n} coroutines unfinished)"),
        }
    }
}

impl fmt::Debug for Countdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Countdown")
            // Relaxed: a snapshot.
            .field("remaining", &self.remaining.load(Ordering::Relaxed))
            .field("what", &self.what)
            .finish_non_exhaustive()
    }
}
