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

/// The case a child started by [`run_child_case`] runs (the value of
/// [`CHILD_ENV`]), if this process is such a child.
pub fn child_case() -> Option<String> {
    std::env::var(CHILD_ENV).ok()
}

/// Runs this binary's test `name` (exactly) in a child process with
/// [`CHILD_ENV`] set, killing it after [`CHILD_HANG_GUARD`].
pub fn run_child(name: &str) -> ChildOutput {
    run_child_case(name, "1", &[], &[])
}

/// [`run_child`], with [`CHILD_ENV`] set to `case`, the variables `env`
/// added and those named in `remove` taken out of the child's environment.
pub fn run_child_case(
    name: &str,
    case: &str,
    env: &[(&str, &str)],
    remove: &[&str],
) -> ChildOutput {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, case)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for k in remove {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
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

/// A child that must end by itself (not be killed as hung): its exit
/// status and stderr. `name` labels the failure.
pub fn exited(name: &str, out: ChildOutput) -> (ExitStatus, String) {
    let status = out
        .status
        .unwrap_or_else(|| panic!("{name}: the child hung and was killed\n{}", out.both()));
    (status, out.stderr)
}

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
