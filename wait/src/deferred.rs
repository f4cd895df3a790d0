//! Deferred unwinding: a panic (a cancellation) caught where unwinding on
//! the spot would lose or duplicate something, to go on at the next block
//! or suspension of the same party.
//!
//! A rendezvous receive that has already been handed its message when it is
//! cancelled must return the message first: it defers the unwinding here.
//! Every blocking operation ([`with_current`](crate::hook::with_current))
//! and every coroutine suspension (the executor, through
//! [`resume_deferred_unwind`](crate::hook::resume_deferred_unwind)) goes on
//! with it; a coroutine that finishes without suspending again forgets it
//! ([`discard_deferred_unwind`](crate::hook::discard_deferred_unwind)).
//! Set and taken with no suspension in between, so by the same coroutine.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

std::thread_local! {
    /// The deferred payload, if any.
    static DEFERRED: Cell<Option<Box<dyn Any + Send>>> = const { Cell::new(None) };
    /// Whether `DEFERRED` holds a payload. Every block and suspension asks,
    /// and a flag without a destructor is one load, where `DEFERRED` (which
    /// has one) is a call and a take.
    static HAS_DEFERRED: Cell<bool> = const { Cell::new(false) };
}

/// Puts off the unwinding `payload` until this thread's next block or
/// suspension ([`rethrow`]). A second one while the first waits is dropped:
/// the first wins.
pub fn defer(payload: Box<dyn Any + Send>) {
    DEFERRED.with(|d| {
        let first = d.take();
        d.set(Some(first.unwrap_or(payload)));
    });
    HAS_DEFERRED.with(|f| f.set(true));
}

/// Takes the deferred panic, if any.
fn take() -> Option<Box<dyn Any + Send>> {
    HAS_DEFERRED.with(|f| f.set(false));
    DEFERRED.with(Cell::take)
}

/// Forgets a deferred panic: its coroutine finished without blocking or
/// suspending again.
#[inline]
pub fn discard() {
    if HAS_DEFERRED.with(Cell::get) {
        // Dropping a payload may panic (user code): the coroutine is done,
        // and the executor reports escaped panics; do not take it down here.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(take())));
    }
}

/// Goes on with the deferred panic, if any.
#[inline]
pub fn rethrow() {
    if HAS_DEFERRED.with(Cell::get) {
        rethrow_slow();
    }
}

#[cold]
#[inline(never)]
fn rethrow_slow() {
    if let Some(payload) = take() {
        resume_unwind(payload);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn payload_of(r: std::thread::Result<()>) -> &'static str {
        *r.expect_err("a deferred panic goes on")
            .downcast::<&'static str>()
            .expect("the first payload")
    }

    #[test]
    fn a_deferred_panic_goes_on_once_and_the_first_one_wins() {
        rethrow(); // nothing deferred: returns
        defer(Box::new("first"));
        defer(Box::new("second"));
        assert_eq!(payload_of(catch_unwind(rethrow)), "first");
        rethrow(); // taken: returns
        defer(Box::new("third"));
        discard();
        rethrow(); // discarded: returns
        assert!(DEFERRED.with(Cell::take).is_none());
    }
}
