//! Tiny spin locks for the waiter lists: one built from CAS, one from the
//! add-only claim. Critical sections under them are a push or a pop on a
//! short list and never suspend, so spinning (then yielding) is the right
//! wait.

use crate::backoff::Backoff;
use crate::sync::{AtomicBool, Ordering};
use crate::updt::UpdtClaim;

/// A lock that guards a waiter list.
pub trait RawLock: Send + Sync {
    /// An unlocked lock.
    fn new() -> Self;
    /// Spins (then yields the thread) until the lock is held.
    fn lock(&self);
    /// Releases the lock held by the caller.
    fn unlock(&self);
}

/// Test-and-test-and-set lock, by compare-and-swap.
pub struct CasLock {
    locked: AtomicBool,
}

impl RawLock for CasLock {
    fn new() -> Self {
        CasLock {
            locked: AtomicBool::new(false),
        }
    }

    #[inline]
    fn lock(&self) {
        let mut backoff = Backoff::new();
        loop {
            // Acquire on success: the previous holder's writes to the list
            // happen-before ours.
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            // Relaxed: only a hint that the lock may be free; the CAS decides.
            while self.locked.load(Ordering::Relaxed) {
                backoff.snooze();
            }
        }
    }

    #[inline]
    fn unlock(&self) {
        // Release: our writes to the list happen-before the next holder's.
        self.locked.store(false, Ordering::Release);
    }
}

impl RawLock for UpdtClaim {
    fn new() -> Self {
        UpdtClaim::new()
    }
    #[inline]
    fn lock(&self) {
        self.claim();
    }
    #[inline]
    fn unlock(&self) {
        self.undo();
    }
}
