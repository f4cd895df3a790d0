//! A coroutine that overflows its stack must die loudly, naming its executor
//! and the configured stack size, never corrupt memory silently. The
//! overflow runs in a child process (this test binary, re-executed).

use std::process::Command;

const CHILD_ENV: &str = "SWCO_STACK_OVERFLOW_CHILD";

#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 128]);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1).wrapping_add(std::hint::black_box(frame)[7])
}

#[test]
fn stack_overflow_prints_a_clear_message_and_aborts() {
    if std::env::var_os(CHILD_ENV).is_some() {
        let rt = swco::Runtime::builder()
            .executors(2)
            .stack_size(32 * 1024)
            .build()
            .unwrap();
        let h = rt.spawn_on(1, || recurse(0)).unwrap();
        let _ = h.join();
        unreachable!("the overflow should have aborted the process");
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "stack_overflow_prints_a_clear_message_and_aborts",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "child survived: {stderr}");
    assert!(
        stderr.contains("stack overflow in a coroutine on executor swco-cpe-1"),
        "unexpected stderr: {stderr}"
    );
    assert!(
        stderr.contains("stack size 32768 bytes"),
        "unexpected stderr: {stderr}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        const SIGABRT: i32 = 6;
        assert_eq!(out.status.signal(), Some(SIGABRT), "stderr: {stderr}");
    }
}
