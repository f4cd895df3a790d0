//! The blocking pool: `unblock` and `Runtime::spawn_blocking`. Whatever can
//! hang if the pool is wrong (a blocked executor, a shutdown that waits for
//! ever) runs in a child process (`common::in_child_process`).

mod common;

use std::collections::HashSet;
use std::panic::catch_unwind;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::in_child_process;
use swco_channel::spsc;
use swco_executor::{unblock, BuildError, Runtime};

fn thread_name() -> Option<String> {
    thread::current().name().map(str::to_owned)
}

#[test]
fn unblock_lets_the_executors_other_coroutines_run() {
    in_child_process("unblock_lets_the_executors_other_coroutines_run", || {
        // One executor: if the blocking call held it, the ping-pong below
        // could not advance, and the blocking call waits for it to advance.
        let rt = Runtime::builder().executors(1).build().unwrap();
        let rounds = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (ping_tx, ping_rx) = spsc::bounded::<u32>(1);
        let (pong_tx, pong_rx) = spsc::bounded::<u32>(1);
        let pinger = {
            let (rounds, stop) = (rounds.clone(), stop.clone());
            rt.spawn_on(0, move || {
                while !stop.load(Ordering::Relaxed) {
                    ping_tx.send(1).unwrap();
                    pong_rx.recv().unwrap();
                    rounds.fetch_add(1, Ordering::Relaxed);
                }
            })
            .unwrap()
        };
        let ponger = rt
            .spawn_on(0, move || {
                for n in ping_rx.iter() {
                    if pong_tx.send(n).is_err() {
                        break;
                    }
                }
            })
            .unwrap();
        let waiter = {
            let rounds = rounds.clone();
            rt.spawn_on(0, move || {
                let before = rounds.load(Ordering::Relaxed);
                let seen = unblock(move || {
                    // Blocks its thread until the ping-pong has moved on.
                    while rounds.load(Ordering::Relaxed) < before + 1000 {
                        thread::sleep(Duration::from_millis(1));
                    }
                    rounds.load(Ordering::Relaxed)
                });
                (before, seen, swco_executor::current_cpe())
            })
            .unwrap()
        };
        let (before, seen, cpe) = waiter.join().unwrap();
        assert!(seen >= before + 1000, "{before} -> {seen}");
        assert_eq!(cpe, Some(0));
        stop.store(true, Ordering::Relaxed);
        pinger.join().unwrap();
        ponger.join().unwrap();
        rt.shutdown();
    });
}

#[test]
fn unblock_runs_on_a_pool_thread_and_returns_the_value() {
    let rt = Runtime::builder().executors(2).build().unwrap();
    let h = rt.spawn(|| {
        let name = unblock(thread_name);
        (name, thread_name())
    });
    let (pool, executor) = h.join().unwrap();
    assert!(pool.unwrap().starts_with("swco-blocking-"));
    assert!(executor.unwrap().starts_with("swco-cpe-"));
    rt.shutdown();
}

#[test]
fn unblock_reraises_a_panic_with_its_payload() {
    let rt = Runtime::builder().executors(1).build().unwrap();
    let h = rt.spawn(|| {
        let any = catch_unwind(|| unblock(|| std::panic::panic_any(42u32))).unwrap_err();
        let n = std::hint::black_box(7);
        let text = catch_unwind(move || unblock(move || -> () { panic!("boom {n}") })).unwrap_err();
        // The coroutine goes on after catching.
        let after = unblock(|| 5);
        (
            any.downcast_ref::<u32>().copied(),
            text.downcast_ref::<String>().cloned(),
            after,
        )
    });
    assert_eq!(h.join().unwrap(), (Some(42), Some("boom 7".to_owned()), 5));
    // Uncaught, it fails the coroutine with the same payload.
    let err = rt
        .spawn(|| unblock(|| std::panic::panic_any(9i64)))
        .join()
        .unwrap_err();
    assert_eq!(err.into_panic().downcast_ref::<i64>(), Some(&9));
    rt.shutdown();
}

