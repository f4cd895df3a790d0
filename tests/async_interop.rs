//! Async endpoints meet swco coroutines: tasks of a tokio `current_thread`
//! runtime (on the test's thread) and coroutines on the swco executors
//! exchange messages through mpmc channels, in both directions, with exact
//! counts. A coroutine blocked in `send`/`recv` is woken by a future's
//! progress (from the tokio thread), and a pending future by a coroutine's
//! (from an executor thread).

use std::ops::Range;

use swco::channel::{mpmc, Cas, Protocol, Updt};
use swco::{JoinHandle, Runtime};

const PER: u64 = 2_000;

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// Each value in `0..total` exactly once.
fn check_exactly_once(received: impl IntoIterator<Item = Vec<u64>>, total: u64) {
    let mut all: Vec<u64> = received.into_iter().flatten().collect();
    assert_eq!(all.iter().sum::<u64>(), total * (total - 1) / 2, "sum");
    all.sort_unstable();
    assert_eq!(all, (0..total).collect::<Vec<_>>(), "not exactly once");
}

/// Coroutines on `rt`, one per producer number in `ids`, each sending its
/// `PER` messages on `tx`.
fn co_producers<P: Protocol>(
    rt: &Runtime,
    tx: &mpmc::Sender<u64, P>,
    ids: Range<u64>,
) -> Vec<JoinHandle<()>> {
    ids.map(|p| {
        let tx = tx.clone();
        rt.spawn(move || {
            for i in 0..PER {
                tx.send(p * PER + i).unwrap();
            }
        })
    })
    .collect()
}

/// Two coroutines on `rt`, each receiving from `rx` until it disconnects.
fn co_consumers<P: Protocol>(
    rt: &Runtime,
    rx: &mpmc::Receiver<u64, P>,
) -> Vec<JoinHandle<Vec<u64>>> {
    (0..2)
        .map(|_| {
            let rx = rx.clone();
            rt.spawn(move || rx.iter().collect::<Vec<_>>())
        })
        .collect()
}

fn join_coroutines<T>(handles: Vec<JoinHandle<T>>) -> Vec<T> {
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// On a fresh tokio runtime: two tasks send producers 0 and 1's `PER`
/// messages each on `tx` with `send_async`, and two tasks receive from `rx`
/// with `recv_async` until it disconnects. What the receiving tasks got.
fn tasks_exchange<P: Protocol>(
    tx: mpmc::Sender<u64, P>,
    rx: mpmc::Receiver<u64, P>,
) -> Vec<Vec<u64>> {
    tokio_rt().block_on(async move {
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let tx = tx.clone();
                tokio::spawn(async move {
                    for i in 0..PER {
                        tx.send_async(p * PER + i).await.unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let rx = rx.clone();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    while let Ok(v) = rx.recv_async().await {
                        got.push(v);
                    }
                    got
                })
            })
            .collect();
        drop(rx);
        for p in producers {
            p.await.unwrap();
        }
        let mut received = Vec::new();
        for c in consumers {
            received.push(c.await.unwrap());
        }
        received
    })
}

/// One capacity-1 mpmc channel, with tokio tasks and swco coroutines on
/// *both* sides: producers 0, 1 are tasks and 2, 3 coroutines; consumers
/// likewise. Whoever takes a message, every one arrives exactly once.
fn one_channel_both_sides<P: Protocol>() {
    let rt = Runtime::builder().executors(2).build().unwrap();
    let (tx, rx) = mpmc::bounded_with::<u64, P>(1);

    let co_producers = co_producers(&rt, &tx, 2..4);
    let co_consumers = co_consumers(&rt, &rx);

    let from_tasks = tasks_exchange(tx, rx);

    join_coroutines(co_producers);
    let from_coroutines = join_coroutines(co_consumers);
    let crossed = from_tasks
        .iter()
        .flatten()
        .filter(|&&v| v >= 2 * PER)
        .count()
        + from_coroutines
            .iter()
            .flatten()
            .filter(|&&v| v < 2 * PER)
            .count();
    eprintln!(
        "{}: {crossed} messages crossed between tasks and coroutines",
        P::NAME
    );
    check_exactly_once(from_tasks.into_iter().chain(from_coroutines), 4 * PER);
    rt.shutdown();
}

#[test]
fn one_channel_both_sides_cas() {
    one_channel_both_sides::<Cas>();
}

#[test]
fn one_channel_both_sides_updt() {
    one_channel_both_sides::<Updt>();
}

/// Two capacity-1 mpmc channels, one per direction, at once: tasks to
/// coroutines on `down`, coroutines to tasks on `up`. Every message crosses
/// between the two worlds.
fn both_directions<P: Protocol>() {
    let rt = Runtime::builder().executors(2).build().unwrap();
    let (down_tx, down_rx) = mpmc::bounded_with::<u64, P>(1);
    let (up_tx, up_rx) = mpmc::bounded_with::<u64, P>(1);

    // Coroutines: two consumers of `down`, two producers on `up`.
    let co_consumers = co_consumers(&rt, &down_rx);
    drop(down_rx);
    let co_producers = co_producers(&rt, &up_tx, 0..2);
    drop(up_tx);

    let up_received = tasks_exchange(down_tx, up_rx);

    join_coroutines(co_producers);
    let down_received = join_coroutines(co_consumers);
    check_exactly_once(down_received, 2 * PER);
    check_exactly_once(up_received, 2 * PER);
    rt.shutdown();
}

#[test]
fn both_directions_cas() {
    both_directions::<Cas>();
}

#[test]
fn both_directions_updt() {
    both_directions::<Updt>();
}
