//! Helpers shared by the executor's integration tests: running one test of
//! the current test binary in a child process (the binary re-executed with
//! [`CHILD_ENV`] set and that one test selected), so that a crash (an
//! abort, a stack overflow) or a hang fails that test alone, with the
//! child's output, instead of the whole suite.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Set in the child process: there the test runs its body.
pub const CHILD_ENV: &str = "SWCO_TEST_CHILD";

/// A child that has not finished by then is hung: it is killed and its test
/// fails (a hang guard, not a speed assertion).
pub const CHILD_HANG_GUARD: Duration = Duration::from_secs(120);

/// Whether this process is a child started by [`run_child`].
pub fn in_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// What a child run of one test left behind.
pub struct ChildOutput {
    /// How it exited; `None` if it hung and was killed.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl ChildOutput {
    /// Both streams, labelled, for a failure message.
    pub fn both(&self) -> String {
        format!("--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr)
    }
}

/// Runs this binary's test `name` (exactly) in a child process with
/// [`CHILD_ENV`] set, killing it after [`CHILD_HANG_GUARD`].
pub fn run_child(name: &str) -> ChildOutput {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both pipes are drained while the child runs, so that it never blocks
    // on a full one.
    let mut stderr = child.stderr.take().unwrap();
    let err_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut stdout = child.stdout.take().unwrap();
    let out_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > CHILD_HANG_GUARD {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(10));
    };
    ChildOutput {
        status,
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

/// In the child, runs `body`; in the parent, runs test `name` in a child
/// process and fails with its output unless it exits successfully.
pub fn in_child_process(name: &str, body: impl FnOnce()) {
    if in_child() {
        body();
        return;
    }
    let out = run_child(name);
    let output = out.both();
    match out.status {
        None => panic!("{name}: the child hung and was killed\n{output}"),
        Some(s) => assert!(
            s.success() && output.contains("test result: ok. 1 passed"),
            "{name}: the child failed ({s})\n{output}"
        ),
    }
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
