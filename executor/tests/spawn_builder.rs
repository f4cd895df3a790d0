//! Spawn options and the ways to wait: names, ids and spawn sites, the
//! spawn builder's stack size and executor (and its errors), `wait_timeout`,
//! `join_async` on a tokio runtime, and panics' payloads through
//! `JoinError::into_panic`. Scenarios that could hang or abort run in child
//! processes (see `common`).

use std::collections::HashSet;
use std::panic::{catch_unwind, panic_any, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use swco_channel::mpmc;
use swco_executor::{
    current_id, current_name, JoinHandle, Placement, Runtime, SpawnError, MIN_STACK_SIZE,
};

mod common;

use common::{child_case, in_child_process};
use swco_test_support::DropCounter as Counted;

fn runtime(executors: usize) -> Runtime {
    Runtime::builder().executors(executors).build().unwrap()
}

/// What a coroutine saw of itself: its `current_id` and `current_name`.
type Seen = (Option<u64>, Option<String>);

fn seen() -> Seen {
    (current_id(), current_name())
}

#[test]
fn ids_are_unique_across_executors_and_names_only_when_set() {
    let rt = Runtime::builder()
        .executors(4)
        .placement(Placement::RoundRobin)
        .build()
        .unwrap();
    let mut handles: Vec<(JoinHandle<Seen>, Option<String>)> = Vec::new();
    for i in 0..40 {
        handles.push((rt.spawn(seen), None));
        handles.push((rt.spawn_on(i % 4, seen).unwrap(), None));
        let name = format!("worker-{i}");
        let named = rt.spawn_builder().name(name.as_str()).spawn(seen).unwrap();
        handles.push((named, Some(name)));
        // A builder that sets nothing: no name.
        handles.push((rt.spawn_builder().spawn(seen).unwrap(), None));
    }
    // Coroutines spawning coroutines, on every executor.
    let nested: Vec<JoinHandle<Vec<(u64, Seen)>>> = (0..4)
        .map(|cpe| {
            rt.spawn_on(cpe, || {
                let inner: Vec<_> = (0..10).map(|_| swco_executor::spawn(seen)).collect();
                inner
                    .into_iter()
                    .map(|h| (h.id(), h.join().unwrap()))
                    .collect()
            })
            .unwrap()
        })
        .collect();

    let mut ids = HashSet::new();
    let mut cpes = HashSet::new();
    for (h, name) in handles {
        let id = h.id();
        assert_ne!(id, 0, "runtime ids start at 1");
        assert!(ids.insert(id), "id {id} given twice");
        assert_eq!(h.name(), name.as_deref());
        cpes.insert(h.cpe().unwrap());
        let (seen_id, seen_name) = h.join().unwrap();
        assert_eq!(seen_id, Some(id), "current_id inside the coroutine");
        assert_eq!(seen_name, name, "current_name inside the coroutine");
    }
    for h in nested {
        assert!(ids.insert(h.id()));
        for (id, (seen_id, seen_name)) in h.join().unwrap() {
            assert!(ids.insert(id), "id {id} given twice");
            assert_eq!(seen_id, Some(id));
            assert_eq!(seen_name, None);
        }
    }
    assert_eq!(ids.len(), 40 * 4 + 4 + 4 * 10);
    assert_eq!(cpes.len(), 4, "spawned on every executor");
    // Outside a coroutine there is no current one.
    assert_eq!(seen(), (None, None));
    rt.shutdown();
}

#[test]
fn ids_are_per_runtime_and_a_refused_spawn_has_one_too() {
    let a = runtime(1);
    let b = runtime(1);
    let first_a = a.spawn(|| ()).id();
    let first_b = b.spawn(|| ()).id();
    assert_eq!(first_a, first_b, "each runtime counts its own");
    a.shutdown();
    let refused = a.spawn(|| ());
    assert_ne!(refused.id(), first_a);
    assert!(refused.join().unwrap_err().is_shut_down());
    b.shutdown();
}

#[test]
fn the_handle_records_where_it_was_spawned() {
    let rt = runtime(2);
    let line = line!() + 1;
    let a = rt.spawn(|| ());
    let b = rt.try_spawn(|| ()).unwrap(); // line + 1
    let c = rt.spawn_on(1, || ()).unwrap(); // line + 2
    let d = rt.spawn_builder().name("d").spawn(|| ()).unwrap(); // line + 3
    let e = rt.spawn(|| {
        let here = line!() + 1;
        let inner = swco_executor::spawn(|| ());
        (here, inner.spawned_at().line(), inner.spawned_at().file())
    });
    for (h, at) in [(a, line), (b, line + 1), (c, line + 2), (d, line + 3)] {
        assert_eq!(h.spawned_at().file(), file!());
        assert_eq!(h.spawned_at().line(), at);
        h.join().unwrap();
    }
    assert_eq!(e.spawned_at().line(), line + 4);
    let (here, inner_line, inner_file) = e.join().unwrap();
    assert_eq!(inner_line, here, "swco::spawn records its caller");
    assert_eq!(inner_file, file!());
    rt.shutdown();
}

#[test]
fn the_spawn_builder_rejects_bad_input_with_clear_errors() {
    let rt = runtime(4);
    let e = rt
        .spawn_builder()
        .stack_size(MIN_STACK_SIZE - 1)
        .spawn(|| ())
        .unwrap_err();
    assert_eq!(
        e,
        SpawnError::StackTooSmall {
            requested: MIN_STACK_SIZE - 1,
            minimum: MIN_STACK_SIZE
        }
    );
    let text = e.to_string();
    assert!(
        text.contains(&(MIN_STACK_SIZE - 1).to_string()) && text.contains("below the minimum"),
        "{text}"
    );

    let e = rt
        .spawn_builder()
        .stack_size(usize::MAX)
        .spawn(|| ())
        .unwrap_err();
    assert_eq!(
        e,
        SpawnError::StackTooLarge {
            requested: usize::MAX
        }
    );
    assert!(e.to_string().contains("too large"), "{e}");

    let e = rt.spawn_builder().on(4).spawn(|| ()).unwrap_err();
    assert_eq!(
        e,
        SpawnError::OutOfRange {
            cpe: 4,
            executors: 4
        }
    );
    assert!(e.to_string().contains("out of range"), "{e}");

    // The smallest accepted size, pinned to the last executor.
    let h = rt
        .spawn_builder()
        .stack_size(MIN_STACK_SIZE)
        .on(3)
        .spawn(swco_executor::current_cpe)
        .unwrap();
    assert_eq!(h.join().unwrap(), Some(3));

    rt.shutdown();
    let e = rt.spawn_builder().name("late").spawn(|| ()).unwrap_err();
    assert_eq!(e, SpawnError::ShutDown);
    // Nothing was spawned by the refused builders.
    assert_eq!(rt.stats().total().spawned, 1);
}

/// Recurses `depth` times with 1 KiB live per frame.
#[inline(never)]
fn descend(depth: u32) -> u64 {
    let frame = std::hint::black_box([u64::from(depth); 128]);
    if depth == 0 {
        return 0;
    }
    descend(depth - 1).wrapping_add(std::hint::black_box(frame)[5])
}

/// Frames of [`descend`] that need at least 256 KiB (more in a debug
/// build): far beyond the 32 KiB of the runtime below, well within the
/// 8 MiB asked for.
const DEEP: u32 = 256;

/// What `descend(DEEP)` returns: the sum of the depths.
const DEEP_SUM: u64 = DEEP as u64 * (DEEP as u64 + 1) / 2;

#[test]
fn a_larger_stack_per_spawn_is_used() {
    const NAME: &str = "a_larger_stack_per_spawn_is_used";
    let rt = || {
        Runtime::builder()
            .executors(2)
            .stack_size(32 * 1024)
            .build()
            .unwrap()
    };
    match child_case().as_deref() {
        Some("large") => {
            let rt = rt();
            let mapped = rt.stats().total().stacks_mapped;
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    rt.spawn_builder()
                        .stack_size(8 << 20)
                        .on(i % 2)
                        .spawn(|| descend(DEEP))
                        .unwrap()
                })
                .collect();
            for h in handles {
                assert_eq!(h.join().unwrap(), DEEP_SUM);
            }
            // Each had a stack of its own.
            assert_eq!(rt.stats().total().stacks_mapped, mapped + 4);
            // A size below the runtime's is served by the pool.
            let h = rt
                .spawn_builder()
                .stack_size(MIN_STACK_SIZE)
                .spawn(|| descend(4))
                .unwrap();
            assert_eq!(h.join().unwrap(), descend(4));
            rt.shutdown();
            println!("deep recursion finished");
        }
        Some("default") => {
            let rt = rt();
            let h = rt.spawn_on(1, || descend(DEEP)).unwrap();
            let _ = h.join();
            println!("the default stack held");
        }
        Some(other) => panic!("unknown case {other}"),
        None => {
            let out = common::run_child_case(NAME, "large", &[], &[]);
            assert!(
                out.status.is_some_and(|s| s.success())
                    && out.stdout.contains("deep recursion finished"),
                "{}",
                out.both()
            );
            // The same recursion overflows the runtime's own stacks: the
            // size asked for is what made the difference.
            let out = common::run_child_case(NAME, "default", &[], &[]);
            let (status, stderr) = common::exited(NAME, out);
            assert!(!status.success(), "{stderr}");
            assert!(
                stderr.contains("swco: stack overflow in a coroutine on executor swco-cpe-1"),
                "{stderr}"
            );
        }
    }
}

