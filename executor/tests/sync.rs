//! `swco::sync` under the executor: exact counts under contention with
//! guards held across `yield_now`, more coroutines than executors, plain
//! threads mixed in; recursion and bad input; waiters cancelled by
//! `JoinHandle::cancel` and by `shutdown_timeout`, which must leave no
//! stale waiter and lose no permit or wake-up; the `_async` forms' cancel
//! safety.
//!
//! Each test runs in a child process with a hang guard (see `common`): a
//! lost wake-up fails its own test with the child's output. Nothing here
//! asserts on elapsed time.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use swco_executor::{yield_now, JoinHandle, Runtime};
use swco_sync::{Barrier, Condvar, Mutex, OnceCell, Semaphore, WaitGroup};

mod common;

use common::in_child_process;

/// Coroutines per test: many more than executors.
const COROUTINES: usize = 64;
/// Plain threads mixed in.
const THREADS: usize = 2;

fn rt(executors: usize) -> Runtime {
    Runtime::builder().executors(executors).build().unwrap()
}

fn assert_cancelled<T: std::fmt::Debug>(h: JoinHandle<T>) {
    let e = h.join().expect_err("the coroutine was cancelled");
    assert!(e.is_cancelled(), "{e}");
}

/// Gives a coroutine that announced itself time to park (a scheduling
/// nudge, not an assertion on time: the tests pass whether or not it has).
fn settle() {
    thread::sleep(Duration::from_millis(20));
}

/// Counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A waker that does nothing (`Waker::noop` needs Rust 1.85).
struct Noop;
impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

/// Runs `f(i)` on `COROUTINES` coroutines of a 2-executor runtime and on
/// `THREADS` plain threads (indices after the coroutines'), and waits for
/// all.
fn everyone(f: impl Fn(usize) + Send + Sync + 'static) {
    let rt = rt(2);
    let f = Arc::new(f);
    let coroutines: Vec<_> = (0..COROUTINES)
        .map(|i| {
            let f = Arc::clone(&f);
            rt.spawn(move || f(i))
        })
        .collect();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let f = Arc::clone(&f);
            thread::spawn(move || f(COROUTINES + t))
        })
        .collect();
    for c in coroutines {
        c.join().unwrap();
    }
    for t in threads {
        t.join().unwrap();
    }
    rt.shutdown();
}

#[test]
fn mutex_counts_exactly_with_guards_held_across_yields() {
    in_child_process(
        "mutex_counts_exactly_with_guards_held_across_yields",
        || {
            const ROUNDS: usize = 40;
            let drops = Arc::new(AtomicUsize::new(0));
            let m = Arc::new(Mutex::new((0usize, Vec::new())));
            let (m2, d2) = (Arc::clone(&m), Arc::clone(&drops));
            everyone(move |_| {
                for _ in 0..ROUNDS {
                    let mut g = m2.lock();
                    // A read, a suspension, a write: without exclusion
                    // increments would be lost.
                    let seen = g.0;
                    yield_now();
                    g.0 = seen + 1;
                    g.1.push(Counted(Arc::clone(&d2)));
                    yield_now();
                }
            });
            let parties = COROUTINES + THREADS;
            let (count, values) = Arc::try_unwrap(m).ok().unwrap().into_inner();
            assert_eq!(count, parties * ROUNDS);
            assert_eq!(values.len(), parties * ROUNDS);
            assert_eq!(drops.load(Ordering::SeqCst), 0);
            drop(values);
            assert_eq!(drops.load(Ordering::SeqCst), parties * ROUNDS);
        },
    );
}

/// Spawns `count` coroutines on executor 0 that lock `m` and increment it
/// (a read, a `yield_now` with the guard held, a write) for as long as
/// `stop` is short of 2; each returns its increments.
fn hammers_on_executor_0(
    rt: &Runtime,
    count: usize,
    m: &Arc<Mutex<usize>>,
    stop: &Arc<AtomicUsize>,
) -> Vec<JoinHandle<usize>> {
    (0..count)
        .map(|_| {
            let (m, stop) = (Arc::clone(m), Arc::clone(stop));
            rt.spawn_on(0, move || {
                let mut rounds = 0usize;
                while stop.load(Ordering::SeqCst) < 2 {
                    let mut g = m.lock();
                    let seen = *g;
                    yield_now();
                    *g = seen + 1;
                    rounds += 1;
                }
                rounds
            })
            .unwrap()
        })
        .collect()
}

