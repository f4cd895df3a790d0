//! Regression tests for the runtime's fault paths: panics, cancellation and
//! shutdown must never corrupt memory, kill an executor, abort the process
//! or lose a wake-up.
//!
//! Every scenario runs in a child process (this test binary, re-executed
//! with `SWCO_TEST_CHILD` set and the one test selected; see `common`), so a
//! crash or a hang fails its own test, with the child's output, instead of
//! the suite.

use std::panic::{catch_unwind, panic_any, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use swco_channel::{mpmc, mpsc, spmc, Cas, Updt};
use swco_executor::{BuildError, JoinHandle, Runtime, MAX_EXECUTORS};

mod common;

use common::in_child_process;

/// Counts drops; panics in its own `Drop` if `panics` is set.
struct Guard {
    drops: Arc<AtomicUsize>,
    panics: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        if self.panics {
            panic!("guard panics in Drop");
        }
    }
}

/// A value whose `Drop` panics.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("PanicOnDrop dropped");
    }
}

/// Parks `n` coroutines on executor 0 of `rt`, each waiting for one message;
/// returns the sender that releases them and their handles.
fn park_on_executor_0(rt: &Runtime, n: usize) -> (mpmc::Sender<u64>, Vec<JoinHandle<u64>>) {
    let (tx, rx) = mpmc::bounded::<u64>(n.max(1));
    let handles = (0..n)
        .map(|_| {
            let rx = rx.clone();
            rt.spawn_on(0, move || rx.recv().unwrap()).unwrap()
        })
        .collect();
    (tx, handles)
}

