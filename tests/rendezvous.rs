//! Zero-capacity (rendezvous) channels with swco coroutines: a blocked
//! party suspends only its coroutine, hand-offs are exact, and a cancelling
//! shutdown unwinds a coroutine blocked in a rendezvous, dropping its
//! message exactly once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use swco::channel::{mpmc, spsc, Cas, Protocol, Updt};
use swco::Runtime;
use swco_test_support::DropCounter as Counted;

fn ping_pong_on_one_executor<P: Protocol>() {
    const ROUNDS: u64 = 10_000;
    let rt = Runtime::builder().executors(1).build().unwrap();
    let (ping_tx, ping_rx) = spsc::bounded_with::<u64, P>(0);
    let (pong_tx, pong_rx) = spsc::bounded_with::<u64, P>(0);
    let echo = rt
        .spawn_on(0, move || {
            let mut n = 0;
            for v in ping_rx {
                pong_tx.send(v + 1).unwrap();
                n += 1;
            }
            n
        })
        .unwrap();
    let pinger = rt
        .spawn_on(0, move || {
            let mut sum = 0;
            for i in 0..ROUNDS {
                ping_tx.send(i).unwrap();
                sum += pong_rx.recv().unwrap();
            }
            sum
        })
        .unwrap();
    assert_eq!(pinger.join().unwrap(), ROUNDS * (ROUNDS + 1) / 2);
    assert_eq!(echo.join().unwrap(), ROUNDS);
}

#[test]
fn rendezvous_ping_pong_between_coroutines_on_one_executor() {
    ping_pong_on_one_executor::<Cas>();
    ping_pong_on_one_executor::<Updt>();
}

fn many_to_many<P: Protocol>() {
    const PRODUCERS: u64 = 8;
    const PER: u64 = 2_000;
    let rt = Runtime::builder().executors(2).build().unwrap();
    let (tx, rx) = mpmc::bounded_with::<u64, P>(0);
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let tx = tx.clone();
            rt.spawn(move || {
                for i in 0..PER {
                    tx.send(p * PER + i).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let rx = rx.clone();
            rt.spawn(move || {
                rx.iter()
                    .map(|v| (1u64, v))
                    .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
            })
        })
        .collect();
    // A plain thread receives too.
    let (mut count, mut sum) = rx.iter().fold((0u64, 0u64), |a, v| (a.0 + 1, a.1 + v));
    for p in producers {
        p.join().unwrap();
    }
    for c in consumers {
        let (n, s) = c.join().unwrap();
        count += n;
        sum += s;
    }
    let total = PRODUCERS * PER;
    assert_eq!(count, total);
    assert_eq!(sum, total * (total - 1) / 2);
}

#[test]
fn rendezvous_many_coroutines_and_a_thread_exactly_once() {
    many_to_many::<Cas>();
    many_to_many::<Updt>();
}

/// Coroutines blocked in a rendezvous send (holding their message) and in
/// a rendezvous receive are unwound by a cancelling shutdown; each message
/// is dropped exactly once, and nothing is left queued.
#[test]
fn cancelling_coroutines_blocked_in_a_rendezvous_drops_each_message_once() {
    const N: usize = 50;
    let rt = Runtime::builder().executors(2).build().unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpmc::bounded::<Counted>(0);
    let (idle_tx, idle_rx) = mpmc::bounded::<Counted>(0);
    let mut handles = Vec::new();
    for _ in 0..N {
        let (tx, dropped, up) = (tx.clone(), dropped.clone(), started.clone());
        handles.push(rt.spawn(move || {
            up.fetch_add(1, Ordering::SeqCst);
            // Nobody receives: blocked until cancelled.
            let _ = tx.send(Counted(dropped));
        }));
        let (idle_rx, up) = (idle_rx.clone(), started.clone());
        handles.push(rt.spawn(move || {
            up.fetch_add(1, Ordering::SeqCst);
            // Nobody sends: blocked until cancelled.
            let _ = idle_rx.recv();
        }));
    }
    while started.load(Ordering::SeqCst) < 2 * N {
        std::thread::yield_now();
    }
    rt.shutdown_timeout(Duration::from_millis(100))
        .expect_err("the coroutines were blocked");
    for h in handles {
        assert!(h.join().unwrap_err().is_cancelled());
    }
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        N,
        "each message dropped once"
    );
    // No packet was left queued: neither side finds a partner.
    assert!(rx.try_recv().is_err());
    assert!(idle_tx.try_send(Counted(dropped.clone())).is_err());
    assert_eq!(dropped.load(Ordering::SeqCst), N + 1);
}

/// Two coroutines on one executor meet through a rendezvous channel with
/// `select!` on both ends (a selecting sender, a selecting receiver that
/// also watches a second channel), and an async-free blocking peer on the
/// second channel: every message once, in both protocols.
fn selects_meet_on_one_executor<P: Protocol>() {
    const N: u64 = 2_000;
    let rt = Runtime::builder().executors(1).build().unwrap();
    let (tx, rx) = mpmc::bounded_with::<u64, P>(0);
    let (side_tx, side_rx) = spsc::bounded_with::<u64, P>(0);
    let keep = tx.clone();
    let sender = rt
        .spawn_on(0, move || {
            for i in 0..N {
                swco::channel::select! {
                    send(tx, i) -> res => res.unwrap(),
                }
            }
        })
        .unwrap();
    let side = rt
        .spawn_on(0, move || {
            for i in 0..N {
                side_tx.send(N + i).unwrap();
            }
            side_tx
        })
        .unwrap();
    let receiver = rt
        .spawn_on(0, move || {
            let (mut count, mut sum) = (0u64, 0u64);
            while count < 2 * N {
                let v = swco::channel::select! {
                    recv(rx) -> v => v.unwrap(),
                    recv(side_rx) -> v => v.unwrap(),
                };
                count += 1;
                sum += v;
            }
            (count, sum)
        })
        .unwrap();
    sender.join().unwrap();
    let side_tx = side.join().unwrap();
    let (count, sum) = receiver.join().unwrap();
    assert_eq!(count, 2 * N);
    assert_eq!(sum, (2 * N) * (2 * N - 1) / 2);
    drop((keep, side_tx));
}

#[test]
fn selects_meet_in_a_rendezvous_between_coroutines() {
    selects_meet_on_one_executor::<Cas>();
    selects_meet_on_one_executor::<Updt>();
}
