//! The athread / swYAKL model: `spawn_all`, scoped coroutines,
//! `parallel_for` and `parallel_reduce`. Tests that could hang (a scope
//! that does not wait, or waits for ever) run in a child process.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::in_child_process;
use swco_executor::{JoinError, Runtime};

fn rt(n: usize) -> Runtime {
    Runtime::builder().executors(n).build().unwrap()
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "?".to_owned()
    }
}

/// Sets its flag when dropped: marks the end of a child, however it ends.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

// --- spawn_all ---------------------------------------------------------------

#[test]
fn spawn_all_runs_one_member_per_executor_in_cpe_order() {
    let rt = rt(4);
    let g = rt.spawn_all(|cpe| (cpe, swco_executor::current_cpe()));
    assert_eq!(g.len(), 4);
    let r = g.join().unwrap();
    assert_eq!(r, (0..4).map(|c| (c, Some(c))).collect::<Vec<_>>());
}

#[test]
fn spawn_all_reports_the_first_panic_after_every_member_finished() {
    in_child_process(
        "spawn_all_reports_the_first_panic_after_every_member_finished",
        || {
            let rt = rt(3);
            let slow_done = Arc::new(AtomicBool::new(false));
            let flag = slow_done.clone();
            let g = rt.spawn_all(move |cpe| match cpe {
                0 => {
                    swco_executor::sleep(Duration::from_millis(100));
                    flag.store(true, Ordering::SeqCst);
                }
                1 => panic!("first {cpe}"),
                _ => panic!("second {cpe}"),
            });
            let err = g.join().unwrap_err();
            assert_eq!(err.panic_message(), Some("first 1"));
            assert!(
                slow_done.load(Ordering::SeqCst),
                "reported before member 0 ended"
            );
        },
    );
}

#[test]
fn spawn_all_on_a_shut_down_runtime_joins_with_an_error() {
    in_child_process(
        "spawn_all_on_a_shut_down_runtime_joins_with_an_error",
        || {
            let rt = rt(2);
            rt.shutdown();
            let err = rt.spawn_all(|cpe| cpe).join().unwrap_err();
            assert!(err.is_shut_down(), "{err}");
        },
    );
}

#[test]
fn spawn_all_joined_from_a_coroutine() {
    let rt = Arc::new(rt(2));
    let rt2 = rt.clone();
    let h = rt.spawn(move || rt2.spawn_all(|cpe| cpe + 1).join().unwrap());
    assert_eq!(h.join().unwrap(), vec![1, 2]);
}

/// A park context for the test thread that counts the wakes it is sent.
struct CountingPark {
    thread: std::thread::Thread,
    wakes: Arc<AtomicUsize>,
}

struct CountWake {
    thread: std::thread::Thread,
    wakes: Arc<AtomicUsize>,
}

impl std::task::Wake for CountWake {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.thread.unpark();
    }
}

impl swco_channel::hook::Park for CountingPark {
    fn waker(&self) -> std::task::Waker {
        std::task::Waker::from(Arc::new(CountWake {
            thread: self.thread.clone(),
            wakes: self.wakes.clone(),
        }))
    }
    fn park(&self, deadline: Option<std::time::Instant>) {
        match deadline {
            Some(d) => {
                std::thread::park_timeout(d.saturating_duration_since(std::time::Instant::now()))
            }
            None => std::thread::park(),
        }
    }
}

#[test]
fn spawn_all_wakes_its_joiner_once() {
    in_child_process("spawn_all_wakes_its_joiner_once", || {
        let rt = rt(3);
        let wakes = Arc::new(AtomicUsize::new(0));
        let park: std::rc::Rc<dyn swco_channel::hook::Park> = std::rc::Rc::new(CountingPark {
            thread: std::thread::current(),
            wakes: wakes.clone(),
        });
        swco_channel::hook::set_current(Some(park));
        // Members finish one after another, well after the join parks.
        let g = rt.spawn_all(|cpe| {
            swco_executor::sleep(Duration::from_millis(30 * (cpe as u64 + 1)));
            cpe
        });
        assert_eq!(g.join().unwrap(), [0, 1, 2]);
        swco_channel::hook::set_current(None);
        assert_eq!(
            wakes.load(Ordering::SeqCst),
            1,
            "one wake for the whole group"
        );
    });
}

