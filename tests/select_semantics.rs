//! Select and rendezvous semantics that crossbeam's and Go's tests expect:
//!
//! * a select picks uniformly among its ready operations in a coroutine as
//!   on a thread (Go's `TestSelectFairness` shape);
//! * a blocked select's rendezvous receives are served in a random order,
//!   not in arm order;
//! * a blocking operation in a thread-local's destructor, while its thread
//!   exits, works (parks the OS thread) instead of aborting the process.
//!
//! The tests that block run in a child process (this binary, re-executed,
//! with a hang guard: `swco_test_support::in_child_process`).

#[path = "../channel/tests/common/mod.rs"]
mod chan_common;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use chan_common::{Panic, TestPark};
use swco::channel::hook::{self, Park};
use swco::channel::{mpmc, spsc, Cas, Protocol, RecvTimeoutError, Select, SendTimeoutError, Updt};
use swco::{select, Runtime};
use swco_test_support::{in_child_process, CHILD_HANG_GUARD};

/// Rounds per test, as in Go's `TestSelectFairness`.
const TRIALS: usize = 10_000;
/// How far an arm's count may stray from its fair share: 2.2 % of the
/// trials (for two arms, 4.4 standard deviations of a fair coin over
/// 10 000 tosses; more for more arms).
const SLACK: usize = TRIALS * 22 / 1000;

/// Fails unless every count is within [`SLACK`] of `TRIALS / counts.len()`.
fn assert_fair(counts: &[usize], what: &str) {
    eprintln!("{what}: {counts:?}");
    assert_eq!(counts.iter().sum::<usize>(), TRIALS, "{what}: {counts:?}");
    let share = TRIALS / counts.len();
    for &c in counts {
        assert!(
            c.abs_diff(share) <= SLACK,
            "{what}: unfair select, counts {counts:?} over {TRIALS} trials"
        );
    }
}

// ---- fairness in a coroutine ----------------------------------------------

/// Go's shape in a coroutine: four arms, the first two on rendezvous
/// channels that never have a sender, the last two always ready; with
/// `select!` and with a `Select`. Nothing blocks.
fn go_shape_in_a_coroutine<P: Protocol>() {
    let rt = Runtime::builder().executors(1).build().unwrap();
    let counts = rt
        .spawn(|| {
            let (tx1, rx1) = mpmc::bounded_with::<u8, P>(TRIALS);
            let (tx2, rx2) = spsc::bounded_with::<u8, P>(TRIALS);
            let (_tx3, rx3) = mpmc::bounded_with::<u8, P>(0);
            let (_tx4, rx4) = spsc::bounded_with::<u8, P>(0);
            let refill = || {
                while tx1.try_send(1).is_ok() {}
                while tx2.try_send(2).is_ok() {}
            };
            refill();
            let mut by_macro = [0usize; 2];
            for _ in 0..TRIALS {
                let b = select! {
                    recv(rx3) -> m => m.unwrap(),
                    recv(rx4) -> m => m.unwrap(),
                    recv(rx1) -> m => m.unwrap(),
                    recv(rx2) -> m => m.unwrap(),
                };
                by_macro[usize::from(b) - 1] += 1;
            }
            refill();
            let mut sel = Select::new();
            sel.recv(&rx3);
            sel.recv(&rx4);
            let i1 = sel.recv(&rx1);
            let i2 = sel.recv(&rx2);
            let mut by_struct = [0usize; 2];
            for _ in 0..TRIALS {
                let oper = sel.select();
                let b = match oper.index() {
                    i if i == i1 => oper.recv(&rx1).unwrap(),
                    i if i == i2 => oper.recv(&rx2).unwrap(),
                    i => panic!("selected operation {i}, which is never ready"),
                };
                by_struct[usize::from(b) - 1] += 1;
            }
            (by_macro, by_struct)
        })
        .join()
        .unwrap();
    rt.shutdown();
    assert_fair(&counts.0, &format!("select! in a coroutine, {}", P::NAME));
    assert_fair(&counts.1, &format!("Select in a coroutine, {}", P::NAME));
}

#[test]
fn go_shape_is_fair_in_a_coroutine() {
    go_shape_in_a_coroutine::<Cas>();
    go_shape_in_a_coroutine::<Updt>();
}

// ---- a blocked select's rendezvous receives --------------------------------