#[test]
fn executor_affinity_never_starves_a_waiter_elsewhere() {
    // Coroutines of executor 0 pass the lock among themselves for as long
    // as `stop` is unset: every unlock there finds a waiter of its own
    // executor near the front. A coroutine of executor 1 and a plain
    // thread must still get the lock (the bound on passing the oldest
    // waiter over); were it unbounded they would wait for ever, the hammers
    // with them, and the hang guard would fail the test.
    in_child_process("executor_affinity_never_starves_a_waiter_elsewhere", || {
        const HAMMERS: usize = 8;
        let rt = rt(2);
        let m = Arc::new(Mutex::new(0usize));
        let stop = Arc::new(AtomicUsize::new(0));
        let hammers = hammers_on_executor_0(&rt, HAMMERS, &m, &stop);
        // Let the hammers' queue form before the others join it.
        settle();
        let (m1, stop1) = (Arc::clone(&m), Arc::clone(&stop));
        let elsewhere = rt
            .spawn_on(1, move || {
                *m1.lock() += 1;
                stop1.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        let (m2, stop2) = (Arc::clone(&m), Arc::clone(&stop));
        let thread = thread::spawn(move || {
            *m2.lock() += 1;
            stop2.fetch_add(1, Ordering::SeqCst);
        });
        elsewhere.join().unwrap();
        thread.join().unwrap();
        let rounds: usize = hammers.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(*m.lock(), rounds + 2, "an increment was lost");
        rt.shutdown();
    });
}

#[test]
fn mutex_contention_lets_timers_and_new_coroutines_run() {
    // Contenders on one executor pass the lock round for as long as `stop`
    // is short of 2: every unlock wakes the next one, which runs nested in
    // the park of the one that woke it. A sleeper (a timer only the
    // executor loop fires) and a coroutine spawned afterwards (a job the
    // loop must start) each add 1 to `stop`: the contention must let the
    // loop come round (the holders' `yield_now` does when a timer is due
    // or a job waits; the run-next budget bounds the chain otherwise, which
    // `a_chain_of_direct_hand_offs_lets_the_loop_fire_timers` in
    // runtime.rs checks alone). Starved, the contenders would go on for
    // ever and the hang guard would fail the test.
    in_child_process(
        "mutex_contention_lets_timers_and_new_coroutines_run",
        || {
            const CONTENDERS: usize = 16;
            let rt = rt(1);
            let m = Arc::new(Mutex::new(0usize));
            let stop = Arc::new(AtomicUsize::new(0));
            let contenders = hammers_on_executor_0(&rt, CONTENDERS, &m, &stop);
            let stop1 = Arc::clone(&stop);
            let sleeper = rt
                .spawn_on(0, move || {
                    swco_executor::sleep(Duration::from_millis(1));
                    stop1.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
            // Let the chain form before the last job is queued.
            settle();
            let stop2 = Arc::clone(&stop);
            let late = rt
                .spawn_on(0, move || {
                    stop2.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
            sleeper.join().unwrap();
            late.join().unwrap();
            let rounds: usize = contenders.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(*m.lock(), rounds, "an increment was lost");
            rt.shutdown();
        },
    );
}

#[test]
fn mutex_try_lock_get_mut_and_lock_async() {
    in_child_process("mutex_try_lock_get_mut_and_lock_async", || {
        let mut m = Mutex::new(1);
        *m.get_mut() += 1;
        {
            let g = m.try_lock().expect("free");
            assert!(m.try_lock().is_none(), "held");
            assert_eq!(*g, 2);
        }
        // A pending lock_async that is handed the lock and then dropped
        // hands it on: the mutex is free afterwards.
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        let held = m.lock();
        {
            let mut fut = pin!(m.lock_async());
            assert!(fut.as_mut().poll(&mut cx).is_pending());
            drop(held); // hands the lock to the future
            assert!(m.try_lock().is_none(), "handed to the pending future");
        } // dropped without being polled again
        assert!(m.try_lock().is_some(), "the hand-off was lost");
        // And one polled to completion.
        {
            let held = m.lock();
            let mut fut = pin!(m.lock_async());
            assert!(fut.as_mut().poll(&mut cx).is_pending());
            drop(held);
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(mut g) => *g += 1,
                Poll::Pending => panic!("the lock was handed over"),
            }
        }
        assert_eq!(m.into_inner(), 3);
    });
}

#[test]
fn recursive_lock_panics_in_a_coroutine_and_on_a_thread() {
    in_child_process(
        "recursive_lock_panics_in_a_coroutine_and_on_a_thread",
        || {
            let m = Arc::new(Mutex::new(()));
            let r = catch_unwind(AssertUnwindSafe(|| {
                let _g = m.lock();
                let _again = m.lock();
            }));
            let msg = panic_text(&*r.expect_err("a recursive lock on a thread"));
            assert!(msg.contains("already holds"), "{msg}");
            assert!(
                m.try_lock().is_some(),
                "the guard was dropped by the unwind"
            );

            let rt = rt(2);
            let m2 = Arc::clone(&m);
            let h = rt.spawn(move || {
                let _g = m2.lock();
                yield_now(); // may move; still the same coroutine
                let _again = m2.lock();
            });
            let e = h.join().expect_err("a recursive lock in a coroutine");
            assert!(e.is_panic(), "{e}");
            assert!(m.try_lock().is_some());
            rt.shutdown();
        },
    );
}

#[test]
fn semaphore_permits_are_conserved_under_contention() {
    in_child_process("semaphore_permits_are_conserved_under_contention", || {
        const PERMITS: usize = 3;
        const ROUNDS: usize = 30;
        let s = Arc::new(Semaphore::new(PERMITS));
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let (s2, i2, m2, d2) = (s.clone(), inside.clone(), most.clone(), done.clone());
        everyone(move |_| {
            for _ in 0..ROUNDS {
                let _p = s2.acquire();
                let now = i2.fetch_add(1, Ordering::SeqCst) + 1;
                m2.fetch_max(now, Ordering::SeqCst);
                yield_now();
                i2.fetch_sub(1, Ordering::SeqCst);
                d2.fetch_add(1, Ordering::SeqCst);
            }
        });
        assert!(most.load(Ordering::SeqCst) <= PERMITS);
        assert_eq!(done.load(Ordering::SeqCst), (COROUTINES + THREADS) * ROUNDS);
        assert_eq!(s.available_permits(), PERMITS, "a permit was lost or made");
    });
}

#[test]
fn semaphore_add_permits_try_acquire_and_overflow() {
    in_child_process("semaphore_add_permits_try_acquire_and_overflow", || {
        let s = Semaphore::new(0);
        assert!(s.try_acquire().is_none());
        assert_eq!(s.available_permits(), 0, "a failed try gives nothing back");
        s.add_permits(2);
        let a = s.try_acquire().expect("a permit");
        a.forget();
        assert_eq!(s.available_permits(), 1);
        let r = catch_unwind(AssertUnwindSafe(|| s.add_permits(Semaphore::MAX_PERMITS)));
        let msg = panic_text(&*r.expect_err("overflowing add_permits panics"));
        assert!(msg.contains("overflow"), "{msg}");
        assert_eq!(s.available_permits(), 1, "left as it was");
        // A pending acquire_async handed a permit and then dropped gives it
        // back.
        let _p = s.acquire();
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        {
            let mut fut = pin!(s.acquire_async());
            assert!(fut.as_mut().poll(&mut cx).is_pending());
            s.add_permits(1); // handed to the future
            assert_eq!(s.available_permits(), 0);
        }
        assert_eq!(s.available_permits(), 1, "the dropped future lost a permit");
    });
}

#[test]
fn barrier_rounds_with_more_coroutines_than_executors_and_threads() {
    in_child_process(
        "barrier_rounds_with_more_coroutines_than_executors_and_threads",
        || {
            const ROUNDS: usize = 20;
            let parties = COROUTINES + THREADS;
            let b = Arc::new(Barrier::new(parties));
            let arrived: Arc<Vec<AtomicUsize>> =
                Arc::new((0..ROUNDS).map(|_| AtomicUsize::new(0)).collect());
            let leaders: Arc<Vec<AtomicUsize>> =
                Arc::new((0..ROUNDS).map(|_| AtomicUsize::new(0)).collect());
            let (b2, a2, l2) = (b.clone(), arrived.clone(), leaders.clone());
            everyone(move |_| {
                for r in 0..ROUNDS {
                    a2[r].fetch_add(1, Ordering::SeqCst);
                    if b2.wait().is_leader() {
                        l2[r].fetch_add(1, Ordering::SeqCst);
                    }
                    // Everyone of this round arrived before anyone left.
                    assert_eq!(a2[r].load(Ordering::SeqCst), parties, "round {r}");
                }
            });
            for r in 0..ROUNDS {
                assert_eq!(leaders[r].load(Ordering::SeqCst), 1, "round {r}");
            }
            // `new(0)` acts as std's: every wait returns at once and leads.
            let zero = Barrier::new(0);
            assert!(zero.wait().is_leader() && zero.wait().is_leader());
            assert!(std::sync::Barrier::new(0).wait().is_leader());
        },
    );
}

#[test]
fn wait_group_counts_every_member() {
    in_child_process("wait_group_counts_every_member", || {
        for _ in 0..10 {
            let rt = rt(2);
            let wg = WaitGroup::new();
            let done = Arc::new(AtomicUsize::new(0));
            for i in 0..COROUTINES {
                let (wg, done) = (wg.clone(), done.clone());
                rt.spawn(move || {
                    if i % 2 == 0 {
                        yield_now();
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                    drop(wg);
                });
            }
            for _ in 0..THREADS {
                let (wg, done) = (wg.clone(), done.clone());
                thread::spawn(move || {
                    done.fetch_add(1, Ordering::SeqCst);
                    drop(wg);
                });
            }
            // A coroutine waits too, alongside this thread.
            let (wg2, done2) = (wg.clone(), done.clone());
            let waiter = rt.spawn(move || {
                wg2.wait();
                done2.load(Ordering::SeqCst)
            });
            wg.wait();
            assert_eq!(done.load(Ordering::SeqCst), COROUTINES + THREADS);
            assert_eq!(waiter.join().unwrap(), COROUTINES + THREADS);
            rt.shutdown();
        }
    });
}

#[test]
fn cancelled_lock_waiters_leave_no_stale_waiter() {
    in_child_process("cancelled_lock_waiters_leave_no_stale_waiter", || {
        let rt = rt(2);
        let m = Arc::new(Mutex::new(0usize));
        let parked = Arc::new(AtomicUsize::new(0));
        let held = m.lock();
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let (m, parked) = (m.clone(), parked.clone());
                rt.spawn(move || {
                    parked.fetch_add(1, Ordering::SeqCst);
                    *m.lock() += 1;
                })
            })
            .collect();
        while parked.load(Ordering::SeqCst) < 4 {
            thread::yield_now();
        }
        settle();
        // Cancel the first two; the other two must still get the lock in
        // turn (a stale registration would swallow the hand-off).
        let mut waiters = waiters.into_iter();
        for h in waiters.by_ref().take(2) {
            h.cancel();
            assert_cancelled(h);
        }
        drop(held);
        for h in waiters {
            h.join().unwrap();
        }
        assert_eq!(*m.lock(), 2);
        assert!(m.try_lock().is_some());
        rt.shutdown();
    });
}

#[test]
fn cancels_racing_hand_offs_lose_no_lock_or_permit() {
    in_child_process("cancels_racing_hand_offs_lose_no_lock_or_permit", || {
        let rt = rt(2);
        let m = Arc::new(Mutex::new(0usize));
        let s = Arc::new(Semaphore::new(2));
        let finished = Arc::new(AtomicUsize::new(0));
        for round in 0..50 {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let (m, s, f) = (m.clone(), s.clone(), finished.clone());
                    rt.spawn(move || {
                        let _p = s.acquire();
                        let mut g = m.lock();
                        yield_now();
                        *g += 1;
                        f.fetch_add(1, Ordering::SeqCst);
                    })
                })
                .collect();
            // Cancel every other one, wherever it is (queued, handed the
            // lock or a permit, or done).
            for (i, h) in handles.into_iter().enumerate() {
                if (i + round) % 2 == 0 {
                    h.cancel();
                }
                let _ = h.join();
            }
        }
        assert_eq!(*m.lock(), finished.load(Ordering::SeqCst));
        assert!(m.try_lock().is_some(), "the lock was lost");
        assert_eq!(s.available_permits(), 2, "a permit was lost");
        rt.shutdown();
    });
}

#[test]
fn shutdown_timeout_cancels_sync_waiters_cleanly() {
    in_child_process("shutdown_timeout_cancels_sync_waiters_cleanly", || {
        let rt = rt(2);
        let m = Arc::new(Mutex::new(()));
        let s = Arc::new(Semaphore::new(0));
        let b = Arc::new(Barrier::new(3));
        let wg = WaitGroup::new();
        let parked = Arc::new(AtomicUsize::new(0));
        let held = m.lock();
        {
            let (m, p) = (m.clone(), parked.clone());
            rt.spawn(move || {
                p.fetch_add(1, Ordering::SeqCst);
                drop(m.lock());
            });
        }
        {
            let (s, p) = (s.clone(), parked.clone());
            rt.spawn(move || {
                p.fetch_add(1, Ordering::SeqCst);
                drop(s.acquire());
            });
        }
        {
            let (b, p) = (b.clone(), parked.clone());
            rt.spawn(move || {
                p.fetch_add(1, Ordering::SeqCst);
                b.wait();
            });
        }
        {
            let (member, p) = (wg.clone(), parked.clone());
            let keep = wg.clone();
            rt.spawn(move || {
                p.fetch_add(1, Ordering::SeqCst);
                member.wait();
            });
            // `keep` stays alive: the coroutine above waits for ever.
            std::mem::forget(keep);
        }
        while parked.load(Ordering::SeqCst) < 4 {
            thread::yield_now();
        }
        settle();
        let e = rt.shutdown_timeout(Duration::from_millis(50)).unwrap_err();
        assert_eq!(e.total(), 4);
        // Nothing stale: the unlock finds no waiter to hand to, the permit
        // stays, and the barrier's round (one cancelled arrival counted)
        // completes with two more.
        drop(held);
        assert!(
            m.try_lock().is_some(),
            "the unlock went to a cancelled waiter"
        );
        s.add_permits(1);
        assert_eq!(s.available_permits(), 1, "a cancelled waiter took a permit");
        let b2 = b.clone();
        let t = thread::spawn(move || b2.wait().is_leader());
        let me = b.wait().is_leader();
        assert!(me ^ t.join().unwrap(), "exactly one leader");
        drop(wg);
    });
}

// ---- Condvar -------------------------------------------------------------------

/// A bounded queue made of a mutex and two condition variables, filled by
/// every coroutine and thread and drained by two consumers: every item
/// arrives exactly once, and no notice is lost (a lost one hangs the child).
#[test]
fn condvar_queue_delivers_every_item_once() {
    in_child_process("condvar_queue_delivers_every_item_once", || {
        const PER: usize = 50;
        const BOUND: usize = 4;
        struct Shared {
            queue: Mutex<(std::collections::VecDeque<usize>, usize)>,
            not_empty: Condvar,
            not_full: Condvar,
        }
        let parties = COROUTINES + THREADS;
        let shared = Arc::new(Shared {
            queue: Mutex::new((std::collections::VecDeque::new(), 0)),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
        });
        let rt = rt(2);
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let shared = Arc::clone(&shared);
                rt.spawn(move || {
                    let mut got = Vec::new();
                    loop {
                        let mut g = shared
                            .not_empty
                            .wait_while(shared.queue.lock(), |(q, done)| {
                                q.is_empty() && *done < parties
                            });
                        let Some(v) = g.0.pop_front() else {
                            // Every producer is done and the queue is empty.
                            return got;
                        };
                        drop(g);
                        shared.not_full.notify_one();
                        got.push(v);
                    }
                })
            })
            .collect();
        let producer = {
            let shared = Arc::clone(&shared);
            move |p: usize| {
                for i in 0..PER {
                    let mut g = shared
                        .not_full
                        .wait_while(shared.queue.lock(), |(q, _)| q.len() >= BOUND);
                    g.0.push_back(p * PER + i);
                    drop(g);
                    shared.not_empty.notify_one();
                }
                shared.queue.lock().1 += 1;
                shared.not_empty.notify_all();
            }
        };
        everyone(producer);
        let mut all: Vec<usize> = consumers
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..parties * PER).collect::<Vec<_>>());
        rt.shutdown();
    });
}

