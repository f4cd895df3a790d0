//! `Select` and `select!` from plain threads: every arm kind, readiness of
//! disconnected channels, exactly once over several producers and selecting
//! consumers, a drop-counted soak, fairness, wake-ups, and no registration
//! left behind by a timed-out select.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{Census, Counted, HANG_GUARD};
use swco_channel::{
    bounded_in, mpmc, mpsc, select, spmc, spsc, Cas, Mode, Mpmc, Protocol, ReadyTimeoutError,
    RecvError, Select, SelectTimeoutError, SendError, TryReadyError, TrySelectError, TrySendError,
    Updt,
};
use swco_test_support::cas_and_updt;

/// Runs `f` on its own thread and fails the test if it takes longer than
/// [`HANG_GUARD`] (a lost wake-up would otherwise hang the suite).
fn within<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(HANG_GUARD) {
        Ok(()) => t.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            // The thread panicked: pass its panic on.
            match t.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(_) => unreachable!("finished without reporting"),
            }
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("hung (lost wake-up?)"),
    }
}

/// Receives once from `rx1` or `rx2` (which may be the same endpoint), with
/// the `select!` macro or else with a `Select`.
fn select_recv<T, M: Mode, P: Protocol>(
    by_macro: bool,
    rx1: &swco_channel::Receiver<T, M, P>,
    rx2: &swco_channel::Receiver<T, M, P>,
) -> T {
    if by_macro {
        select! {
            recv(rx1) -> m => m.unwrap(),
            recv(rx2) -> m => m.unwrap(),
        }
    } else {
        let mut sel = Select::new();
        let first = sel.recv(rx1);
        sel.recv(rx2);
        let oper = sel.select();
        if oper.index() == first {
            oper.recv(rx1).unwrap()
        } else {
            oper.recv(rx2).unwrap()
        }
    }
}

// ---- the macro ---------------------------------------------------------

#[test]
fn macro_recv_arms_blocks_and_expressions() {
    let (tx1, rx1) = spsc::bounded_with::<i32, Updt>(1);
    let (tx2, rx2) = mpmc::bounded::<&str>(1);
    tx1.send(1).unwrap();
    // Expression body, trailing comma.
    let got = select! {
        recv(rx1) -> m => m.unwrap() * 10,
        recv(rx2) -> _ => unreachable!(),
    };
    assert_eq!(got, 10);
    tx2.send("x").unwrap();
    // Block bodies, no commas, no trailing comma; the endpoint as a reference.
    let r2 = &rx2;
    let got = select! {
        recv(rx1) -> _m => { unreachable!() }
        recv(r2) -> m => { m.unwrap() }
    };
    assert_eq!(got, "x");
    // A pattern in the binding.
    tx1.send(5).unwrap();
    select! {
        recv(rx1) -> mut m => {
            m = m.map(|v| v + 1);
            assert_eq!(m, Ok(6));
        }
    }
}

#[test]
fn macro_send_arms() {
    let (tx1, rx1) = mpsc::bounded_with::<String, Updt>(1);
    let (tx2, rx2) = spmc::bounded::<u8>(1);
    tx2.send(0).unwrap(); // full: the send arm on tx2 is not ready
    let s = String::from("hello");
    select! {
        send(tx1, s) -> res => assert_eq!(res, Ok(())),
        send(tx2, 9) -> _ => unreachable!(),
    }
    assert_eq!(rx1.recv().unwrap(), "hello");
    assert_eq!(rx2.recv().unwrap(), 0);
}

#[test]
fn macro_send_arm_gives_value_back_on_disconnection() {
    let (tx, rx) = mpmc::bounded::<String>(1);
    drop(rx);
    let back = select! {
        send(tx, "kept".to_string()) -> res => match res {
            Err(SendError(v)) => v,
            Ok(()) => unreachable!(),
        }
    };
    assert_eq!(back, "kept");
}

#[test]
fn macro_recv_on_disconnected_channel_is_ready() {
    let (tx, rx) = spsc::bounded::<i32>(1);
    let (_tx2, rx2) = mpmc::bounded::<i32>(1);
    drop(tx);
    let r = select! {
        recv(rx) -> m => m,
        recv(rx2) -> _ => unreachable!(),
    };
    assert_eq!(r, Err(RecvError));
}

#[test]
fn macro_default_and_default_timeout() {
    let (tx, rx) = mpmc::bounded_with::<i32, Updt>(1);
    let hit = select! {
        recv(rx) -> _ => false,
        default => true,
    };
    assert!(hit);
    // `default` first, block body.
    let hit = select! {
        default => { 1 }
        recv(rx) -> _ => 2,
    };
    assert_eq!(hit, 1);
    let start = Instant::now();
    let hit = select! {
        recv(rx) -> _ => false,
        default(Duration::from_millis(20)) => true,
    };
    assert!(hit);
    assert!(start.elapsed() >= Duration::from_millis(20));
    // A default that is not taken.
    tx.send(3).unwrap();
    let got = select! {
        recv(rx) -> m => m.unwrap(),
        default(Duration::from_secs(100)) => unreachable!(),
    };
    assert_eq!(got, 3);
    // Only a default.
    assert_eq!(select! { default => 7 }, 7);
    assert_eq!(select! { default(Duration::from_millis(1)) => 8, }, 8);
}

