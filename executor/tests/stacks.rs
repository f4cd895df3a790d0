//! Coroutine stacks carved from slabs: overflow reports on both guard-page
//! paths, tens of thousands of live coroutines in few kernel mappings,
//! honest spawn failure, and stack reuse.
//!
//! Overflows and environment-dependent cases run in child processes (this
//! test binary, re-executed with `common::CHILD_ENV` naming the case).

mod common;

use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use swco_channel::{mpmc, spsc};
use swco_executor::{GuardPages, JoinHandle, Runtime};

use common::{child_case, recurse};

const GUARD_ENV: &str = "SWCO_GUARD_PAGES";

/// Runs this binary's test `name` in a child process with the child case
/// `case` and the extra environment `env` (the guard-path variable taken
/// out unless `env` sets it); returns its exit status and stderr.
fn run_child(name: &str, case: &str, env: &[(&str, &str)]) -> (ExitStatus, String) {
    common::exited(name, common::run_child_case(name, case, env, &[GUARD_ENV]))
}

fn guard_regions_supported() -> bool {
    Runtime::builder()
        .executors(1)
        .guard_pages(GuardPages::GuardRegion)
        .build()
        .is_ok()
}

fn path_named(name: &str) -> GuardPages {
    match name {
        "madvise" => GuardPages::GuardRegion,
        "mprotect" => GuardPages::Mprotect,
        other => panic!("unknown guard path {other}"),
    }
}

/// The guard paths to test here, with a note for one the kernel lacks.
fn testable_paths() -> Vec<&'static str> {
    let mut paths = vec!["mprotect"];
    if guard_regions_supported() {
        paths.push("madvise");
    } else {
        eprintln!(
            "note: this kernel lacks MADV_GUARD_INSTALL (Linux 6.13+); guard-region cases skipped"
        );
    }
    paths
}

#[path = "common/hold.rs"]
mod hold;

use hold::{hold, join_sum};

