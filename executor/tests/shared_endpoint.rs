//! A side with one endpoint waits in a single-waiter slot, but several
//! coroutines of one executor can still block on that one endpoint at once,
//! sharing it through a thread-local (the endpoint is `Send`, not `Sync`,
//! and a thread-local asks for neither). The first registers in the slot;
//! the others queue behind it and are woken when it leaves. None may sleep
//! through a message meant for the endpoint.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::sleep;
use std::time::Duration;

use swco_channel::{bounded_in, Cas, Mode, Mpsc, Protocol, Receiver, RecvTimeoutError, Spsc, Updt};
use swco_executor::Runtime;

thread_local! {
    /// The shared receiver, on the executor thread.
    static RX: RefCell<Option<Box<dyn std::any::Any>>> = RefCell::new(None);
}

/// Receives on the thread-local receiver, optionally with a timeout.
fn recv_shared<M: Mode, P: Protocol>(timeout: Option<Duration>) -> Result<u32, RecvTimeoutError> {
    RX.with(|rx| {
        let rx = rx.borrow();
        let rx = rx
            .as_ref()
            .and_then(|rx| rx.downcast_ref::<Receiver<u32, M, P>>())
            .expect("receiver installed");
        match timeout {
            Some(t) => rx.recv_timeout(t),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        }
    })
}

/// Three coroutines block on one receiver; three sends, one at a time, must
/// reach all three. If `first_times_out`, the first waiter (the one in the
/// slot) gives up on a deadline first and only the other two get messages.
fn three_waiters<M: Mode, P: Protocol>(first_times_out: bool) {
    let rt = Runtime::builder().executors(1).build().unwrap();
    let (tx, rx) = bounded_in::<u32, M, P>(1);
    rt.spawn_on(0, move || RX.with(|r| *r.borrow_mut() = Some(Box::new(rx))))
        .unwrap()
        .join()
        .unwrap();

    let started = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let started = started.clone();
            let timeout = (first_times_out && i == 0).then_some(Duration::from_millis(100));
            rt.spawn_on(0, move || {
                started.fetch_add(1, Ordering::SeqCst);
                recv_shared::<M, P>(timeout)
            })
            .unwrap()
        })
        .collect();
    while started.load(Ordering::SeqCst) < 3 {
        sleep(Duration::from_millis(1));
    }
    // Let them all block (the first in the slot, the others behind it), and
    // a timed one time out.
    sleep(Duration::from_millis(300));

    let sends = if first_times_out { 2 } else { 3 };
    for v in 1..=sends {
        tx.send(v).unwrap();
        // One message at a time: each must wake a waiter by itself.
        while !tx.is_empty() {
            sleep(Duration::from_millis(1));
        }
    }
    let results: Vec<_> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
    let got: BTreeSet<u32> = results.iter().filter_map(|r| r.ok()).collect();
    assert_eq!(got, (1..=sends).collect(), "results: {results:?}");
    if first_times_out {
        assert_eq!(results[0], Err(RecvTimeoutError::Timeout));
    }
    rt.spawn_on(0, || RX.with(|r| r.borrow_mut().take()).map(drop))
        .unwrap()
        .join()
        .unwrap();
    rt.shutdown();
}

#[test]
fn spsc_cas_three_waiters() {
    three_waiters::<Spsc, Cas>(false);
}

#[test]
fn spsc_updt_three_waiters() {
    three_waiters::<Spsc, Updt>(false);
}

#[test]
fn mpsc_cas_three_waiters() {
    three_waiters::<Mpsc, Cas>(false);
}

#[test]
fn mpsc_updt_three_waiters() {
    three_waiters::<Mpsc, Updt>(false);
}

#[test]
fn spsc_cas_slot_waiter_times_out() {
    three_waiters::<Spsc, Cas>(true);
}

#[test]
fn spsc_updt_slot_waiter_times_out() {
    three_waiters::<Spsc, Updt>(true);
}
