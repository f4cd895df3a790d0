//! `select!` and `Select` inside swco coroutines: a blocked select suspends
//! only its coroutine, exact counts with selecting coroutines, and a
//! timed-out select leaves no registration behind.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use swco::channel::{mpmc, mpsc, spsc, Cas, Protocol, Select, Updt};
use swco::{select, JoinHandle, Runtime};
use swco_test_support::cas_and_updt;

/// How long a test waits for something that should happen promptly before
/// calling it hung.
const HANG_GUARD: Duration = Duration::from_secs(20);

fn runtime(executors: usize) -> Runtime {
    Runtime::builder().executors(executors).build().unwrap()
}

/// One executor: coroutine A blocks in a select over two empty channels;
/// coroutine B, on the same executor, keeps running (it could not if the
/// select parked the thread) and then sends A what it waits for.
fn select_suspends_only_its_coroutine<P: Protocol>(use_macro: bool) {
    let rt = runtime(1);
    let (tx1, rx1) = spsc::bounded_with::<u32, P>(1);
    let (tx2, rx2) = mpmc::bounded_with::<u32, P>(1);
    let (report_tx, report_rx) = mpmc::bounded::<&'static str>(4);
    let report_a = report_tx.clone();
    let a = rt
        .spawn_on(0, move || {
            report_a.send("a blocks").unwrap();
            let got = if use_macro {
                select! {
                    recv(rx1) -> m => (1, m.unwrap()),
                    recv(rx2) -> m => (2, m.unwrap()),
                }
            } else {
                let mut sel = Select::new();
                let i1 = sel.recv(&rx1);
                let i2 = sel.recv(&rx2);
                let oper = sel.select();
                match oper.index() {
                    i if i == i1 => (1, oper.recv(&rx1).unwrap()),
                    i if i == i2 => (2, oper.recv(&rx2).unwrap()),
                    _ => unreachable!(),
                }
            };
            report_a.send("a woke").unwrap();
            got
        })
        .unwrap();
    assert_eq!(report_rx.recv_timeout(HANG_GUARD), Ok("a blocks"));
    let b = rt
        .spawn_on(0, move || {
            // A is suspended in its select (or about to be): we run anyway.
            for _ in 0..10 {
                swco::yield_now();
            }
            report_tx.send("b ran").unwrap();
            tx2.send(42).unwrap();
            tx1 // kept alive until joined
        })
        .unwrap();
    assert_eq!(report_rx.recv_timeout(HANG_GUARD), Ok("b ran"));
    assert_eq!(report_rx.recv_timeout(HANG_GUARD), Ok("a woke"));
    assert_eq!(a.join().unwrap(), (2, 42));
    drop(b.join().unwrap());
    rt.shutdown();
}

cas_and_updt!(
    select_suspends_only_its_coroutine(true):
    macro_in_coroutine_suspends_only_the_coroutine_cas,
    macro_in_coroutine_suspends_only_the_coroutine_updt
);

cas_and_updt!(
    select_suspends_only_its_coroutine(false):
    select_struct_in_coroutine_suspends_only_the_coroutine_cas,
    select_struct_in_coroutine_suspends_only_the_coroutine_updt
);

/// A coroutine on `rt` sending each of `values` on `tx`.
fn producer<M: swco::channel::Mode, P: Protocol>(
    rt: &Runtime,
    tx: swco::channel::Sender<u64, M, P>,
    values: Range<u64>,
) -> JoinHandle<()>
where
    swco::channel::Sender<u64, M, P>: Send + 'static,
{
    rt.spawn(move || values.for_each(|v| tx.send(v).unwrap()))
}

