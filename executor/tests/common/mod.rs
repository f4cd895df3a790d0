//! Helpers shared by the executor's integration tests. Running one test of
//! the current test binary in a child process (so that a crash, an abort, a
//! stack overflow, or a hang fails that test alone, with the child's
//! output) comes from `swco-test-support`, re-exported here; the rest is
//! the executor's own.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code, unused_imports)]

use std::process::ExitStatus;
use std::thread;

pub use swco_test_support::{
    child_case, exited, in_child, in_child_process, run_child, run_child_case, ChildOutput,
    CHILD_ENV, CHILD_HANG_GUARD,
};

/// Recurses until the stack overflows (each frame keeps 1 KiB live).
#[inline(never)]
pub fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 128]);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1).wrapping_add(std::hint::black_box(frame)[7])
}

/// Checks a child that overflowed a 32 KiB coroutine stack on executor 1:
/// it aborted (SIGABRT) after the overflow report naming the executor and
/// the stack size. `what` labels the failure message.
pub fn assert_overflow_report(status: ExitStatus, stderr: &str, what: &str) {
    assert!(!status.success(), "{what}: child survived: {stderr}");
    assert!(
        stderr.contains("swco: stack overflow in a coroutine on executor swco-cpe-1"),
        "{what}: unexpected stderr: {stderr}"
    );
    assert!(
        stderr.contains("coroutine stack size 32768 bytes"),
        "{what}: unexpected stderr: {stderr}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        const SIGABRT: i32 = 6;
        assert_eq!(status.signal(), Some(SIGABRT), "{what}: stderr: {stderr}");
    }
}

/// Runs `then` in a coroutine of executor `cpe` that a direct hand-off
/// resumes: it parks on a channel first; then a second coroutine of the
/// same executor sends to it and waits for its answer, so the send's wake
/// and the wait's park hand the thread over, and `then` runs on top of the
/// sender's stack. Returns the join handles of that coroutine (its `then`'s
/// result) and of the sender (the answer, 1).
pub fn after_a_direct_hand_off<R: Send + 'static>(
    rt: &swco_executor::Runtime,
    cpe: usize,
    then: impl FnOnce() -> R + Send + 'static,
) -> (swco_executor::JoinHandle<R>, swco_executor::JoinHandle<u32>) {
    let (tx, rx) = swco_channel::spsc::bounded::<u32>(1);
    let (back_tx, back_rx) = swco_channel::spsc::bounded::<u32>(1);
    let blocks_before = rt.stats().executors[cpe].blocks;
    let woken = rt
        .spawn_on(cpe, move || {
            let n = rx.recv().unwrap();
            back_tx.send(n).unwrap();
            then()
        })
        .unwrap();
    // Parked first, so that the sender's wake and park hand off to it.
    while rt.stats().executors[cpe].blocks == blocks_before {
        thread::yield_now();
    }
    let sender = rt
        .spawn_on(cpe, move || {
            tx.send(1).unwrap();
            back_rx.recv().unwrap()
        })
        .unwrap();
    (woken, sender)
}
