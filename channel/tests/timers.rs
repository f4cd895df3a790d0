//! `after`, `at`, `tick` and `never` on plain threads: crossbeam's
//! semantics (one message from `after`, missed ticks dropped, nothing ever
//! from `never`, never disconnected), with `recv`, `try_recv`, the
//! timeouts, `select!` and `Select`.
//!
//! No assertion here is on how long anything took: the instants a timer
//! delivers follow from its semantics (an `after`'s is its due time, a
//! tick taken late schedules the next a whole period after it was taken),
//! and those are what the tests check. Each test runs in a child process,
//! killed if it hangs (a timer that never wakes its receiver).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use swco_channel::{
    after, at, mpmc, never, select, select_biased, spsc, tick, RecvTimeoutError, Select,
    TimerReceiver, TryRecvError,
};

// ---- running a test in a child process -------------------------------------

use swco_test_support::child_test;

const MS: Duration = Duration::from_millis(1);

// ---- after / at --------------------------------------------------------------

child_test! {
    after_delivers_its_due_instant_exactly_once {
        let d = 10 * MS;
        let before = Instant::now();
        let timer = after(d);
        let made = Instant::now();
        assert_eq!(timer.capacity(), 1);
        assert!(!timer.is_disconnected());
        let due = timer.recv().unwrap();
        // The message is the due instant: `d` after the call.
        assert!(due >= before + d && due <= made + d);
        // Once: then empty for ever, and never disconnected.
        assert_eq!(timer.try_recv(), Err(TryRecvError::Empty));
        assert_eq!(timer.recv_timeout(5 * MS), Err(RecvTimeoutError::Timeout));
        assert_eq!(timer.recv_deadline(Instant::now()), Err(RecvTimeoutError::Timeout));
        assert!(timer.is_empty());
        assert_eq!(timer.len(), 0);
        assert!(!timer.is_disconnected());
        assert_eq!(timer.try_iter().count(), 0);
    }

    after_clones_share_one_message {
        let timer = after(5 * MS);
        let due = Instant::now() + 5 * MS;
        let got = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (timer, got) = (timer.clone(), got.clone());
                thread::spawn(move || {
                    // Tries before it checks its deadline: however late a
                    // thread gets here, one of them takes the message.
                    if timer.recv_deadline(due + 200 * MS).is_ok() {
                        got.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(got.load(Ordering::SeqCst), 1);
        assert!(timer.same_channel(&timer.clone()));
        assert!(!timer.same_channel(&after(MS)));
    }

    at_a_past_instant_is_ready_at_once {
        let when = Instant::now();
        let timer = at(when);
        assert!(!timer.is_empty());
        assert_eq!(timer.len(), 1);
        assert_eq!(timer.try_recv(), Ok(when));
        assert_eq!(timer.try_recv(), Err(TryRecvError::Empty));
        // A zero `after` likewise.
        let zero = after(Duration::ZERO);
        assert!(zero.try_recv().is_ok());
    }

    after_too_far_never_fires {
        let timer = after(Duration::MAX);
        assert_eq!(timer.try_recv(), Err(TryRecvError::Empty));
        assert_eq!(timer.recv_timeout(MS), Err(RecvTimeoutError::Timeout));
        let ticker = tick(Duration::MAX);
        assert_eq!(ticker.try_recv(), Err(TryRecvError::Empty));
        assert_eq!(ticker.recv_timeout(MS), Err(RecvTimeoutError::Timeout));
    }

    // ---- tick ----------------------------------------------------------------

    tick_delivers_each_tick_once_in_order {
        let period = 2 * MS;
        let start = Instant::now();
        let ticker = tick(period);
        let ticks: Vec<Instant> = ticker.iter().take(5).collect();
        assert!(ticks[0] >= start + period);
        for w in ticks.windows(2) {
            // A loop of `recv`s claims each next tick before waiting for
            // it: a period apart (exactly, unless this thread was late for
            // one, which then was taken late and pushed the next).
            assert!(w[1] >= w[0] + period);
        }
    }

    tick_drops_missed_ticks {
        let period = 50 * MS;
        // The instants prove the drop on every attempt; "nothing is ready
        // right after the late tick" holds unless this thread stalls for a
        // whole period between two calls, so it needs one attempt of three.
        let mut saw_empty = false;
        for _ in 0..3 {
            let ticker = tick(period);
            let first = ticker.recv().unwrap();
            // Five periods go by untaken.
            thread::sleep(5 * period);
            // One tick is ready at once: the one due a period after the
            // first (its instant is in the past)...
            let late = ticker.try_recv().unwrap();
            assert_eq!(late, first + period);
            // ... and the four missed after it were dropped: nothing is
            // ready now, and the next tick is a whole period after the late
            // one was taken (at least five periods after `first`).
            let right_after = ticker.try_recv();
            if right_after == Err(TryRecvError::Empty) {
                saw_empty = true;
            }
            let next = match right_after {
                Ok(next) => next,
                Err(_) => ticker.recv().unwrap(),
            };
            assert!(
                next >= first + 6 * period,
                "a missed tick was delivered: {:?} after the first",
                next - first
            );
            if saw_empty {
                break;
            }
        }
        assert!(saw_empty, "a tick was ready right after the late one, three times");
    }

    tick_clones_share_the_ticks {
        let ticker = tick(MS);
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let ticker = ticker.clone();
                thread::spawn(move || (0..10).map(|_| ticker.recv().unwrap()).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<Instant> = Vec::new();
        for t in threads {
            let mine = t.join().unwrap();
            assert!(mine.windows(2).all(|w| w[0] < w[1]), "ticks out of order");
            all.extend(mine);
        }
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a tick was delivered twice");
    }

    tick_recv_timeout_before_the_next_tick_times_out {
        let ticker = tick(Duration::from_secs(3600));
        assert_eq!(ticker.recv_timeout(MS), Err(RecvTimeoutError::Timeout));
        assert_eq!(ticker.try_recv(), Err(TryRecvError::Empty));
        assert!(!ticker.is_disconnected());
    }

    // ---- never ---------------------------------------------------------------

    never_never_delivers {
        let nothing = never();
        assert_eq!(nothing.try_recv(), Err(TryRecvError::Empty));
        assert_eq!(nothing.recv_timeout(2 * MS), Err(RecvTimeoutError::Timeout));
        assert!(nothing.is_empty() && nothing.is_full());
        assert_eq!(nothing.capacity(), 0);
        assert!(!nothing.is_disconnected());
        let took_default = select! {
            recv(nothing) -> _ => false,
            default(5 * MS) => true,
        };
        assert!(took_default);
        let took_default = select! {
            recv(nothing) -> _ => false,
            default => true,
        };
        assert!(took_default);
        let mut sel = Select::new();
        sel.recv(&nothing);
        assert!(sel.try_select().is_err());
        assert!(sel.select_timeout(2 * MS).is_err());
        assert!(sel.ready_timeout(2 * MS).is_err());
    }

    // ---- select --------------------------------------------------------------

    select_prefers_nothing_but_takes_what_is_ready {
        let (tx, rx) = spsc::bounded::<u32>(1);
        // A message there, the timer far off: the channel's arm.
        tx.send(1).unwrap();
        let got = select! {
            recv(rx) -> m => m.ok(),
            recv(after(Duration::from_secs(3600))) -> _ => None,
        };
        assert_eq!(got, Some(1));
        // The channel empty (its sender alive): the select blocks and the
        // timer wakes it, with its due instant.
        let timer = after(10 * MS);
        let due = Instant::now() + 10 * MS;
        let got = select! {
            recv(rx) -> _ => None,
            recv(timer) -> t => Some(t.unwrap()),
        };
        assert!(got.unwrap() <= due);
        // And once fired, it is not ready again: the default is taken.
        let again = select! {
            recv(timer) -> _ => true,
            default(5 * MS) => false,
        };
        assert!(!again);
        drop(tx);
    }

    blocked_select_wakes_for_the_earliest_timer {
        let (_tx, rx) = mpmc::bounded::<u32>(4);
        let late = after(Duration::from_secs(3600));
        let soon = after(5 * MS);
        let which = select_biased! {
            recv(rx) -> _ => 0,
            recv(late) -> _ => 1,
            recv(never()) -> _ => 2,
            recv(soon) -> _ => 3,
        };
        assert_eq!(which, 3);
        // A default timeout earlier than the timer still wins.
        let which = select! {
            recv(late) -> _ => 1,
            default(MS) => 0,
        };
        assert_eq!(which, 0);
    }

    select_loop_over_tick_and_a_channel {
        let (tx, rx) = mpmc::bounded::<u32>(4);
        let ticker = tick(MS);
        let producer = thread::spawn(move || {
            for i in 0..20 {
                tx.send(i).unwrap();
            }
        });
        let (mut msgs, mut ticks) = (0, 0);
        let mut last_tick = None;
        while msgs < 20 || ticks < 5 {
            select! {
                recv(rx) -> m => if m.is_ok() { msgs += 1 },
                recv(ticker) -> t => {
                    let t = t.unwrap();
                    assert!(last_tick.map_or(true, |l| l < t));
                    last_tick = Some(t);
                    ticks += 1;
                }
            }
        }
        producer.join().unwrap();
        assert_eq!(msgs, 20);
    }

    select_object_with_timers {
        let (tx, rx) = spsc::bounded::<u8>(1);
        let timer = after(5 * MS);
        let nothing = never();
        let mut sel = Select::new();
        let i_rx = sel.recv(&rx);
        let i_never = sel.recv(&nothing);
        let i_timer = sel.recv(&timer);
        let oper = sel.select();
        assert_eq!(oper.index(), i_timer);
        assert!(oper.index() != i_rx && oper.index() != i_never);
        let due = oper.recv(&timer).unwrap();
        assert!(due <= Instant::now());
        // The timer is spent; the channel's message is taken next.
        tx.send(9).unwrap();
        let oper = sel.select();
        assert_eq!(oper.index(), i_rx);
        assert_eq!(oper.recv(&rx), Ok(9));
        // Readiness without taking: a due `at`.
        let now = at(Instant::now());
        let mut sel = Select::new();
        sel.recv(&nothing);
        let i = sel.recv(&now);
        assert_eq!(sel.ready(), i);
        assert!(now.try_recv().is_ok());
    }

    selected_timer_needs_its_own_receiver {
        let (_tx, rx) = spsc::bounded::<Instant>(1);
        let timer = at(Instant::now());
        let other = at(Instant::now());
        let mut sel = Select::new();
        sel.recv(&rx);
        sel.recv(&timer);
        let oper = sel.select();
        let wrong = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| oper.recv(&other)));
        assert!(wrong.is_err(), "a receiver that was not selected was accepted");
        // A clone of the one selected is accepted.
        let mut sel = Select::new();
        sel.recv(&timer);
        sel.recv(&other);
        let oper = sel.select();
        let got = if oper.index() == 1 {
            oper.recv(&other.clone())
        } else {
            oper.recv(&timer.clone())
        };
        assert!(got.is_ok());
    }
}

/// Type-level: the four are one type, so one binding takes any of them.
#[test]
fn one_type_for_every_timer() {
    let pick = |k: u8| -> TimerReceiver {
        match k {
            0 => after(MS),
            1 => tick(MS),
            2 => at(Instant::now()),
            _ => never(),
        }
    };
    let timers: Vec<TimerReceiver> = (0..4).map(pick).collect();
    assert_eq!(timers.iter().filter(|t| t.capacity() == 0).count(), 1);
    fn send_sync<T: Send + Sync + Clone>() {}
    send_sync::<TimerReceiver>();
}
