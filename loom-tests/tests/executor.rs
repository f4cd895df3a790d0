//! Loom models of the executor's synchronisation cores: the per-coroutine
//! wake state, the inbox hand-off to a parking executor, and the join-handle
//! hand-off.
//!
//! Loom threads stand in for executors and wakers.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p swco-loom-tests --release --test executor`
#![cfg(loom)]

#[macro_use]
mod common;

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use swco_channel::hook::Parker;
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

/// What an executor took from its inbox, in the order it took it.
#[derive(Default)]
struct Taken {
    wakes: Vec<usize>,
    spawns: Vec<u32>,
}

/// The executor side of the inbox protocol, as `Local::run` does it: drain,
/// and unless `done`, park through the inbox's sleep protocol
/// ([`Inbox::park`]: `EMPTY -> SLEEPING`, or drain again if something
/// arrived). Loom's parker may return spuriously; that only loops. If a push
/// or a stop request could be slept through, loom reports a deadlock.
fn executor_until(
    inbox: &Inbox<u32>,
    parker: &Parker,
    mut done: impl FnMut(&Taken) -> bool,
) -> Taken {
    let mut taken = Taken::default();
    let mut spare = InboxQueue::default();
    loop {
        if inbox.drain_into(&mut spare) {
            taken.wakes.append(&mut spare.wakes);
            taken.spawns.append(&mut spare.spawns);
        }
        if done(&taken) {
            return taken;
        }
        inbox.park(parker, None);
    }
}

/// After every pusher is joined: nothing is left to take, so nothing was
/// delivered twice.
fn assert_nothing_left(inbox: &Inbox<u32>) {
    let mut spare = InboxQueue::default();
    assert!(!inbox.is_pending());
    assert!(
        !inbox.drain_into(&mut spare),
        "delivered twice or left over"
    );
}

model!(
    /// One pusher hands a wake, then a spawn, to an executor that drains and
    /// parks: neither is slept through (the second push may be the one that
    /// finds the executor `SLEEPING`), each is delivered exactly once, and
    /// the executor reads each node only after its push happened-before
    /// (loom's `UnsafeCell` in the nodes). Bound 20 does not cut the search:
    /// bound 40 explores the same executions.
    executor_inbox_hand_off_is_never_slept_through,
    20,
    {
        let parker = Parker::new();
        let inbox = Arc::new(Inbox::<u32>::new(parker.unparker()));
        let pusher = {
            let inbox = inbox.clone();
            thread::spawn(move || {
                inbox.push_wake(7);
                inbox.push_spawn(8);
            })
        };
        let taken = executor_until(&inbox, &parker, |t| {
            t.wakes.len() + t.spawns.len() == 2
        });
        assert_eq!((taken.wakes, taken.spawns), (vec![7], vec![8]));
        pusher.join().unwrap();
        assert_nothing_left(&inbox);
    }
);

model!(
    /// Two pushers, two wakes each, against a draining, parking executor:
    /// only the push that clears `SLEEPING` unparks, yet all four arrive,
    /// exactly once, each pusher's in the order it pushed them.
    executor_inbox_two_pushers_both_delivered,
    2,
    {
        let parker = Parker::new();
        let inbox = Arc::new(Inbox::<u32>::new(parker.unparker()));
        let pushers: Vec<_> = [10, 20]
            .into_iter()
            .map(|base| {
                let inbox = inbox.clone();
                thread::spawn(move || {
                    inbox.push_wake(base);
                    inbox.push_wake(base + 1);
                })
            })
            .collect();
        let taken = executor_until(&inbox, &parker, |t| t.wakes.len() == 4);
        for base in [10, 20] {
            let mine: Vec<usize> = taken
                .wakes
                .iter()
                .copied()
                .filter(|w| w / 10 == base / 10)
                .collect();
            assert_eq!(mine, vec![base, base + 1], "order broken: {:?}", taken.wakes);
        }
        for p in pushers {
            p.join().unwrap();
        }
        assert_nothing_left(&inbox);
    }
);

model!(
    /// A stop request (a flag, then an unpark with no item, as
    /// `ExecutorShared::request_stop` does) and a push race with an executor
    /// that drains and parks: the executor sees the stop and takes the
    /// wake. Neither wake-up is slept through, nor is the push lost when the
    /// stop request's unpark (or a spurious one) ends the park first and the
    /// executor clears `SLEEPING` itself.
    executor_inbox_stop_request_wakes_a_parking_executor,
    4,
    {
        let parker = Parker::new();
        let inbox = Arc::new(Inbox::<u32>::new(parker.unparker()));
        let stop = Arc::new(AtomicBool::new(false));
        let stopper = {
            let (inbox, stop) = (inbox.clone(), stop.clone());
            thread::spawn(move || {
                // Release: as `request_stop`.
                stop.store(true, Ordering::Release);
                inbox.unpark();
            })
        };
        let pusher = {
            let inbox = inbox.clone();
            thread::spawn(move || inbox.push_wake(5))
        };
        let mut stopped = false;
        let taken = executor_until(&inbox, &parker, |t| {
            // Acquire: as `Local::run`, pairs with the stopper's Release.
            stopped = stopped || stop.load(Ordering::Acquire);
            stopped && t.wakes.len() == 1
        });
        assert_eq!(taken.wakes, vec![5]);
        stopper.join().unwrap();
        pusher.join().unwrap();
        assert_nothing_left(&inbox);
    }
);