#[test]
fn a_stack_the_os_cannot_map_is_refused_through_the_handle() {
    let rt = runtime(1);
    // Fits the arithmetic, but no address space holds 4 EiB.
    let size = 1usize << 62;
    let h = rt
        .spawn_builder()
        .stack_size(size)
        .spawn(|| unreachable!("never runs"))
        .unwrap();
    let e = h.join().unwrap_err();
    assert!(e.is_refused(), "{e}");
    assert!(e.to_string().contains(&size.to_string()), "{e}");
    // The executor carries on.
    assert_eq!(rt.spawn(|| 5).join().unwrap(), 5);
    rt.shutdown();
}

#[test]
fn wait_timeout_is_false_until_the_coroutine_finishes() {
    in_child_process("wait_timeout_is_false_until_the_coroutine_finishes", || {
        let rt = runtime(2);
        let (tx, rx) = mpmc::bounded::<u32>(1);
        let h = rt.spawn_on(0, move || rx.recv().unwrap() * 2).unwrap();
        // It cannot finish before the send below.
        assert!(!h.wait_timeout(Duration::ZERO));
        assert!(!h.wait_timeout(Duration::from_millis(5)));
        assert!(!h.is_finished());

        // Waiters on other threads, and one in a coroutine, all on the
        // same handle, none with a finite timeout.
        let h = Arc::new(h);
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let h = h.clone();
                thread::spawn(move || h.wait_timeout(Duration::MAX))
            })
            .collect();
        let (early_tx, early_rx) = mpmc::bounded::<bool>(1);
        let in_coroutine = {
            let h = h.clone();
            rt.spawn_on(1, move || {
                // Times out on its executor's timer: nothing is sent
                // before the report below arrives.
                early_tx
                    .send(h.wait_timeout(Duration::from_millis(1)))
                    .unwrap();
                h.wait_timeout(Duration::MAX)
            })
            .unwrap()
        };
        assert!(!early_rx.recv().unwrap(), "nothing was sent yet");
        tx.send(21).unwrap();
        for t in threads {
            assert!(t.join().unwrap());
        }
        assert!(in_coroutine.join().unwrap());
        assert!(h.wait_timeout(Duration::ZERO));
        // The result is still there for the owner.
        let h = Arc::try_unwrap(h).unwrap();
        assert_eq!(h.join().unwrap(), 42);
        rt.shutdown();
    });
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