#[test]
fn macro_bodies_act_on_enclosing_code() {
    let (tx, rx) = spsc::bounded::<i32>(4);
    for i in 0..3 {
        tx.send(i).unwrap();
    }
    drop(tx);
    let mut seen = Vec::new();
    loop {
        select! {
            recv(rx) -> m => match m {
                Ok(v) => seen.push(v),
                Err(_) => break,
            },
        }
    }
    assert_eq!(seen, [0, 1, 2]);

    fn first(rx: &mpsc::Receiver<i32>) -> Result<i32, RecvError> {
        loop {
            select! {
                recv(rx) -> m => return Ok(m? + 1),
                default => thread::yield_now(),
            }
        }
    }
    let (tx, rx) = mpsc::bounded(1);
    tx.send(1).unwrap();
    assert_eq!(first(&rx), Ok(2));
}

#[test]
fn macro_send_value_is_made_only_when_there_is_room() {
    let (tx, _rx) = mpmc::bounded::<i32>(1);
    tx.send(0).unwrap(); // full
    let made = std::cell::Cell::new(false);
    let r = select! {
        send(tx, { made.set(true); 1 }) -> _ => 1,
        default => 0,
    };
    assert_eq!(r, 0);
    assert!(
        !made.get(),
        "the message of a send that was not ready was made"
    );
}

#[test]
fn macro_blocks_until_a_send_arrives() {
    within(|| {
        let (tx1, rx1) = spsc::bounded::<i32>(1);
        let (tx2, rx2) = mpmc::bounded_with::<i32, Updt>(1);
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            tx2.send(2).unwrap();
            tx1
        });
        let got = select! {
            recv(rx1) -> _ => unreachable!(),
            recv(rx2) -> m => m.unwrap(),
        };
        assert_eq!(got, 2);
        drop(t.join().unwrap());
    });
}

#[test]
fn macro_send_arm_blocks_until_room() {
    within(|| {
        let (tx1, rx1) = mpmc::bounded::<i32>(1);
        let (tx2, rx2) = spsc::bounded_with::<i32, Updt>(1);
        tx1.send(0).unwrap();
        tx2.send(0).unwrap();
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            assert_eq!(rx2.recv(), Ok(0));
            rx2
        });
        let which = select! {
            send(tx1, 1) -> _ => 1,
            send(tx2, 2) -> res => { res.unwrap(); 2 }
        };
        assert_eq!(which, 2);
        let rx2 = t.join().unwrap();
        assert_eq!(rx2.recv(), Ok(2));
        assert_eq!(rx1.recv(), Ok(0));
    });
}

#[test]
fn empty_select_with_default_timeout_waits() {
    let start = Instant::now();
    select! { default(Duration::from_millis(10)) => {} }
    assert!(start.elapsed() >= Duration::from_millis(10));
}

// ---- the struct --------------------------------------------------------

/// Receivers behind an `Arc`, `Rc` or `Box` are added as they are, as
/// with a method that names the receiver type (deref would not reach a
/// generic one), and `SelectedOperation::recv` takes them the same way.
#[test]
fn select_struct_takes_receivers_behind_pointers() {
    let (tx1, rx1) = mpmc::bounded::<u32>(1);
    let (tx2, rx2) = spsc::bounded::<u32>(1);
    let (tx3, rx3) = mpmc::bounded::<u32>(1);
    let rx1 = Arc::new(rx1);
    let rx2 = std::rc::Rc::new(rx2);
    let rx3 = Box::new(rx3);
    for (i, tx) in [&tx1, &tx3].into_iter().enumerate() {
        tx.send(i as u32 * 10).unwrap();
    }
    tx2.send(5).unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        let mut sel = Select::new();
        let a = sel.recv(&rx1);
        let b = sel.recv(&rx2);
        let c = sel.recv(&rx3);
        let oper = sel.select();
        got.push(match oper.index() {
            i if i == a => oper.recv(&rx1).unwrap(),
            i if i == b => oper.recv(&rx2).unwrap(),
            i if i == c => oper.recv(&rx3).unwrap(),
            _ => unreachable!(),
        });
    }
    got.sort_unstable();
    assert_eq!(got, [0, 5, 10]);
}

