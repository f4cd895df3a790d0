//! The runtime's tests that need its crate-private knobs: the stack limit
//! and the blocking pool's keep-alive are builder settings for tests only,
//! so they are set here rather than through the public builder.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use swco_channel::mpmc;
use swco_test_support::in_child_process;

use crate::{JoinHandle, Runtime};

fn thread_name() -> Option<String> {
    thread::current().name().map(str::to_owned)
}

/// Pool threads alive in this process, by name (`/proc/self/task/*/comm`).
#[cfg(target_os = "linux")]
fn pool_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.starts_with("swco-blocking-"))
        .count()
}

#[path = "../../tests/common/hold.rs"]
mod hold;

use hold::{hold, join_sum};

/// With a stack limit, the spawn past it is refused, with the reason in the
/// join error; freed stacks are then reused.
#[test]
fn a_spawn_past_the_stack_limit_is_refused() {
    let rt = Runtime::builder()
        .executors(1)
        .max_stacks(2)
        .build()
        .unwrap();
    let (tx, held) = hold(&rt, 0, 2);
    let err = rt.spawn(|| 1).join().unwrap_err();
    assert!(err.is_refused(), "{err}");
    assert!(
        err.to_string().contains("max_stacks"),
        "the error names the cause: {err}"
    );
    drop(tx);
    assert_eq!(join_sum(held), 2);
    assert_eq!(rt.spawn(|| 7).join().unwrap(), 7, "a freed stack is reused");
    assert_eq!(rt.stats().total().stacks_mapped, 2);
}

#[cfg(target_os = "linux")]
#[test]
fn pool_threads_start_on_demand_and_exit_after_the_keep_alive() {
    in_child_process(
        "runtime::tests::pool_threads_start_on_demand_and_exit_after_the_keep_alive",
        || {
            let rt = Runtime::builder()
                .executors(1)
                .blocking_threads(4)
                .blocking_keep_alive(Duration::from_millis(50))
                .build()
                .unwrap();
            assert_eq!(pool_threads(), 0, "none at build time");
            let gate = Arc::new(std::sync::Barrier::new(3));
            let jobs: Vec<_> = (0..2)
                .map(|_| {
                    let gate = gate.clone();
                    rt.spawn_blocking(move || {
                        gate.wait();
                    })
                })
                .collect();
            gate.wait(); // both jobs run at once: two threads
            assert_eq!(pool_threads(), 2);
            for j in jobs {
                j.join().unwrap();
            }
            // Idle past the keep-alive, they exit (the child's hang guard
            // fails the test if they never do).
            while pool_threads() != 0 {
                thread::sleep(Duration::from_millis(5));
            }
            // And start again on demand.
            assert!(rt
                .spawn_blocking(thread_name)
                .join()
                .unwrap()
                .unwrap()
                .starts_with("swco-blocking-"));
            rt.shutdown();
            assert_eq!(pool_threads(), 0, "shutdown ends the pool's threads");
        },
    );
}