/// Checks that executor 0 of `rt` still runs new coroutines, then releases
/// the coroutines [`park_on_executor_0`] parked there: each receives exactly
/// one of the messages sent.
fn assert_executor_0_intact(
    rt: &Runtime,
    release: mpmc::Sender<u64>,
    parked: Vec<JoinHandle<u64>>,
) {
    assert_eq!(rt.spawn_on(0, || 7).unwrap().join().unwrap(), 7);
    let n = parked.len() as u64;
    for i in 0..n {
        release.send(i).unwrap();
    }
    let mut got: Vec<u64> = parked.into_iter().map(|h| h.join().unwrap()).collect();
    got.sort_unstable();
    assert_eq!(got, (0..n).collect::<Vec<_>>());
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "gave up waiting until {what}"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// Waits until `rt` has `n` coroutines parked (blocked and not woken).
fn wait_blocked(rt: &Runtime, n: u64) {
    wait_until("coroutines are parked", || {
        let t = rt.stats().total();
        t.blocks - t.wakes >= n
    });
}

// ---- 1. a panic hook that blocks --------------------------------------------

/// A panic hook that yields and blocks on a full channel, installed before
/// the first runtime, with a coroutine panicking on a 16, 32 and 64 KiB
/// stack: the hook must not suspend from the executor's stack (it parks the
/// executor thread instead), nothing is corrupted, and the executor runs on.
#[test]
fn panic_hook_that_blocks_does_not_corrupt_the_executor() {
    in_child_process(
        "panic_hook_that_blocks_does_not_corrupt_the_executor",
        || {
            let (tx, rx) = mpmc::bounded::<String>(1);
            let hook_tx = tx.clone();
            std::panic::set_hook(Box::new(move |info| {
                swco_executor::yield_now();
                hook_tx.send(format!("hook saw: {info}")).unwrap();
            }));
            for stack in [16 * 1024, 32 * 1024, 64 * 1024] {
                let rt = Runtime::builder()
                    .executors(2)
                    .stack_size(stack)
                    .build()
                    .unwrap();
                let (release, parked) = park_on_executor_0(&rt, 3);
                tx.send("fill".to_owned()).unwrap();
                let h = rt.spawn_on(0, || -> u32 { panic!("boom on a small stack") });
                // The hook blocks on the full channel until we take the fill.
                assert_eq!(rx.recv().unwrap(), "fill");
                let seen = rx.recv().unwrap();
                assert!(seen.contains("boom on a small stack"), "{seen}");
                let err = h.unwrap().join().unwrap_err();
                assert_eq!(err.panic_message(), Some("boom on a small stack"));
                assert_executor_0_intact(&rt, release, parked);
                rt.shutdown();
            }
            let _ = std::panic::take_hook();
        },
    );
}

/// A coroutine resumed by a direct hand-off (run on top of the parked
/// coroutine that woke it, see `docs/DESIGN.md`) panics on a 16 KiB stack:
/// its panic hook still gets a roomy stack, not the parked coroutine's
/// (the hook below needs 64 KiB: on either coroutine's stack it would
/// overflow and abort), and the executor runs on.
#[test]
fn panic_hook_after_a_direct_hand_off_has_room() {
    in_child_process("panic_hook_after_a_direct_hand_off_has_room", || {
        let (seen_tx, seen_rx) = std::sync::mpsc::channel::<String>();
        std::panic::set_hook(Box::new(move |info| {
            let room = std::hint::black_box([7u8; 64 * 1024]);
            seen_tx.send(format!("{} {info}", room[4096])).unwrap();
        }));
        let rt = Runtime::builder()
            .executors(1)
            .stack_size(16 * 1024)
            .build()
            .unwrap();
        let (boom, sender) =
            common::after_a_direct_hand_off(&rt, 0, || -> u32 { panic!("boom after a hand-off") });
        assert_eq!(sender.join().unwrap(), 1);
        let err = boom.join().unwrap_err();
        assert_eq!(err.panic_message(), Some("boom after a hand-off"));
        let seen = seen_rx.recv().unwrap();
        assert!(
            seen.starts_with("7 ") && seen.contains("boom after a hand-off"),
            "{seen}"
        );
        rt.shutdown();
        assert!(rt.stats().executors[0].hand_offs > 0, "no direct hand-off");
        let _ = std::panic::take_hook();
    });
}

// ---- 2. a panic escaping the coroutine body ----------------------------------

/// The `Drop` of a detached coroutine's result panics: the executor survives,
/// its parked coroutines finish, and shutdown returns.
#[test]
fn panicking_drop_of_a_detached_result_does_not_kill_the_executor() {
    in_child_process(
        "panicking_drop_of_a_detached_result_does_not_kill_the_executor",
        || {
            std::panic::set_hook(Box::new(|_| {}));
            let rt = Runtime::builder().executors(1).build().unwrap();
            let (release, parked) = park_on_executor_0(&rt, 4);
            for _ in 0..3 {
                drop(rt.spawn_on(0, || PanicOnDrop).unwrap());
            }
            assert_executor_0_intact(&rt, release, parked);
            rt.shutdown();
            let total = rt.stats().total();
            assert_eq!(total.spawned, 8);
            assert_eq!(total.finished, 8);
        },
    );
}

/// The `Drop` of a panic payload panics: the joiner still learns of the
/// panic, and the executor survives.
#[test]
fn panicking_drop_of_a_panic_payload_does_not_kill_the_executor() {
    in_child_process(
        "panicking_drop_of_a_panic_payload_does_not_kill_the_executor",
        || {
            std::panic::set_hook(Box::new(|_| {}));
            let rt = Runtime::builder().executors(1).build().unwrap();
            let (release, parked) = park_on_executor_0(&rt, 4);
            let joined = rt.spawn_on(0, || panic_any(PanicOnDrop)).unwrap();
            drop(rt.spawn_on(0, || panic_any(PanicOnDrop)).unwrap());
            assert!(joined.join().unwrap_err().is_panic());
            assert_executor_0_intact(&rt, release, parked);
            rt.shutdown();
        },
    );
}

// ---- 3. cancelling coroutines that never started -----------------------------

/// Coroutines spawned but never started (in the inbox, or created on the run
/// queue and never resumed) are cancelled by `shutdown_timeout`; their
/// closures capture guards whose `Drop` panics or blocks. Each closure is
/// dropped exactly once, every join says "cancelled", the process lives.
#[test]
fn cancelling_unstarted_coroutines_drops_each_closure_once() {
    in_child_process(
        "cancelling_unstarted_coroutines_drops_each_closure_once",
        || {
            std::panic::set_hook(Box::new(|_| {}));
            const EACH: usize = 6;
            let rt = Runtime::builder().executors(1).build().unwrap();
            let drops: Vec<Arc<AtomicUsize>> = (0..2 * EACH)
                .map(|_| Arc::new(AtomicUsize::new(0)))
                .collect();
            // Drop notifications: the blocking guards send here on drop.
            let (note_tx, note_rx) = mpmc::bounded::<usize>(1);
            let guard = |i: usize| {
                let g = Guard {
                    drops: drops[i].clone(),
                    panics: i % 3 == 0,
                };
                let note = (i % 3 == 1).then(|| note_tx.clone());
                move || {
                    let _g = g;
                    if let Some(n) = note {
                        // Never run: the closure is only dropped. A blocking
                        // send in a Drop is emulated by the `Notify` below.
                        n.send(i).unwrap();
                    }
                }
            };
            struct Notify(mpmc::Sender<usize>, usize);
            impl Drop for Notify {
                fn drop(&mut self) {
                    swco_executor::yield_now();
                    self.0.send(self.1).unwrap();
                }
            }
            let release = Arc::new(AtomicBool::new(false));
            let inner: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
            let busy = {
                let release = release.clone();
                let inner = inner.clone();
                let mut bodies: Vec<_> = (0..EACH)
                    .map(|i| {
                        let f = guard(i);
                        let n = (i % 3 == 2).then(|| Notify(note_tx.clone(), i));
                        move || {
                            let _n = n;
                            f()
                        }
                    })
                    .collect();
                rt.spawn_on(0, move || {
                    // Created on this executor's run queue, never resumed.
                    for b in bodies.drain(..) {
                        inner.lock().unwrap().push(swco_executor::spawn(b));
                    }
                    // Never yields until released, so nothing else starts.
                    while !release.load(Ordering::SeqCst) {
                        std::hint::spin_loop();
                    }
                })
                .unwrap()
            };
            wait_until("the busy coroutine spawned its children", || {
                inner.lock().unwrap().len() == EACH
            });
            // Handed to the (busy) executor's inbox, never started.
            let outer: Vec<JoinHandle<()>> = (EACH..2 * EACH)
                .map(|i| {
                    let f = guard(i);
                    let n = (i % 3 == 2).then(|| Notify(note_tx.clone(), i));
                    rt.spawn_on(0, move || {
                        let _n = n;
                        f()
                    })
                    .unwrap()
                })
                .collect();
            drop(note_tx);
            let err = rt
                .shutdown_timeout(Duration::from_millis(20))
                .expect_err("the busy coroutine outlives the timeout");
            assert_eq!(err.total(), 1 + 2 * EACH);
            release.store(true, Ordering::SeqCst);
            busy.join().unwrap();
            let notes: Vec<usize> = note_rx.iter().collect();
            assert_eq!(
                notes.len(),
                2 * EACH / 3,
                "blocking drops completed: {notes:?}"
            );
            let handles = std::mem::take(&mut *inner.lock().unwrap());
            for h in handles.into_iter().chain(outer) {
                assert!(h.join().unwrap_err().is_cancelled());
            }
            for (i, d) in drops.iter().enumerate() {
                assert_eq!(d.load(Ordering::SeqCst), 1, "closure {i} dropped once");
            }
        },
    );
}

// ---- 4. a cancelled waiter keeps no registration -----------------------------

/// A coroutine blocked in `recv` is cancelled while a plain thread is blocked
/// on the same channel; the next message must wake the thread.
fn cancelled_receiver_leaves_no_waiter<R: Clone + Send + 'static>(
    rx: R,
    recv: fn(&R, Duration) -> Option<u64>,
    // `Fn`, kept until the end: dropping the last sender would wake the
    // thread by disconnection and hide a lost wake.
    send: impl Fn(u64),
) {
    let rt = Runtime::builder().executors(1).build().unwrap();
    let crx = rx.clone();
    let h = rt.spawn_on(0, move || recv(&crx, Duration::MAX)).unwrap();
    wait_blocked(&rt, 1);
    // The thread's own timeout is far beyond the join below allows for: a
    // lost wake shows as a failed join, not as a late success.
    let (done_tx, done_rx) = mpmc::bounded::<Option<u64>>(1);
    let waiter = thread::spawn(move || done_tx.send(recv(&rx, Duration::from_secs(600))));
    // Let the thread spin out and register behind the coroutine.
    thread::sleep(Duration::from_millis(50));
    assert!(rt.shutdown_timeout(Duration::from_millis(10)).is_err());
    assert!(h.join().unwrap_err().is_cancelled());
    send(42);
    assert_eq!(
        done_rx.recv_timeout(Duration::from_secs(20)),
        Ok(Some(42)),
        "the blocked thread was not woken by the message"
    );
    waiter.join().unwrap().unwrap();
}