#[test]
fn select_struct_recv_and_send() {
    let (tx1, rx1) = spsc::bounded_with::<i32, Updt>(1);
    let (tx2, rx2) = mpmc::bounded::<String>(1);
    let mut sel = Select::new();
    let a = sel.recv(&rx1);
    let b = sel.send(&tx2);
    // Only the send is ready.
    let oper = sel.try_select().unwrap();
    assert_eq!(oper.index(), b);
    oper.send(&tx2, "x".to_string()).unwrap();
    // Now neither.
    assert_eq!(sel.try_select().err(), Some(TrySelectError));
    assert_eq!(sel.try_ready(), Err(TryReadyError));
    assert_eq!(
        sel.select_timeout(Duration::from_millis(5)).err(),
        Some(SelectTimeoutError)
    );
    assert_eq!(
        sel.ready_timeout(Duration::from_millis(5)),
        Err(ReadyTimeoutError)
    );
    tx1.send(4).unwrap();
    assert_eq!(sel.ready(), a);
    let oper = sel.select();
    assert_eq!(oper.index(), a);
    assert_eq!(oper.recv(&rx1), Ok(4));
    assert_eq!(rx2.recv().unwrap(), "x");
    // Removing an operation keeps the other's index.
    sel.remove(a);
    let oper = sel.select();
    assert_eq!(oper.index(), b);
    oper.send(&tx2, "y".into()).unwrap();
    // Disconnected: the send is ready and gives the value back.
    drop(rx2);
    let oper = sel.select();
    assert_eq!(oper.send(&tx2, "z".into()), Err(SendError("z".to_string())));
}

#[test]
fn select_struct_recv_disconnected() {
    let (tx, rx) = mpsc::bounded_with::<i32, Updt>(2);
    tx.send(1).unwrap();
    drop(tx);
    let mut sel = Select::new_biased();
    sel.recv(&rx);
    assert_eq!(sel.select().recv(&rx), Ok(1));
    assert_eq!(sel.select().recv(&rx), Err(RecvError));
    assert_eq!(sel.try_ready(), Ok(0));
}

#[test]
#[should_panic(expected = "passed a receiver that wasn't selected")]
fn select_struct_wrong_receiver_panics() {
    let (tx1, rx1) = mpmc::bounded::<i32>(1);
    let (_tx2, rx2) = mpmc::bounded::<i32>(1);
    tx1.send(1).unwrap();
    let mut sel = Select::new();
    sel.recv(&rx1);
    let _ = sel.select().recv(&rx2);
}

/// As crossbeam accepts since its issue #1096: a selected operation may be
/// completed through a clone of the endpoint it was added for (the same
/// channel), for a receive and for a send; a sender of another channel
/// still panics.
#[test]
fn select_struct_accepts_a_clone_of_the_selected_endpoint() {
    let (tx, rx) = mpmc::bounded::<i32>(1);
    let (tx2, rx2) = (tx.clone(), rx.clone());
    let mut sel = Select::new();
    sel.send(&tx);
    sel.select().send(&tx2, 7).unwrap();
    let mut sel = Select::new();
    sel.recv(&rx);
    assert_eq!(sel.select().recv(&rx2), Ok(7));
    let (other, _other_rx) = mpmc::bounded::<i32>(1);
    let mut sel = Select::new();
    sel.send(&tx);
    let oper = sel.select();
    let wrong = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| oper.send(&other, 1)));
    let payload = wrong.expect_err("a sender of another channel");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"passed a sender that wasn't selected")
    );
}

#[test]
fn selected_message_is_held_for_its_taker() {
    // Two consumers of one mpmc channel: the one that selected the message
    // gets it, even if the other receives in between.
    let (tx, rx) = mpmc::bounded::<i32>(4);
    let rx2 = rx.clone();
    tx.send(1).unwrap();
    tx.send(2).unwrap();
    let mut sel = Select::new();
    sel.recv(&rx);
    let oper = sel.select();
    assert_eq!(rx2.recv(), Ok(2));
    assert_eq!(oper.recv(&rx), Ok(1));
}

#[test]
fn unfinished_selected_operation_drops_its_message() {
    let census = Census::new();
    let (tx, rx) = mpmc::bounded::<Counted<u8>>(2);
    tx.send(Counted::new(1, &census)).unwrap();
    tx.send(Counted::new(2, &census)).unwrap();
    let mut sel = Select::new();
    sel.recv(&rx);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let oper = sel.select();
        drop(oper);
    }));
    // Crossbeam panics; so do we, in a debug build. Either way the message
    // the selection took is dropped, once.
    assert_eq!(outcome.is_err(), cfg!(debug_assertions));
    assert_eq!(census.dropped(), 1);
    // The next select is clean and gets the next message.
    assert_eq!(sel.select().recv(&rx).unwrap().value, 2);
    assert_eq!(census.dropped(), 2);
}

// ---- exactly once -------------------------------------------------------

/// A thread sending `base..base + per` on `tx`.
fn producer<M: Mode, P: Protocol>(
    tx: swco_channel::Sender<u64, M, P>,
    base: u64,
    per: u64,
) -> thread::JoinHandle<()>
where
    swco_channel::Sender<u64, M, P>: Send,
{
    thread::spawn(move || {
        for i in 0..per {
            tx.send(base + i).unwrap();
        }
    })
}

