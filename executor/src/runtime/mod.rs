//! The MPE scheduler: the [`Runtime`] that owns the executors and places
//! coroutines on them.
//!
//! # Invariants
//!
//! * `live` counts coroutines spawned and not yet finished, runtime-wide. A
//!   spawn increments it *before* checking `closed`, and shutdown sets
//!   `closed` before waiting for `live == 0` (both `SeqCst`), so a spawn that
//!   races with shutdown is either refused or waited for, never lost.
//! * Executors are told to stop only once `live == 0` (or, for
//!   `shutdown_timeout`, told to cancel what is left), and every executor
//!   thread is joined before shutdown returns.

//!
//! The builder (with `Runtime::builder` and `Runtime::new`) is in
//! `builder.rs`, the spawn builder (with `Runtime::spawn_builder`) in
//! `spawn_builder.rs`; what code inside a coroutine calls on its own
//! runtime (`spawn`, `yield_now`, `sleep`, `current_cpe`, `current_name`)
//! is in `current.rs`; the blocking pool's front ends (`unblock`,
//! `Runtime::spawn_blocking`) are in `unblocking.rs`. They name the
//! `Runtime`; this file does not name them (the crate root re-exports
//! their public items itself), so no file here imports another that
//! imports it back.
pub(crate) mod builder;
pub(crate) mod current;
pub(crate) mod spawn_builder;
#[cfg(test)]
mod tests;
pub(crate) mod unblocking;

use std::panic::Location;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::dump::RuntimeDump;
use crate::error::{ShutdownTimeout, SpawnError};
use crate::executor::Local;
use crate::join::JoinHandle;
use crate::shared::{RuntimeShared, StopMode};
use crate::spawning::SpawnOptions;
use crate::stack;
use crate::stats::{ExecutorStats, Stats};

/// How long a cancelling shutdown waits, after its timeout, for cancelled
/// coroutines to finish unwinding while none finishes. Unwinding normally
/// takes microseconds; a coroutine still live after that is blocked in a
/// `Drop`, or still running without having yielded, and its executor is
/// then left running, detached.
const CANCEL_PATIENCE: Duration = Duration::from_millis(200);

/// A swco runtime: `executors` CPE executor threads and the scheduler that
/// places coroutines on them.
///
/// Dropping the runtime shuts it down (waiting for live coroutines). Dropped
/// inside one of its own coroutines (the last `Arc<Runtime>` released
/// there), it cannot wait for itself: the shutdown then runs on a helper
/// thread and the drop returns at once.
///
/// ```
/// use swco_executor::Runtime;
/// let rt = Runtime::builder().executors(2).build().unwrap();
/// let h = rt.spawn_on(1, || swco_executor::current_cpe()).unwrap();
/// assert_eq!(h.join().unwrap(), Some(1));
/// rt.shutdown();
/// ```
pub struct Runtime {
    shared: Arc<RuntimeShared>,
    threads: Mutex<Vec<thread::JoinHandle<()>>>,
    stack_size: usize,
    guard_pages: stack::GuardPages,
}

impl Runtime {
    /// The number of executors.
    pub fn executors(&self) -> usize {
        self.shared.executors()
    }

    /// The usable size of each coroutine stack, in bytes (page-rounded).
    pub fn stack_size(&self) -> usize {
        self.stack_size
    }

    /// The guard-page path of the coroutine stacks:
    /// [`GuardRegion`](stack::GuardPages::GuardRegion) or
    /// [`Mprotect`](stack::GuardPages::Mprotect), never `Auto`.
    pub fn guard_pages(&self) -> stack::GuardPages {
        self.guard_pages
    }

