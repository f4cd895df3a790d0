//! The per-coroutine wake state: the one word that makes "wake before
//! suspend" safe.
//!
//! # Invariants
//!
//! * Only the coroutine itself (on its home executor thread) moves the state
//!   `RUNNING -> WAITING` ([`WakeState::prepare_park`]) and consumes a pending
//!   notification (`NOTIFIED -> RUNNING`).
//! * Any thread may notify. Exactly one notifier (or the home executor's timer)
//!   wins the `WAITING -> RUNNING` transition, and only that winner schedules
//!   the coroutine. So a parked coroutine is put back on its runnable queue at
//!   most once per park: no double scheduling, no lost wake.
//! * A notification that arrives while the coroutine is still running (it has
//!   registered its waker but not suspended yet) leaves `NOTIFIED` behind, and
//!   the next `prepare_park` returns `false` instead of suspending.
//! * Every notification writes the state, even one that finds `NOTIFIED`
//!   already there, and the coroutine consumes a pending notification with
//!   a read-modify-write (a swap). So whichever notification it consumes,
//!   it has read the latest one, and the re-check it makes next sees that
//!   notifier's change. (A notifier that left a pending `NOTIFIED` alone,
//!   or a consumption by plain store, loses a wake on any machine that lets
//!   a store wait behind a later load, x86 included: the notifier reads the
//!   stale `NOTIFIED` while the coroutine, having consumed it, re-checks
//!   before the notifier's change is visible, and parks for good.)
//!
//! The module only uses the crate's `sync` shim, so it compiles under
//! `--cfg loom`; its loom models are in `loom_tests/wake.rs`.

use crate::sync::{AtomicU32, Ordering};

/// Running, or runnable and queued; no wake pending.
const RUNNING: u32 = 0;
/// Running, and a wake arrived: the next park returns at once.
const NOTIFIED: u32 = 1;
/// Suspended, waiting: the next wake must schedule it.
const WAITING: u32 = 2;

/// The wake state of one coroutine. See the module docs for the protocol.
#[derive(Debug)]
pub(crate) struct WakeState(AtomicU32);

impl Default for WakeState {
    fn default() -> Self {
        Self::new()
    }
}

impl WakeState {
    /// A fresh state: running (about to be run), nothing pending.
    #[must_use]
    pub(crate) fn new() -> Self {
        WakeState(AtomicU32::new(RUNNING))
    }

    /// Called by the coroutine before it suspends. Returns `true` if it must
    /// suspend (state is now `WAITING`), `false` if a wake was pending (it is
    /// consumed and the coroutine carries on).
    pub(crate) fn prepare_park(&self) -> bool {
        // AcqRel: on success, publish everything the coroutine did before
        // parking to the notifier that wins WAITING -> RUNNING; on failure,
        // Acquire the notifier's writes that came with NOTIFIED.
        match self
            .0
            .compare_exchange(RUNNING, WAITING, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(seen) => {
                debug_assert_eq!(seen, NOTIFIED, "a coroutine parked twice");
                // A swap, not a store, and Acquire: the pending wake may have
                // been renewed since the compare-exchange read it (a notifier
                // that finds NOTIFIED writes it again, with its change). The
                // swap reads the latest write, so the re-check that follows
                // sees every change whose wake it consumes. A plain store
                // could consume a renewal it never read: the notifier then
                // relies on a re-check that misses its change (invariant 4).
                let consumed = self.0.swap(RUNNING, Ordering::Acquire);
                debug_assert_eq!(consumed, NOTIFIED, "only notifiers race with a park");
                false
            }
        }
    }

    /// Called by any waker. Returns `true` if the caller won
    /// `WAITING -> RUNNING` and must now put the coroutine on its home
    /// executor's runnable queue.
    pub(crate) fn notify(&self) -> bool {
        // Relaxed first read: the CAS below is what synchronises.
        let mut seen = self.0.load(Ordering::Relaxed);
        loop {
            // A wake already pending is written again, not left alone: the
            // coroutine that consumes it must also see this notifier's
            // change, and only a write in the state's modification order
            // (Release, read by the consumer's Acquire swap) carries it.
            // Leaving it alone, the load above may read a NOTIFIED that the
            // coroutine has already consumed, while its re-check misses our
            // change: it parks and nobody wakes it (invariant 4).
            let next = match seen {
                WAITING => RUNNING,
                RUNNING | NOTIFIED => NOTIFIED,
                _ => unreachable!("a wake state is RUNNING, NOTIFIED or WAITING"),
            };
            // AcqRel: Release hands the waker's prior writes (the channel
            // state it changed) to the woken coroutine; Acquire pairs with the
            // Release of prepare_park.
            match self
                .0
                .compare_exchange_weak(seen, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return seen == WAITING,
                Err(now) => seen = now,
            }
        }
    }

    /// Called by the home executor when a parked coroutine's deadline
    /// passes. Returns `true` if it won `WAITING -> RUNNING` and must schedule
    /// the coroutine; `false` if a waker got there first.
    pub(crate) fn expire(&self) -> bool {
        // AcqRel: same pairing as notify.
        self.0
            .compare_exchange(WAITING, RUNNING, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Whether the coroutine is parked: for diagnostics (a runtime's dump,
    /// the loom models' assertions).
    #[must_use]
    pub(crate) fn is_waiting(&self) -> bool {
        // Relaxed: a snapshot for diagnostics only.
        self.0.load(Ordering::Relaxed) == WAITING
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn wake_before_park_is_remembered() {
        let s = WakeState::new();
        assert!(!s.notify());
        assert!(!s.prepare_park());
        assert!(s.prepare_park());
        assert!(s.notify());
        assert!(!s.notify());
        assert!(!s.expire());
    }

    #[test]
    fn timer_and_waker_race_once() {
        let s = WakeState::new();
        assert!(s.prepare_park());
        assert!(s.expire());
        assert!(!s.expire());
        assert!(!s.notify()); // now NOTIFIED while running
        assert!(!s.prepare_park());
    }
}
