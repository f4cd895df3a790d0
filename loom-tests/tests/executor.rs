//! Loom models of the executor's synchronisation cores: the per-coroutine
//! wake state, the inbox hand-off to a parking executor, and the join-handle
//! hand-off.
//!
//! Loom threads stand in for executors and wakers.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p swco-loom-tests --release --test executor`
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use swco_channel::sync::Parker;
use swco_executor::model::{Inbox, InboxQueue, JoinSlot, WakeState};

/// A wake racing with the coroutine's own park is never lost: either the park
/// is cancelled (the wake was remembered) or the waker schedules the parked
/// coroutine, exactly once.
#[test]
fn executor_wake_racing_with_park_is_not_lost() {
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
fn executor_parked_coroutine_is_scheduled_exactly_once() {
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
fn executor_join_receives_the_result() {
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
fn executor_dropped_completer_cancels_the_join() {
    loom::model(|| {
        let (completer, handle) = JoinSlot::<u32>::pair();
        let producer = thread::spawn(move || drop(completer));
        assert!(handle.join().unwrap_err().is_cancelled());
        producer.join().unwrap();
    });
}

/// The executor side of the inbox protocol: drain, and park only when
/// nothing is pending. Returns once `want` wakes have been taken. If a push
/// could be slept through, loom reports a deadlock.
fn executor_until(inbox: &Inbox<()>, parker: &Parker, want: usize) -> Vec<usize> {
    let mut got = Vec::new();
    let mut spare = InboxQueue::default();
    loop {
        if inbox.drain_into(&mut spare) {
            got.append(&mut spare.wakes);
        }
        if got.len() == want {
            return got;
        }
        if !inbox.is_pending() {
            parker.park(None);
        }
    }
}

/// A wake pushed from another thread while the executor is deciding to
/// sleep is never slept through.
#[test]
fn executor_inbox_hand_off_is_never_slept_through() {
    loom::model(|| {
        let parker = Parker::new();
        let inbox = Arc::new(Inbox::<()>::new(parker.unparker()));
        // Pushers are not joined: a late unpark of this thread while it
        // blocks in loom's `JoinHandle::join` trips a loom assertion (real
        // parkers keep it as a token). Loom still runs them to completion.
        let inbox2 = inbox.clone();
        thread::spawn(move || inbox2.push_wake(7));
        assert_eq!(executor_until(&inbox, &parker, 1), vec![7]);
    });
}

/// Two pushers: only the first flip of `pending` unparks, and the executor
/// still collects both.
#[test]
fn executor_inbox_two_pushers_both_delivered() {
    loom::model(|| {
        let parker = Parker::new();
        let inbox = Arc::new(Inbox::<()>::new(parker.unparker()));
        for slot in [1, 2] {
            let inbox = inbox.clone();
            thread::spawn(move || inbox.push_wake(slot)); // not joined: see above
        }
        let mut got = executor_until(&inbox, &parker, 2);
        got.sort_unstable();
        assert_eq!(got, vec![1, 2]);
    });
}