    /// Spawns a coroutine on the executor chosen by the placement policy.
    ///
    /// After [`shutdown`](Runtime::shutdown) the coroutine is not run and the
    /// handle's `join` returns an error saying so; use
    /// [`try_spawn`](Runtime::try_spawn) to get the error at once. The
    /// handle records the caller ([`JoinHandle::spawned_at`]); a name, a
    /// stack size or an executor is given with
    /// [`spawn_builder`](Runtime::spawn_builder).
    #[track_caller]
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let at = Location::caller();
        let (cpe, stealable) = self.shared.place();
        self.shared
            .submit(
                cpe,
                f,
                self.on_own_executor(),
                stealable,
                SpawnOptions::at(at),
            )
            .unwrap_or_else(|_| self.shared.refused_handle(SpawnOptions::at(at)))
    }

    /// Spawns a coroutine on the executor chosen by the placement policy.
    ///
    /// # Errors
    ///
    /// [`SpawnError::ShutDown`] after shutdown.
    #[track_caller]
    pub fn try_spawn<F, T>(&self, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let at = Location::caller();
        let (cpe, stealable) = self.shared.place();
        self.shared.submit(
            cpe,
            f,
            self.on_own_executor(),
            stealable,
            SpawnOptions::at(at),
        )
    }

    /// Spawns a coroutine on executor `cpe` (pinned there for life).
    ///
    /// # Errors
    ///
    /// [`SpawnError::OutOfRange`] if `cpe >= self.executors()`,
    /// [`SpawnError::ShutDown`] after shutdown.
    #[track_caller]
    pub fn spawn_on<F, T>(&self, cpe: usize, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let at = Location::caller();
        self.shared
            .submit(cpe, f, self.on_own_executor(), false, SpawnOptions::at(at))
    }

    /// The runtime's shared state and whether the caller is one of its
    /// coroutines, for the spawn builder.
    pub(crate) fn spawn_context(&self) -> (&RuntimeShared, bool) {
        (&self.shared, self.on_own_executor())
    }

    /// The runtime's shared state, for scopes, whose children keep it.
    pub(crate) fn shared_arc(&self) -> &Arc<RuntimeShared> {
        &self.shared
    }

    /// A snapshot of the live coroutines: for each, its id, name, executor,
    /// state, what it waits on, where it was spawned and how much stack it
    /// used. Its `Display` prints one line per coroutine, grouped by
    /// executor, like a Go goroutine dump.
    ///
    /// Every executor writes its own part between two coroutines (a busy
    /// one at its next pass through its loop, a parked one woken for it),
    /// so no executor stops for longer than that; one that does not answer
    /// within a second (a coroutine there runs without suspending) is
    /// named instead. Called from a coroutine, it suspends only that
    /// coroutine, which then shows as parked on the dump's own channel.
    ///
    /// ```
    /// use swco_executor::{CoroutineState, Runtime};
    /// let rt = Runtime::builder().executors(2).build().unwrap();
    /// let (tx, rx) = swco_channel::mpmc::bounded::<u32>(0);
    /// let h = rt.spawn_builder().name("waiter").spawn(move || rx.recv()).unwrap();
    /// while !rt.dump().coroutines().iter().any(|c| c.state() == CoroutineState::Parked) {
    ///     std::thread::yield_now();
    /// }
    /// let dump = rt.dump();
    /// let waiter = &dump.coroutines()[0];
    /// assert_eq!(waiter.name(), Some("waiter"));
    /// assert!(waiter.waiting_on().starts_with("recv on mpmc channel (cas, capacity 0)"));
    /// println!("{dump}");
    /// tx.send(7).unwrap();
    /// assert_eq!(h.join().unwrap(), Ok(7));
    /// ```
    #[must_use]
    pub fn dump(&self) -> RuntimeDump {
        self.shared.dump::<Local>(None)
    }

    /// Per-executor counters (relaxed snapshots). A coroutine's `finished`
    /// is counted just after its join handle is completed, so the totals are
    /// exact once [`shutdown`](Runtime::shutdown) has returned.
    pub fn stats(&self) -> Stats {
        Stats {
            executors: self
                .shared
                .executors
                .iter()
                .map(|e| {
                    let c = &e.counters;
                    // Relaxed: statistics snapshot.
                    ExecutorStats {
                        spawned: c.spawned.load(Ordering::Relaxed),
                        finished: c.finished.load(Ordering::Relaxed),
                        context_switches: c.switches.load(Ordering::Relaxed),
                        hand_offs: c.hand_offs.load(Ordering::Relaxed),
                        blocks: c.blocks.load(Ordering::Relaxed),
                        wakes: c.wakes.load(Ordering::Relaxed),
                        parks: c.parks.load(Ordering::Relaxed),
                        stacks_mapped: c.stacks_mapped.load(Ordering::Relaxed),
                        stacks_released: c.stacks_released.load(Ordering::Relaxed),
                        stack_high_water: c.stack_high_water.load(Ordering::Relaxed),
                    }
                })
                .collect(),
        }
    }

    /// Waits for every live coroutine to finish, then stops and joins the
    /// executor threads, then waits for the blocking jobs still queued or
    /// running ([`spawn_blocking`](Runtime::spawn_blocking)) and joins the
    /// blocking pool's threads. Idempotent; also done on drop. Spawning
    /// afterwards fails with [`SpawnError::ShutDown`].
    ///
    /// # Panics
    ///
    /// If called on one of this runtime's own executor threads — from inside
    /// one of its coroutines, or a panic hook running there — since it would
    /// wait for itself.
    pub fn shutdown(&self) {
        let _ = self.shutdown_until(None);
    }

    /// Like [`shutdown`](Runtime::shutdown), but waits at most `timeout` for
    /// live coroutines. If some are still live then, they are cancelled
    /// (their stacks unwound, their join handles return a cancelled
    /// [`JoinError`](crate::JoinError)), the threads are joined, and the
    /// error reports how many were live on each executor.
    ///
    /// Cancellation unwinds each coroutine's stack from where it is parked,
    /// inside the coroutine, so the `Drop`s on the way may still block (they
    /// are woken like any other wait). Coroutines still live once the
    /// cancellation stops making progress (a `Drop` blocked for good, or a
    /// coroutine still running that has not yielded since, and so is not
    /// cancelled yet) are counted
    /// in [`ShutdownTimeout::stuck`], and their executor threads are left
    /// running, detached, rather than joined.
    ///
    /// Blocking jobs get the same deadline: then those still queued are
    /// dropped unrun (cancelled) and those still running are left to their
    /// pool threads, detached, with a note on stderr, since a blocking call
    /// cannot be unwound; they do not count in the error.
    ///
    /// A `timeout` too large to represent (`Duration::MAX`) waits for ever.
    ///
    /// # Errors
    ///
    /// [`ShutdownTimeout`] if coroutines were still live at the timeout.
    ///
    /// # Panics
    ///
    /// If called on one of this runtime's own executor threads, as
    /// [`shutdown`](Runtime::shutdown).
    pub fn shutdown_timeout(&self, timeout: Duration) -> Result<(), ShutdownTimeout> {
        // A timeout too large to represent (`Duration::MAX`) waits for ever.
        self.shutdown_until(Instant::now().checked_add(timeout))
    }

    fn on_own_executor(&self) -> bool {
        Local::current().is_some_and(|l| Arc::ptr_eq(&l.runtime, &self.shared) && l.in_coroutine())
    }

    /// Whether the caller is one of this runtime's executor threads (in a
    /// coroutine or not).
    fn on_own_thread(&self) -> bool {
        Local::current().is_some_and(|l| Arc::ptr_eq(&l.runtime, &self.shared))
    }

    fn shutdown_until(&self, deadline: Option<Instant>) -> Result<(), ShutdownTimeout> {
        assert!(
            !self.on_own_thread(),
            "swco: Runtime::shutdown called from one of its own executors; it would wait for itself"
        );
        let threads = std::mem::take(&mut *self.threads.lock().unwrap());
        if threads.is_empty() {
            // Already shut down: do not wait again for coroutines a
            // cancelling shutdown left stuck.
            return Ok(());
        }
        self.shared.shut_down(threads, deadline)
    }
}

