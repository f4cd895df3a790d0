//! Loom models of the executor's synchronisation cores: the per-coroutine
//! wake state and the join-handle hand-off.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p swco-executor --release --test loom`
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use swco_executor::model::{JoinSlot, WakeState};

/// A wake racing with the coroutine's own park is never lost: either the park
/// is cancelled (the wake was remembered) or the waker schedules the parked
/// coroutine, exactly once.
#[test]
fn wake_racing_with_park_is_not_lost() {
    loom::model(|| {
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
    });
}

/// Two wakers and the deadline timer race for one parked coroutine: exactly
/// one of them schedules it.
#[test]
fn parked_coroutine_is_scheduled_exactly_once() {
    loom::model(|| {
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
    });
}

/// A joiner on one thread gets the value a completer on another thread
/// stores, whichever runs first.
#[test]
fn join_receives_the_result() {
    loom::model(|| {
        let (completer, handle) = JoinSlot::<u32>::pair();
        let producer = thread::spawn(move || completer.complete(Ok(7)));
        assert_eq!(handle.join().unwrap(), 7);
        producer.join().unwrap();
    });
}

/// A completer dropped without a result (cancelled coroutine) still releases
/// the joiner.
#[test]
fn dropped_completer_cancels_the_join() {
    loom::model(|| {
        let (completer, handle) = JoinSlot::<u32>::pair();
        let producer = thread::spawn(move || drop(completer));
        assert!(handle.join().unwrap_err().is_cancelled());
        producer.join().unwrap();
    });
}