#[test]
fn cancelled_receiver_leaves_no_waiter_on_the_channel() {
    in_child_process("cancelled_receiver_leaves_no_waiter_on_the_channel", || {
        macro_rules! case {
            ($mode:ident, $protocol:ty) => {{
                let (tx, rx) = $mode::bounded_with::<u64, $protocol>(1);
                cancelled_receiver_leaves_no_waiter(
                    rx,
                    |r, t| r.recv_timeout(t).ok(),
                    move |v| tx.send(v).unwrap(),
                );
            }};
        }
        case!(spmc, Cas);
        case!(spmc, Updt);
        case!(mpmc, Cas);
        case!(mpmc, Updt);
    });
}

/// The sender side: a coroutine blocked in `send` on a full channel is
/// cancelled while a thread is blocked sending too; a receive must let the
/// thread's message in.
#[test]
fn cancelled_sender_leaves_no_waiter_on_the_channel() {
    fn case<S: Clone + Send + 'static>(
        tx: S,
        send: fn(&S, u64, Duration) -> bool,
        recv: impl Fn(Duration) -> Option<u64>,
    ) {
        let rt = Runtime::builder().executors(1).build().unwrap();
        assert!(send(&tx, 1, Duration::ZERO));
        let ctx = tx.clone();
        let h = rt
            .spawn_on(0, move || send(&ctx, 2, Duration::MAX))
            .unwrap();
        wait_blocked(&rt, 1);
        // The thread's own timeout is far beyond the receive below: a lost
        // wake shows as that receive timing out, not as a late success.
        let waiter = thread::spawn(move || send(&tx, 3, Duration::from_secs(600)));
        thread::sleep(Duration::from_millis(50));
        assert!(rt.shutdown_timeout(Duration::from_millis(10)).is_err());
        assert!(h.join().unwrap_err().is_cancelled());
        assert_eq!(recv(Duration::MAX), Some(1));
        assert_eq!(
            recv(Duration::from_secs(20)),
            Some(3),
            "the blocked thread was not woken by the free slot"
        );
        assert!(waiter.join().unwrap());
    }
    in_child_process("cancelled_sender_leaves_no_waiter_on_the_channel", || {
        macro_rules! case {
            ($mode:ident, $protocol:ty) => {{
                let (tx, rx) = $mode::bounded_with::<u64, $protocol>(1);
                case(
                    tx,
                    |s, v, t| s.send_timeout(v, t).is_ok(),
                    move |t| rx.recv_timeout(t).ok(),
                );
            }};
        }
        case!(mpsc, Cas);
        case!(mpsc, Updt);
        case!(mpmc, Updt);
    });
}