/// Receives once through five receive operations on the same rendezvous
/// channel; returns which one was served, and what it got.
fn five_arms<P: Protocol>(by_macro: bool, rx: &mpmc::Receiver<usize, P>) -> (usize, usize) {
    if by_macro {
        select! {
            recv(rx) -> m => (0, m.unwrap()),
            recv(rx) -> m => (1, m.unwrap()),
            recv(rx) -> m => (2, m.unwrap()),
            recv(rx) -> m => (3, m.unwrap()),
            recv(rx) -> m => (4, m.unwrap()),
        }
    } else {
        let mut sel = Select::new();
        for _ in 0..5 {
            sel.recv(rx);
        }
        let oper = sel.select();
        let i = oper.index();
        (i, oper.recv(rx).unwrap())
    }
}

/// A select with five receive operations on one rendezvous channel blocks
/// (its five packets queued) before each send: the sender serves the first
/// packet it finds, so which operation completes is the queue order, which
/// must be random. Go's bound, each a fifth of the time.
fn duplicate_rendezvous_arms<P: Protocol>(by_macro: bool) {
    let (tx, rx) = mpmc::bounded_with::<usize, P>(0);
    // The selecting thread's park context says when it parks: by then its
    // packets are queued (it parks only after queueing them, fencing and
    // re-checking), and it never parks spuriously.
    let (park, probe) = TestPark::new(Panic::Never);
    let selector = thread::spawn(move || {
        hook::set_current(Some(Rc::new(park)));
        let mut counts = [0usize; 5];
        for round in 0..TRIALS {
            let (arm, got) = five_arms(by_macro, &rx);
            assert_eq!(got, round);
            counts[arm] += 1;
        }
        hook::set_current(None);
        counts
    });
    for round in 0..TRIALS {
        probe.wait_parked();
        tx.send(round).unwrap();
    }
    let how = if by_macro { "select!" } else { "Select" };
    assert_fair(
        &selector.join().unwrap(),
        &format!(
            "{how}, five receives on one rendezvous channel, {}",
            P::NAME
        ),
    );
}

#[test]
fn duplicate_rendezvous_receives_are_served_uniformly() {
    in_child_process("duplicate_rendezvous_receives_are_served_uniformly", || {
        duplicate_rendezvous_arms::<Cas>(true);
        duplicate_rendezvous_arms::<Updt>(true);
        duplicate_rendezvous_arms::<Cas>(false);
        duplicate_rendezvous_arms::<Updt>(false);
    });
}

// ---- blocking while the thread exits ---------------------------------------

/// Runs its closure when the thread's thread-locals are destroyed.
struct AtExit(RefCell<Option<Box<dyn FnOnce()>>>);

impl Drop for AtExit {
    fn drop(&mut self) {
        if let Some(f) = self.0.get_mut().take() {
            f();
        }
    }
}

thread_local! {
    static AT_EXIT: AtExit = const { AtExit(RefCell::new(None)) };
}

/// Spawns a thread that runs `on_exit` from a thread-local's destructor as
/// it exits. The thread-local is set up first; then `after` runs (it may
/// set up the channel crate's own thread-locals, which are then destroyed
/// before `on_exit` runs: thread-locals go in the reverse order of their
/// first use).
fn exit_with(
    on_exit: impl FnOnce() + Send + 'static,
    after: impl FnOnce() + Send + 'static,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        AT_EXIT.with(|a| *a.0.borrow_mut() = Some(Box::new(on_exit)));
        after();
    })
}

/// Sets up the hook's thread-locals (the thread's parker and the slot for
/// an installed context) after `AT_EXIT`, so that they are gone when its
/// destructor blocks.
fn touch_the_hook() {
    let _ = hook::current();
    hook::set_current(None);
}

/// From a thread-local's destructor: a receive and a send that time out,
/// on a buffered and on a rendezvous channel, and a `select!` with a
/// timeout, each of which parks the thread.
fn time_out_while_exiting<P: Protocol>() {
    const T: Duration = Duration::from_millis(5);
    for set_up_first in [true, false] {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let t = exit_with(
            move || {
                for cap in [1, 0] {
                    let (tx, rx) = mpmc::bounded_with::<u32, P>(cap);
                    assert_eq!(rx.recv_timeout(T), Err(RecvTimeoutError::Timeout));
                    if cap == 1 {
                        tx.send(1).unwrap();
                    }
                    assert_eq!(tx.send_timeout(2, T), Err(SendTimeoutError::Timeout(2)));
                    let (_tx2, rx2) = spsc::bounded_with::<u32, P>(cap);
                    let timed_out = select! {
                        recv(rx2) -> _ => false,
                        send(tx, 3) -> _ => false,
                        default(T) => true,
                    };
                    assert!(timed_out);
                    // A thread-local's destructor is called once the thread's
                    // own context (the hook's) may be gone: `current` and
                    // `set_current` must not panic either.
                    let _ = hook::current();
                    assert!(hook::set_current(None).is_none());
                }
                done_tx.send(()).unwrap();
            },
            move || {
                if set_up_first {
                    touch_the_hook();
                }
            },
        );
        t.join().unwrap();
        done_rx
            .try_recv()
            .expect("the thread-local's destructor did not finish");
    }
}

