//! The join-handle hand-off ([`JoinSlot`], `join.rs`): a join racing the
//! coroutine's completion (or the completer's drop) gets the result (or
//! "cancelled") and never hangs; and `JoinHandle::cancel`'s request word
//! against the coroutine's start, park and finish.

use std::task::{Wake, Waker};

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::join::JoinSlot;
use crate::wake::WakeState;

model!(
    /// A joiner on one thread gets the value a completer on another thread
    /// stores, whichever runs first.
    executor_join_receives_the_result,
    unbounded,
    {
        let (completer, handle) = JoinSlot::<u32>::pair();
        let producer = thread::spawn(move || completer.complete(Ok(7)));
        assert_eq!(handle.join().unwrap(), 7);
        producer.join().unwrap();
    }
);

model!(
    /// A completer dropped without a result (cancelled coroutine) still releases
    /// the joiner.
    executor_dropped_completer_cancels_the_join,
    unbounded,
    {
        let (completer, handle) = JoinSlot::<u32>::pair();
        let producer = thread::spawn(move || drop(completer));
        assert!(handle.join().unwrap_err().is_cancelled());
        producer.join().unwrap();
    }
);

/// The coroutine's waker, as the executor's `TaskHeader` wakes: only the
/// winner of `WAITING -> RUNNING` schedules.
struct Runner {
    state: Arc<WakeState>,
    scheduled: Arc<AtomicUsize>,
}

impl Wake for Runner {
    fn wake(self: std::sync::Arc<Self>) {
        if self.state.notify() {
            self.scheduled.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// How the modelled coroutine's run went.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Its start saw the request: the closure never ran.
    NeverRan,
    /// It finished before any cancel reached it.
    Finished,
    /// Its park did not suspend (a wake came first) and it saw the request.
    UnwoundWithoutSuspending,
    /// It suspended; whether the cancel resumed it is checked after.
    Suspended,
}

/// A cancel from another thread racing with the coroutine's start, its
/// one park, or its finish (`finish_first`: it completes instead of
/// parking). Nothing is lost or doubled: a coroutine that parks is
/// scheduled exactly once by the cancel and then sees the request; one
/// whose park is turned into a non-suspension sees it too; one that
/// finished keeps its result; one not started never runs.
fn cancel_races(finish_first: bool) {
    super::check(
        if finish_first {
            "cancel_racing_with_start_and_finish"
        } else {
            "cancel_racing_with_start_and_park"
        },
        None,
        move || {
            let (completer, handle) = JoinSlot::<u32>::pair();
            let handle = Arc::new(handle);
            let state = Arc::new(WakeState::new());
            let scheduled = Arc::new(AtomicUsize::new(0));
            let canceller = {
                let handle = handle.clone();
                thread::spawn(move || {
                    handle.cancel();
                    handle.cancel();
                })
            };
            // The runner lives in the coroutine's task header on an executor;
            // here, in this frame, which outlives both threads.
            let runner = Waker::from(std::sync::Arc::new(Runner {
                state: state.clone(),
                scheduled: scheduled.clone(),
            }));
            let runner_at = &runner as *const Waker as usize;
            let coroutine = {
                let (handle, state) = (handle.clone(), state.clone());
                thread::spawn(move || {
                    let slot = handle.slot();
                    // SAFETY: `runner` outlives the slot's completion: both
                    // threads are joined before it is dropped.
                    if !unsafe { slot.start_running(runner_at as *const Waker) } {
                        drop(completer);
                        return (Outcome::NeverRan, None);
                    }
                    if finish_first {
                        completer.complete(Ok(7));
                        return (Outcome::Finished, None);
                    }
                    // As `park.rs` does: a park that does not suspend checks
                    // for a cancel (`raise_cancel`).
                    if state.prepare_park() {
                        // Stays parked: resumed (or not) by the cancel, below.
                        return (Outcome::Suspended, Some(completer));
                    }
                    assert!(
                        slot.cancel_flag().is_requested(),
                        "a wake turned the park into a non-suspension, but no cancel is seen"
                    );
                    drop(completer);
                    (Outcome::UnwoundWithoutSuspending, None)
                })
            };
            canceller.join().unwrap();
            let (outcome, parked) = coroutine.join().unwrap();
            let scheduled = scheduled.load(Ordering::Relaxed);
            match outcome {
                Outcome::Suspended => {
                    assert_eq!(
                        scheduled, 1,
                        "a parked coroutine is scheduled by its cancel exactly once"
                    );
                    // Resumed: its suspension point sees the request.
                    assert!(handle.slot().cancel_flag().is_requested());
                    // ... and unwinds: its completer goes.
                    drop(parked);
                }
                Outcome::UnwoundWithoutSuspending | Outcome::NeverRan => assert_eq!(scheduled, 0),
                Outcome::Finished => {}
            }
            let Ok(handle) = Arc::try_unwrap(handle) else {
                panic!("both threads are done, so the handle is ours alone");
            };
            match (outcome, handle.join()) {
                (Outcome::Finished, Ok(7)) => {}
                (
                    Outcome::NeverRan | Outcome::UnwoundWithoutSuspending | Outcome::Suspended,
                    Err(e),
                ) if e.is_cancelled() => {}
                (outcome, result) => panic!("{outcome:?} but joined {result:?}"),
            }
        },
    );
}

#[test]
fn cancel_racing_with_start_and_park() {
    cancel_races(false);
}

#[test]
fn cancel_racing_with_start_and_finish() {
    cancel_races(true);
}
