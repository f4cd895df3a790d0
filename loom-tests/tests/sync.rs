//! Models of the `swco::sync` types, one per type, on loom threads parking
//! through the hook's default thread parker (the executor does not build
//! under loom; a coroutine parks through the same register / fence /
//! re-check / park steps, only its `park` differs).
//!
//! * `Mutex`: mutual exclusion (a loom cell written under the guard: two
//!   holders at once are a data race loom reports) and no lost wake-up (a
//!   waiter left asleep is a deadlock loom reports), three parties; and
//!   the same with homes (`Park::home`), so that an unlock chooses a waiter
//!   behind the front, which learns it through the list's `chosen` word;
//! * `Semaphore`: permits are conserved: never more holders than permits,
//!   and every permit back at the end, with an `add_permits` racing;
//! * `Barrier`: generations: two rounds of two parties, nobody leaves a
//!   round before its last party arrived, one leader per round;
//! * `WaitGroup`: the count: `wait` returns only after every other clone
//!   is gone;
//! * `Condvar`: no lost notice: a waiter that checks a flag under the mutex
//!   and waits, against a notifier that sets it under the mutex and then
//!   notifies, always wakes (a waiter left asleep is loom's deadlock);
//! * `OnceCell`: one initialiser: two parties race `get_or_init`, one
//!   initialiser runs, both see its value, the loser is never left asleep.
//!
//! Instrumentation uses `std` atomics (see `common`).
#![cfg(loom)]

#[macro_use]
mod common;

use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::Waker;
use std::time::Instant;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use swco_channel::hook::{self, Park};
use swco_sync::{Barrier, Condvar, Mutex, OnceCell, Semaphore, WaitGroup};

/// Locks `m` and increments `cell` under the guard.
fn bump(m: &Mutex<()>, cell: &UnsafeCell<usize>) {
    let _g = m.lock();
    // SAFETY: written only under the guard; loom reports a concurrent
    // access if the mutex let two holders in.
    cell.with_mut(|p| unsafe { *p += 1 });
}

/// Three parties lock once each and increment a loom cell under the guard.
fn mutex_exclusion() {
    let m = Arc::new(Mutex::new(()));
    let cell = Arc::new(UnsafeCell::new(0usize));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (m, cell) = (m.clone(), cell.clone());
            thread::spawn(move || bump(&m, &cell))
        })
        .collect();
    bump(&m, &cell);
    for t in threads {
        t.join().unwrap();
    }
    let _g = m.lock();
    // SAFETY: as above.
    assert_eq!(cell.with(|p| unsafe { *p }), 3);
}

/// A park context with a home: the thread's own parker, but reporting
/// `home`, as an executor's coroutines report theirs.
struct HomePark {
    inner: Rc<dyn Park>,
    home: usize,
}

impl Park for HomePark {
    fn waker(&self) -> Waker {
        self.inner.waker()
    }
    fn will_wake(&self, waker: &Waker) -> bool {
        self.inner.will_wake(waker)
    }
    fn park(&self, deadline: Option<Instant>) {
        self.inner.park(deadline);
    }
    fn home(&self) -> usize {
        self.home
    }
    fn thread_home(&self) -> usize {
        self.home
    }
}

/// Runs the rest of this loom thread at `home`.
fn set_home(home: usize) {
    let inner = hook::current();
    hook::set_current(Some(Rc::new(HomePark { inner, home })));
}

/// `mutex_exclusion` with homes: the main thread (home 1) holds the lock
/// while a home-2 thread and then a home-1 thread may queue, so its unlock
/// may pass the front (home 2) over for the home-1 waiter. Mutual exclusion
/// and no lost wake-up as before; here they also depend on how a waiter
/// chosen from behind the front learns it (the `chosen` word, Acquire
/// against the chooser's Release).
fn mutex_exclusion_with_homes() {
    let m = Arc::new(Mutex::new(()));
    let cell = Arc::new(UnsafeCell::new(0usize));
    set_home(1);
    let g = m.lock();
    let threads: Vec<_> = [2, 1]
        .into_iter()
        .map(|home| {
            let (m, cell) = (m.clone(), cell.clone());
            thread::spawn(move || {
                set_home(home);
                bump(&m, &cell);
            })
        })
        .collect();
    // SAFETY: as above, under the guard.
    cell.with_mut(|p| unsafe { *p += 1 });
    drop(g);
    for t in threads {
        t.join().unwrap();
    }
    let _g = m.lock();
    // SAFETY: as above.
    assert_eq!(cell.with(|p| unsafe { *p }), 3);
}

