//! A cancelled member of a scope is still waited for: a scoped coroutine
//! cancelled through its handle ([`ScopedJoinHandle::cancel`]) unwinds,
//! and the scope does not return before it has finished unwinding, also
//! when a `Drop` on the way blocks.
//!
//! The checks are exact counts read right after the wait returns. Where the
//! order could depend on timing, it is forced: on one executor, a coroutine
//! that does not suspend keeps the thread, and a blocking `Drop` is let go
//! only once the waiter is seen parked (in the runtime's dump, or by a park
//! context that counts the waiting thread's parks). A scope or join that did
//! not wait would read the count before the unwinding and fail, not race.
//!
//! Every scenario could hang if the wait or the cancel were broken, so each
//! runs in a child process (see `common`).
//!
//! [`ScopedJoinHandle::cancel`]: swco_executor::ScopedJoinHandle::cancel

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use common::in_child_process;
use swco_channel::mpmc;
use swco_executor::{CoroutineState, Runtime};

fn rt(executors: usize) -> Runtime {
    Runtime::builder().executors(executors).build().unwrap()
}

/// Counts its drop: the end of a coroutine's stack, however it ends.
struct Count<'a>(&'a AtomicUsize);

impl Drop for Count<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A `Drop` that blocks: it says it has begun, then waits for a value on
/// `gate`, and counts its end once it has it.
struct BlocksInDrop<'a> {
    begun: &'a AtomicBool,
    gate: &'a mpmc::Receiver<u32>,
    got: &'a AtomicUsize,
}

impl Drop for BlocksInDrop<'_> {
    fn drop(&mut self) {
        self.begun.store(true, Ordering::SeqCst);
        let v = self.gate.recv().expect("the gate is opened, not closed");
        self.got.fetch_add(v as usize, Ordering::SeqCst);
    }
}

/// Whether the coroutine `id` of `rt` is parked (the runtime's dump).
fn is_parked(rt: &Runtime, id: u64) -> bool {
    rt.dump()
        .coroutines()
        .iter()
        .any(|c| c.id() == id && c.state() == CoroutineState::Parked)
}

/// A park context for a plain thread that counts its parks, so another
/// thread can see it waiting.
struct CountingPark {
    thread: thread::Thread,
    parks: Arc<AtomicUsize>,
}