/// `producers` threads per channel, each sending `per` numbered messages,
/// over a spsc-Updt, an mpsc-Cas, an spmc-Updt and an mpmc-Cas channel... as
/// far as the modes allow: single-sender channels get one producer.
/// `consumers` threads select over all four (half with the macro, half with
/// `Select`); every message is received exactly once.
fn exactly_once_over_mixed_channels(consumers: usize, per: u64) {
    within(move || {
        let (tx_a, rx_a) = spsc::bounded_with::<u64, Updt>(2);
        let (tx_b, rx_b) = mpsc::bounded::<u64>(3);
        let (tx_c, rx_c) = spmc::bounded_with::<u64, Updt>(1);
        let (tx_d, rx_d) = mpmc::bounded::<u64>(4);
        // Single-receiver channels (a, b) can have one consumer: consumer 0
        // takes those and the shared ones; the others select over c and d.
        let mut producers = Vec::new();
        let mut id = 0u64;
        let mut next = || {
            id += 1;
            id << 32
        };
        producers.push(producer(tx_a, next(), per));
        for _ in 0..3 {
            producers.push(producer(tx_b.clone(), next(), per));
        }
        drop(tx_b);
        producers.push(producer(tx_c, next(), per));
        for _ in 0..3 {
            producers.push(producer(tx_d.clone(), next(), per));
        }
        drop(tx_d);
        let n_producers = producers.len() as u64;

        let mut handles = Vec::new();
        for c in 1..consumers {
            let (rx_c, rx_d) = (rx_c.clone(), rx_d.clone());
            handles.push(thread::spawn(move || {
                let mut got = Vec::new();
                let (mut c_open, mut d_open) = (true, true);
                while c_open || d_open {
                    if c % 2 == 0 {
                        select! {
                            recv(rx_c) -> m => match m { Ok(v) => got.push(v), Err(_) => c_open = false },
                            recv(rx_d) -> m => match m { Ok(v) => got.push(v), Err(_) => d_open = false },
                        }
                    } else {
                        let mut sel = Select::new();
                        let ic = sel.recv(&rx_c);
                        let _id = sel.recv(&rx_d);
                        let oper = sel.select();
                        if oper.index() == ic {
                            match oper.recv(&rx_c) {
                                Ok(v) => got.push(v),
                                Err(_) => c_open = false,
                            }
                        } else {
                            match oper.recv(&rx_d) {
                                Ok(v) => got.push(v),
                                Err(_) => d_open = false,
                            }
                        }
                    }
                }
                got
            }));
        }
        // Consumer 0, here: all four channels, with a reused `Select` whose
        // finished operations are removed.
        let mut got = Vec::new();
        {
            let mut sel = Select::new();
            let ops = [
                sel.recv(&rx_a),
                sel.recv(&rx_b),
                sel.recv(&rx_c),
                sel.recv(&rx_d),
            ];
            let mut open = 4;
            while open > 0 {
                let oper = sel.select();
                let i = oper.index();
                let r = if i == ops[0] {
                    oper.recv(&rx_a)
                } else if i == ops[1] {
                    oper.recv(&rx_b)
                } else if i == ops[2] {
                    oper.recv(&rx_c)
                } else {
                    oper.recv(&rx_d)
                };
                match r {
                    Ok(v) => got.push(v),
                    Err(RecvError) => {
                        sel.remove(i);
                        open -= 1;
                    }
                }
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        let mut all = got;
        for h in handles {
            all.extend(h.join().unwrap());
        }
        assert_eq!(all.len() as u64, n_producers * per, "count");
        let sum: u64 = all.iter().sum();
        let expected: u64 = (1..=n_producers)
            .map(|p| (p << 32) * per + per * (per - 1) / 2)
            .sum();
        assert_eq!(sum, expected, "sum");
        let distinct: HashSet<u64> = all.iter().copied().collect();
        assert_eq!(distinct.len(), all.len(), "a message received twice");
    });
}

#[test]
fn exactly_once_one_selecting_consumer() {
    exactly_once_over_mixed_channels(1, 20_000);
}

#[test]
fn exactly_once_several_selecting_consumers() {
    exactly_once_over_mixed_channels(5, 20_000);
}

/// Selecting senders and selecting receivers at once, both protocols: each
/// producer selects a send over two mpmc channels, each consumer selects a
/// receive over both.
fn select_both_ends<P: Protocol>() {
    within(|| {
        const PRODUCERS: u64 = 3;
        const CONSUMERS: usize = 3;
        const PER: u64 = 20_000;
        let (tx1, rx1) = mpmc::bounded_with::<u64, P>(2);
        let (tx2, rx2) = mpmc::bounded_with::<u64, P>(1);
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let (tx1, tx2) = (tx1.clone(), tx2.clone());
                thread::spawn(move || {
                    for i in 0..PER {
                        let v = p * PER + i;
                        if i % 2 == 0 {
                            select! {
                                send(tx1, v) -> r => r.unwrap(),
                                send(tx2, v) -> r => r.unwrap(),
                            }
                        } else {
                            let mut sel = Select::new();
                            let a = sel.send(&tx1);
                            sel.send(&tx2);
                            let oper = sel.select();
                            if oper.index() == a {
                                oper.send(&tx1, v).unwrap();
                            } else {
                                oper.send(&tx2, v).unwrap();
                            }
                        }
                    }
                })
            })
            .collect();
        drop((tx1, tx2));
        let consumers: Vec<_> = (0..CONSUMERS)
            .map(|_| {
                let (rx1, rx2) = (rx1.clone(), rx2.clone());
                thread::spawn(move || {
                    let (mut n, mut sum, mut open) = (0u64, 0u64, 2);
                    let (mut o1, mut o2) = (true, true);
                    while open > 0 {
                        let r = select! {
                            recv(rx1) -> m => m.map_err(|_| 1),
                            recv(rx2) -> m => m.map_err(|_| 2),
                        };
                        match r {
                            Ok(v) => {
                                n += 1;
                                sum += v;
                            }
                            Err(1) if o1 => {
                                o1 = false;
                                open -= 1;
                            }
                            Err(2) if o2 => {
                                o2 = false;
                                open -= 1;
                            }
                            Err(_) => {}
                        }
                    }
                    (n, sum)
                })
            })
            .collect();
        drop((rx1, rx2));
        for p in producers {
            p.join().unwrap();
        }
        let (mut n, mut sum) = (0, 0);
        for c in consumers {
            let (cn, cs) = c.join().unwrap();
            n += cn;
            sum += cs;
        }
        let total = PRODUCERS * PER;
        assert_eq!(n, total);
        assert_eq!(sum, total * (total - 1) / 2);
    });
}

