//! Coroutines that hold their stacks until released: shared by the stack
//! tests (`tests/stacks.rs`) and the runtime's unit tests that need the
//! crate-private stack limit (`src/runtime/tests.rs`, which includes this
//! file by path). The including module has `Runtime`, `JoinHandle` and
//! `mpmc` in scope.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::{mpmc, JoinHandle, Runtime};

/// The sum of the coroutines' results.
pub fn join_sum(handles: Vec<JoinHandle<usize>>) -> usize {
    handles.into_iter().map(|h| h.join().unwrap()).sum()
}

/// Spawns `n` coroutines on executor `cpe` that wait on one channel (each
/// returning 1 once it closes), and waits until all of them run: `n` stacks
/// are then in use. Dropping the sender releases them.
pub fn hold(rt: &Runtime, cpe: usize, n: usize) -> (mpmc::Sender<()>, Vec<JoinHandle<usize>>) {
    let (tx, rx) = mpmc::bounded::<()>(1);
    let started = Arc::new(AtomicUsize::new(0));
    let hs = (0..n)
        .map(|_| {
            let (rx, started) = (rx.clone(), started.clone());
            rt.spawn_on(cpe, move || {
                started.fetch_add(1, Ordering::Relaxed);
                let _ = rx.recv();
                1
            })
            .unwrap()
        })
        .collect();
    // A bound only so that a lost coroutine fails instead of hanging.
    let deadline = Instant::now() + Duration::from_secs(120);
    while started.load(Ordering::Relaxed) < n {
        assert!(Instant::now() < deadline, "the coroutines never all ran");
        thread::sleep(Duration::from_millis(1));
    }
    (tx, hs)
}
