//! The state of executors and of the runtime that other threads may touch:
//! [`ExecutorShared`] (one per executor: its inbox, stop flag, load, idle
//! flag, stealable spawns and counters) and [`RuntimeShared`] (the
//! executors, the placement policy and the runtime-wide live count). Both
//! the executor loop and the [`Runtime`](crate::Runtime) facade hold them.
//!
//! # Invariants
//!
//! * Each of an executor's [`Counters`] has a single writer, the executor
//!   thread ([`bump`]).
//! * An idle executor is woken by an offer of work at most once: the offer
//!   claims its `idle` flag with a CAS ([`ExecutorShared::claim_idle`]).
//! * A job is never handed to an executor that has left its loop: `exited`
//!   and `live` form a Dekker pair between the exiting executor and the
//!   spawner (see [`ExecutorShared::exited`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::sync::Unparker;
use crossbeam_deque::{Stealer, Worker};
use crossbeam_utils::CachePadded;

use crate::inbox::Inbox;
use crate::job::Job;
use crate::placement::Placement;
use crate::stall::StallWatch;

/// An executor's run state, set by the runtime at shutdown. Kept in an
/// [`AtomicU8`] ([`ExecutorShared::stop_mode`] reads it back).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(crate) enum StopMode {
    /// Keep running: no shutdown asked for.
    Run = 0,
    /// Exit once nothing is live here (the runtime saw no live coroutine).
    Stop = 1,
    /// Exit now, unwinding whatever coroutines are still here.
    Cancel = 2,
}

impl StopMode {
    /// The mode stored as `raw` (a `StopMode as u8`).
    #[inline]
    fn from_u8(raw: u8) -> StopMode {
        match raw {
            0 => StopMode::Run,
            1 => StopMode::Stop,
            2 => StopMode::Cancel,
            _ => unreachable!("not a stop mode: {raw}"),
        }
    }
}

/// Per-executor counters. Each has a single writer (the executor thread), so
/// a relaxed load + store is enough and costs no locked instruction.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) spawned: AtomicU64,
    pub(crate) finished: AtomicU64,
    pub(crate) switches: AtomicU64,
    pub(crate) hand_offs: AtomicU64,
    pub(crate) blocks: AtomicU64,
    pub(crate) wakes: AtomicU64,
    pub(crate) parks: AtomicU64,
    pub(crate) stacks_mapped: AtomicU64,
    pub(crate) stacks_released: AtomicU64,
    /// The deepest stack use measured (a maximum, not a count).
    pub(crate) stack_high_water: AtomicU64,
}

/// Raises `counter` to `value` if that is more (single writer, as
/// [`bump`]).
#[inline]
pub(crate) fn raise(counter: &AtomicU64, value: u64) {
    // Relaxed: statistics only, and only the executor thread writes.
    if value > counter.load(Ordering::Relaxed) {
        counter.store(value, Ordering::Relaxed);
    }
}

#[inline]
pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    // Relaxed: statistics only, and only the executor thread writes.
    counter.store(counter.load(Ordering::Relaxed) + by, Ordering::Relaxed);
}

/// The part of an executor other threads may touch.
pub(crate) struct ExecutorShared {
    pub(crate) index: usize,
    pub(crate) inbox: CachePadded<Inbox<Job>>,
    /// A [`StopMode`], as `u8`: set through [`request_stop`], read through
    /// [`stop_mode`].
    ///
    /// [`request_stop`]: ExecutorShared::request_stop
    /// [`stop_mode`]: ExecutorShared::stop_mode
    stop: AtomicU8,
    /// Coroutines placed here and not yet finished (for least-loaded
    /// placement, the shutdown report, and the exit check). A stolen job's
    /// count moves to its thief when the thief starts it (`Local::launch`),
    /// one job at a time, so the counts stay exact.
    pub(crate) live: CachePadded<AtomicUsize>,
    pub(crate) counters: CachePadded<Counters>,
    /// Set while the executor has nothing to run (it may be parked): it will
    /// take work offered by a busy executor. Cleared by whoever claims it
    /// (with a CAS, so one offer wakes it once) or by the executor itself.
    pub(crate) idle: CachePadded<AtomicBool>,
    /// The other end of the executor's local spawn deque: idle executors
    /// steal unstarted jobs here, oldest first.
    pub(crate) stealer: Stealer<Job>,
    /// The deque's owning end, until the executor thread takes it.
    pub(crate) worker: std::sync::Mutex<Option<Worker<Job>>>,
    /// Set once the executor thread has left its loop (or is about to):
    /// a job handed to it now would never run. Only a cancelling shutdown
    /// lets an executor go while coroutines elsewhere may still spawn.
    pub(crate) exited: AtomicBool,
}

impl ExecutorShared {
    pub(crate) fn new(index: usize, unparker: Unparker) -> Self {
        let spawns = Worker::new_lifo();
        ExecutorShared {
            index,
            inbox: CachePadded::new(Inbox::new(unparker)),
            stop: AtomicU8::new(StopMode::Run as u8),
            live: CachePadded::new(AtomicUsize::new(0)),
            counters: CachePadded::new(Counters::default()),
            idle: CachePadded::new(AtomicBool::new(false)),
            stealer: spawns.stealer(),
            worker: std::sync::Mutex::new(Some(spawns)),
            exited: AtomicBool::new(false),
        }
    }