cas_and_updt!(select_both_ends(): select_on_both_ends_cas, select_on_both_ends_updt);

/// Soak: drop-counted payloads over channels of several modes; consumers
/// select for a while and then leave, dropping their receivers with
/// messages still buffered. Every message is received exactly once or
/// dropped exactly once (by the channel, or handed back to its sender).
fn drop_counted_soak<P: Protocol>() {
    within(|| {
        let census = Census::new();
        let received = Arc::new(AtomicUsize::new(0));
        let ids = Arc::new(Mutex::new(HashSet::new()));
        for round in 0..20u64 {
            let (tx1, rx1) = mpmc::bounded_with::<Counted<u64>, P>(3);
            let (tx2, rx2) = mpsc::bounded_with::<Counted<u64>, P>(2);
            let (tx3, rx3) = spsc::bounded_with::<Counted<u64>, P>(1);
            let stop = Arc::new(AtomicBool::new(false));
            let mut producers = Vec::new();
            for p in 0..2u64 {
                let (tx1, tx2, census) = (tx1.clone(), tx2.clone(), census.clone());
                producers.push(thread::spawn(move || {
                    for i in 0.. {
                        let id = (round << 40) | (p << 32) | i;
                        let ok = if i % 2 == 0 {
                            tx1.send(Counted::new(id, &census)).is_ok()
                        } else {
                            tx2.send(Counted::new(id, &census)).is_ok()
                        };
                        if !ok {
                            break; // handed back, and dropped, in the error
                        }
                    }
                }));
            }
            let census3 = census.clone();
            producers.push(thread::spawn(move || {
                for i in 0.. {
                    let id = (round << 40) | (9 << 32) | i;
                    if tx3.send(Counted::new(id, &census3)).is_err() {
                        break;
                    }
                }
            }));
            drop((tx1, tx2));
            let consumer = {
                let (received, ids, stop) = (received.clone(), ids.clone(), stop.clone());
                let rx1b = rx1.clone();
                thread::spawn(move || {
                    let mut mine = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        select! {
                            recv(rx1b) -> m => if let Ok(m) = m { mine.push(m.value) },
                            recv(rx2) -> m => if let Ok(m) = m { mine.push(m.value) },
                        }
                    }
                    received.fetch_add(mine.len(), Ordering::SeqCst);
                    ids.lock().unwrap().extend(mine.iter().copied());
                    mine.len()
                })
            };
            let mut mine = Vec::new();
            let mut sel = Select::new();
            let i1 = sel.recv(&rx1);
            let i3 = sel.recv(&rx3);
            for _ in 0..2_000 {
                let oper = sel.select();
                let m = if oper.index() == i1 {
                    oper.recv(&rx1)
                } else {
                    assert_eq!(oper.index(), i3);
                    oper.recv(&rx3)
                };
                mine.push(m.unwrap().value);
            }
            drop(sel);
            drop((rx1, rx3));
            stop.store(true, Ordering::Relaxed);
            // The consumer's channels lose their receivers when it leaves;
            // the producers then fail and stop.
            consumer.join().unwrap();
            for p in producers {
                p.join().unwrap();
            }
            received.fetch_add(mine.len(), Ordering::SeqCst);
            let mut ids = ids.lock().unwrap();
            let before = ids.len();
            ids.extend(mine.iter().copied());
            assert_eq!(ids.len(), before + mine.len(), "a message received twice");
        }
        // Every endpoint is gone: every message made has been dropped once
        // (`Counted` panics on a second drop), and no receiver got one twice.
        assert_eq!(census.made(), census.dropped(), "a message leaked");
        assert_eq!(
            ids.lock().unwrap().len(),
            received.load(Ordering::SeqCst),
            "a message received twice"
        );
        assert!(received.load(Ordering::SeqCst) >= 20 * 2_000);
    });
}