#[test]
fn join_async_is_awaited_by_tokio() {
    in_child_process("join_async_is_awaited_by_tokio", || {
        let rt = runtime(2);
        let (tx, rx) = mpmc::bounded::<u64>(1);
        let waiting = rt.spawn(move || rx.recv().unwrap() + 1);
        let quick = rt.spawn(|| 7u64);
        let panics = rt.spawn(|| -> u64 { panic!("async boom") });
        let total = tokio_rt().block_on(async move {
            // A tokio task awaits one handle while the main future awaits
            // the others; the send comes from another tokio task.
            let task = tokio::spawn(waiting.join_async());
            tokio::spawn(async move { tx.send_async(41).await.unwrap() });
            let quick = quick.await.unwrap(); // IntoFuture
            let err = panics.join_async().await.unwrap_err();
            assert_eq!(err.panic_message(), Some("async boom"));
            quick + task.await.unwrap().unwrap()
        });
        assert_eq!(total, 49);
        rt.shutdown();
    });
}

#[test]
fn dropping_a_pending_join_async_detaches_the_coroutine() {
    in_child_process(
        "dropping_a_pending_join_async_detaches_the_coroutine",
        || {
            let rt = runtime(2);
            let drops = Arc::new(AtomicUsize::new(0));
            let (go_tx, go_rx) = mpmc::bounded::<()>(1);
            let (done_tx, done_rx) = mpmc::bounded::<()>(1);
            let result = Counted(drops.clone());
            let h = rt.spawn(move || {
                go_rx.recv().unwrap();
                done_tx.send(()).unwrap();
                result
            });
            let timed_out = tokio_rt().block_on(async move {
                tokio::time::timeout(Duration::from_millis(5), h.join_async()).await
            });
            // The future was polled (its waker registered), then dropped.
            assert!(timed_out.is_err());
            go_tx.send(()).unwrap();
            done_rx.recv().unwrap();
            rt.shutdown();
            // The coroutine finished and its result was dropped, once.
            assert_eq!(drops.load(Ordering::SeqCst), 1);
            assert_eq!(rt.stats().total().finished, 1);
        },
    );
}

