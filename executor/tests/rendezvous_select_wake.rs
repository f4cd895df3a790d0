//! A select that sends on a zero-capacity (rendezvous) channel waits in the
//! rendezvous (a packet of its own, where any receiver meets it) and on the
//! channel's senders' waiter list for a receiver to appear; a blocking
//! receive that queues its packet looks at that list under the rendezvous
//! lock and wakes what waits there (the select's re-check takes the same
//! lock).
//! Coroutines on two executors and a thread, both protocols, every message
//! exactly once. A lost wake-up would hang, so the scenario runs in a child
//! process.

mod common;

use std::thread;

use common::in_child_process;
use swco_channel::{mpmc, select, spsc, Cas, Protocol, Updt};
use swco_executor::Runtime;

/// Two selecting senders (one per executor), each offering every message
/// on the shared rendezvous channel and on one nobody receives from;
/// blocking receivers: a coroutine per executor and a thread.
fn selects_send_to_blocking_receivers<P: Protocol>() {
    const N: u64 = 5_000;
    let rt = Runtime::builder().executors(2).build().unwrap();
    let (tx, rx) = mpmc::bounded_with::<u64, P>(0);
    let mut idle_receivers = Vec::new();
    let senders: Vec<_> = (0..2u64)
        .map(|s| {
            let tx = tx.clone();
            let (idle_tx, idle_rx) = spsc::bounded_with::<u64, P>(0);
            idle_receivers.push(idle_rx);
            rt.spawn_on(s as usize, move || {
                for i in 0..N {
                    let v = s * N + i;
                    select! {
                        send(tx, v) -> res => res.expect("the receivers are alive"),
                        send(idle_tx, v) -> _ => panic!("nobody receives there"),
                    }
                }
            })
            .unwrap()
        })
        .collect();
    drop(tx);
    let tally =
        |rx: mpmc::Receiver<u64, P>| rx.iter().fold((0u64, 0u64), |(n, s), v| (n + 1, s + v));
    let coroutines: Vec<_> = (0..2)
        .map(|e| {
            let rx = rx.clone();
            rt.spawn_on(e, move || tally(rx)).unwrap()
        })
        .collect();
    let thread = {
        let rx = rx.clone();
        thread::spawn(move || tally(rx))
    };
    drop(rx);
    for s in senders {
        s.join().expect("a sender finished");
    }
    let mut tallies: Vec<(u64, u64)> = coroutines
        .into_iter()
        .map(|c| c.join().expect("a receiver finished"))
        .collect();
    tallies.push(thread.join().unwrap());
    let count: u64 = tallies.iter().map(|t| t.0).sum();
    let sum: u64 = tallies.iter().map(|t| t.1).sum();
    assert_eq!(count, 2 * N, "every message received exactly once");
    assert_eq!(
        sum,
        (2 * N) * (2 * N - 1) / 2,
        "every message received exactly once"
    );
    drop(idle_receivers);
    rt.shutdown();
}

#[test]
fn selecting_senders_are_woken_by_blocking_receivers() {
    in_child_process("selecting_senders_are_woken_by_blocking_receivers", || {
        selects_send_to_blocking_receivers::<Cas>();
        selects_send_to_blocking_receivers::<Updt>();
    });
}

/// Wakes by panicking: the waker of a select whose wake goes wrong.
struct PanickingWake;

impl std::task::Wake for PanickingWake {
    fn wake(self: std::sync::Arc<Self>) {
        panic!("a select's waker panicked");
    }
}

/// A thread's park context whose waker panics; `park` reports that the
/// thread parked and sleeps until the deadline.
struct PanickingPark(std::sync::mpsc::Sender<()>);

impl swco_channel::hook::Park for PanickingPark {
    fn waker(&self) -> std::task::Waker {
        std::task::Waker::from(std::sync::Arc::new(PanickingWake))
    }

    fn park(&self, deadline: Option<std::time::Instant>) {
        let _ = self.0.send(());
        let deadline = deadline.expect("the select waits with a deadline");
        thread::sleep(deadline.saturating_duration_since(std::time::Instant::now()));
    }
}

/// A blocking receive that queues its packet and then wakes a readiness
/// probe (a `Select` waiting for its send to be ready, registered on the
/// senders' waiter list) whose waker panics: the receive unwinds with that
/// panic, and its packet (in its frame) leaves the rendezvous first, so the
/// next send finds no receiver rather than a dead frame.
fn a_panicking_select_waker_leaves_no_receiver_queued<P: Protocol>() {
    let (tx, rx) = mpmc::bounded_with::<u64, P>(0);
    let (parked_tx, parked) = std::sync::mpsc::channel();
    let selector = {
        let tx = tx.clone();
        thread::spawn(move || {
            swco_channel::hook::set_current(Some(std::rc::Rc::new(PanickingPark(parked_tx))));
            let mut sel = swco_channel::Select::new();
            sel.send(&tx);
            // Ready or not by its deadline: the receive that made it ready
            // has left again.
            let _ = sel.ready_timeout(std::time::Duration::from_millis(300));
        })
    };
    parked.recv().expect("the select parked");
    let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rx.recv()))
        .expect_err("the select's waker panics inside the receive");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"a select's waker panicked")
    );
    assert!(
        matches!(tx.try_send(2), Err(swco_channel::TrySendError::Full(2))),
        "the unwound receive left its packet queued"
    );
    selector.join().expect("the select timed out");
}

/// A blocked select's send waits in the rendezvous, message-less; a
/// blocking receive meets it there and wakes it, and the select's waker
/// panics. The receive was chosen: it gets the message the select then
/// makes (the hand-off stands, as for any receive whose peer's waker
/// panics), and the panic goes on at its thread's next blocking operation.
fn a_panicking_select_waker_defers_in_a_receive_that_met_it<P: Protocol>() {
    let (tx, rx) = mpmc::bounded_with::<u64, P>(0);
    let (parked_tx, parked) = std::sync::mpsc::channel();
    let selector = {
        let tx = tx.clone();
        thread::spawn(move || {
            swco_channel::hook::set_current(Some(std::rc::Rc::new(PanickingPark(parked_tx))));
            select! {
                send(tx, 1) -> res => res.expect("the receiver is alive"),
                default(std::time::Duration::from_millis(300)) => panic!("a receiver met the send"),
            }
        })
    };
    parked.recv().expect("the select parked");
    assert_eq!(rx.recv(), Ok(1), "the receive gets the select's message");
    let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rx.recv_timeout(std::time::Duration::from_millis(1))
    }))
    .expect_err("the deferred panic goes on at the next blocking operation");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"a select's waker panicked")
    );
    assert!(tx.try_send(2).is_err(), "nobody left queued");
    selector.join().expect("the select sent");
}

#[test]
fn a_panicking_select_waker_unwinds_a_receive_cleanly() {
    in_child_process("a_panicking_select_waker_unwinds_a_receive_cleanly", || {
        a_panicking_select_waker_leaves_no_receiver_queued::<Cas>();
        a_panicking_select_waker_leaves_no_receiver_queued::<Updt>();
    });
}

#[test]
fn a_panicking_select_waker_is_deferred_by_the_receive_that_met_it() {
    in_child_process(
        "a_panicking_select_waker_is_deferred_by_the_receive_that_met_it",
        || {
            a_panicking_select_waker_defers_in_a_receive_that_met_it::<Cas>();
            a_panicking_select_waker_defers_in_a_receive_that_met_it::<Updt>();
        },
    );
}
