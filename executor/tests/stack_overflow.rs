//! A coroutine that overflows its stack must die loudly, naming its executor
//! and the configured stack size, never corrupt memory silently. The
//! overflows run in child processes (this test binary, re-executed).

use std::process::ExitStatus;

mod common;

use common::{in_child, recurse};

/// Runs this binary's test `name` in a child process (see `common`);
/// returns its exit status and stderr.
fn run_child(name: &str) -> (ExitStatus, String) {
    common::exited(name, common::run_child(name))
}

/// Two executors with 32 KiB stacks: what `common::assert_overflow_report`
/// expects of a coroutine that overflows on executor 1.
fn overflow_runtime() -> swco_executor::Runtime {
    swco_executor::Runtime::builder()
        .executors(2)
        .stack_size(32 * 1024)
        .build()
        .unwrap()
}

#[test]
fn stack_overflow_prints_a_clear_message_and_aborts() {
    if in_child() {
        let rt = overflow_runtime();
        let h = rt.spawn_on(1, || recurse(0)).unwrap();
        let _ = h.join();
        unreachable!("the overflow should have aborted the process");
    }
    let (status, stderr) = run_child("stack_overflow_prints_a_clear_message_and_aborts");
    common::assert_overflow_report(status, &stderr, "default guard path");
}

/// A coroutine resumed by a direct hand-off runs on its own stack, on top
/// of the parked coroutine that woke it: its overflow is still caught on
/// its own guard page and reported, not taken for the other's.
#[test]
fn stack_overflow_after_a_direct_hand_off_is_reported() {
    if in_child() {
        let rt = overflow_runtime();
        let (deep, sender) = common::after_a_direct_hand_off(&rt, 1, || recurse(0));
        let _ = sender.join();
        let _ = deep.join();
        unreachable!("the overflow should have aborted the process");
    }
    let (status, stderr) = run_child("stack_overflow_after_a_direct_hand_off_is_reported");
    common::assert_overflow_report(status, &stderr, "direct hand-off");
}

/// The handler only claims faults on coroutine guard pages: a plain thread
/// overflowing its own stack still gets Rust's usual report.
#[test]
fn thread_stack_overflow_is_left_to_rust() {
    if in_child() {
        let rt = swco_executor::Runtime::builder()
            .executors(1)
            .build()
            .unwrap();
        rt.spawn(|| ()).join().unwrap();
        let t = std::thread::Builder::new()
            .name("plain-overflow".into())
            .stack_size(64 * 1024)
            .spawn(|| recurse(0))
            .unwrap();
        let _ = t.join();
        unreachable!("the overflow should have aborted the process");
    }
    let (status, stderr) = run_child("thread_stack_overflow_is_left_to_rust");
    assert!(!status.success(), "child survived: {stderr}");
    assert!(
        stderr.contains("thread 'plain-overflow'") && stderr.contains("has overflowed its stack"),
        "unexpected stderr ({status:?}): {stderr}"
    );
    assert!(
        !stderr.contains("swco: stack overflow"),
        "unexpected stderr: {stderr}"
    );
}
