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

#[test]
fn stack_overflow_prints_a_clear_message_and_aborts() {
    if in_child() {
        let rt = swco_executor::Runtime::builder()
            .executors(2)
            .stack_size(32 * 1024)
            .build()
            .unwrap();
        let h = rt.spawn_on(1, || recurse(0)).unwrap();
        let _ = h.join();
        unreachable!("the overflow should have aborted the process");
    }
    let (status, stderr) = run_child("stack_overflow_prints_a_clear_message_and_aborts");
    common::assert_overflow_report(status, &stderr, "default guard path");
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