cas_and_updt!(drop_counted_soak(): drop_counted_soak_cas, drop_counted_soak_updt);

// ---- fairness -------------------------------------------------------------

#[test]
fn macro_is_fair_between_ready_channels() {
    const N: usize = 10_000;
    let (tx1, rx1) = spsc::bounded_with::<u8, Updt>(1);
    let (tx2, rx2) = mpmc::bounded::<u8>(1);
    tx1.send(1).unwrap();
    tx2.send(2).unwrap();
    let mut counts = [0usize; 2];
    for _ in 0..N {
        // Both always ready: whichever is taken is refilled at once.
        select! {
            recv(rx1) -> m => { counts[0] += 1; tx1.send(m.unwrap()).unwrap(); }
            recv(rx2) -> m => { counts[1] += 1; tx2.send(m.unwrap()).unwrap(); }
        }
    }
    assert!(
        counts.iter().all(|&c| c * 10 > N * 3),
        "unfair: {counts:?} of {N}"
    );
}

#[test]
fn select_struct_is_fair_between_ready_channels() {
    const N: usize = 10_000;
    let (tx1, rx1) = mpsc::bounded_with::<u8, Updt>(1);
    let (tx2, rx2) = spmc::bounded::<u8>(1);
    let mut counts = [0usize; 2];
    let mut sel = Select::new();
    let a = sel.recv(&rx1);
    let b = sel.send(&tx2);
    tx1.send(0).unwrap();
    for _ in 0..N {
        // A receive and a send, both always ready.
        let oper = sel.select();
        if oper.index() == a {
            counts[0] += 1;
            tx1.send(oper.recv(&rx1).unwrap()).unwrap();
        } else {
            assert_eq!(oper.index(), b);
            counts[1] += 1;
            oper.send(&tx2, 0).unwrap();
            rx2.recv().unwrap();
        }
    }
    assert!(
        counts.iter().all(|&c| c * 10 > N * 3),
        "unfair: {counts:?} of {N}"
    );
}

/// With some operations ready and others not (and one removed), a select
/// picks uniformly among the ready ones: over five slots `[A, removed, B,
/// idle, idle]`, A and B half of the time each. Checks the look-before-try
/// shortcut's bit arithmetic, and that it never picks an operation that is
/// not ready, nor a removed one whose channel holds a message.
#[test]
fn select_picks_uniformly_among_the_ready_operations() {
    const N: usize = 20_000;
    let chans: Vec<_> = (0..5).map(|_| mpmc::bounded::<usize>(1)).collect();
    let mut sel = Select::new();
    let idx: Vec<usize> = chans.iter().map(|(_, rx)| sel.recv(rx)).collect();
    sel.remove(idx[1]);
    for k in [0, 1, 2] {
        chans[k].0.send(k).unwrap();
    }
    let mut counts = [0usize; 5];
    for _ in 0..N {
        let oper = sel.select();
        let k = oper.index();
        assert!(
            [0, 2].contains(&k),
            "picked operation {k}, which was not ready"
        );
        assert_eq!(oper.recv(&chans[k].1), Ok(k));
        counts[k] += 1;
        chans[k].0.send(k).unwrap();
    }
    let share = |k: usize| counts[k] as f64 / N as f64;
    assert!((share(0) - 0.5).abs() < 0.05, "A: {counts:?}");
    assert!((share(2) - 0.5).abs() < 0.05, "B: {counts:?}");
    // `ready` picks the same way, without consuming.
    let mut seen = [0usize; 5];
    for _ in 0..N {
        seen[sel.ready()] += 1;
    }
    assert_eq!(
        seen[1] + seen[3] + seen[4],
        0,
        "ready picked an idle operation: {seen:?}"
    );
    assert!((seen[0] as f64 / N as f64 - 0.5).abs() < 0.05, "{seen:?}");
    // The removed operation's message is still in its channel.
    assert_eq!(chans[1].1.try_recv(), Ok(1));
}

/// The macro's first try (statically dispatched, see `FirstTry`) makes the
/// same pick as `Select`: over five arms `[recv A (ready), recv (idle),
/// send B (room), recv (idle), send (full)]`, A and B half of the time
/// each. A send arm's message is made only when that arm is the one tried.
#[test]
fn macro_picks_uniformly_among_the_ready_arms() {
    const N: usize = 20_000;
    let (tx_a, rx_a) = mpmc::bounded::<usize>(1);
    let (_tx_idle1, rx_idle1) = spsc::bounded_with::<usize, Updt>(1);
    let (tx_b, rx_b) = mpsc::bounded::<usize>(1);
    let (_tx_idle3, rx_idle3) = mpmc::bounded_with::<usize, Updt>(1);
    let (tx_full, _rx_full) = spmc::bounded::<usize>(1);
    tx_full.send(0).unwrap();
    tx_a.send(0).unwrap();
    let mut counts = [0usize; 5];
    let mut made = 0usize;
    for _ in 0..N {
        select! {
            recv(rx_a) -> m => {
                counts[0] += 1;
                tx_a.send(m.unwrap()).unwrap();
            }
            recv(rx_idle1) -> _ => counts[1] += 1,
            send(tx_b, { made += 1; 2 }) -> r => {
                r.unwrap();
                counts[2] += 1;
                assert_eq!(rx_b.try_recv(), Ok(2));
            }
            recv(rx_idle3) -> _ => counts[3] += 1,
            send(tx_full, 4) -> _ => counts[4] += 1,
        }
    }
    assert_eq!(counts[1] + counts[3] + counts[4], 0, "{counts:?}");
    assert_eq!(
        made, counts[2],
        "a send arm's message is made only when it is tried"
    );
    let share = |k: usize| counts[k] as f64 / N as f64;
    assert!((share(0) - 0.5).abs() < 0.05, "A: {counts:?}");
    assert!((share(2) - 0.5).abs() < 0.05, "B: {counts:?}");
}