#[test]
fn unblock_on_a_plain_thread_runs_in_place() {
    let here = thread::current().id();
    assert_eq!(unblock(move || thread::current().id()), here);
    let payload = catch_unwind(|| unblock(|| std::panic::panic_any(3u8))).unwrap_err();
    assert_eq!(payload.downcast_ref::<u8>(), Some(&3));
}

#[test]
fn spawn_blocking_joins_from_a_thread_and_a_coroutine() {
    let rt = Arc::new(Runtime::builder().executors(2).build().unwrap());
    // From a thread: join, wait_timeout, and the handle's description.
    let h = rt.spawn_blocking(thread_name);
    assert!(h.wait_timeout(Duration::from_secs(60)));
    assert!(h.is_finished());
    assert_eq!((h.cpe(), h.name()), (None, Some("blocking")));
    assert_eq!(h.spawned_at().file(), file!());
    assert!(h.join().unwrap().unwrap().starts_with("swco-blocking-"));
    // From a coroutine: the join suspends only the coroutine.
    let rt2 = rt.clone();
    let h = rt.spawn(move || {
        let job = rt2.spawn_blocking(|| {
            thread::sleep(Duration::from_millis(5));
            6 * 7
        });
        job.join().unwrap()
    });
    assert_eq!(h.join().unwrap(), 42);
    // Awaited.
    let tokio = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert_eq!(tokio.block_on(rt.spawn_blocking(|| 7).join_async()), Ok(7));
    // A panic is a JoinError with the payload.
    let err = rt
        .spawn_blocking(|| std::panic::panic_any(11u16))
        .join()
        .unwrap_err();
    assert!(err.is_panic());
    assert_eq!(err.into_panic().downcast_ref::<u16>(), Some(&11));
    rt.shutdown();
}