/// Waits (at most two minutes) until executor `cpe` has given back the
/// memory of some free stacks.
fn wait_until_released(rt: &Runtime, cpe: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while rt.stats().executors[cpe].stacks_released == 0 {
        assert!(Instant::now() < deadline, "no stack memory was given back");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (at most two minutes) until `counter` reaches `n`.
fn wait_for(counter: &AtomicUsize, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while counter.load(Ordering::Relaxed) < n {
        assert!(Instant::now() < deadline, "coroutines did not all start");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// An overflow on a freshly carved stack, on each guard path.
#[test]
fn overflow_is_reported_on_both_guard_paths() {
    if let Some(path) = child_case() {
        let rt = Runtime::builder()
            .executors(2)
            .stack_size(32 * 1024)
            .guard_pages(path_named(&path))
            .build()
            .unwrap();
        assert_eq!(rt.guard_pages(), path_named(&path));
        let h = rt.spawn_on(1, || recurse(0)).unwrap();
        let _ = h.join();
        unreachable!("the overflow should have aborted the process");
    }
    for path in testable_paths() {
        let (status, stderr) = run_child("overflow_is_reported_on_both_guard_paths", path, &[]);
        common::assert_overflow_report(status, &stderr, path);
    }
}

/// An overflow on a reused stack whose memory was given back to the OS
/// (`MADV_DONTNEED` over it and its neighbours' guard pages): the guard must
/// have survived, on each guard path.
#[test]
fn overflow_is_reported_on_a_released_stack() {
    const N: usize = 1000;
    if let Some(path) = child_case() {
        let rt = Runtime::builder()
            .executors(2)
            .stack_size(32 * 1024)
            .guard_pages(path_named(&path))
            .build()
            .unwrap();
        // N live coroutines on executor 1, then all finished: more free
        // stacks than an executor keeps resident, so once they sat unused
        // for a trim period the coldest are released (the idle executor
        // wakes up for it).
        let (tx, hs) = hold(&rt, 1, N);
        drop(tx);
        assert_eq!(join_sum(hs), N);
        wait_until_released(&rt, 1);
        // Hold all but the coldest free stack, then overflow on that one.
        let (tx, hs) = hold(&rt, 1, N - 1);
        let h = rt.spawn_on(1, || recurse(0)).unwrap();
        let _ = h.join();
        drop((tx, hs));
        unreachable!("the overflow should have aborted the process");
    }
    for path in testable_paths() {
        let (status, stderr) = run_child("overflow_is_reported_on_a_released_stack", path, &[]);
        common::assert_overflow_report(status, &stderr, path);
    }
}

/// `SWCO_GUARD_PAGES` picks the path of `Auto` runtimes and leaves explicit
/// choices alone.
#[test]
fn the_environment_overrides_auto() {
    if let Some(case) = child_case() {
        let auto = Runtime::builder().executors(1).build().unwrap();
        let explicit = Runtime::builder()
            .executors(1)
            .guard_pages(GuardPages::Mprotect)
            .build()
            .unwrap();
        assert_eq!(explicit.guard_pages(), GuardPages::Mprotect);
        let expected = match case.as_str() {
            "unset" | "bogus" | "guard-region" => {
                if guard_regions_supported() {
                    GuardPages::GuardRegion
                } else {
                    GuardPages::Mprotect
                }
            }
            path => path_named(path),
        };
        assert_eq!(auto.guard_pages(), expected, "case {case}");
        return;
    }
    let name = "the_environment_overrides_auto";
    let mut cases = vec![("unset", None), ("mprotect", Some("mprotect"))];
    if guard_regions_supported() {
        cases.push(("madvise", Some("madvise")));
    }
    cases.push(("bogus", Some("bogus")));
    // The enum variant's name is not a spelling of the variable: one
    // spelling per path, the others reported like any unknown value.
    cases.push(("guard-region", Some("guard-region")));
    for (case, value) in cases {
        let env: Vec<(&str, &str)> = value.map(|v| (GUARD_ENV, v)).into_iter().collect();
        let (status, stderr) = run_child(name, case, &env);
        assert!(status.success(), "case {case}: {stderr}");
        if case == "bogus" || case == "guard-region" {
            assert!(stderr.contains("ignoring SWCO_GUARD_PAGES"), "{stderr}");
        }
    }
}

/// Lines in /proc/self/maps: the process's kernel mappings.
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().count())
        .unwrap_or(0)
}

/// 40 000 coroutines alive at once: more than the ~32 700 that one
/// `mmap` + guard per stack allowed under the default `vm.max_map_count`.
/// With guard regions, their stacks take a few dozen mappings in all.
#[test]
fn forty_thousand_live_coroutines_in_few_mappings() {
    const N: usize = 40_000;
    if !guard_regions_supported() {
        eprintln!("note: this kernel lacks MADV_GUARD_INSTALL (Linux 6.13+); skipped");
        return;
    }
    let before = mappings();
    let rt = Runtime::builder()
        .executors(2)
        .stack_size(32 * 1024)
        .guard_pages(GuardPages::GuardRegion)
        .build()
        .unwrap();
    let waiting = Arc::new(AtomicUsize::new(0));
    let (senders, handles): (Vec<_>, Vec<_>) = (0..N)
        .map(|_| {
            let (tx, rx) = spsc::bounded::<usize>(1);
            let waiting = waiting.clone();
            let h = rt.spawn(move || {
                waiting.fetch_add(1, Ordering::Relaxed);
                rx.recv().unwrap()
            });
            (tx, h)
        })
        .unzip();
    wait_for(&waiting, N);
    let during = mappings();
    let stats = rt.stats().total();
    assert_eq!(
        stats.stacks_mapped, N as u64,
        "every live coroutine has its own stack"
    );
    eprintln!(
        "{N} live coroutines: {before} mappings before the runtime, {during} with them live \
         (one mmap + guard per stack would need {} more)",
        2 * N
    );
    assert!(
        during < before + 1000,
        "stacks should take few mappings: {before} -> {during}"
    );
    for (i, tx) in senders.iter().enumerate() {
        tx.send(i).unwrap();
    }
    assert_eq!(join_sum(handles), N * (N - 1) / 2);
    rt.shutdown();
    let total = rt.stats().total();
    assert_eq!((total.spawned, total.finished), (N as u64, N as u64));
}

/// `stacks_mapped` counts stacks carved fresh; finished coroutines' stacks
/// are reused.
#[test]
fn stacks_are_reused() {
    let rt = Runtime::builder().executors(1).build().unwrap();
    for i in 0..1000 {
        assert_eq!(rt.spawn(move || i).join().unwrap(), i);
    }
    assert_eq!(rt.stats().total().stacks_mapped, 1, "one stack, reused");
    for _ in 0..3 {
        let (tx, hs) = hold(&rt, 0, 100);
        drop(tx);
        assert_eq!(join_sum(hs), 100);
    }
    assert_eq!(
        rt.stats().total().stacks_mapped,
        100,
        "100 were live at once, then reused"
    );
}
