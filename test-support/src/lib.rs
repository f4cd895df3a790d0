//! Helpers shared by the tests of swco's crates (`swco-channel`,
//! `swco-executor` and the `swco` facade):
//!
//! * [`in_child_process`] and friends run one test of the current test
//!   binary in a child process (the binary re-executed with [`CHILD_ENV`]
//!   set and that one test selected), killed after [`CHILD_HANG_GUARD`],
//!   so that a crash (an abort, a stack overflow) or a hang fails that test
//!   alone, with the child's output, instead of the whole suite;
//! * [`cas_and_updt!`] and [`mode_tests!`] write one `#[test]` per protocol
//!   or per mode and protocol, calling a generic body;
//! * [`Census`] / [`Counted`] and [`DropCounter`] count drops, for the
//!   tests that check that every value is dropped exactly once;
//! * under `--cfg loom`, `loom_check` runs a loom model with every bound
//!   of the search set in code (the executor's in-crate models and
//!   `swco-loom-tests` both use it).
//!
//! It depends on no swco crate (a test of `swco-channel` that used a copy
//! of `swco-channel` through this crate would see two sets of types), so
//! the macros name `Cas` and `Updt` as the calling test file has them in
//! scope.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

// ---- running a test in a child process -------------------------------------

/// Set in the child process: there the test runs its body.
pub const CHILD_ENV: &str = "SWCO_TEST_CHILD";

/// A child that has not finished by then is hung: it is killed and its test
/// fails (a hang guard, not a speed assertion).
pub const CHILD_HANG_GUARD: Duration = Duration::from_secs(120);

/// Whether this process is a child started by [`run_child`].
#[must_use]
pub fn in_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// The case a child started by [`run_child_case`] runs (the value of
/// [`CHILD_ENV`]), if this process is such a child.
#[must_use]
pub fn child_case() -> Option<String> {
    std::env::var(CHILD_ENV).ok()
}

/// What a child run of one test left behind.
pub struct ChildOutput {
    /// How it exited; `None` if it hung and was killed.
    pub status: Option<ExitStatus>,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
}

impl ChildOutput {
    /// Both streams, labelled, for a failure message.
    #[must_use]
    pub fn both(&self) -> String {
        format!("--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr)
    }
}

/// Runs this binary's test `name` (exactly) in a child process with
/// [`CHILD_ENV`] set, killing it after [`CHILD_HANG_GUARD`].
///
/// # Panics
///
/// If the child cannot be started or waited for.
#[must_use]
pub fn run_child(name: &str) -> ChildOutput {
    run_child_case(name, "1", &[], &[])
}

/// [`run_child`], with [`CHILD_ENV`] set to `case`, the variables `env`
/// added and those named in `remove` taken out of the child's environment.
///
/// # Panics
///
/// If the child cannot be started or waited for.
#[must_use]
pub fn run_child_case(
    name: &str,
    case: &str,
    env: &[(&str, &str)],
    remove: &[&str],
) -> ChildOutput {
    run_child_for(name, case, env, remove, CHILD_HANG_GUARD)
}

/// [`run_child_case`], killing the child after `guard` rather than
/// [`CHILD_HANG_GUARD`] (a test that runs long on purpose, such as a soak).
///
/// # Panics
///
/// If the child cannot be started or waited for.
#[must_use]
pub fn run_child_for(
    name: &str,
    case: &str,
    env: &[(&str, &str)],
    remove: &[&str],
    guard: Duration,
) -> ChildOutput {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, case)
        .stdin(Stdio::null())
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
    let drain = |mut pipe: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut s = String::new();
            let _ = pipe.read_to_string(&mut s);
            s
        })
    };
    let out_reader = drain(Box::new(child.stdout.take().unwrap()));
    let err_reader = drain(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > guard {
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
/// process and fails with its output unless it passes there.
///
/// # Panics
///
/// In the parent, if the child hung, failed, or did not run exactly one
/// passing test (a `name` that matches no test fails too).
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
///
/// # Panics
///
/// If the child hung and was killed.
#[must_use]
pub fn exited(name: &str, out: ChildOutput) -> (ExitStatus, String) {
    let status = out
        .status
        .unwrap_or_else(|| panic!("{name}: the child hung and was killed\n{}", out.both()));
    (status, out.stderr)
}

// ---- test macros -------------------------------------------------------------

/// Two tests of each generic body, one per protocol: `$cas` runs
/// `$body::<Cas>(args)` and `$updt` runs `$body::<Updt>(args)`, with `Cas`
/// and `Updt` as the calling file has them in scope.
///
/// ```text
/// cas_and_updt! {
///     body(args...): cas_test_name, updt_test_name;
/// }
/// // Each test in a child process (see `in_child_process`):
/// cas_and_updt! {
///     in_child_process;
///     body(args...): cas_test_name, updt_test_name;
/// }
/// // In a child process, handing the body's instance to `run(f)`:
/// cas_and_updt! {
///     in_child_process, each(run);
///     body: cas_test_name, updt_test_name;
/// }
/// ```
#[macro_export]
macro_rules! cas_and_updt {
    (in_child_process, each($run:path); $($body:ident: $cas:ident, $updt:ident);* $(;)?) => {$(
        #[test]
        fn $cas() {
            $crate::in_child_process(stringify!($cas), || $run($body::<Cas>));
        }

        #[test]
        fn $updt() {
            $crate::in_child_process(stringify!($updt), || $run($body::<Updt>));
        }
    )*};
    (in_child_process; $($body:ident($($arg:expr),* $(,)?): $cas:ident, $updt:ident);* $(;)?) => {$(
        #[test]
        fn $cas() {
            $crate::in_child_process(stringify!($cas), || $body::<Cas>($($arg),*));
        }

        #[test]
        fn $updt() {
            $crate::in_child_process(stringify!($updt), || $body::<Updt>($($arg),*));
        }
    )*};
    ($($body:ident($($arg:expr),* $(,)?): $cas:ident, $updt:ident);* $(;)?) => {$(
        #[test]
        fn $cas() {
            $body::<Cas>($($arg),*);
        }

        #[test]
        fn $updt() {
            $body::<Updt>($($arg),*);
        }
    )*};
}

/// One test per line, each calling a generic body with its own type
/// arguments (a mode and a protocol, typically) and value arguments:
///
/// ```text
/// mode_tests! {
///     spsc_cas_name: body::<Spsc, Cas>();
///     mpmc_updt_name: other_body::<Mpmc, Updt>(3, 3);
/// }
/// // The same tests inside `mod module { use super::*; ... }`:
/// mode_tests! {
///     mod module;
///     spsc_cas: body::<Spsc, Cas>();
/// }
/// ```
#[macro_export]
macro_rules! mode_tests {
    (mod $module:ident; $($rest:tt)*) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $crate::mode_tests! { $($rest)* }
        }
    };
    ($($name:ident: $body:ident::<$($ty:ty),+>($($arg:expr),* $(,)?);)*) => {$(
        #[test]
        fn $name() {
            $body::<$($ty),+>($($arg),*);
        }
    )*};
}