/// `notify_all` wakes every waiter, coroutines and threads.
#[test]
fn condvar_notify_all_wakes_every_waiter() {
    in_child_process("condvar_notify_all_wakes_every_waiter", || {
        let state = Arc::new((Mutex::new((false, 0usize)), Condvar::new()));
        let s2 = Arc::clone(&state);
        let waiters = thread::spawn(move || {
            everyone(move |_| {
                let (m, cv) = &*s2;
                let mut g = m.lock();
                g.1 += 1;
                let g = cv.wait_while(g, |(go, _)| !*go);
                assert!(g.0);
            })
        });
        // Everyone counts itself in under the lock and gives it up only by
        // waiting, so once the count is full every waiter is listed.
        let (m, cv) = &*state;
        while m.lock().1 < COROUTINES + THREADS {
            thread::yield_now();
        }
        m.lock().0 = true;
        cv.notify_all();
        waiters.join().unwrap();
    });
}

/// A timed wait with no notice times out and holds the lock again; one
/// notified in time does not time out.
#[test]
fn condvar_wait_timeout_times_out_and_relocks() {
    in_child_process("condvar_wait_timeout_times_out_and_relocks", || {
        let rt = rt(1);
        let state = Arc::new((Mutex::new(0usize), Condvar::new()));
        let s2 = Arc::clone(&state);
        let timed = rt.spawn(move || {
            let (m, cv) = &*s2;
            let (mut g, r) = cv.wait_timeout(m.lock(), Duration::from_millis(5));
            *g += 1;
            let (g, r2) = cv.wait_timeout_while(g, Duration::from_millis(5), |_| true);
            (r.timed_out(), r2.timed_out(), *g)
        });
        assert_eq!(timed.join().unwrap(), (true, true, 1));
        // Notified: `wait_timeout_while` ends with the condition false.
        let s2 = Arc::clone(&state);
        let waiter = rt.spawn(move || {
            let (m, cv) = &*s2;
            let (g, r) = cv.wait_timeout_while(m.lock(), Duration::from_secs(600), |v| *v < 2);
            (r.timed_out(), *g)
        });
        let (m, cv) = &*state;
        *m.lock() = 2;
        cv.notify_all();
        assert_eq!(waiter.join().unwrap(), (false, 2));
        rt.shutdown();
    });
}

