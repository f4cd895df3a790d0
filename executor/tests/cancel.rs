//! `JoinHandle::cancel`: a coroutine not started never runs, a parked or
//! running one unwinds at its next suspension point, a finished one keeps
//! its result; channels neither lose nor duplicate a value across a cancel.
//!
//! Scenarios that would hang if a cancel were lost run in a child process
//! (see `common`), so a hang fails its own test with the child's output.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use swco_channel::mpmc;
use swco_executor::{JoinHandle, Runtime};

mod common;

use common::in_child_process;

/// Counts its drops unless it was delivered (then the receiver counts it
/// and disarms it).
struct Counted {
    drops: Arc<AtomicUsize>,
    armed: bool,
}

impl Counted {
    fn new(drops: &Arc<AtomicUsize>) -> Self {
        Counted {
            drops: drops.clone(),
            armed: true,
        }
    }

    fn delivered(mut self, deliveries: &AtomicUsize) {
        self.armed = false;
        deliveries.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if self.armed {
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn rt(executors: usize) -> Runtime {
    Runtime::builder().executors(executors).build().unwrap()
}

fn assert_cancelled<T: std::fmt::Debug>(h: JoinHandle<T>) {
    let e = h.join().expect_err("the coroutine was cancelled");
    assert!(e.is_cancelled(), "{e}");
}

/// Gives a coroutine that announced itself time to park.
fn settle() {
    thread::sleep(Duration::from_millis(20));
}

#[test]
fn cancel_before_start_drops_the_closure_unrun() {
    in_child_process("cancel_before_start_drops_the_closure_unrun", || {
        let rt = rt(1);
        let release = Arc::new(AtomicBool::new(false));
        let spinning = Arc::new(AtomicBool::new(false));
        // Holds the only executor, never suspending, so the next spawn
        // cannot start before it is cancelled.
        let hog = {
            let (release, spinning) = (release.clone(), spinning.clone());
            rt.spawn_on(0, move || {
                spinning.store(true, Ordering::SeqCst);
                while !release.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
            })
            .unwrap()
        };
        while !spinning.load(Ordering::SeqCst) {
            thread::yield_now();
        }
        let drops = Arc::new(AtomicUsize::new(0));
        let ran = Arc::new(AtomicBool::new(false));
        let guard = Counted::new(&drops);
        let h = {
            let ran = ran.clone();
            rt.spawn_on(0, move || {
                let _guard = guard;
                ran.store(true, Ordering::SeqCst);
            })
            .unwrap()
        };
        h.cancel();
        h.cancel();
        release.store(true, Ordering::SeqCst);
        hog.join().unwrap();
        assert_cancelled(h);
        assert!(
            !ran.load(Ordering::SeqCst),
            "a cancelled closure never runs"
        );
        assert_eq!(drops.load(Ordering::SeqCst), 1, "its closure dropped once");
    });
}

#[test]
fn cancel_parked_in_recv_leaves_the_message_for_another_receiver() {
    in_child_process(
        "cancel_parked_in_recv_leaves_the_message_for_another_receiver",
        || {
            for capacity in [0, 1] {
                let rt = rt(2);
                let (tx, rx) = mpmc::bounded::<u32>(capacity);
                let (ready_tx, ready_rx) = mpmc::bounded::<()>(1);
                let rx2 = rx.clone();
                let h = rt.spawn(move || {
                    ready_tx.send(()).unwrap();
                    rx.recv()
                });
                ready_rx.recv().unwrap();
                settle();
                h.cancel();
                assert_cancelled(h);
                let other = rt.spawn(move || rx2.recv().unwrap());
                tx.send(7).unwrap();
                assert_eq!(other.join().unwrap(), 7, "capacity {capacity}");
            }
        },
    );
}

#[test]
fn cancel_parked_in_send_drops_the_value_once() {
    in_child_process("cancel_parked_in_send_drops_the_value_once", || {
        for capacity in [0, 1] {
            let rt = rt(2);
            let drops = Arc::new(AtomicUsize::new(0));
            let (tx, rx) = mpmc::bounded::<Counted>(capacity);
            let (ready_tx, ready_rx) = mpmc::bounded::<()>(1);
            let d = drops.clone();
            let h = rt.spawn(move || {
                for _ in 0..capacity {
                    tx.send(Counted::new(&d)).unwrap();
                }
                ready_tx.send(()).unwrap();
                // Parks: the channel is full (or has no receiver waiting).
                let _ = tx.send(Counted::new(&d));
            });
            ready_rx.recv().unwrap();
            settle();
            h.cancel();
            assert_cancelled(h);
            assert_eq!(drops.load(Ordering::SeqCst), 1, "capacity {capacity}");
            let left = rx.try_iter().count();
            assert_eq!(left, capacity, "the buffered value stays");
            assert_eq!(drops.load(Ordering::SeqCst), 1 + capacity);
        }
    });
}

#[test]
fn cancel_parked_in_sleep_and_join() {
    in_child_process("cancel_parked_in_sleep_and_join", || {
        let rt = rt(2);
        let sleeper = rt.spawn(|| swco_executor::sleep(Duration::from_secs(3600)));
        let (tx, rx) = mpmc::bounded::<()>(1);
        let (ready_tx, ready_rx) = mpmc::bounded::<()>(1);
        let inner = rt.spawn(move || rx.recv().is_err());
        let joiner = rt.spawn(move || {
            ready_tx.send(()).unwrap();
            inner.join()
        });
        ready_rx.recv().unwrap();
        settle();
        sleeper.cancel();
        joiner.cancel();
        assert_cancelled(sleeper);
        assert_cancelled(joiner);
        // The joined coroutine is not cancelled with its joiner.
        drop(tx);
    });
}

#[test]
fn cancel_a_coroutine_that_only_yields() {
    in_child_process("cancel_a_coroutine_that_only_yields", || {
        let rt = rt(1);
        let spins = Arc::new(AtomicUsize::new(0));
        let s = spins.clone();
        let h = rt.spawn(move || loop {
            s.fetch_add(1, Ordering::Relaxed);
            swco_executor::yield_now();
        });
        while spins.load(Ordering::Relaxed) < 100 {
            thread::yield_now();
        }
        h.cancel();
        assert_cancelled(h);
    });
}

#[test]
fn cancel_from_another_coroutine() {
    in_child_process("cancel_from_another_coroutine", || {
        let rt = rt(2);
        let (_tx, rx) = mpmc::bounded::<u32>(1);
        for cpe in [0, 1] {
            let rx = rx.clone();
            let victim = rt.spawn_on(0, move || rx.recv()).unwrap();
            let canceller = rt
                .spawn_on(cpe, move || {
                    swco_executor::yield_now();
                    victim.cancel();
                    victim.join().map_err(|e| e.is_cancelled())
                })
                .unwrap();
            assert!(canceller.join().unwrap().unwrap_err(), "is_cancelled");
        }
    });
}

#[test]
fn cancel_self_unwinds_at_the_next_suspension() {
    in_child_process("cancel_self_unwinds_at_the_next_suspension", || {
        let rt = rt(1);
        let (htx, hrx) = mpmc::bounded::<Arc<JoinHandle<u32>>>(1);
        let before = Arc::new(AtomicBool::new(false));
        let after = Arc::new(AtomicBool::new(false));
        let h = {
            let (before, after) = (before.clone(), after.clone());
            Arc::new(rt.spawn(move || {
                let me = hrx.recv().unwrap();
                me.cancel();
                // Not a suspension: goes on.
                before.store(true, Ordering::SeqCst);
                swco_executor::yield_now();
                after.store(true, Ordering::SeqCst);
                5
            }))
        };
        htx.send(h.clone()).unwrap();
        assert!(h.wait_timeout(Duration::from_secs(60)));
        let h = Arc::try_unwrap(h).expect("the coroutine let go of its handle");
        assert_cancelled(h);
        assert!(before.load(Ordering::SeqCst));
        assert!(!after.load(Ordering::SeqCst), "unwound at the yield");
    });
}

#[test]
fn cancel_after_finish_keeps_the_result() {
    let rt = rt(1);
    let h = rt.spawn(|| 42);
    assert!(h.wait_timeout(Duration::from_secs(60)));
    h.cancel();
    h.cancel();
    assert_eq!(h.join().unwrap(), 42);
}

#[test]
fn a_drop_that_blocks_during_the_unwinding_still_works() {
    in_child_process(
        "a_drop_that_blocks_during_the_unwinding_still_works",
        || {
            struct Blocks {
                rx: mpmc::Receiver<u32>,
                got: Arc<AtomicUsize>,
            }
            impl Drop for Blocks {
                fn drop(&mut self) {
                    swco_executor::yield_now();
                    let v = self.rx.recv().unwrap();
                    self.got.store(v as usize, Ordering::SeqCst);
                }
            }
            let rt = rt(1);
            let got = Arc::new(AtomicUsize::new(0));
            let (tx, rx) = mpmc::bounded::<u32>(0);
            let (_never, parked_on) = mpmc::bounded::<u32>(1);
            let (ready_tx, ready_rx) = mpmc::bounded::<()>(1);
            let g = got.clone();
            let h = rt.spawn(move || {
                let _blocks = Blocks { rx, got: g };
                ready_tx.send(()).unwrap();
                parked_on.recv()
            });
            ready_rx.recv().unwrap();
            settle();
            h.cancel();
            settle();
            assert!(!h.is_finished(), "its Drop is waiting");
            h.cancel();
            tx.send(9).unwrap();
            assert_cancelled(h);
            assert_eq!(got.load(Ordering::SeqCst), 9);
        },
    );
}

/// Senders and receivers of `Counted` values on a channel of `capacity`,
/// all cancelled while they run: every value made is delivered or dropped,
/// exactly once.
fn values_are_delivered_or_dropped(capacity: usize) {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let deliveries = Arc::new(AtomicUsize::new(0));
    let made = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpmc::bounded::<Counted>(capacity);
    let mut handles = Vec::new();
    for _ in 0..4 {
        let (tx, drops, made) = (tx.clone(), drops.clone(), made.clone());
        handles.push(rt.spawn(move || loop {
            made.fetch_add(1, Ordering::SeqCst);
            if tx.send(Counted::new(&drops)).is_err() {
                return;
            }
        }));
        let (rx, deliveries) = (rx.clone(), deliveries.clone());
        handles.push(rt.spawn(move || {
            while let Ok(v) = rx.recv() {
                v.delivered(&deliveries);
            }
        }));
    }
    drop(tx);
    // Cancelled once they exchange values, so that the cancels find them
    // running and parked, not only unstarted.
    while deliveries.load(Ordering::SeqCst) < 50 {
        thread::yield_now();
    }
    for (i, h) in handles.iter().enumerate() {
        thread::sleep(Duration::from_micros(300 * (i as u64 % 3)));
        h.cancel();
    }
    for h in handles {
        // Finished on its own if the other side was all gone first.
        if let Err(e) = h.join() {
            assert!(e.is_cancelled(), "{e}");
        }
    }
    for v in rx.try_iter() {
        v.delivered(&deliveries);
    }
    drop(rx);
    let (made, drops, deliveries) = (
        made.load(Ordering::SeqCst),
        drops.load(Ordering::SeqCst),
        deliveries.load(Ordering::SeqCst),
    );
    assert_eq!(
        drops + deliveries,
        made,
        "capacity {capacity}: {drops} dropped + {deliveries} delivered"
    );
}

#[test]
fn a_cancelled_senders_value_is_delivered_or_dropped_buffered() {
    in_child_process(
        "a_cancelled_senders_value_is_delivered_or_dropped_buffered",
        || {
            for _ in 0..20 {
                values_are_delivered_or_dropped(4);
            }
        },
    );
}

#[test]
fn a_cancelled_senders_value_is_delivered_or_dropped_rendezvous() {
    in_child_process(
        "a_cancelled_senders_value_is_delivered_or_dropped_rendezvous",
        || {
            for _ in 0..20 {
                values_are_delivered_or_dropped(0);
            }
        },
    );
}

#[test]
fn many_ping_pongs_cancelled_from_two_threads() {
    in_child_process("many_ping_pongs_cancelled_from_two_threads", || {
        const PAIRS: usize = 200;
        let rt = rt(2);
        let drops = Arc::new(AtomicUsize::new(0));
        let deliveries = Arc::new(AtomicUsize::new(0));
        let made = Arc::new(AtomicUsize::new(0));
        let guards = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        for pair in 0..PAIRS {
            let capacity = pair % 2;
            let (ping_tx, ping_rx) = mpmc::bounded::<Counted>(capacity);
            let (pong_tx, pong_rx) = mpmc::bounded::<Counted>(capacity);
            let (d, dl, m, g) = (
                drops.clone(),
                deliveries.clone(),
                made.clone(),
                guards.clone(),
            );
            // Made outside the closure: dropped whether it starts or not.
            let guard = Guard(g);
            handles.push(rt.spawn(move || {
                let _guard = guard;
                let mut rounds = 0u64;
                loop {
                    m.fetch_add(1, Ordering::SeqCst);
                    if ping_tx.send(Counted::new(&d)).is_err() {
                        return rounds;
                    }
                    match pong_rx.recv() {
                        Ok(v) => v.delivered(&dl),
                        Err(_) => return rounds,
                    }
                    rounds += 1;
                }
            }));
            let (d, dl, m, g) = (
                drops.clone(),
                deliveries.clone(),
                made.clone(),
                guards.clone(),
            );
            // Made outside the closure: dropped whether it starts or not.
            let guard = Guard(g);
            handles.push(rt.spawn(move || {
                let _guard = guard;
                let mut rounds = 0u64;
                while let Ok(v) = ping_rx.recv() {
                    v.delivered(&dl);
                    m.fetch_add(1, Ordering::SeqCst);
                    if pong_tx.send(Counted::new(&d)).is_err() {
                        break;
                    }
                    rounds += 1;
                }
                rounds
            }));
        }
        settle();
        let handles = Arc::new(handles);
        let cancellers: Vec<_> = (0..2)
            .map(|t| {
                let handles = handles.clone();
                thread::spawn(move || {
                    // Both threads cancel every coroutine, in opposite
                    // orders: each is cancelled twice, concurrently.
                    let n = handles.len();
                    for i in 0..n {
                        let i = if t == 0 { i } else { n - 1 - i };
                        handles[i].cancel();
                    }
                })
            })
            .collect();
        for c in cancellers {
            c.join().unwrap();
        }
        let handles = Arc::try_unwrap(handles).unwrap();
        let mut cancelled = 0;
        for h in handles {
            // Ok: its partner was cancelled first, and it saw the
            // channel closed before its own cancel came.
            if let Err(e) = h.join() {
                assert!(e.is_cancelled(), "{e}");
                cancelled += 1;
            }
        }
        assert!(cancelled >= PAIRS, "at least one of each pair: {cancelled}");
        assert_eq!(
            guards.load(Ordering::SeqCst),
            2 * PAIRS,
            "every stack unwound once"
        );
        let (made, drops, deliveries) = (
            made.load(Ordering::SeqCst),
            drops.load(Ordering::SeqCst),
            deliveries.load(Ordering::SeqCst),
        );
        assert_eq!(
            drops + deliveries,
            made,
            "{drops} dropped + {deliveries} delivered"
        );
    });
}

/// Counts the unwinding (or end) of a coroutine's stack.
struct Guard(Arc<AtomicUsize>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A cancel that reaches a coroutine while another coroutine of its
/// executor is parked mid-unwind cannot be raised then (a second panic on
/// a panicking thread aborts): it is raised once that unwinding is over.
#[test]
fn a_cancel_put_off_by_another_unwinding_is_not_lost() {
    in_child_process("a_cancel_put_off_by_another_unwinding_is_not_lost", || {
        struct Blocks(mpmc::Receiver<u32>);
        impl Drop for Blocks {
            fn drop(&mut self) {
                let _ = self.0.recv();
            }
        }
        let rt = rt(1);
        let (release, held) = mpmc::bounded::<u32>(1);
        let (_never, parked_on) = mpmc::bounded::<u32>(1);
        let (ready_tx, ready_rx) = mpmc::bounded::<()>(2);
        let unwinding = {
            let (parked_on, ready_tx) = (parked_on.clone(), ready_tx.clone());
            rt.spawn(move || {
                let _blocks = Blocks(held);
                ready_tx.send(()).unwrap();
                parked_on.recv()
            })
        };
        let victim = rt.spawn(move || {
            ready_tx.send(()).unwrap();
            parked_on.recv()
        });
        ready_rx.recv().unwrap();
        ready_rx.recv().unwrap();
        settle();
        unwinding.cancel();
        settle();
        assert!(!unwinding.is_finished(), "parked in its Drop, mid-unwind");
        victim.cancel();
        settle();
        release.send(1).unwrap();
        assert_cancelled(unwinding);
        assert_cancelled(victim);
    });
}

/// Coroutines spawned from a plain thread share its home executor, and the
/// other one steals the unstarted ones: cancels racing with the steals,
/// the starts and the parks reach exactly the coroutines cancelled.
#[test]
fn cancels_race_with_steals() {
    in_child_process("cancels_race_with_steals", || {
        const N: usize = 400;
        let rt = rt(2);
        let guards = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpmc::bounded::<()>(1);
        let mut handles = Vec::new();
        for i in 0..N {
            let guard = Guard(guards.clone());
            let rx = rx.clone();
            handles.push(rt.spawn(move || {
                let _guard = guard;
                swco_executor::yield_now();
                let _ = rx.recv();
                i
            }));
            if i % 2 == 1 {
                handles[i - 1].cancel();
            }
        }
        drop(rx);
        settle();
        drop(tx);
        for (i, h) in handles.into_iter().enumerate() {
            match h.join() {
                Ok(v) => assert!(i % 2 == 1 && v == i, "coroutine {i} was cancelled"),
                Err(e) => assert!(i % 2 == 0 && e.is_cancelled(), "coroutine {i}: {e}"),
            }
        }
        assert_eq!(
            guards.load(Ordering::SeqCst),
            N,
            "every closure dropped once"
        );
        // Not asserted (stealing is a matter of timing): shown.
        let started: Vec<u64> = rt.stats().executors.iter().map(|e| e.spawned).collect();
        eprintln!("coroutines started per executor: {started:?}");
    });
}