#[test]
fn into_panic_gives_the_payload_back_whole() {
    let rt = runtime(1);
    let err = rt.spawn(|| panic_any(42u32)).join().unwrap_err();
    assert!(err.is_panic());
    assert_eq!(err.panic_message(), Some("Box<dyn Any>"));
    assert!(err.to_string().contains("Box<dyn Any>"), "{err}");
    // A clone keeps the message, not the payload.
    let clone = err.clone();
    assert_eq!(clone, err);
    assert_eq!(
        clone
            .into_panic()
            .downcast_ref::<String>()
            .map(String::as_str),
        Some("Box<dyn Any>")
    );
    // Resumed, the payload unwinds as itself.
    let caught = catch_unwind(AssertUnwindSafe(|| resume_unwind(err.into_panic()))).unwrap_err();
    assert_eq!(caught.downcast_ref::<u32>(), Some(&42));

    // String payloads, both kinds, keep their message and their type.
    let err = rt.spawn(|| panic!("static text")).join().unwrap_err();
    assert_eq!(err.panic_message(), Some("static text"));
    let payload = err.try_into_panic().unwrap();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"static text"));
    let n = std::hint::black_box(7);
    let err = rt
        .spawn(move || panic!("formatted {n}"))
        .join()
        .unwrap_err();
    assert_eq!(err.panic_message(), Some("formatted 7"));
    let payload = err.into_panic();
    assert_eq!(
        payload.downcast_ref::<String>().map(String::as_str),
        Some("formatted 7")
    );

    // An error that is no panic says so, and resumes as its message.
    rt.shutdown();
    let err = rt.spawn(|| ()).join().unwrap_err();
    let err = err.try_into_panic().unwrap_err();
    assert!(err.is_shut_down());
    let text = err.to_string();
    let payload = err.into_panic();
    assert_eq!(payload.downcast_ref::<String>(), Some(&text));
}

#[test]
fn new_types_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<swco_executor::JoinFuture<u32>>();
    check::<swco_executor::SpawnBuilder<'static>>();
    check::<swco_executor::JoinError>();
}