// --- scope -------------------------------------------------------------------

#[test]
fn scoped_children_borrow_and_return() {
    let rt = rt(3);
    let data: Vec<u64> = (1..=30).collect();
    let mut halves = [0u64; 2];
    let total = rt.scope(|s| {
        let (a, b) = halves.split_at_mut(1);
        s.spawn(|| a[0] = data[..15].iter().sum());
        s.spawn(|| b[0] = data[15..].iter().sum());
        let h = s.spawn_on(2, || data.len()).unwrap();
        h.join().unwrap()
    });
    assert_eq!(total, 30);
    assert_eq!(halves[0] + halves[1], 465);
    let err = rt.scope(|s| s.spawn_on(3, || ()).unwrap_err());
    assert!(matches!(err, swco_executor::SpawnError::OutOfRange { .. }));
}

#[test]
fn scope_closure_panic_waits_for_children() {
    in_child_process("scope_closure_panic_waits_for_children", || {
        let rt = rt(2);
        let child_ended = AtomicBool::new(false);
        let r = catch_unwind(AssertUnwindSafe(|| {
            rt.scope(|s| {
                s.spawn(|| {
                    let _end = SetOnDrop(&child_ended);
                    swco_executor::sleep(Duration::from_millis(100));
                });
                panic!("scope body");
            })
        }));
        assert_eq!(panic_text(&*r.unwrap_err()), "scope body");
        assert!(
            child_ended.load(Ordering::SeqCst),
            "unwound before the child ended"
        );
    });
}

#[test]
fn unjoined_child_panic_is_reraised_after_all_children() {
    in_child_process(
        "unjoined_child_panic_is_reraised_after_all_children",
        || {
            let rt = rt(2);
            let slow_ended = AtomicBool::new(false);
            let r = catch_unwind(AssertUnwindSafe(|| {
                rt.scope(|s| {
                    s.spawn(|| panic!("child {}", 7));
                    s.spawn(|| {
                        let _end = SetOnDrop(&slow_ended);
                        swco_executor::sleep(Duration::from_millis(100));
                    });
                })
            }));
            assert_eq!(panic_text(&*r.unwrap_err()), "child 7");
            assert!(slow_ended.load(Ordering::SeqCst));
        },
    );
}

#[test]
fn joined_child_panic_is_returned_not_reraised() {
    let rt = rt(2);
    let msg = rt.scope(|s| {
        let h = s.spawn(|| -> u32 { panic!("joined") });
        let e: JoinError = h.join().unwrap_err();
        e.panic_message().map(str::to_owned)
    });
    assert_eq!(msg.as_deref(), Some("joined"));
}

#[test]
fn scope_inside_a_coroutine_suspends_only_it() {
    // One executor: the scope's children can only run if the waiting
    // coroutine suspends rather than blocks the thread.
    let rt = rt(1);
    let h = rt.spawn(|| {
        let mut v = [0usize; 8];
        swco_executor::scope(|s| {
            for (i, x) in v.iter_mut().enumerate() {
                s.spawn(move || *x = i * 2);
            }
        });
        v.iter().sum::<usize>()
    });
    assert_eq!(h.join().unwrap(), 56);
}