/// The shortcut's largest case: 64 operations, one ready (the first, then
/// the last): the pick finds it at either end of the bit set.
#[test]
fn select_over_64_operations_finds_the_one_ready() {
    let chans: Vec<_> = (0..64).map(|_| spsc::bounded::<usize>(1)).collect();
    let mut sel = Select::new();
    for (_, rx) in &chans {
        sel.recv(rx);
    }
    for k in [0, 63] {
        for round in 0..2_000 {
            chans[k].0.send(round).unwrap();
            let oper = sel.select();
            assert_eq!(oper.index(), k);
            assert_eq!(oper.recv(&chans[k].1), Ok(round));
        }
    }
}

// ---- wake-ups -----------------------------------------------------------

/// A select that timed out leaves no registration behind: the channel's next
/// send wakes a receiver that is really blocked, at once (a stale entry
/// would take the wake-one and leave it asleep).
fn timed_out_select_leaves_no_waiter<M: Mode, P: Protocol>()
where
    swco_channel::Receiver<u32, M, P>: Send,
    swco_channel::Sender<u32, M, P>: Send,
{
    within(|| {
        let (tx, rx) = bounded_in::<u32, M, P>(1);
        let (_tx2, rx2) = mpmc::bounded::<u32>(1);
        for _ in 0..3 {
            let r = select! {
                recv(rx) -> _ => false,
                recv(rx2) -> _ => false,
                default(Duration::from_millis(5)) => true,
            };
            assert!(r);
            let mut sel = Select::new();
            sel.recv(&rx);
            sel.recv(&rx2);
            assert!(sel.select_timeout(Duration::from_millis(5)).is_err());
        }
        let started = Arc::new(Barrier::new(2));
        let s = started.clone();
        let waiter = thread::spawn(move || {
            s.wait();
            let got = rx.recv();
            (got, Instant::now())
        });
        started.wait();
        thread::sleep(Duration::from_millis(50)); // let it park
        let sent = Instant::now();
        tx.send(7).unwrap();
        let (got, woke) = waiter.join().unwrap();
        assert_eq!(got, Ok(7));
        // Generous: a lost wake would hang until the guard fires.
        assert!(woke.duration_since(sent) < Duration::from_secs(2));
    });
}

#[test]
fn timed_out_select_leaves_no_waiter_mpmc_cas() {
    timed_out_select_leaves_no_waiter::<Mpmc, Cas>();
}

#[test]
fn timed_out_select_leaves_no_waiter_spsc_updt() {
    timed_out_select_leaves_no_waiter::<swco_channel::Spsc, Updt>();
}

/// The hand-on: a select woken by a wake-one on a channel whose operation
/// it does not complete passes that wake to the channel's next waiter.
///
/// Each round, a select waits on two mpmc channels, and a plain receiver
/// blocks in `recv` on the first. The feeder sends on the second channel,
/// then on the first. Whenever the select takes the second channel's
/// message after the first channel's wake-one chose it (it registered
/// first), it must hand that wake to the plain receiver, or the plain
/// receiver sleeps for ever beside a buffered message. (When the select
/// takes the first channel's message instead, the feeder sends the plain
/// receiver another one and drains the second channel.)
fn wake_is_handed_on<P: Protocol>() {
    within(|| {
        const ROUNDS: usize = 3_000;
        let (tx1, rx1) = mpmc::bounded_with::<u32, P>(1);
        let (tx2, rx2) = mpmc::bounded_with::<u32, P>(1);
        let plain_rx = rx1.clone();
        let feeder_rx2 = rx2.clone();
        let (sel_go_tx, sel_go_rx) = mpmc::bounded::<()>(1);
        let (plain_go_tx, plain_go_rx) = mpmc::bounded::<()>(1);
        let (sel_done_tx, sel_done_rx) = mpmc::bounded::<u32>(1);
        let (plain_done_tx, plain_done_rx) = mpmc::bounded::<()>(1);
        let selector = thread::spawn(move || {
            let mut round = 0;
            while sel_go_rx.recv().is_ok() {
                plain_go_tx.send(()).unwrap();
                let took = select_recv(round % 2 == 0, &rx1, &rx2);
                sel_done_tx.send(took).unwrap();
                round += 1;
            }
        });
        let plain = thread::spawn(move || {
            while plain_go_rx.recv().is_ok() {
                assert_eq!(plain_rx.recv(), Ok(1));
                plain_done_tx.send(()).unwrap();
            }
        });
        let mut took_second = 0;
        for round in 0..ROUNDS {
            sel_go_tx.send(()).unwrap();
            // Let the two block first, for a varying while.
            for _ in 0..(round % 64) * 64 {
                std::hint::spin_loop();
            }
            if round % 8 == 0 {
                thread::sleep(Duration::from_micros(200));
            }
            tx2.send(2).unwrap();
            tx1.send(1).unwrap();
            if sel_done_rx.recv().unwrap() == 1 {
                tx1.send(1).unwrap();
                assert_eq!(feeder_rx2.recv(), Ok(2));
            } else {
                took_second += 1;
            }
            plain_done_rx.recv().unwrap();
        }
        assert!(took_second > 0, "the select never took the second channel");
        drop(sel_go_tx);
        selector.join().unwrap();
        plain.join().unwrap();
    });
}