// ---- 5. a Drop that suspends during cancellation -----------------------------

/// A cancelled coroutine unwinds through a guard whose `Drop` yields and
/// blocks on a full channel: the drop runs to the end, the process lives.
#[test]
fn cancelled_coroutine_whose_drop_suspends_completes_it() {
    in_child_process(
        "cancelled_coroutine_whose_drop_suspends_completes_it",
        || {
            struct BlockingDrop(mpmc::Sender<&'static str>);
            impl Drop for BlockingDrop {
                fn drop(&mut self) {
                    swco_executor::yield_now();
                    self.0.send("dropped").unwrap();
                }
            }
            let rt = Runtime::builder().executors(2).build().unwrap();
            let (note_tx, note_rx) = mpmc::bounded::<&'static str>(1);
            note_tx.send("fill").unwrap();
            let (_never_tx, never_rx) = mpmc::bounded::<u8>(1);
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let guard = BlockingDrop(note_tx.clone());
                    let never_rx = never_rx.clone();
                    rt.spawn_on(i % 2, move || {
                        let _guard = guard;
                        never_rx.recv()
                    })
                    .unwrap()
                })
                .collect();
            drop(note_tx);
            wait_blocked(&rt, 4);
            let drainer = thread::spawn(move || note_rx.iter().count());
            let _ = rt.shutdown_timeout(Duration::from_millis(10));
            for h in handles {
                assert!(h.join().unwrap_err().is_cancelled());
            }
            assert_eq!(drainer.join().unwrap(), 1 + 4);
        },
    );
}

// ---- 6. the last Arc<Runtime> dropped inside its own coroutine ---------------