#[test]
fn more_jobs_than_threads_all_run_at_most_max_at_once() {
    const JOBS: usize = 24;
    let rt = Runtime::builder()
        .executors(2)
        .blocking_threads(2)
        .build()
        .unwrap();
    let now = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let names = Arc::new(Mutex::new(HashSet::new()));
    let job = {
        let (now, most, done, names) = (now.clone(), most.clone(), done.clone(), names.clone());
        move || {
            let running = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(running, Ordering::SeqCst);
            names.lock().unwrap().insert(thread_name().unwrap());
            thread::sleep(Duration::from_millis(2));
            now.fetch_sub(1, Ordering::SeqCst);
            done.fetch_add(1, Ordering::SeqCst);
        }
    };
    // Half from a plain thread, half through `unblock` from coroutines.
    let handles: Vec<_> = (0..JOBS / 2)
        .map(|_| rt.spawn_blocking(job.clone()))
        .collect();
    let coroutines: Vec<_> = (0..JOBS / 2)
        .map(|_| {
            let job = job.clone();
            rt.spawn(move || unblock(job))
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    for c in coroutines {
        c.join().unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), JOBS);
    let most = most.load(Ordering::SeqCst);
    assert!((1..=2).contains(&most), "{most} jobs ran at once");
    let names = names.lock().unwrap();
    assert!((1..=2).contains(&names.len()), "{names:?}");
    rt.shutdown();
}

#[test]
fn zero_blocking_threads_is_a_build_error() {
    let err = Runtime::builder()
        .executors(1)
        .blocking_threads(0)
        .build()
        .unwrap_err();
    assert!(matches!(err, BuildError::NoBlockingThreads), "{err:?}");
    assert!(err.to_string().contains("blocking_threads(0)"), "{err}");
}

#[test]
fn shutdown_waits_for_queued_and_running_blocking_jobs() {
    in_child_process(
        "shutdown_waits_for_queued_and_running_blocking_jobs",
        || {
            let rt = Runtime::builder()
                .executors(1)
                .blocking_threads(1)
                .build()
                .unwrap();
            let done = Arc::new(AtomicUsize::new(0));
            let (started_tx, started_rx) = std::sync::mpsc::channel();
            let running = {
                let done = done.clone();
                rt.spawn_blocking(move || {
                    started_tx.send(()).unwrap();
                    thread::sleep(Duration::from_millis(50));
                    done.fetch_add(1, Ordering::SeqCst);
                })
            };
            // Queued behind it: the pool's one thread is busy.
            let queued = {
                let done = done.clone();
                rt.spawn_blocking(move || done.fetch_add(1, Ordering::SeqCst))
            };
            started_rx.recv().unwrap();
            rt.shutdown();
            assert_eq!(done.load(Ordering::SeqCst), 2);
            assert!(running.is_finished() && queued.is_finished());
            // After shutdown: refused, not run.
            let late = rt.spawn_blocking(|| unreachable!("run after shutdown"));
            assert!(late.join().unwrap_err().is_shut_down());
        },
    );
}

#[test]
fn shutdown_timeout_detaches_a_blocking_job_that_never_returns() {
    const NAME: &str = "shutdown_timeout_detaches_a_blocking_job_that_never_returns";
    if common::in_child() {
        let rt = Runtime::builder()
            .executors(1)
            .blocking_threads(1)
            .build()
            .unwrap();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let _forever = rt.spawn_blocking(move || {
            started_tx.send(()).unwrap();
            loop {
                thread::park();
            }
        });
        let queued = rt.spawn_blocking(|| unreachable!("runs only after the first"));
        started_rx.recv().unwrap();
        // Returns instead of hanging; the queued job is dropped unrun.
        assert!(rt.shutdown_timeout(Duration::from_millis(50)).is_ok());
        assert!(queued.join().unwrap_err().is_cancelled());
        return;
    }
    let (status, stderr) = common::exited(NAME, common::run_child(NAME));
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("1 blocking jobs are still running (a blocking call cannot be unwound)"),
        "{stderr}"
    );
}

#[test]
fn unblock_after_shutdown_runs_in_place() {
    in_child_process("unblock_after_shutdown_runs_in_place", || {
        let rt = Runtime::builder().executors(1).build().unwrap();
        let go = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let (running_tx, running_rx) = std::sync::mpsc::channel();
        {
            let go = go.clone();
            // Never yields until told, so the shutdown cannot cancel it and
            // leaves its executor running, detached.
            let _stuck = rt.spawn(move || {
                running_tx.send(()).unwrap();
                while !go.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
                tx.send(unblock(thread_name)).unwrap();
            });
        }
        running_rx.recv().unwrap();
        let err = rt.shutdown_timeout(Duration::from_millis(20)).unwrap_err();
        assert_eq!(err.stuck, 1);
        go.store(true, Ordering::SeqCst);
        // The pool is shut: it ran in place, on the executor's thread.
        assert_eq!(rx.recv().unwrap().as_deref(), Some("swco-cpe-0"));
    });
}

#[test]
fn a_coroutine_waiting_on_unblock_is_not_reported_stalled() {
    const NAME: &str = "a_coroutine_waiting_on_unblock_is_not_reported_stalled";
    if common::in_child() {
        let rt = Runtime::builder()
            .executors(1)
            .stall_report(Some(Duration::from_millis(30)))
            .build()
            .unwrap();
        // Several stall periods long: the executor is idle all along, but
        // the pool's thread will wake the coroutine.
        let h = rt.spawn(|| unblock(|| thread::sleep(Duration::from_millis(300))));
        h.join().unwrap();
        rt.shutdown();
        return;
    }
    let (status, stderr) = common::exited(NAME, common::run_child(NAME));
    assert!(status.success(), "{stderr}");
    assert!(!stderr.contains("stalled"), "{stderr}");
}