/// One permit; two threads take it in turn while the main thread adds a
/// second one. At most two holders at once, at most one before the add;
/// all permits back at the end.
fn semaphore_conserves_permits() {
    let s = Arc::new(Semaphore::new(1));
    let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (s, inside) = (s.clone(), inside.clone());
            thread::spawn(move || {
                let _p = s.acquire();
                let now = inside.fetch_add(1, SeqCst) + 1;
                assert!(now <= 2, "{now} holders of 2 permits");
                inside.fetch_sub(1, SeqCst);
            })
        })
        .collect();
    s.add_permits(1);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(s.available_permits(), 2, "a permit was lost or made");
}

/// The same with one permit and no add: at most one holder.
fn semaphore_excludes() {
    let s = Arc::new(Semaphore::new(1));
    let inside = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (s, inside) = (s.clone(), inside.clone());
            thread::spawn(move || {
                let _p = s.acquire();
                assert_eq!(inside.fetch_add(1, SeqCst), 0, "two holders of 1 permit");
                thread::yield_now();
                inside.fetch_sub(1, SeqCst);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(s.available_permits(), 1, "a permit was lost or made");
}

/// Two parties, two rounds each.
fn barrier_generations() {
    let b = Arc::new(Barrier::new(2));
    let arrived = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let leaders = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let party = {
        let (b, arrived, leaders) = (b.clone(), arrived.clone(), leaders.clone());
        move || {
            for round in 0..2 {
                arrived[round].fetch_add(1, SeqCst);
                if b.wait().is_leader() {
                    leaders[round].fetch_add(1, SeqCst);
                }
                assert_eq!(arrived[round].load(SeqCst), 2, "left round {round} early");
            }
        }
    };
    let other = thread::spawn(party.clone());
    party();
    other.join().unwrap();
    for round in 0..2 {
        assert_eq!(leaders[round].load(SeqCst), 1, "round {round}");
    }
}

/// Two members finish on their threads; the main thread waits.
fn wait_group_count() {
    let wg = WaitGroup::new();
    let done = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (wg, done) = (wg.clone(), done.clone());
            thread::spawn(move || {
                done.fetch_add(1, SeqCst);
                drop(wg);
            })
        })
        .collect();
    wg.wait();
    assert_eq!(done.load(SeqCst), 2, "wait returned before every member");
    for t in threads {
        t.join().unwrap();
    }
}

/// One waiter, one notifier: the waiter sees the flag set, having waited
/// or not, and is never left asleep.
fn condvar_notice() {
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let notifier = {
        let pair = pair.clone();
        thread::spawn(move || {
            let (m, cv) = &*pair;
            *m.lock() = true;
            cv.notify_one();
        })
    };
    let (m, cv) = &*pair;
    let g = cv.wait_while(m.lock(), |set| !*set);
    assert!(*g, "woke with the flag unset");
    drop(g);
    notifier.join().unwrap();
}

/// Two parties race `get_or_init` with different values.
fn once_cell_one_initialiser() {
    let cell = Arc::new(OnceCell::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let other = {
        let (cell, runs) = (cell.clone(), runs.clone());
        thread::spawn(move || {
            *cell.get_or_init(|| {
                runs.fetch_add(1, SeqCst);
                1
            })
        })
    };
    let mine = *cell.get_or_init(|| {
        runs.fetch_add(1, SeqCst);
        2
    });
    let theirs = other.join().unwrap();
    assert_eq!(mine, theirs, "two values");
    assert_eq!(runs.load(SeqCst), 1, "two initialisers ran");
}

model!(
    mutex_mutual_exclusion_and_no_lost_wake_up,
    2,
    mutex_exclusion()
);
model!(
    mutex_hand_off_past_the_front_by_home,
    2,
    mutex_exclusion_with_homes()
);
model!(
    semaphore_permits_conserved,
    2,
    semaphore_conserves_permits()
);
model!(semaphore_one_permit_one_holder, 2, semaphore_excludes());
model!(barrier_generations_two_rounds, 2, barrier_generations());
model!(wait_group_counts_to_zero, 2, wait_group_count());
model!(condvar_no_lost_notice, 2, condvar_notice());
model!(
    once_cell_one_initialiser_runs,
    2,
    once_cell_one_initialiser()
);