cas_and_updt!(wake_is_handed_on(): wake_is_handed_on_cas, wake_is_handed_on_updt);

/// Rendezvous channels in selects: a select receiving from two zero-capacity
/// channels meets plain sending threads, and a select sending meets a select
/// receiving (through the receiving one's packet); every message arrives
/// exactly once and nothing is left behind.
fn rendezvous_selects<P: Protocol>() {
    const N: u64 = 2000;
    let (tx1, rx1) = mpmc::bounded_with::<u64, P>(0);
    let (tx2, rx2) = mpsc::bounded_with::<u64, P>(0);
    // Kept, so that neither channel disconnects (a disconnected channel
    // would be ready for ever).
    let keep = (tx1.clone(), tx2.clone());
    let feeders = [(tx1.clone(), 0), (tx1, 1)].map(|(tx, k)| {
        thread::spawn(move || {
            for i in 0..N {
                tx.send(2 * i + k).unwrap();
            }
        })
    });
    // A selecting sender on the second channel.
    let select_sender = thread::spawn(move || {
        for i in 0..N {
            select! {
                send(tx2, 10 * N + i) -> res => res.unwrap(),
            }
        }
    });
    let mut seen = Vec::new();
    let mut from_second = 0;
    while seen.len() < (3 * N) as usize {
        select! {
            recv(rx1) -> v => seen.push(v.unwrap()),
            recv(rx2) -> v => {
                seen.push(v.unwrap());
                from_second += 1;
            }
        }
    }
    for f in feeders {
        f.join().unwrap();
    }
    select_sender.join().unwrap();
    assert_eq!(from_second, N);
    seen.sort_unstable();
    let mut expected: Vec<u64> = (0..2 * N).chain(10 * N..11 * N).collect();
    expected.sort_unstable();
    assert_eq!(seen, expected, "every message exactly once");
    assert!(rx1.try_recv().is_err() && rx2.try_recv().is_err());
    drop(keep);
}

cas_and_updt!(rendezvous_selects(): rendezvous_selects_cas, rendezvous_selects_updt);

/// A `Select` receive on a rendezvous channel that times out leaves no
/// packet behind: a later `try_send` finds no receiver.
#[test]
fn rendezvous_select_timeout_leaves_no_packet() {
    let (tx, rx) = mpmc::bounded::<u8>(0);
    let mut sel = Select::new();
    sel.recv(&rx);
    assert!(sel.select_timeout(Duration::from_millis(20)).is_err());
    assert!(matches!(tx.try_send(1), Err(TrySendError::Full(1))));
}

/// The same endpoint in two operations of one select: both register (a
/// single-endpoint side queues the second registration behind the first),
/// a blocked select is still woken, and it leaves nothing behind.
fn same_endpoint_twice<M: Mode, P: Protocol>()
where
    swco_channel::Receiver<u32, M, P>: Send,
    swco_channel::Sender<u32, M, P>: Send,
{
    within(|| {
        let (mut tx, rx) = bounded_in::<u32, M, P>(1);
        for round in 0..50 {
            let t = thread::spawn(move || {
                thread::sleep(Duration::from_micros(200));
                tx.send(round).unwrap();
                tx
            });
            let got = select_recv(round % 2 == 0, &rx, &rx);
            assert_eq!(got, round);
            tx = t.join().unwrap();
        }
        // Nothing left registered: a plain blocked receive is still woken.
        let t = thread::spawn(move || rx.recv());
        thread::sleep(Duration::from_millis(20));
        tx.send(99).unwrap();
        assert_eq!(t.join().unwrap(), Ok(99));
    });
}

#[test]
fn same_endpoint_twice_spsc() {
    same_endpoint_twice::<swco_channel::Spsc, Updt>();
}

#[test]
fn same_endpoint_twice_mpmc() {
    same_endpoint_twice::<Mpmc, Cas>();
}
