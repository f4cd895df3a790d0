//! Async endpoints meet swco coroutines: tasks of a tokio `current_thread`
//! runtime (on the test's thread) and coroutines on the swco executors
//! exchange messages through mpmc channels, in both directions, with exact
//! counts. A coroutine blocked in `send`/`recv` is woken by a future's
//! progress (from the tokio thread), and a pending future by a coroutine's
//! (from an executor thread).

use swco::channel::{mpmc, Cas, Protocol, Updt};
use swco::Runtime;

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

/// One capacity-1 mpmc channel, with tokio tasks and swco coroutines on
/// *both* sides: producers 0, 1 are tasks and 2, 3 coroutines; consumers
/// likewise. Whoever takes a message, every one arrives exactly once.
fn one_channel_both_sides<P: Protocol>() {
    let rt = Runtime::builder().executors(2).build().unwrap();
    let (tx, rx) = mpmc::bounded_with::<u64, P>(1);

    let co_producers: Vec<_> = (2..4)
        .map(|p| {
            let tx = tx.clone();
            rt.spawn(move || {
                for i in 0..PER {
                    tx.send(p * PER + i).unwrap();
                }
            })
        })
        .collect();
    let co_consumers: Vec<_> = (0..2)
        .map(|_| {
            let rx = rx.clone();
            rt.spawn(move || rx.iter().collect::<Vec<_>>())
        })
        .collect();

    let from_tasks = tokio_rt().block_on(async move {
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
    });

    for p in co_producers {
        p.join().unwrap();
    }
    let from_coroutines: Vec<_> = co_consumers
        .into_iter()
        .map(|c| c.join().unwrap())
        .collect();
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
    let co_consumers: Vec<_> = (0..2)
        .map(|_| {
            let rx = down_rx.clone();
            rt.spawn(move || rx.iter().collect::<Vec<_>>())
        })
        .collect();
    drop(down_rx);
    let co_producers: Vec<_> = (0..2)
        .map(|p| {
            let tx = up_tx.clone();
            rt.spawn(move || {
                for i in 0..PER {
                    tx.send(p * PER + i).unwrap();
                }
            })
        })
        .collect();
    drop(up_tx);

    let up_received = tokio_rt().block_on(async move {
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let tx = down_tx.clone();
                tokio::spawn(async move {
                    for i in 0..PER {
                        tx.send_async(p * PER + i).await.unwrap();
                    }
                })
            })
            .collect();
        drop(down_tx);
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let rx = up_rx.clone();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    while let Ok(v) = rx.recv_async().await {
                        got.push(v);
                    }
                    got
                })
            })
            .collect();
        drop(up_rx);
        for p in producers {
            p.await.unwrap();
        }
        let mut received = Vec::new();
        for c in consumers {
            received.push(c.await.unwrap());
        }
        received
    });

    for p in co_producers {
        p.join().unwrap();
    }
    let down_received: Vec<_> = co_consumers
        .into_iter()
        .map(|c| c.join().unwrap())
        .collect();
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