#[test]
fn scope_child_cancelled_by_shutdown_timeout_plain_thread() {
    in_child_process(
        "scope_child_cancelled_by_shutdown_timeout_plain_thread",
        || {
            let rt = Arc::new(rt(2));
            let (tx, rx) = swco_channel::mpmc::bounded::<()>(1);
            let started = Arc::new(AtomicUsize::new(0));
            let rt2 = rt.clone();
            let st = started.clone();
            let waiter = std::thread::spawn(move || {
                let child_ended = AtomicBool::new(false);
                let r = catch_unwind(AssertUnwindSafe(|| {
                    rt2.scope(|s| {
                        s.spawn(|| {
                            let _end = SetOnDrop(&child_ended);
                            st.fetch_add(1, Ordering::SeqCst);
                            let _ = rx.recv();
                        });
                    })
                }));
                (
                    r.map_err(|p| panic_text(&*p)),
                    child_ended.load(Ordering::SeqCst),
                )
            });
            while started.load(Ordering::SeqCst) == 0 {
                std::thread::yield_now();
            }
            let e = rt.shutdown_timeout(Duration::from_millis(50)).unwrap_err();
            assert_eq!(e.total(), 1);
            let (r, ended) = waiter.join().unwrap();
            assert!(ended, "the scope returned before its child ended");
            let msg = r.unwrap_err();
            assert!(msg.contains("cancelled"), "{msg}");
            drop(tx);
        },
    );
}

#[test]
fn scope_in_a_cancelled_coroutine_waits_for_its_children() {
    in_child_process(
        "scope_in_a_cancelled_coroutine_waits_for_its_children",
        || {
            let rt = rt(2);
            let (tx, rx) = swco_channel::mpmc::bounded::<()>(1);
            let witness = Arc::new(AtomicUsize::new(0));
            let w = witness.clone();
            let started = Arc::new(AtomicBool::new(false));
            let st = started.clone();
            let h = rt
                .spawn_on(0, move || {
                    /// Runs after the scope call has unwound: records
                    /// whether the child had ended by then (2) or not (1).
                    struct Check<'a>(&'a AtomicBool, Arc<AtomicUsize>);
                    impl Drop for Check<'_> {
                        fn drop(&mut self) {
                            let v = if self.0.load(Ordering::SeqCst) { 2 } else { 1 };
                            self.1.store(v, Ordering::SeqCst);
                        }
                    }
                    let child_ended = AtomicBool::new(false);
                    let _check = Check(&child_ended, w);
                    swco_executor::scope(|s| {
                        // Pinned elsewhere: it is cancelled on its own
                        // executor while the scope waits on executor 0.
                        s.spawn_on(1, || {
                            let _end = SetOnDrop(&child_ended);
                            st.store(true, Ordering::SeqCst);
                            let _ = rx.recv();
                        })
                        .unwrap();
                    });
                })
                .unwrap();
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            assert!(rt.shutdown_timeout(Duration::from_millis(50)).is_err());
            assert!(h.join().unwrap_err().is_cancelled());
            assert_eq!(
                witness.load(Ordering::SeqCst),
                2,
                "unwound before the child ended"
            );
            drop(tx);
        },
    );
}

#[test]
fn a_child_spawns_a_sibling_through_the_scope() {
    let rt = rt(2);
    let hits = counts(3);
    rt.scope(|s| {
        s.spawn(|| {
            hits[0].fetch_add(1, Ordering::SeqCst);
            s.spawn(|| {
                hits[1].fetch_add(1, Ordering::SeqCst);
                s.spawn(|| hits[2].fetch_add(1, Ordering::SeqCst));
            });
        });
    });
    assert!(hits.iter().all(|h| h.load(Ordering::SeqCst) == 1));
}

#[test]
fn free_scope_outside_a_coroutine_panics_clearly() {
    let r = catch_unwind(|| swco_executor::scope(|_| ()));
    let msg = panic_text(&*r.unwrap_err());
    assert!(msg.contains("outside a coroutine"), "{msg}");
}

// --- parallel_for / parallel_reduce -------------------------------------------

fn counts(n: usize) -> Vec<AtomicUsize> {
    (0..n).map(|_| AtomicUsize::new(0)).collect()
}

