//! Coroutine-aware synchronisation for swco: [`Mutex`] and its
//! [`Condvar`], [`Semaphore`], [`Barrier`], [`WaitGroup`] and
//! [`OnceCell`], re-exported as `swco::sync`.
//!
//! `std`'s blocking primitives block the OS thread. On an executor thread
//! that is every coroutine of that executor: a `std::sync::Barrier` shared
//! by more coroutines than executors deadlocks, and a `std::sync::Mutex`
//! held across a channel operation freezes its executor. The types here
//! block only the calling coroutine (a plain thread blocks itself), so they
//! mix threads and coroutines freely and their guards may be held across a
//! suspension.
//!
//! They are built on the same blocking layer as the channels
//! (`swco-wait`): register on a waiter list, `fence(SeqCst)`, re-check,
//! park; so none loses a wake-up, and a waiter cancelled in its park
//! (`JoinHandle::cancel`, a runtime's `shutdown_timeout`) leaves no stale
//! registration and hands on anything given to it. Each type states its
//! fairness rule: [`Mutex`] and [`Semaphore`] hand off to the oldest
//! waiter, preferring one on the giver's executor a bounded number of
//! times in a row; a
//! [`Condvar`]'s `notify_one` wakes its oldest waiter; [`Barrier`],
//! [`WaitGroup`] and [`OnceCell`] release everyone at once.
//!
//! Each but [`Condvar`] and [`OnceCell`] has an `_async` form of its wait, a cancel-safe
//! future that works with any executor. (An async condition wait would
//! hold the guard across its own `.await` points; lock with
//! [`Mutex::lock_async`] and re-check in a loop instead.)
//!
//! Bad input: `Barrier::new(0)` behaves as `std`'s (as `Barrier::new(1)`);
//! [`Semaphore::add_permits`] past [`Semaphore::MAX_PERMITS`] panics with a
//! message (as tokio's does); a recursive [`Mutex::lock`] panics rather
//! than hang.

#![warn(missing_docs)]

mod barrier;
mod condvar;
mod mutex;
mod once_cell;
mod queue;
mod semaphore;
mod wait_group;

pub use barrier::{Barrier, BarrierWaitFuture, BarrierWaitResult};
pub use condvar::{Condvar, WaitTimeoutResult};
pub use mutex::{LockFuture, Mutex, MutexGuard};
pub use once_cell::OnceCell;
pub use semaphore::{AcquireFuture, Semaphore, SemaphorePermit};
pub use wait_group::{WaitGroup, WaitGroupFuture};