impl RuntimeShared {
    /// Waits until no coroutine is live (`true`), or until `deadline`
    /// (`false`).
    fn wait_idle(&self, deadline: Option<Instant>) -> bool {
        let mut guard = self.idle.lock().unwrap();
        // Counted in before `live` is checked, under the lock the last
        // finisher tells whether to notify under (`finished_one`).
        *guard += 1;
        let mut idle = true;
        // SeqCst: see the module invariants.
        while self.live.load(Ordering::SeqCst) != 0 {
            match deadline {
                None => guard = self.idle_changed.wait(guard).unwrap(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        idle = false;
                        break;
                    }
                    guard = self.idle_changed.wait_timeout(guard, d - now).unwrap().0;
                }
            }
        }
        *guard -= 1;
        idle
    }

    /// [`wait_idle`](Self::wait_idle), but a wait with no deadline that
    /// lasts the stall-report period writes the stall report (unless the
    /// executors reported this very stall already) and goes on waiting.
    fn wait_idle_or_report(&self, deadline: Option<Instant>) -> bool {
        let (None, Some(period)) = (deadline, self.stall_report) else {
            return self.wait_idle(deadline);
        };
        if self.wait_idle(Instant::now().checked_add(period)) {
            return true;
        }
        // SeqCst: as in `wait_idle`.
        let live = self.live.load(Ordering::SeqCst);
        // Coroutines waiting on the blocking pool are not stalled.
        if !self.blocking.busy() && self.stall.claim_report(self.progress()) {
            let dump = self.dump::<Local>(None);
            eprintln!(
                "swco: stalled: the runtime's shutdown (or drop) has waited {period:.1?} for \
                 {} that have not finished. It keeps waiting: a plain thread may still \
                 wake them.\n{dump}",
                crate::dump::count(live, "live coroutine")
            );
        }
        self.wait_idle(None)
    }

    /// The shutdown proper: refuse spawns, wait for the live coroutines
    /// (until `deadline`), cancel what is left, stop the executors and join
    /// their `threads`.
    fn shut_down(
        &self,
        threads: Vec<thread::JoinHandle<()>>,
        deadline: Option<Instant>,
    ) -> Result<(), ShutdownTimeout> {
        // SeqCst: see the module invariants.
        self.closed.store(true, Ordering::SeqCst);
        let timed_out = !self.wait_idle_or_report(deadline);
        // Relaxed: the report is a snapshot.
        let blocked: Vec<usize> = self
            .executors
            .iter()
            .map(|e| e.live.load(Ordering::Relaxed))
            .collect();
        let mode = if timed_out {
            StopMode::Cancel
        } else {
            StopMode::Stop
        };
        for e in &self.executors {
            e.request_stop(mode);
        }
        let mut stuck = 0;
        if timed_out {
            // Cancelled coroutines unwind at once, unless a `Drop` blocks on
            // the way out: wait as long as they keep finishing.
            // SeqCst: pairs with finished_one.
            let mut left = self.live.load(Ordering::SeqCst);
            while left != 0 && !self.wait_idle(Some(Instant::now() + CANCEL_PATIENCE)) {
                let now = self.live.load(Ordering::SeqCst);
                if now >= left {
                    break;
                }
                left = now;
            }
            stuck = self.live.load(Ordering::SeqCst);
        }
        let mut detached = 0;
        for (t, e) in threads.into_iter().zip(&self.executors) {
            // Relaxed: a snapshot; an executor with nothing live exits.
            if stuck == 0 || e.live.load(Ordering::Relaxed) == 0 || t.is_finished() {
                // An executor thread does not panic (coroutine panics are
                // caught); if one did, there is nothing left to clean up.
                let _ = t.join();
            } else {
                // Left running: it finishes its stuck coroutines if they
                // are ever woken, then exits.
                detached += 1;
            }
        }
        if detached > 0 {
            eprintln!(
                "swco: shutdown_timeout: {stuck} cancelled coroutines are still running \
                 or blocked (a coroutine that has not yielded, or a Drop that blocks); \
                 {detached} executor threads are left running, detached"
            );
        }
        // No coroutine is left to submit blocking jobs (bar stuck ones,
        // which then run them in place): wait for the pool's (`blocking.rs`).
        let left_running = self.blocking.shut_down(deadline);
        if left_running > 0 {
            eprintln!(
                "swco: shutdown_timeout: {left_running} blocking jobs are still running \
                 (a blocking call cannot be unwound); their pool threads are left \
                 running, detached"
            );
        }
        if let Some(trace) = &self.trace {
            // Every joined executor has handed its recording in.
            trace.write();
        }
        let report = ShutdownTimeout { blocked, stuck };
        if timed_out && report.total() > 0 {
            Err(report)
        } else {
            Ok(())
        }
    }
}

impl Drop for Runtime {
    /// Shuts the runtime down, waiting for live coroutines. Dropped on one
    /// of its own executor threads (the last `Arc<Runtime>` released inside
    /// one of its coroutines), it cannot wait for itself: the shutdown is
    /// handed to a helper thread (`swco-shutdown`) and the drop returns.
    fn drop(&mut self) {
        if !self.on_own_thread() {
            return self.shutdown();
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap());
        if threads.is_empty() {
            return; // already shut down
        }
        // Refuse new spawns from outside now, as a shutdown would.
        // SeqCst: see the module invariants.
        self.shared.closed.store(true, Ordering::SeqCst);
        let shared = self.shared.clone();
        let helper = thread::Builder::new()
            .name("swco-shutdown".into())
            .spawn(move || {
                let _ = shared.shut_down(threads, None);
            });
        if helper.is_err() {
            // No thread to wait with: ask every executor to exit once it has
            // nothing live (their threads are detached).
            for e in &self.shared.executors {
                e.request_stop(StopMode::Stop);
            }
        }
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("executors", &self.executors())
            .field("stack_size", &self.stack_size)
            .field("placement", &self.shared.placement)
            .finish()
    }
}