fn executor_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|name| name.starts_with("swco-cpe-"))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn last_runtime_dropped_inside_its_own_coroutine_shuts_down_cleanly() {
    in_child_process(
        "last_runtime_dropped_inside_its_own_coroutine_shuts_down_cleanly",
        || {
            std::panic::set_hook(Box::new(|_| {}));
            // Returning normally, then while unwinding from a panic.
            for unwinding in [false, true] {
                let rt = Arc::new(Runtime::builder().executors(2).build().unwrap());
                let (go_tx, go_rx) = mpmc::bounded::<()>(1);
                let inner = rt.clone();
                let h = rt
                    .spawn_on(1, move || {
                        go_rx.recv().unwrap();
                        if unwinding {
                            let _last = inner;
                            panic!("unwinding with the last runtime");
                        }
                        drop(inner);
                        5
                    })
                    .unwrap();
                drop(rt);
                go_tx.send(()).unwrap();
                match h.join() {
                    Ok(v) => assert!(!unwinding && v == 5),
                    Err(e) => assert!(unwinding && e.is_panic(), "{e}"),
                }
                wait_until("the executor threads exit", || executor_threads() == 0);
            }
        },
    );
}

// ---- 7. Duration::MAX --------------------------------------------------------

#[test]
fn shutdown_timeout_duration_max_waits_for_ever() {
    in_child_process("shutdown_timeout_duration_max_waits_for_ever", || {
        let rt = Runtime::builder().executors(2).build().unwrap();
        assert_eq!(rt.shutdown_timeout(Duration::MAX), Ok(()));

        let rt = Runtime::builder().executors(2).build().unwrap();
        let (tx, rx) = mpmc::bounded::<u64>(1);
        let h = rt.spawn(move || rx.recv().unwrap() * 2);
        let feeder = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            tx.send(21).unwrap();
        });
        assert_eq!(rt.shutdown_timeout(Duration::MAX), Ok(()));
        assert_eq!(h.join().unwrap(), 42, "waited for, not cancelled");
        feeder.join().unwrap();
    });
}

// ---- 9. too many executors ----------------------------------------------------

#[test]
fn too_many_executors_is_a_build_error() {
    in_child_process("too_many_executors_is_a_build_error", || {
        for n in [MAX_EXECUTORS + 1, 20_000, usize::MAX] {
            match Runtime::builder().executors(n).build() {
                Err(e @ BuildError::TooManyExecutors { .. }) => {
                    assert!(e.to_string().contains(&MAX_EXECUTORS.to_string()), "{e}");
                }
                other => panic!("executors({n}): {other:?}"),
            }
        }
    });
}

// ---- 11. a refused spawn says why ----------------------------------------------

fn vm_size() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmSize:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// With the address space capped (RLIMIT_AS) so that only two coroutine
/// stacks fit, further spawns are refused, and their join handles say why.
#[test]
fn refused_spawn_reports_why_through_its_handle() {
    in_child_process("refused_spawn_reports_why_through_its_handle", || {
        const STACK: usize = 64 << 20;
        let rt = Runtime::builder()
            .executors(1)
            .stack_size(STACK)
            .build()
            .unwrap();
        // Warm up every allocation the scenario needs before the cap.
        let (tx, rx) = mpmc::bounded::<u64>(8);
        let mut handles = Vec::with_capacity(8);
        assert_eq!(rt.spawn_on(0, || 1).unwrap().join().unwrap(), 1);
        let limit = vm_size() + 2 * STACK as u64 + (16 << 20);
        let cap = libc::rlimit {
            rlim_cur: limit,
            rlim_max: libc::RLIM_INFINITY,
        };
        // SAFETY: setrlimit only reads the struct we pass.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &cap) }, 0);
        // One stack is pooled from the warm-up; two more fit under the cap.
        for _ in 0..6 {
            let rx = rx.clone();
            handles.push(rt.spawn_on(0, move || rx.recv().unwrap()).unwrap());
        }
        // Each holds its stack, parked in `recv`, until every one has been
        // started or refused (a stack is bound at a coroutine's first run).
        wait_until("every coroutine started or was refused", || {
            rt.stats().total().spawned == 1 + 6
        });
        for i in 0..6 {
            tx.send(i).unwrap();
        }
        let mut ok = 0;
        let mut refused = 0;
        for h in handles {
            match h.join() {
                Ok(_) => ok += 1,
                Err(e) => {
                    assert!(e.is_refused(), "{e}");
                    assert!(
                        e.to_string().contains("cannot map a coroutine stack"),
                        "{e}"
                    );
                    refused += 1;
                }
            }
        }
        assert!(ok >= 1 && refused >= 1, "ok {ok}, refused {refused}");
        assert_eq!(ok + refused, 6);
        // Messages the refused coroutines did not take are still buffered.
        assert_eq!(rx.try_iter().count(), refused);
        rt.shutdown();
    });
}

