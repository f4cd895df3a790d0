//! [`Condvar`]: wait for a condition guarded by a [`Mutex`](crate::Mutex), blocking only
//! the calling coroutine.

use std::fmt;
use std::time::{Duration, Instant};

use swco_wait::hook::Op;
use swco_wait::protocol;
use swco_wait::wait_list::Waiters;

use crate::mutex::MutexGuard;
use crate::queue::Queue;

/// A condition variable for coroutines and threads, used with
/// [`Mutex`](crate::Mutex): `std::sync::Condvar`'s shape, without poisoning.
///
/// [`wait`](Condvar::wait) gives the guard's lock up and waits (only the
/// calling coroutine; a plain thread blocks) until a
/// [`notify_one`](Condvar::notify_one) or
/// [`notify_all`](Condvar::notify_all), then takes the lock again before
/// it returns. As with std's, a wait may also end spuriously, so wait in a
/// loop on the condition, or use [`wait_while`](Condvar::wait_while).
///
/// **No notice is lost.** A waiter is listed before its lock is given up,
/// so a notifier that changes the condition under the mutex and then
/// notifies finds it. `notify_one` wakes the oldest waiter (FIFO). A waiter
/// cancelled while it waits (by `JoinHandle::cancel` or a runtime's
/// `shutdown_timeout`) leaves the list, and hands a `notify_one` that had
/// chosen it to the next waiter. A cancelled waiter does not take the lock
/// again: its guard is gone with the unwinding.
///
/// Use one mutex with a condition variable; waiters of different mutexes
/// on one `Condvar` are not detected, and only make its notices harder to
/// reason about.
///
/// ```
/// use std::sync::Arc;
/// use swco_sync::{Condvar, Mutex};
///
/// // Threads here; coroutines wait the same way, each blocking only itself.
/// let pair = Arc::new((Mutex::new(false), Condvar::new()));
/// let waiter = {
///     let pair = Arc::clone(&pair);
///     std::thread::spawn(move || {
///         let (ready, cv) = &*pair;
///         let guard = cv.wait_while(ready.lock(), |ready| !*ready);
///         assert!(*guard);
///     })
/// };
/// let (ready, cv) = &*pair;
/// *ready.lock() = true;
/// cv.notify_one();
/// waiter.join().unwrap();
/// ```
pub struct Condvar {
    queue: Queue,
}

/// Whether a timed [`Condvar`] wait returned because its time ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// Whether the wait's time ran out (rather than a notice, or a
    /// spurious wake-up, ending it first).
    #[must_use]
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

impl Condvar {
    /// A condition variable with no waiters.
    #[must_use]
    pub fn new() -> Self {
        Condvar {
            queue: Queue::new(Op::Sync, "Condvar"),
        }
    }

    /// Gives up `guard`'s lock, waits for a notice (or a spurious
    /// wake-up), and takes the lock again.
    ///
    /// # Panics
    ///
    /// If taking the lock again panics (see [`Mutex::lock`](crate::Mutex::lock)).
    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        let mutex = guard.mutex();
        self.wait_on(guard, None);
        mutex.lock()
    }

    /// Waits while `condition` holds for the guarded value, re-checking it
    /// after each wake-up; returns the guard with `condition` false.
    ///
    /// # Panics
    ///
    /// If `condition` panics, or taking the lock again does.
    pub fn wait_while<'a, T, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: F,
    ) -> MutexGuard<'a, T>
    where
        F: FnMut(&mut T) -> bool,
    {
        while condition(&mut guard) {
            guard = self.wait(guard);
        }
        guard
    }

    /// [`wait`](Condvar::wait) for at most `timeout`; the result says
    /// whether the time ran out. The lock is taken again either way.
    ///
    /// # Panics
    ///
    /// If taking the lock again panics (see [`Mutex::lock`](crate::Mutex::lock)).
    pub fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        let mutex = guard.mutex();
        // A deadline past what `Instant` reaches waits without one.
        let deadline = Instant::now().checked_add(timeout);
        let notified = self.wait_on(guard, deadline);
        let timed_out = !notified && deadline.is_some_and(|d| Instant::now() >= d);
        (mutex.lock(), WaitTimeoutResult(timed_out))
    }

    /// [`wait_while`](Condvar::wait_while) for at most `timeout` in all:
    /// returns the guard and whether the time ran out with `condition`
    /// still true.
    ///
    /// # Panics
    ///
    /// If `condition` panics, or taking the lock again does.
    pub fn wait_timeout_while<'a, T, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        timeout: Duration,
        mut condition: F,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult)
    where
        F: FnMut(&mut T) -> bool,
    {
        let start = Instant::now();
        while condition(&mut guard) {
            let Some(left) = timeout.checked_sub(start.elapsed()) else {
                return (guard, WaitTimeoutResult(true));
            };
            guard = self.wait_timeout(guard, left).0;
        }
        (guard, WaitTimeoutResult(false))
    }

    /// Wakes the oldest waiter, if there is one.
    pub fn notify_one(&self) {
        // A notifier that changed the condition under the mutex comes after
        // the waiter's unlock, so after its registration, and sees it
        // listed. The fence before the look extends that, as far as it
        // goes, to a notifier that changed the condition without the
        // mutex, as the other waits of this crate are ordered.
        self.queue.notify_one(true);
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        self.queue.notify_all();
    }

    /// Lists the caller, unlocks `guard`, parks once; whether a notifier
    /// chose it.
    fn wait_on<T>(&self, guard: MutexGuard<'_, T>, deadline: Option<Instant>) -> bool {
        protocol::wait_for_notice(&self.queue, self.queue.waiting_on(), deadline, || {
            drop(guard);
        })
    }
}

impl Default for Condvar {
    fn default() -> Self {
        Condvar::new()
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar")
            .field("has_waiters", &self.queue.has_waiters())
            .finish()
    }
}