/// Producer coroutines over three channels (mpmc, mpsc and spsc), selecting
/// consumer coroutines (the mpsc and spsc channels have one consumer, which
/// selects over all three); every message arrives exactly once.
fn exact_counts_in_coroutines<P: Protocol>() {
    const PER: u64 = 10_000;
    let rt = runtime(4);
    let (tx_a, rx_a) = mpmc::bounded_with::<u64, P>(2);
    let (tx_b, rx_b) = mpsc::bounded_with::<u64, P>(2);
    let (tx_c, rx_c) = spsc::bounded_with::<u64, P>(1);
    let mut producers = Vec::new();
    let mut base = 0;
    for _ in 0..3 {
        producers.push(producer(&rt, tx_a.clone(), base..base + PER));
        base += PER;
    }
    for _ in 0..2 {
        producers.push(producer(&rt, tx_b.clone(), base..base + PER));
        base += PER;
    }
    producers.push(producer(&rt, tx_c, base..base + PER));
    base += PER;
    drop((tx_a, tx_b));
    let total = base;

    let mut consumers = Vec::new();
    for _ in 0..2 {
        let rx_a = rx_a.clone();
        consumers.push(rt.spawn(move || {
            let (mut n, mut sum) = (0u64, 0u64);
            loop {
                select! {
                    recv(rx_a) -> m => match m {
                        Ok(v) => { n += 1; sum += v; }
                        Err(_) => break,
                    },
                }
            }
            (n, sum)
        }));
    }
    consumers.push(rt.spawn(move || {
        let (mut n, mut sum) = (0u64, 0u64);
        let mut sel = Select::new();
        let ia = sel.recv(&rx_a);
        let ib = sel.recv(&rx_b);
        let ic = sel.recv(&rx_c);
        let mut open = 3;
        while open > 0 {
            let oper = sel.select();
            let i = oper.index();
            let r = match i {
                i if i == ia => oper.recv(&rx_a),
                i if i == ib => oper.recv(&rx_b),
                i if i == ic => oper.recv(&rx_c),
                _ => unreachable!(),
            };
            match r {
                Ok(v) => {
                    n += 1;
                    sum += v;
                }
                Err(_) => {
                    sel.remove(i);
                    open -= 1;
                }
            }
        }
        (n, sum)
    }));
    for p in producers {
        p.join().unwrap();
    }
    let (mut n, mut sum) = (0, 0);
    for c in consumers {
        let (cn, cs) = c.join().unwrap();
        n += cn;
        sum += cs;
    }
    assert_eq!(n, total);
    assert_eq!(sum, total * (total - 1) / 2);
    rt.shutdown();
}

cas_and_updt!(
    exact_counts_in_coroutines():
    exact_counts_in_coroutines_cas,
    exact_counts_in_coroutines_updt
);

/// A select that times out in a coroutine leaves no waiter behind: then a
/// receiver coroutine blocks in `recv` on the same channel, and the next
/// send wakes it at once (a stale registration would swallow the wake-one).
fn timed_out_select_in_coroutine<P: Protocol>() {
    let rt = runtime(2);
    let (tx, rx) = mpmc::bounded_with::<u32, P>(1);
    let (_tx2, rx2) = mpsc::bounded_with::<u32, P>(1);
    let rx_sel = rx.clone();
    let timed_out = rt
        .spawn_on(0, move || {
            let mut n = 0;
            for _ in 0..3 {
                let r = select! {
                    recv(rx_sel) -> _ => false,
                    recv(rx2) -> _ => false,
                    default(Duration::from_millis(5)) => true,
                };
                n += r as usize;
                let mut sel = Select::new();
                sel.recv(&rx_sel);
                n += sel.select_timeout(Duration::from_millis(5)).is_err() as usize;
            }
            // Handed back, so that the channels keep these receivers (and
            // anything they left registered) while the wake is tested.
            (n, rx_sel, rx2)
        })
        .unwrap();
    let (n, rx_sel, rx2) = timed_out.join().unwrap();
    assert_eq!(n, 6);
    let parked = Arc::new(AtomicUsize::new(0));
    let p = parked.clone();
    let receiver = rt
        .spawn_on(1, move || {
            p.store(1, Ordering::SeqCst);
            let got = rx.recv_timeout(HANG_GUARD);
            (got, Instant::now())
        })
        .unwrap();
    while parked.load(Ordering::SeqCst) == 0 {
        thread::yield_now();
    }
    thread::sleep(Duration::from_millis(50)); // let it suspend
    let sent = Instant::now();
    tx.send(9).unwrap();
    let (got, woke) = receiver.join().unwrap();
    assert_eq!(got, Ok(9));
    assert!(
        woke.duration_since(sent) < Duration::from_secs(2),
        "the wake went astray"
    );
    drop((rx_sel, rx2));
    rt.shutdown();
}