/// One test per block, each run in a child process with the hang guard
/// of [`in_child_process`]:
///
/// ```text
/// child_test! {
///     a_timer_fires_once { /* body */ }
///     another { /* body */ }
/// }
/// ```
#[macro_export]
macro_rules! child_test {
    ($($name:ident $body:block)*) => {$(
        #[test]
        fn $name() {
            $crate::in_child_process(stringify!($name), || $body);
        }
    )*};
}

// ---- endpoints for a side ------------------------------------------------------

/// The endpoints of a side with one endpoint: `e` itself (`n` must be 1).
///
/// # Panics
///
/// If `n` is not 1.
pub fn one<E>(e: E, n: usize) -> Vec<E> {
    assert_eq!(n, 1, "a single side has one endpoint");
    vec![e]
}

/// `n` endpoints of a side with several: `n - 1` clones of `e`, then `e`.
///
/// # Panics
///
/// If `n` is 0.
pub fn clones<E: Clone>(e: E, n: usize) -> Vec<E> {
    assert!(n >= 1, "a side has at least one endpoint");
    let mut v = Vec::with_capacity(n);
    for _ in 1..n {
        v.push(e.clone());
    }
    v.push(e);
    v
}

/// [`one`] or [`clones`] by name, for macros that list the modes:
/// `endpoints!(single, tx, 1)`, `endpoints!(clone, rx, 3)`.
#[macro_export]
macro_rules! endpoints {
    (single, $e:expr, $n:expr) => {
        $crate::one($e, $n)
    };
    (clone, $e:expr, $n:expr) => {
        $crate::clones($e, $n)
    };
}

// ---- counting drops ------------------------------------------------------------

/// Counts how many [`Counted`] values were made and how many dropped.
#[derive(Default)]
pub struct Census {
    made: AtomicUsize,
    dropped: AtomicUsize,
}

impl Census {
    /// A census with nothing made yet, to share among [`Counted`] values.
    #[must_use]
    pub fn new() -> Arc<Self> {
        Arc::new(Census::default())
    }
    /// How many [`Counted`] values were made with this census.
    pub fn made(&self) -> usize {
        self.made.load(Ordering::SeqCst)
    }
    /// How many of them were dropped.
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }
}

/// A message that reports its making and its drop to its [`Census`].
pub struct Counted<T> {
    /// What it carries.
    pub value: T,
    census: Arc<Census>,
    alive: bool,
}

impl<T> Counted<T> {
    /// `value`, counted as made in `census`.
    pub fn new(value: T, census: &Arc<Census>) -> Self {
        census.made.fetch_add(1, Ordering::SeqCst);
        Counted {
            value,
            census: census.clone(),
            alive: true,
        }
    }
}

impl<T> Drop for Counted<T> {
    /// # Panics
    ///
    /// If this value was dropped already (a double drop, by `ptr::read` or
    /// the like, in the code under test).
    fn drop(&mut self) {
        assert!(self.alive, "message dropped twice");
        self.alive = false;
        self.census.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// Adds one to its counter when dropped.
pub struct DropCounter(pub Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

// ---- running a loom model ------------------------------------------------------

/// Runs `f` under loom with at most `preemptions` preemptions per execution
/// (`None`: unbounded), and prints the execution count and time.
///
/// Every bound of the search is set here, so a suite's cost is decided by
/// the code and not by `LOOM_*` variables left in the environment.
/// `max_branches` is raised from loom's 1,000 because retry and parking
/// loops yield on every turn, and each yield is a branch.
#[cfg(loom)]
pub fn loom_check<F>(name: &str, preemptions: Option<usize>, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = preemptions;
    builder.max_branches = 100_000;
    builder.max_permutations = None;
    builder.max_duration = None;
    builder.checkpoint_file = None;
    let executions = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&executions);
    let start = Instant::now();
    builder.check(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        f();
    });
    eprintln!(
        "loom model {name}: {} executions, preemption bound {preemptions:?}, {:.2?}",
        executions.load(Ordering::SeqCst),
        start.elapsed()
    );
}