#[test]
fn parallel_for_runs_every_index_exactly_once() {
    let rt = rt(3);
    for (range, grain) in [
        (0..1000, 7),
        (5..1000, 1),
        (0..1, 64),
        (10..1013, 0),
        (0..100_000, 4096),
    ] {
        let hits = counts(range.end);
        rt.parallel_for(range.clone(), grain, |chunk| {
            assert!(grain == 0 || chunk.len() <= grain);
            for i in chunk {
                hits[i].fetch_add(1, Ordering::Relaxed);
            }
        });
        for (i, h) in hits.iter().enumerate() {
            let want = usize::from(range.contains(&i));
            assert_eq!(
                h.load(Ordering::Relaxed),
                want,
                "index {i} of {range:?}/{grain}"
            );
        }
    }
}

#[test]
#[allow(clippy::reversed_empty_ranges)]
fn reversed_or_empty_range_runs_nothing() {
    let rt = rt(2);
    let ran = AtomicUsize::new(0);
    rt.parallel_for(10..3, 1, |_| {
        ran.fetch_add(1, Ordering::Relaxed);
    });
    rt.parallel_for(4..4, 0, |_| {
        ran.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(ran.load(Ordering::Relaxed), 0);
    assert_eq!(rt.parallel_reduce(9..2, 1, 17, |_| 1, |a, b| a + b), 17);
}

#[test]
fn parallel_reduce_sums() {
    let rt = rt(4);
    let data: Vec<u64> = (0..10_007).collect();
    let sum = rt.parallel_reduce(
        0..data.len(),
        100,
        0u64,
        |r| data[r].iter().sum(),
        |a, b| a + b,
    );
    assert_eq!(sum, data.iter().sum::<u64>());
    let chunks = rt.parallel_reduce(0..1000, 10, 0usize, |_| 1, |a, b| a + b);
    assert_eq!(chunks, 100);
}

#[test]
fn panic_in_the_body_stops_chunks_and_is_reraised() {
    in_child_process("panic_in_the_body_stops_chunks_and_is_reraised", || {
        let rt = rt(2);
        let ran = AtomicUsize::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            rt.parallel_for(0..100_000, 1, |chunk| {
                if chunk.start == 10 {
                    panic!("bad index {}", chunk.start);
                }
                ran.fetch_add(1, Ordering::SeqCst);
                // Slow enough that the other worker sees the stop flag.
                std::thread::sleep(Duration::from_micros(20));
            })
        }));
        assert_eq!(panic_text(&*r.unwrap_err()), "bad index 10");
        let ran = ran.load(Ordering::SeqCst);
        assert!(ran < 99_999, "chunks went on being handed out: {ran}");
        // Every worker has stopped: nothing runs after the re-raise.
        std::thread::sleep(Duration::from_millis(20));
        // The runtime is still usable.
        assert_eq!(
            rt.parallel_reduce(0..10, 1, 0, |r| r.len(), |a, b| a + b),
            10
        );
    });
}

#[test]
fn nested_parallel_for_does_not_deadlock() {
    in_child_process("nested_parallel_for_does_not_deadlock", || {
        let rt = rt(2);
        let hits = counts(64 * 64);
        rt.parallel_for(0..64, 1, |outer| {
            for i in outer {
                swco_executor::parallel_for(0..64, 8, |inner| {
                    for j in inner {
                        hits[i * 64 + j].fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
    });
}

#[test]
fn free_parallel_reduce_inside_a_coroutine() {
    let rt = rt(2);
    let h = rt.spawn(|| {
        let v: Vec<f64> = (0..1000).map(f64::from).collect();
        swco_executor::parallel_reduce(0..v.len(), 0, 0.0, |r| v[r].iter().sum(), |a, b| a + b)
    });
    assert_eq!(h.join().unwrap(), 499_500.0);
}

#[test]
fn parallel_for_after_shutdown_panics_clearly() {
    in_child_process("parallel_for_after_shutdown_panics_clearly", || {
        let rt = rt(2);
        rt.shutdown();
        let r = catch_unwind(AssertUnwindSafe(|| rt.parallel_for(0..10, 1, |_| {})));
        let msg = panic_text(&*r.unwrap_err());
        assert!(msg.contains("shut down"), "{msg}");
    });
}