cas_and_updt!(
    timed_out_select_in_coroutine():
    timed_out_select_in_coroutine_leaves_no_waiter_cas,
    timed_out_select_in_coroutine_leaves_no_waiter_updt
);

/// One side of the ping-pong below: sends `0..N` on `tx` and sums what
/// arrives on `rx`, selecting between the two while both are open.
fn ping_pong_side<P: Protocol, Q: Protocol>(
    tx: spsc::Sender<u64, P>,
    rx: spsc::Receiver<u64, Q>,
    n: u64,
) -> u64 {
    let (mut sent, mut sum, mut rx_open) = (0u64, 0u64, true);
    let mut tx = Some(tx);
    while tx.is_some() || rx_open {
        match (&tx, rx_open) {
            (Some(t), true) => select! {
                send(t, sent) -> r => { r.unwrap(); sent += 1; }
                recv(rx) -> m => match m { Ok(v) => sum += v, Err(_) => rx_open = false },
            },
            (Some(t), false) => {
                t.send(sent).unwrap();
                sent += 1;
            }
            (None, _) => match rx.recv() {
                Ok(v) => sum += v,
                Err(_) => rx_open = false,
            },
        }
        if sent == n {
            tx = None; // disconnect: the other side's receive ends
        }
    }
    sum
}

/// Two coroutines on `rt`, on executors 0 and `b_on`, play the ping-pong
/// below over `ab` (a to b) and `ba` (b to a); what each side summed.
fn ping_pong<P: Protocol, Q: Protocol>(
    rt: &Runtime,
    b_on: usize,
    n: u64,
    (tx_ab, rx_ab): (spsc::Sender<u64, P>, spsc::Receiver<u64, P>),
    (tx_ba, rx_ba): (spsc::Sender<u64, Q>, spsc::Receiver<u64, Q>),
) -> (u64, u64) {
    let a = rt
        .spawn_on(0, move || ping_pong_side(tx_ab, rx_ba, n))
        .unwrap();
    let b = rt
        .spawn_on(b_on, move || ping_pong_side(tx_ba, rx_ab, n))
        .unwrap();
    (a.join().unwrap(), b.join().unwrap())
}

/// Send arms in coroutines: a ping-pong where each side selects between
/// sending its next number and receiving the other's.
#[test]
fn send_and_recv_arms_in_coroutines() {
    const N: u64 = 5_000;
    let rt = runtime(2);
    let ab = spsc::bounded_with::<u64, Updt>(1);
    let ba = spsc::bounded::<u64>(1);
    let (a, b) = ping_pong(&rt, 1, N, ab, ba);
    assert_eq!(a, N * (N - 1) / 2);
    assert_eq!(b, N * (N - 1) / 2);
    rt.shutdown();
}

/// The same on one executor: both sides take turns on one thread.
#[test]
fn send_and_recv_arms_on_one_executor() {
    const N: u64 = 2_000;
    let rt = runtime(1);
    let ab = spsc::bounded::<u64>(1);
    let ba = spsc::bounded_with::<u64, Updt>(1);
    let (a, b) = ping_pong(&rt, 0, N, ab, ba);
    assert_eq!(a, N * (N - 1) / 2);
    assert_eq!(b, N * (N - 1) / 2);
    rt.shutdown();
}
