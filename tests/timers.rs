//! `after`, `tick`, `never` and `oneshot` inside swco coroutines: a wait on
//! a timer suspends only its coroutine (on its executor's timer heap, no
//! thread per timer), many concurrent timers on two executors all deliver,
//! a blocked `select!` is woken by its timer arm, a coroutine parked on a
//! timer shows it in a dump and can be cancelled, and oneshots pass values
//! between coroutines with exact counts.
//!
//! No assertion is on how long anything took. Each test runs in a child
//! process, killed if it hangs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use swco::channel::{after, mpmc, never, oneshot, tick, RecvError, Select, TryRecvError};
use swco::{select, Runtime};

use swco_test_support::child_test;

/// How long the parent of a coroutine waits for something that should
/// happen promptly before calling it hung.
const HANG_GUARD: Duration = Duration::from_secs(30);
const MS: Duration = Duration::from_millis(1);

fn runtime(executors: usize) -> Runtime {
    Runtime::builder().executors(executors).build().unwrap()
}

/// The OS threads of this process (Linux; `None` elsewhere).
fn os_threads() -> Option<usize> {
    std::fs::read_dir("/proc/self/task")
        .ok()
        .map(Iterator::count)
}

child_test! {
    a_timer_wait_suspends_only_its_coroutine {
        // One executor: A waits on a timer; B, on the same executor, runs
        // meanwhile (it could not if A's wait parked the thread), and then
        // stops A through a channel arm of A's select.
        let rt = runtime(1);
        let (report_tx, report_rx) = mpmc::bounded::<&'static str>(8);
        let (stop_tx, stop_rx) = mpmc::bounded::<()>(1);
        let report_a = report_tx.clone();
        let a = rt
            .spawn_on(0, move || {
                let due = after(2 * MS).recv().unwrap();
                report_a.send("a timer").unwrap();
                let stopped = select! {
                    recv(stop_rx) -> _ => true,
                    recv(after(Duration::from_secs(3600))) -> _ => false,
                    recv(never()) -> _ => false,
                };
                report_a.send("a stopped").unwrap();
                (due, stopped)
            })
            .unwrap();
        assert_eq!(report_rx.recv_timeout(HANG_GUARD), Ok("a timer"));
        let b = rt
            .spawn_on(0, move || {
                for _ in 0..10 {
                    swco::yield_now();
                }
                report_tx.send("b ran").unwrap();
                stop_tx.send(()).unwrap();
            })
            .unwrap();
        assert_eq!(report_rx.recv_timeout(HANG_GUARD), Ok("b ran"));
        assert_eq!(report_rx.recv_timeout(HANG_GUARD), Ok("a stopped"));
        let (_, stopped) = a.join().unwrap();
        assert!(stopped);
        b.join().unwrap();
    }

    many_concurrent_timers_on_two_executors {
        let rt = runtime(2);
        let threads_before = os_threads();
        let fired = Arc::new(AtomicUsize::new(0));
        let ticks = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        // 400 `after`s, of 0..20 ms, each received once and then empty.
        for i in 0..400u64 {
            let fired = fired.clone();
            handles.push(rt.spawn(move || {
                let d = Duration::from_millis(i % 20);
                let made = Instant::now();
                let timer = after(d);
                let due = timer.recv().unwrap();
                assert!(due >= made + d);
                assert_eq!(timer.try_recv(), Err(TryRecvError::Empty));
                fired.fetch_add(1, Ordering::SeqCst);
            }));
        }
        // 40 tickers of 1..5 ms, five ticks each, in order.
        for i in 0..40u64 {
            let ticks = ticks.clone();
            handles.push(rt.spawn(move || {
                let ticker = tick(Duration::from_millis(1 + i % 5));
                let mut last = None;
                for _ in 0..5 {
                    let t = ticker.recv().unwrap();
                    assert!(last.map_or(true, |l| l < t));
                    last = Some(t);
                    ticks.fetch_add(1, Ordering::SeqCst);
                }
            }));
        }
        // 40 selects that only a timer can end.
        for i in 0..40u64 {
            let fired = fired.clone();
            handles.push(rt.spawn(move || {
                let (_tx, rx) = mpmc::bounded::<u8>(1);
                let which = select! {
                    recv(rx) -> _ => 0,
                    recv(never()) -> _ => 1,
                    recv(after(Duration::from_millis(i % 7))) -> _ => 2,
                };
                assert_eq!(which, 2);
                fired.fetch_add(1, Ordering::SeqCst);
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(fired.load(Ordering::SeqCst), 440);
        assert_eq!(ticks.load(Ordering::SeqCst), 200);
        // No thread per timer: the timers started none.
        if let (Some(before), Some(after_all)) = (threads_before, os_threads()) {
            assert!(after_all <= before, "{before} threads before, {after_all} after");
        }
    }

    tick_drops_missed_ticks_in_a_coroutine {
        let rt = runtime(2);
        let h = rt.spawn(|| {
            let period = 20 * MS;
            let ticker = tick(period);
            let first = ticker.recv().unwrap();
            swco::sleep(5 * period);
            let late = ticker.try_recv().unwrap();
            assert_eq!(late, first + period);
            let next = ticker.recv().unwrap();
            // The four ticks missed after `late` were dropped.
            assert!(next >= first + 6 * period);
        });
        h.join().unwrap();
    }

    select_object_with_a_timer_in_a_coroutine {
        let rt = runtime(2);
        let h = rt.spawn(|| {
            let (_tx, rx) = mpmc::bounded::<u8>(1);
            let timer = after(3 * MS);
            let mut sel = Select::new();
            sel.recv(&rx);
            let i = sel.recv(&timer);
            let oper = sel.select();
            assert_eq!(oper.index(), i);
            oper.recv(&timer).unwrap()
        });
        assert!(h.join().unwrap() <= Instant::now());
    }

    a_coroutine_on_never_shows_in_the_dump_and_cancels {
        // One executor: the coroutine blocked for ever in `never().recv()`
        // is suspended, not its thread, so another coroutine still runs.
        let rt = runtime(1);
        let h = rt.spawn(|| never().recv());
        let start = Instant::now();
        loop {
            let dump = rt.dump();
            if dump.coroutines().iter().any(|c| c.waiting_on() == "recv on `never`") {
                break;
            }
            assert!(start.elapsed() < HANG_GUARD, "never parked as a timer wait:\n{dump}");
            thread::sleep(MS);
        }
        let neighbour = rt.spawn_on(0, || 5).unwrap();
        assert_eq!(neighbour.join().unwrap(), 5);
        h.cancel();
        let e = h.join().unwrap_err();
        assert!(e.is_cancelled());
    }

    oneshots_between_coroutines {
        let rt = runtime(2);
        let n = 500;
        let mut receivers = Vec::new();
        let mut senders = Vec::new();
        for i in 0..n {
            let (tx, rx) = oneshot::<usize>();
            receivers.push(rt.spawn(move || rx.recv()));
            senders.push(rt.spawn(move || {
                if i % 3 == 0 {
                    drop(tx); // unsent: the receive fails
                    None
                } else {
                    Some(tx.send(i))
                }
            }));
        }
        let mut got = 0;
        for (i, h) in receivers.into_iter().enumerate() {
            match h.join().unwrap() {
                Ok(v) => {
                    assert_eq!(v, i);
                    got += 1;
                }
                Err(RecvError) => assert_eq!(i % 3, 0),
            }
        }
        for h in senders {
            if let Some(sent) = h.join().unwrap() {
                assert_eq!(sent, Ok(()));
            }
        }
        assert_eq!(got, n - n.div_ceil(3));
    }
}