/// A waiter cancelled while it waits leaves the list: a later
/// `notify_one` goes to a live waiter, not to the stale registration (which
/// would swallow it and leave the live one asleep).
#[test]
fn cancelled_condvar_waiters_leave_no_stale_waiter() {
    in_child_process("cancelled_condvar_waiters_leave_no_stale_waiter", || {
        let rt = rt(2);
        let state = Arc::new((Mutex::new((0usize, false)), Condvar::new()));
        let spawn_waiter = |state: &Arc<(Mutex<(usize, bool)>, Condvar)>| {
            let state = Arc::clone(state);
            rt.spawn(move || {
                let (m, cv) = &*state;
                let mut g = m.lock();
                g.0 += 1;
                let g = cv.wait_while(g, |(_, go)| !*go);
                assert!(g.1);
            })
        };
        let doomed: Vec<_> = (0..2).map(|_| spawn_waiter(&state)).collect();
        while state.0.lock().0 < 2 {
            thread::yield_now();
        }
        settle();
        for h in doomed {
            h.cancel();
            assert_cancelled(h);
        }
        let live = spawn_waiter(&state);
        while state.0.lock().0 < 3 {
            thread::yield_now();
        }
        state.0.lock().1 = true;
        // One notice only: a second would hide a first swallowed by a
        // stale registration.
        state.1.notify_one();
        live.join().unwrap();
        // The lock is free: the cancelled waiters did not take it again.
        assert!(state.0.try_lock().is_some());
        rt.shutdown();
    });
}