// ---- a panic hook caught by catch_unwind is still ours ------------------------

/// Unwinding a coroutine's panic through `catch_unwind` inside the
/// coroutine, with a `Drop` that suspends on the way, leaves the executor
/// sound (the unwinding coroutine is parked mid-unwind while others run).
#[test]
fn a_drop_that_suspends_while_unwinding_a_panic_is_sound() {
    in_child_process(
        "a_drop_that_suspends_while_unwinding_a_panic_is_sound",
        || {
            std::panic::set_hook(Box::new(|_| {}));
            struct YieldOnDrop;
            impl Drop for YieldOnDrop {
                fn drop(&mut self) {
                    for _ in 0..3 {
                        swco_executor::yield_now();
                    }
                }
            }
            let rt = Runtime::builder().executors(1).build().unwrap();
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    rt.spawn_on(0, move || {
                        let r = catch_unwind(AssertUnwindSafe(|| {
                            let _g = YieldOnDrop;
                            if i % 2 == 0 {
                                panic!("even");
                            }
                            i
                        }));
                        r.unwrap_or(100)
                    })
                    .unwrap()
                })
                .collect();
            let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(sum, 4 * 100 + 1 + 3 + 5 + 7);
            rt.shutdown();
        },
    );
}

// ---- 8. a large message on a coroutine stack ----------------------------------

/// A blocking `send` of a 10 KiB message from a coroutine with the default
/// 64 KiB stack: the send path keeps the message in one place while it
/// waits, so this fits (it used to need about seven copies).
#[test]
fn blocking_send_of_a_10_kib_message_fits_the_default_stack() {
    in_child_process(
        "blocking_send_of_a_10_kib_message_fits_the_default_stack",
        || {
            const N: usize = 10 * 1024;
            let rt = Runtime::builder().executors(1).build().unwrap();
            let (tx, rx) = mpmc::bounded::<[u8; N]>(1);
            let sender = rt
                .spawn_on(0, move || {
                    for i in 0..4u8 {
                        tx.send([i; N]).unwrap(); // blocks from the second on
                    }
                })
                .unwrap();
            wait_blocked(&rt, 1);
            for i in 0..4u8 {
                let m = rx.recv().unwrap();
                assert!(m.iter().all(|&b| b == i));
            }
            sender.join().unwrap();
            rt.shutdown();
        },
    );
}

// ---- a spawn during cancellation -------------------------------------------

/// A coroutine spawns (round-robin) while a cancelling shutdown has already
/// let the other executor go: the job must not land on the exited executor
/// (where it would never run nor be dropped, and a later drop of the
/// runtime would wait for it for ever). It runs on the spawner's executor,
/// cancelled: each closure is dropped once and each handle completes.
#[test]
fn spawn_during_cancellation_never_lands_on_an_exited_executor() {
    in_child_process(
        "spawn_during_cancellation_never_lands_on_an_exited_executor",
        || {
            let rt = Runtime::builder()
                .executors(2)
                .placement(swco_executor::Placement::RoundRobin)
                .build()
                .unwrap();
            let drops: Arc<AtomicUsize> = Arc::default();
            let d = drops.clone();
            let (started_tx, started_rx) = mpmc::bounded::<()>(1);
            let spawner = rt
                .spawn_on(0, move || {
                    started_tx.send(()).unwrap();
                    // Blocks the executor thread itself, so the cancellation
                    // reaches this coroutine only after it returns.
                    thread::sleep(Duration::from_millis(300));
                    (0..4)
                        .map(|_| {
                            let g = Guard {
                                drops: d.clone(),
                                panics: false,
                            };
                            swco_executor::spawn(move || drop(g))
                        })
                        .collect::<Vec<_>>()
                })
                .unwrap();
            started_rx.recv().unwrap();
            let _ = rt.shutdown_timeout(Duration::ZERO);
            let children = spawner.join().unwrap();
            for h in children {
                assert!(h.join().unwrap_err().is_cancelled());
            }
            assert_eq!(drops.load(Ordering::SeqCst), 4);
            drop(rt); // must not wait for ever
        },
    );
}