#[test]
fn blocking_with_a_timeout_while_the_thread_exits() {
    in_child_process("blocking_with_a_timeout_while_the_thread_exits", || {
        time_out_while_exiting::<Cas>();
        time_out_while_exiting::<Updt>();
    });
}

/// This thread's id, for [`wait_until_sleeping`] (Linux), from inside it.
fn thread_id() -> Option<String> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    stat.split_whitespace().next().map(str::to_owned)
}

/// Waits until the thread `tid` is asleep (parked), where `/proc` says so;
/// elsewhere, a moment. Either way only makes it likely that what follows
/// wakes a parked thread: nothing asserts on it.
fn wait_until_sleeping(tid: Option<String>) {
    let start = Instant::now();
    while let Some(tid) = &tid {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else {
            return;
        };
        // The state follows the command name, which is in parentheses.
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().next());
        if state == Some("S") || start.elapsed() > CHILD_HANG_GUARD / 4 {
            return;
        }
        thread::yield_now();
    }
    thread::sleep(Duration::from_millis(50));
}

/// From a thread-local's destructor, a receive without timeout that parks
/// and is woken by a sender on another thread, on a buffered and on a
/// rendezvous channel.
fn woken_while_exiting<P: Protocol>() {
    for cap in [1, 0] {
        let (tx, rx) = mpmc::bounded_with::<u32, P>(cap);
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (got_tx, got_rx) = std::sync::mpsc::channel();
        let t = exit_with(
            move || {
                tid_tx.send(thread_id()).unwrap();
                got_tx.send(rx.recv()).unwrap();
            },
            touch_the_hook,
        );
        let tid = tid_rx.recv().unwrap();
        wait_until_sleeping(tid);
        tx.send(7).unwrap();
        t.join().unwrap();
        assert_eq!(got_rx.recv().unwrap(), Ok(7));
    }
}

#[test]
fn woken_while_the_thread_exits() {
    in_child_process("woken_while_the_thread_exits", || {
        woken_while_exiting::<Cas>();
        woken_while_exiting::<Updt>();
    });
}

/// Parks made through [`CountingPark`].
static COUNTED_PARKS: AtomicUsize = AtomicUsize::new(0);

/// A park context that counts its parks (in a static: it reads nothing of
/// its own, so a call through a pointer to it after it is gone would still
/// be counted rather than crash) and sleeps a moment.
struct CountingPark;

struct NoWake;

impl Wake for NoWake {
    fn wake(self: std::sync::Arc<Self>) {}
}

impl Park for CountingPark {
    fn waker(&self) -> Waker {
        Waker::from(std::sync::Arc::new(NoWake))
    }
    fn park(&self, _deadline: Option<Instant>) {
        COUNTED_PARKS.fetch_add(1, Ordering::SeqCst);
        thread::sleep(Duration::from_millis(1));
    }
}

/// A context installed on a thread goes when the thread's slot for it is
/// destroyed; a thread-local destroyed after that which blocks parks the
/// OS thread, not through the context that is gone.
#[test]
fn an_installed_context_is_not_used_once_gone() {
    in_child_process("an_installed_context_is_not_used_once_gone", || {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let before = COUNTED_PARKS.load(Ordering::SeqCst);
        let t = exit_with(
            move || {
                let (_tx, rx) = spsc::bounded::<u32>(1);
                let parks = COUNTED_PARKS.load(Ordering::SeqCst);
                assert_eq!(
                    rx.recv_timeout(Duration::from_millis(5)),
                    Err(RecvTimeoutError::Timeout)
                );
                done_tx
                    .send(COUNTED_PARKS.load(Ordering::SeqCst) - parks)
                    .unwrap();
            },
            || {
                hook::set_current(Some(Rc::new(CountingPark)));
                // It is the context while the thread runs.
                let (_tx, rx) = spsc::bounded::<u32>(1);
                let _ = rx.recv_timeout(Duration::from_millis(2));
            },
        );
        t.join().unwrap();
        assert!(COUNTED_PARKS.load(Ordering::SeqCst) > before);
        assert_eq!(
            done_rx.try_recv(),
            Ok(0),
            "parked through a context that was gone"
        );
    });
}