    /// Wakes this executor if it is idle, so that it steals work; `true` if
    /// it was (and is now claimed).
    pub(crate) fn claim_idle(&self) -> bool {
        // Relaxed first look: offers are hints; a missed one costs only
        // parallelism (the owner runs its jobs anyway).
        if !self.idle.load(Ordering::Relaxed)
            || self
                .idle
                .compare_exchange(true, false, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return false;
        }
        self.inbox.unpark();
        true
    }

    /// Hands a new coroutine to this executor from another thread.
    pub(crate) fn push_spawn(&self, job: Job) {
        self.inbox.push_spawn(job);
    }

    /// Asks the executor to stop ([`StopMode::Stop`] or
    /// [`StopMode::Cancel`]) and wakes it.
    pub(crate) fn request_stop(&self, mode: StopMode) {
        debug_assert_ne!(mode, StopMode::Run, "a stop request stops");
        // Release: the runtime's shutdown decisions happen before the
        // executor sees the flag.
        self.stop.store(mode as u8, Ordering::Release);
        self.inbox.unpark();
    }

    /// The run state the runtime last asked for (`ordering`: of the load;
    /// `Acquire` pairs with [`request_stop`](ExecutorShared::request_stop)).
    #[inline]
    pub(crate) fn stop_mode(&self, ordering: Ordering) -> StopMode {
        StopMode::from_u8(self.stop.load(ordering))
    }
}

/// Runtime-wide state shared by the handle and every executor thread.
pub(crate) struct RuntimeShared {
    pub(crate) executors: Vec<Arc<ExecutorShared>>,
    pub(crate) placement: Placement,
    /// Round-robin cursor.
    pub(crate) next: AtomicUsize,
    pub(crate) live: AtomicUsize,
    /// The next coroutine id ([`RuntimeShared::next_id`]).
    pub(crate) next_id: AtomicU64,
    pub(crate) closed: AtomicBool,
    /// How many threads wait on `idle_changed` (for `live == 0`): the
    /// last finisher notifies only if there is one, and takes the lock to
    /// tell (a waiter counts itself in under it before it checks `live`),
    /// so a finish with nobody waiting costs no system call.
    pub(crate) idle: Mutex<usize>,
    pub(crate) idle_changed: Condvar,
    /// The idle accounting of stall reports (`stall.rs`).
    pub(crate) stall: StallWatch,
    /// After how long a stall is reported (`None`: never).
    pub(crate) stall_report: Option<Duration>,
    /// Where the trace goes, if one is recorded (`trace.rs`).
    pub(crate) trace: Option<crate::trace::TraceSink>,
    /// The threads that run `unblock` and `spawn_blocking` jobs
    /// (`blocking.rs`).
    pub(crate) blocking: Arc<crate::blocking::BlockingPool>,
    /// The machine has a core for each executor, so an idle executor
    /// may watch its inbox without yielding while a peer works
    /// (`Local::idle_grace`).
    pub(crate) core_each: bool,
}

impl RuntimeShared {
    /// The executors, by index.
    pub(crate) fn executor_shared(&self) -> &[Arc<ExecutorShared>] {
        &self.executors
    }

    /// A busy executor has jobs to spare: wake one idle executor, which will
    /// steal some. A hint only: the owner runs its jobs anyway, so a missed
    /// offer costs parallelism, never work.
    pub(crate) fn offer_work(&self, from: usize) {
        let n = self.executors.len();
        for k in 1..n {
            if self.executors[(from + k) % n].claim_idle() {
                return;
            }
        }
    }

    pub(crate) fn finished_one(&self) {
        // SeqCst: pairs with shutdown's closed store / live load.
        if self.live.fetch_sub(1, Ordering::SeqCst) == 1 {
            // Under the lock a waiter counts itself in and checks `live`
            // under: it either sees the zero or is counted here.
            let waiters = self.idle.lock().unwrap();
            if *waiters > 0 {
                self.idle_changed.notify_all();
            }
        }
    }

    /// The runtime's progress for stall reports (`stall.rs`): coroutines
    /// resumed and started, summed over the executors' own counters.
    pub(crate) fn progress(&self) -> u64 {
        self.executors
            .iter()
            // Relaxed: ordered by the stall accounting's `SeqCst` count
            // (see `stall.rs`).
            .map(|e| {
                e.counters.switches.load(Ordering::Relaxed)
                    + e.counters.spawned.load(Ordering::Relaxed)
            })
            .sum()
    }

    pub(crate) fn executors(&self) -> usize {
        self.executors.len()
    }

    /// Whether an executor other than `me` has work (a hint: its `idle`
    /// flag, which an offer of work may have cleared early).
    pub(crate) fn peer_busy(&self, me: usize) -> bool {
        self.executors
            .iter()
            // Relaxed: a hint for how to wait, never for what to run.
            .any(|e| e.index != me && !e.idle.load(Ordering::Relaxed))
    }
}
