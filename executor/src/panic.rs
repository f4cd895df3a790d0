//! What becomes of a coroutine's panic payloads: kept in its join error
//! (`join::join_error`), or raised to cancel it ([`Cancelled`]), reported when one escapes its job
//! ([`report_escaped_panic`]), and otherwise dropped with [`drop_payload`],
//! since a payload's own `Drop` may panic in turn.
//!
//! # Invariants
//!
//! * No panic payload, nor the `Drop` of a closure that never ran, unwinds
//!   into the executor loop: each is caught here and dropped safely (or,
//!   if it keeps throwing, leaked). A payload kept in a join error is
//!   dropped by whoever drops the error; on an executor (a detached
//!   coroutine's result) that drop is caught as well (`Spawned::launch`).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The panic payload a cancelling shutdown raises inside a coroutine, at the
/// suspension point it is parked in, to unwind its stack. Never shown to
/// users: the join handle reports "cancelled".
pub(crate) struct Cancelled;

/// Drops a panic payload whose own `Drop` may panic, catching (and dropping)
/// whatever that throws in turn. A payload that keeps throwing payloads is
/// leaked after a few rounds rather than looping for ever.
pub(crate) fn drop_payload(payload: Box<dyn Any + Send>) {
    let mut payload = Some(payload);
    for _ in 0..8 {
        let p = payload.take();
        match catch_unwind(AssertUnwindSafe(move || drop(p))) {
            Ok(()) => return,
            Err(next) => payload = Some(next),
        }
    }
    std::mem::forget(payload);
}

/// A panic escaped a coroutine's job (a `Drop` the job could not guard):
/// report it once on stderr and drop its payload safely. The executor goes
/// on.
pub(crate) fn report_escaped_panic(payload: Box<dyn Any + Send>) {
    if !payload.is::<Cancelled>() {
        eprintln!("swco: a panic escaped a coroutine; the executor carries on");
    }
    drop_payload(payload);
}

/// Drops a coroutine's closure without running it; a panic from its
/// captures' `Drop` is caught (the panic hook has reported it).
pub(crate) fn drop_closure<F>(f: F) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(f))) {
        drop_payload(payload);
    }
}
