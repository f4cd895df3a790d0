//! The per-coroutine wake state ([`WakeState`], `wake.rs`): a wake racing
//! with the coroutine's park is never lost, a wake on a pending wake still
//! hands its change over, and a parked coroutine is scheduled exactly once.

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::wake::WakeState;

model!(
    /// A wake racing with the coroutine's own park is never lost: either the park
    /// is cancelled (the wake was remembered) or the waker schedules the parked
    /// coroutine, exactly once.
    executor_wake_racing_with_park_is_not_lost,
    unbounded,
    {
        let state = Arc::new(WakeState::new());
        let scheduled = Arc::new(AtomicUsize::new(0));
        let waker = {
            let (state, scheduled) = (state.clone(), scheduled.clone());
            thread::spawn(move || {
                if state.notify() {
                    scheduled.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let suspended = state.prepare_park();
        waker.join().unwrap();
        assert_eq!(scheduled.load(Ordering::Relaxed), usize::from(suspended));
    }
);

model!(
    /// A wake that finds an earlier wake still pending (a stale registration
    /// fired while the coroutine ran) must still hand its change over: the
    /// coroutine consumes the pending wake, re-checks, and either sees the
    /// change or is scheduled by this waker. Without a read-modify-write on
    /// both sides (the waker's `NOTIFIED -> NOTIFIED`, the coroutine's
    /// `NOTIFIED -> RUNNING`), the waker's look can miss the coroutine's
    /// consumption while the coroutine's re-check misses the change: it parks
    /// with nobody to wake it (the rendezvous stress's hang).
    executor_wake_on_a_pending_wake_is_not_lost,
    unbounded,
    {
        let state = Arc::new(WakeState::new());
        // The stale wake, pending.
        assert!(!state.notify());
        let ready = Arc::new(AtomicBool::new(false));
        let scheduled = Arc::new(AtomicBool::new(false));
        let waker = {
            let (state, ready, scheduled) = (state.clone(), ready.clone(), scheduled.clone());
            thread::spawn(move || {
                // The peer's change (a packet filled, a message sent), then
                // its wake.
                ready.store(true, Ordering::Release);
                if state.notify() {
                    scheduled.store(true, Ordering::Relaxed);
                }
            })
        };
        // The coroutine's wait loop: re-check, then park.
        let parked = loop {
            if ready.load(Ordering::Acquire) {
                break false;
            }
            if state.prepare_park() {
                break true;
            }
        };
        waker.join().unwrap();
        assert!(
            !parked || scheduled.load(Ordering::Relaxed),
            "parked with the change made and nobody scheduling it"
        );
    }
);

model!(
    /// Two wakers and the deadline timer race for one parked coroutine: exactly
    /// one of them schedules it.
    executor_parked_coroutine_is_scheduled_exactly_once,
    unbounded,
    {
        let state = Arc::new(WakeState::new());
        assert!(state.prepare_park());
        let scheduled = Arc::new(AtomicUsize::new(0));
        let wakers: Vec<_> = (0..2)
            .map(|_| {
                let (state, scheduled) = (state.clone(), scheduled.clone());
                thread::spawn(move || {
                    if state.notify() {
                        scheduled.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        if state.expire() {
            scheduled.fetch_add(1, Ordering::Relaxed);
        }
        for w in wakers {
            w.join().unwrap();
        }
        assert_eq!(scheduled.load(Ordering::Relaxed), 1);
    }
);