// ---- OnceCell ------------------------------------------------------------------

/// Every coroutine and thread asks for the value at once; one initialiser
/// runs (yielding midway, so the others queue), everyone gets its value,
/// and the value is dropped once, with the cell.
#[test]
fn once_cell_runs_one_initialiser_for_everyone() {
    in_child_process("once_cell_runs_one_initialiser_for_everyone", || {
        let drops = Arc::new(AtomicUsize::new(0));
        let runs = Arc::new(AtomicUsize::new(0));
        let cell = Arc::new(OnceCell::new());
        let seen = Arc::new(AtomicUsize::new(0));
        let (c2, r2, d2, s2) = (cell.clone(), runs.clone(), drops.clone(), seen.clone());
        everyone(move |i| {
            let (v, _) = c2.get_or_init(|| {
                r2.fetch_add(1, Ordering::SeqCst);
                yield_now();
                (i, Counted(Arc::clone(&d2)))
            });
            assert_eq!(c2.get().map(|(v, _)| *v), Some(*v));
            s2.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(seen.load(Ordering::SeqCst), COROUTINES + THREADS);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        let cell = Arc::try_unwrap(cell).ok().unwrap();
        assert!(cell.set((0, Counted(Arc::clone(&drops)))).is_err());
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "the refused value is dropped"
        );
        drop(cell);
        assert_eq!(drops.load(Ordering::SeqCst), 2, "the value is dropped once");
    });
}

/// An initialiser that panics leaves the cell empty; a waiting caller
/// then runs its own.
#[test]
fn once_cell_initialiser_that_panics_hands_over() {
    in_child_process("once_cell_initialiser_that_panics_hands_over", || {
        let rt = rt(2);
        let cell = Arc::new(OnceCell::new());
        let (go_tx, go_rx) = swco_channel::mpmc::bounded::<()>(1);
        let started = Arc::new(AtomicUsize::new(0));
        let (c2, st) = (cell.clone(), started.clone());
        let failing = rt.spawn(move || {
            c2.get_or_init(|| {
                st.fetch_add(1, Ordering::SeqCst);
                // Wait until the others queue behind us, then fail.
                go_rx.recv().unwrap();
                panic!("the first initialiser fails")
            });
        });
        while started.load(Ordering::SeqCst) == 0 {
            thread::yield_now();
        }
        let others: Vec<_> = (0..8)
            .map(|i| {
                let c = cell.clone();
                rt.spawn(move || *c.get_or_init(|| 100 + i))
            })
            .collect();
        settle();
        go_tx.send(()).unwrap();
        let e = failing.join().expect_err("the initialiser panicked");
        assert!(panic_text(&*e.into_panic()).contains("fails"));
        let values: Vec<usize> = others.into_iter().map(|h| h.join().unwrap()).collect();
        let first = values[0];
        assert!((100..108).contains(&first));
        assert!(values.iter().all(|v| *v == first), "{values:?}");
        assert_eq!(cell.get(), Some(&first));
        rt.shutdown();
    });
}

/// An initialiser cancelled through its join handle counts as one that
/// panicked: a waiter takes over. Re-entrance panics, and `set`, `get`,
/// `get_mut`, `into_inner` and `From` do what they say.
#[test]
fn once_cell_cancel_reentrance_and_accessors() {
    in_child_process("once_cell_cancel_reentrance_and_accessors", || {
        let rt = rt(2);
        let cell = Arc::new(OnceCell::new());
        let (_hold, never) = swco_channel::mpmc::bounded::<usize>(1);
        let started = Arc::new(AtomicUsize::new(0));
        let (c2, st) = (cell.clone(), started.clone());
        let stuck = rt.spawn(move || {
            *c2.get_or_init(|| {
                st.fetch_add(1, Ordering::SeqCst);
                never.recv().unwrap()
            })
        });
        while started.load(Ordering::SeqCst) == 0 {
            thread::yield_now();
        }
        let c3 = cell.clone();
        let waiter = rt.spawn(move || *c3.get_or_init(|| 7));
        settle();
        stuck.cancel();
        assert_cancelled(stuck);
        assert_eq!(waiter.join().unwrap(), 7);

        // Re-entrance, in a coroutine and on a thread.
        let reenter = || {
            let cell = OnceCell::new();
            let r = catch_unwind(AssertUnwindSafe(|| {
                cell.get_or_init(|| *cell.get_or_init(|| 1));
            }));
            panic_text(&*r.expect_err("re-entrance panics"))
        };
        let in_coroutine = rt.spawn(reenter).join().unwrap();
        assert!(in_coroutine.contains("own initialiser"), "{in_coroutine}");
        let on_thread = thread::spawn(reenter).join().unwrap();
        assert!(on_thread.contains("own initialiser"), "{on_thread}");

        let mut c = OnceCell::new();
        assert_eq!(c.get(), None);
        assert_eq!(c.get_mut(), None);
        assert_eq!(c.set(1), Ok(()));
        assert_eq!(c.set(2), Err(2));
        *c.get_mut().unwrap() += 10;
        assert_eq!(format!("{c:?}"), "OnceCell(11)");
        assert_eq!(c.into_inner(), Some(11));
        assert_eq!(OnceCell::from(5).into_inner(), Some(5));
        assert_eq!(OnceCell::<u8>::new().into_inner(), None);
        rt.shutdown();
    });
}