struct Unpark(thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

impl swco_channel::hook::Park for CountingPark {
    fn waker(&self) -> std::task::Waker {
        std::task::Waker::from(Arc::new(Unpark(self.thread.clone())))
    }

    fn park(&self, deadline: Option<std::time::Instant>) {
        self.parks.fetch_add(1, Ordering::SeqCst);
        match deadline {
            Some(d) => {
                thread::park_timeout(d.saturating_duration_since(std::time::Instant::now()));
            }
            None => thread::park(),
        }
    }
}

/// Installs a [`CountingPark`] on this thread; its count of parks.
fn count_parks() -> Arc<AtomicUsize> {
    let parks = Arc::new(AtomicUsize::new(0));
    let park: std::rc::Rc<dyn swco_channel::hook::Park> = std::rc::Rc::new(CountingPark {
        thread: thread::current(),
        parks: parks.clone(),
    });
    swco_channel::hook::set_current(Some(park));
    parks
}

// --- scope -------------------------------------------------------------------

/// One executor: the scope's coroutine and its child take turns, so the
/// child is parked in its `recv` when it is cancelled, and (a coroutine
/// that does not suspend keeps the thread) the scope could only see the
/// child's unwinding finished if it waited for it.
fn cancel_a_parked_scoped_child(join_it: bool) -> (usize, Option<bool>) {
    let rt = rt(1);
    let h = rt.spawn(move || {
        // Outside the scope: the child borrows them.
        let unwound = AtomicUsize::new(0);
        let (_never, parked_on) = mpmc::bounded::<u32>(1);
        let (ready_tx, ready_rx) = mpmc::bounded::<()>(1);
        let joined = swco_executor::scope(|s| {
            let h = s.spawn(|| {
                let _count = Count(&unwound);
                ready_tx.send(()).unwrap();
                parked_on.recv()
            });
            ready_rx.recv().unwrap();
            h.cancel();
            join_it.then(|| h.join().unwrap_err().is_cancelled())
        });
        // Read before anything else runs on this executor.
        let seen = unwound.load(Ordering::SeqCst);
        // Were the scope broken, the child would still use `unwound`: it
        // is kept until the child is done (at once, if the scope waited).
        while unwound.load(Ordering::SeqCst) == 0 {
            swco_executor::yield_now();
        }
        (seen, joined)
    });
    h.join().unwrap()
}

#[test]
fn a_scoped_child_cancelled_through_its_handle_is_waited_for() {
    in_child_process(
        "a_scoped_child_cancelled_through_its_handle_is_waited_for",
        || {
            let (unwound, joined) = cancel_a_parked_scoped_child(false);
            assert_eq!(unwound, 1, "the scope returned before its child unwound");
            assert_eq!(joined, None);
        },
    );
}

#[test]
fn a_scoped_child_cancelled_and_joined_in_the_scope_is_cancelled() {
    in_child_process(
        "a_scoped_child_cancelled_and_joined_in_the_scope_is_cancelled",
        || {
            let (unwound, joined) = cancel_a_parked_scoped_child(true);
            assert_eq!(unwound, 1);
            assert_eq!(joined, Some(true), "join says is_cancelled");
        },
    );
}

#[test]
fn a_scoped_child_cancelled_before_it_starts_never_runs() {
    in_child_process(
        "a_scoped_child_cancelled_before_it_starts_never_runs",
        || {
            let rt = rt(1);
            let h = rt.spawn(|| {
                let dropped = AtomicUsize::new(0);
                let ran = AtomicBool::new(false);
                let cancelled = swco_executor::scope(|s| {
                    let count = Count(&dropped);
                    // Queued behind this coroutine, which does not suspend
                    // before the cancel: it cannot have started.
                    let h = s.spawn(|| {
                        let _count = count;
                        ran.store(true, Ordering::SeqCst);
                    });
                    h.cancel();
                    h.join().unwrap_err().is_cancelled()
                });
                (cancelled, ran.into_inner(), dropped.into_inner())
            });
            let (cancelled, ran, dropped) = h.join().unwrap();
            assert!(cancelled, "join says is_cancelled");
            assert!(!ran, "a child cancelled before it started never runs");
            assert_eq!(dropped, 1, "its closure dropped once");
        },
    );
}

/// A scope in a coroutine whose cancelled child blocks in a `Drop` while
/// it unwinds: the scope waits for that `Drop` too. The gate opens only
/// once the child is parked in its `Drop` and the scope's coroutine has
/// parked in its wait, or has returned (then the count it read says the
/// scope did not wait).
#[test]
fn a_scoped_child_blocked_in_a_drop_while_cancelled_is_waited_for() {
    in_child_process(
        "a_scoped_child_blocked_in_a_drop_while_cancelled_is_waited_for",
        || {
            let rt = rt(2);
            let (gate_tx, gate_rx) = mpmc::bounded::<u32>(1);
            let begun = Arc::new(AtomicBool::new(false));
            let waiter_id = Arc::new(AtomicU64::new(0));
            let (seen_tx, seen_rx) = mpmc::bounded::<(usize, usize)>(1);
            let (finish_tx, finish_rx) = mpmc::bounded::<()>(1);
            let h = {
                let (begun, waiter_id) = (begun.clone(), waiter_id.clone());
                rt.spawn_on(0, move || {
                    waiter_id.store(swco_executor::current_id().unwrap(), Ordering::SeqCst);
                    let unwound = AtomicUsize::new(0);
                    let got = AtomicUsize::new(0);
                    let (_never, parked_on) = mpmc::bounded::<u32>(1);
                    let (ready_tx, ready_rx) = mpmc::bounded::<()>(1);
                    swco_executor::scope(|s| {
                        let h = s
                            .spawn_on(1, || {
                                let _count = Count(&unwound);
                                let _blocks = BlocksInDrop {
                                    begun: &begun,
                                    gate: &gate_rx,
                                    got: &got,
                                };
                                ready_tx.send(()).unwrap();
                                parked_on.recv()
                            })
                            .unwrap();
                        ready_rx.recv().unwrap();
                        h.cancel();
                    });
                    seen_tx
                        .send((unwound.load(Ordering::SeqCst), got.load(Ordering::SeqCst)))
                        .unwrap();
                    // Were the scope broken, the child could still use the
                    // locals it borrows: they are kept until the test ends.
                    finish_rx.recv().unwrap();
                })
                .unwrap()
            };
            let waiter = loop {
                let id = waiter_id.load(Ordering::SeqCst);
                if id != 0 {
                    break id;
                }
                thread::yield_now();
            };
            // The child in its Drop and the waiter parked in the scope's
            // wait, or (were the wait broken) the scope already returned.
            while !(begun.load(Ordering::SeqCst) && is_parked(&rt, waiter)) && seen_rx.is_empty() {
                thread::yield_now();
            }
            gate_tx.send(5).unwrap();
            let (unwound, got) = seen_rx.recv().unwrap();
            // Only the waiter left (the child is done, at once if the scope
            // waited): the waiter may let its locals go.
            while rt.dump().coroutines().len() > 1 {
                thread::yield_now();
            }
            finish_tx.send(()).unwrap();
            h.join().unwrap();
            assert_eq!(
                (unwound, got),
                (1, 5),
                "the scope returned before its child's Drop ended"
            );
        },
    );
}

/// The same from a plain thread (`Runtime::scope`): the gate opens once
/// the thread has parked in the scope's wait after the cancel.
#[test]
fn a_scope_on_a_plain_thread_waits_for_a_cancelled_child_blocked_in_a_drop() {
    in_child_process(
        "a_scope_on_a_plain_thread_waits_for_a_cancelled_child_blocked_in_a_drop",
        || {
            let rt = rt(1);
            let parks = count_parks();
            let (gate_tx, gate_rx) = mpmc::bounded::<u32>(1);
            let begun = AtomicBool::new(false);
            let parks_at_cancel = AtomicUsize::new(usize::MAX);
            let scope_returned = AtomicBool::new(false);
            let unwound = AtomicUsize::new(0);
            let got = AtomicUsize::new(0);
            let (_never, parked_on) = mpmc::bounded::<u32>(1);
            let (ready_tx, ready_rx) = mpmc::bounded::<()>(1);
            thread::scope(|threads| {
                // Opens the gate once the child is in its Drop and this
                // thread has parked since the cancel (or left the scope).
                threads.spawn(|| {
                    while !begun.load(Ordering::SeqCst) {
                        thread::yield_now();
                    }
                    while parks.load(Ordering::SeqCst) <= parks_at_cancel.load(Ordering::SeqCst)
                        && !scope_returned.load(Ordering::SeqCst)
                    {
                        thread::yield_now();
                    }
                    gate_tx.send(7).unwrap();
                });
                rt.scope(|s| {
                    let h = s.spawn(|| {
                        let _count = Count(&unwound);
                        let _blocks = BlocksInDrop {
                            begun: &begun,
                            gate: &gate_rx,
                            got: &got,
                        };
                        ready_tx.send(()).unwrap();
                        parked_on.recv()
                    });
                    ready_rx.recv().unwrap();
                    parks_at_cancel.store(parks.load(Ordering::SeqCst), Ordering::SeqCst);
                    h.cancel();
                });
                let seen = (unwound.load(Ordering::SeqCst), got.load(Ordering::SeqCst));
                scope_returned.store(true, Ordering::SeqCst);
                swco_channel::hook::set_current(None);
                // Were the scope broken, the child would still use the
                // locals it borrows: it is let finish first (it has, if the
                // scope waited).
                while unwound.load(Ordering::SeqCst) == 0 {
                    thread::yield_now();
                }
                assert_eq!(
                    seen,
                    (1, 7),
                    "the scope returned before its child's Drop ended"
                );
            });
        },
    );
}
