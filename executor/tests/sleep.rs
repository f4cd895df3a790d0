//! `swco_executor::sleep` and `swco_executor::sleep_until`: a sleeping coroutine leaves its
//! executor to its neighbours; outside a coroutine they sleep the thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use swco_channel::spsc;
use swco_executor::Runtime;

#[test]
fn a_sleeping_coroutine_lets_its_neighbours_run() {
    let rt = Runtime::builder().executors(1).build().unwrap();
    let (tx, rx) = spsc::bounded::<u32>(1);
    // The sleeper is started first, on the only executor. If sleeping froze
    // the executor, the other coroutine could not send until it woke, and
    // `try_recv` would find nothing.
    let sleeper = rt
        .spawn_on(0, move || {
            let start = Instant::now();
            swco_executor::sleep(Duration::from_millis(200));
            (start.elapsed(), rx.try_recv())
        })
        .unwrap();
    let neighbour = rt.spawn_on(0, move || tx.send(7).unwrap()).unwrap();
    neighbour.join().unwrap();
    let (slept, got) = sleeper.join().unwrap();
    assert!(slept >= Duration::from_millis(200), "woke early: {slept:?}");
    assert_eq!(got, Ok(7), "the neighbour ran while the coroutine slept");
}

#[test]
fn many_sleepers_on_one_executor_all_wake_exactly_once() {
    const N: usize = 2000;
    let rt = Runtime::builder().executors(1).build().unwrap();
    let woken = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..N)
        .map(|i| {
            let woken = woken.clone();
            rt.spawn_on(0, move || {
                let deadline = Instant::now() + Duration::from_millis(20 + (i % 50) as u64);
                swco_executor::sleep_until(deadline);
                assert!(Instant::now() >= deadline, "coroutine {i} woke early");
                woken.fetch_add(1, Ordering::Relaxed);
                i
            })
            .unwrap()
        })
        .collect();
    let sum: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, N * (N - 1) / 2);
    assert_eq!(woken.load(Ordering::Relaxed), N);
    // Counters are exact once shutdown has waited for every coroutine: a
    // join returns as soon as the coroutine's result is in, which can be
    // just before its executor counts it finished.
    rt.shutdown();
    let total = rt.stats().total();
    assert_eq!(total.finished, N as u64);
    assert_eq!(
        total.wakes, total.blocks,
        "each suspension ended with one wake"
    );
}

#[test]
fn a_deadline_in_the_past_returns_at_once() {
    let rt = Runtime::builder().executors(1).build().unwrap();
    let h = rt
        .spawn_on(0, || {
            swco_executor::sleep_until(Instant::now() - Duration::from_millis(1));
            swco_executor::sleep(Duration::ZERO);
        })
        .unwrap();
    h.join().unwrap();
    assert_eq!(rt.stats().total().blocks, 0, "nothing suspended");
}

#[test]
fn outside_a_coroutine_the_thread_sleeps() {
    let start = Instant::now();
    swco_executor::sleep(Duration::from_millis(30));
    assert!(start.elapsed() >= Duration::from_millis(30));
    let deadline = Instant::now() + Duration::from_millis(20);
    swco_executor::sleep_until(deadline);
    assert!(Instant::now() >= deadline);
}

/// A cancelling shutdown unwinds a sleeping coroutine like a blocked one:
/// its locals are dropped, exactly once.
#[test]
fn a_cancelling_shutdown_unwinds_sleepers() {
    use swco_test_support::DropCounter as Counted;
    const N: usize = 100;
    let rt = Runtime::builder().executors(2).build().unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..N)
        .map(|_| {
            let (dropped, started) = (dropped.clone(), started.clone());
            rt.spawn(move || {
                let _guard = Counted(dropped);
                started.fetch_add(1, Ordering::SeqCst);
                swco_executor::sleep(Duration::from_secs(3600));
            })
        })
        .collect();
    while started.load(Ordering::SeqCst) < N {
        std::thread::yield_now();
    }
    rt.shutdown_timeout(Duration::from_millis(50))
        .expect_err("the sleepers were still sleeping");
    for h in handles {
        assert!(h.join().unwrap_err().is_cancelled());
    }
    assert_eq!(dropped.load(Ordering::SeqCst), N);
}
