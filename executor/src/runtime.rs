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

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::sync::Parker;

use crate::error::{BuildError, ShutdownTimeout, SpawnError};
use crate::executor::{self, Local};
use crate::join::{JoinError, JoinHandle, JoinSlot};
use crate::panic_hook::install_panic_hook;
use crate::park;
use crate::placement::Placement;
use crate::shared::{ExecutorShared, RuntimeShared, StopMode};
use crate::stack::{self, page_size, DEFAULT_STACK_SIZE, MIN_STACK_SIZE};
use crate::stats::{ExecutorStats, Stats};
use crate::task::Suspend;

/// The default number of executors: one per CPE of an SW26010 core group.
pub const DEFAULT_EXECUTORS: usize = 64;

/// The largest executor count [`RuntimeBuilder::build`] accepts (a whole
/// SW26010 chip has 256 CPEs). Each executor is an OS thread with its own
/// thread stack and signal stack; tens of thousands of them exhaust the
/// kernel's mapping limit and abort inside the thread start.
pub const MAX_EXECUTORS: usize = 4096;

/// How long a cancelling shutdown waits, after its timeout, for cancelled
/// coroutines to finish unwinding while none finishes. Unwinding normally
/// takes microseconds; a coroutine that stays blocked longer is blocked in a
/// `Drop` (or never yields), and its executor is then left running, detached.
const CANCEL_PATIENCE: Duration = Duration::from_millis(200);

/// Configures and builds a [`Runtime`].
///
/// ```
/// use swco_executor::{Placement, Runtime};
/// let rt = Runtime::builder()
///     .executors(4)
///     .stack_size(32 * 1024)
///     .placement(Placement::LeastLoaded)
///     .build()
///     .unwrap();
/// assert_eq!(rt.executors(), 4);
/// ```
#[derive(Debug, Clone)]
pub struct RuntimeBuilder {
    executors: usize,
    stack_size: usize,
    placement: Placement,
    guard_pages: stack::GuardPages,
    max_stacks: usize,
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder {
            executors: DEFAULT_EXECUTORS,
            stack_size: DEFAULT_STACK_SIZE,
            placement: Placement::default(),
            guard_pages: stack::GuardPages::Auto,
            max_stacks: usize::MAX,
        }
    }
}

impl RuntimeBuilder {
    /// A builder with the defaults: 64 executors, 64 KiB stacks, local
    /// placement with stealing.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of CPE executors (OS threads, named `swco-cpe-<i>`).
    /// Zero is a [`BuildError::NoExecutors`], more than [`MAX_EXECUTORS`] a
    /// [`BuildError::TooManyExecutors`].
    #[must_use]
    pub fn executors(mut self, n: usize) -> Self {
        self.executors = n;
        self
    }

    /// Usable bytes per coroutine stack (rounded up to whole pages; a guard
    /// page is added below). Less than [`MIN_STACK_SIZE`] is a
    /// [`BuildError::StackTooSmall`].
    #[must_use]
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }

    /// How the guard page below each coroutine stack is made (see
    /// [`GuardPages`](stack::GuardPages)); [`Runtime::guard_pages`] reports
    /// the path taken. With the default, `Auto`, the environment variable
    /// `SWCO_GUARD_PAGES` (`madvise`, `mprotect` or `auto`) decides, else
    /// the kernel's support for guard regions. An explicit
    /// `GuardRegion` on a kernel without them (before Linux 6.13) is a
    /// [`BuildError::StackTooLarge`] naming the cause.
    #[must_use]
    pub fn guard_pages(mut self, how: stack::GuardPages) -> Self {
        self.guard_pages = how;
        self
    }

    /// The most coroutine stacks each executor may hold (live and free):
    /// a spawn beyond it is refused (`JoinError::is_refused`). For tests of
    /// spawn failure; unlimited by default.
    #[doc(hidden)]
    #[must_use]
    pub fn max_stacks(mut self, per_executor: usize) -> Self {
        self.max_stacks = per_executor;
        self
    }

    /// The placement policy of [`Runtime::spawn`].
    #[must_use]
    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Starts the executor threads.
    ///
    /// The first build also wraps the process's panic hook (whatever hook is
    /// set then keeps running): for a panic in a coroutine, the hook runs
    /// with suspension forbidden (a hook that blocks parks the executor
    /// thread), and near the bottom of a small coroutine stack it runs on the
    /// executor's stack rather than overflowing. A hook set after the first
    /// build replaces the wrapper: it then runs on the coroutine's stack, and
    /// must neither block nor need much stack.
    ///
    /// # Errors
    ///
    /// [`BuildError`] for zero executors, a stack below [`MIN_STACK_SIZE`] or
    /// too large to map, or a failure to start a thread.
    // The lock is never poisoned: nothing panics while holding it.
    #[allow(clippy::missing_panics_doc)]
    pub fn build(self) -> Result<Runtime, BuildError> {
        if self.executors == 0 {
            return Err(BuildError::NoExecutors);
        }
        if self.executors > MAX_EXECUTORS {
            return Err(BuildError::TooManyExecutors {
                requested: self.executors,
                maximum: MAX_EXECUTORS,
            });
        }
        if self.stack_size < MIN_STACK_SIZE {
            return Err(BuildError::StackTooSmall {
                requested: self.stack_size,
                minimum: MIN_STACK_SIZE,
            });
        }
        install_panic_hook();
        let page = page_size();
        let too_large = |error| BuildError::StackTooLarge {
            requested: self.stack_size,
            error,
        };
        let stack_size = self
            .stack_size
            .checked_next_multiple_of(page)
            .filter(|s| {
                s.checked_add(2 * page)
                    .is_some_and(|t| t <= isize::MAX as usize)
            })
            .ok_or_else(|| too_large(std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
        // Pick the guard-page path and map one stack now, so a size the OS
        // cannot provide (or a guard path it lacks) is a build error rather
        // than a failure at every spawn.
        let stacks = stack::StackConfig::new(stack_size, self.guard_pages, self.max_stacks)
            .map_err(too_large)?;

        let parkers: Vec<Parker> = (0..self.executors).map(|_| Parker::new()).collect();
        let executors: Vec<Arc<ExecutorShared>> = parkers
            .iter()
            .enumerate()
            .map(|(i, p)| Arc::new(ExecutorShared::new(i, p.unparker())))
            .collect();
        let shared = Arc::new(RuntimeShared {
            executors,
            placement: self.placement,
            next: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            idle: Mutex::new(()),
            idle_changed: Condvar::new(),
        });
        let runtime = Runtime {
            shared: shared.clone(),
            threads: Mutex::new(Vec::with_capacity(self.executors)),
            stack_size,
            guard_pages: stacks.guard_pages(),
        };
        for (i, parker) in parkers.into_iter().enumerate() {
            let exec = shared.executors[i].clone();
            let rt = shared.clone();
            let started = thread::Builder::new()
                .name(format!("swco-cpe-{i}"))
                .spawn(move || executor::run_executor(exec, rt, parker, stacks, park::install));
            match started {
                Ok(t) => runtime.threads.lock().unwrap().push(t),
                // Dropping `runtime` stops and joins the threads started so far.
                Err(e) => return Err(BuildError::Thread(e)),
            }
        }
        Ok(runtime)
    }
}

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
    /// A builder, to configure executors, stack size and placement.
    #[must_use]
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::new()
    }

    /// A runtime with all defaults (64 executors, 64 KiB stacks, local
    /// placement with stealing).
    ///
    /// # Errors
    ///
    /// [`BuildError::Thread`] if an executor thread cannot be started.
    pub fn new() -> Result<Runtime, BuildError> {
        RuntimeBuilder::new().build()
    }

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
    /// [`try_spawn`](Runtime::try_spawn) to get the error at once.
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.try_spawn(f).unwrap_or_else(|_| {
            let (completer, handle) = JoinSlot::pair();
            completer.complete(Err(JoinError::shut_down()));
            handle
        })
    }

    /// Spawns a coroutine on the executor chosen by the placement policy.
    ///
    /// # Errors
    ///
    /// [`SpawnError::ShutDown`] after shutdown.
    pub fn try_spawn<F, T>(&self, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (cpe, stealable) = self.shared.place();
        self.shared
            .submit(cpe, f, self.on_own_executor(), stealable)
    }

    /// Spawns a coroutine on executor `cpe` (pinned there for life).
    ///
    /// # Errors
    ///
    /// [`SpawnError::OutOfRange`] if `cpe >= self.executors()`,
    /// [`SpawnError::ShutDown`] after shutdown.
    pub fn spawn_on<F, T>(&self, cpe: usize, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.shared.submit(cpe, f, self.on_own_executor(), false)
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
                        blocks: c.blocks.load(Ordering::Relaxed),
                        wakes: c.wakes.load(Ordering::Relaxed),
                        parks: c.parks.load(Ordering::Relaxed),
                        stacks_mapped: c.stacks_mapped.load(Ordering::Relaxed),
                        stacks_released: c.stacks_released.load(Ordering::Relaxed),
                    }
                })
                .collect(),
        }
    }

    /// Waits for every live coroutine to finish, then stops and joins the
    /// executor threads. Idempotent; also done on drop. Spawning afterwards
    /// fails with [`SpawnError::ShutDown`].
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
    /// [`JoinError`]), the threads are joined, and the error reports how many
    /// were live on each executor.
    ///
    /// Cancellation unwinds each coroutine's stack from where it is parked,
    /// inside the coroutine, so the `Drop`s on the way may still block (they
    /// are woken like any other wait). Coroutines still live once the
    /// cancellation stops making progress (a `Drop` blocked for good, or a
    /// coroutine that never yields and so cannot be cancelled) are counted
    /// in [`ShutdownTimeout::stuck`], and their executor threads are left
    /// running, detached, rather than joined.
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
        // SeqCst: see the module invariants.
        while self.live.load(Ordering::SeqCst) != 0 {
            match deadline {
                None => guard = self.idle_changed.wait(guard).unwrap(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    guard = self.idle_changed.wait_timeout(guard, d - now).unwrap().0;
                }
            }
        }
        true
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
        let timed_out = !self.wait_idle(deadline);
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
                "swco: shutdown_timeout: {stuck} cancelled coroutines are still blocked \
                 (a Drop that blocks, or a coroutine that never yields); \
                 {detached} executor threads are left running, detached"
            );
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

/// Spawns a coroutine on the current coroutine's runtime, placed by its
/// policy.
///
/// ```
/// # use swco_executor::Runtime;
/// let rt = Runtime::builder().executors(2).build().unwrap();
/// let h = rt.spawn(|| swco_executor::spawn(|| 1 + 1).join().unwrap());
/// assert_eq!(h.join().unwrap(), 2);
/// ```
///
/// # Panics
///
/// If called outside a coroutine (there is no runtime to spawn on): use
/// [`Runtime::spawn`] there.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let local = Local::current()
        .filter(|l| l.in_coroutine())
        .expect("swco::spawn called outside a coroutine; use Runtime::spawn from plain threads");
    let rt = local.runtime.clone();
    let (cpe, stealable) = rt.place();
    match rt.submit(cpe, f, true, stealable) {
        Ok(h) => h,
        Err(e) => unreachable!("spawn from a live coroutine cannot fail: {e}"),
    }
}

/// Lets the other runnable coroutines of this executor run, then continues.
/// Outside a coroutine (or inside a panic hook), yields the OS thread.
pub fn yield_now() {
    match Local::current().filter(|l| l.can_suspend()) {
        Some(local) => {
            // A cancellation a rendezvous receive put off goes on now.
            swco_channel::hook::resume_deferred_unwind();
            local.suspend(Suspend::Yield)
        }
        None => thread::yield_now(),
    }
}

/// Suspends the current coroutine for at least `duration`, on its
/// executor's timer: the executor's other coroutines keep running, which
/// `std::thread::sleep` would stop. Outside a coroutine (or inside a panic
/// hook) it is `std::thread::sleep`.
///
/// A cancelling shutdown (`Runtime::shutdown_timeout`) unwinds a sleeping
/// coroutine like a blocked one.
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let rt = swco_executor::Runtime::builder().executors(1).build().unwrap();
/// // Two sleepers on one executor overlap: the second does not wait for
/// // the first.
/// let start = Instant::now();
/// let a = rt.spawn_on(0, || swco_executor::sleep(Duration::from_millis(50))).unwrap();
/// let b = rt.spawn_on(0, || swco_executor::sleep(Duration::from_millis(50))).unwrap();
/// a.join().unwrap();
/// b.join().unwrap();
/// assert!(start.elapsed() >= Duration::from_millis(50));
/// ```
pub fn sleep(duration: Duration) {
    match Instant::now().checked_add(duration) {
        Some(deadline) => sleep_until(deadline),
        // Further than `Instant` reaches: for ever, as good as.
        None => loop {
            sleep_until(Instant::now() + Duration::from_secs(3600 * 24 * 365));
        },
    }
}

/// Suspends the current coroutine until `deadline` (at once if it has
/// passed), on its executor's timer; see [`sleep`]. Outside a coroutine it
/// sleeps the OS thread.
// The `expect` states an internal invariant; callers cannot reach it.
#[allow(clippy::missing_panics_doc)]
pub fn sleep_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        match Local::current().filter(|l| l.can_suspend()) {
            Some(local) => {
                let header = local
                    .running_header()
                    .expect("a coroutine that can suspend is running");
                // A cancellation a rendezvous receive put off goes on now.
                swco_channel::hook::resume_deferred_unwind();
                // Nobody holds a waker for this coroutine, so only the
                // timer (or a cancelling shutdown) resumes it; the loop
                // absorbs any early return all the same.
                if header.state.prepare_park() {
                    local.suspend(Suspend::Park(Some(deadline)));
                }
            }
            None => thread::sleep(deadline - now),
        }
    }
}

/// The index of the executor (CPE) running the current coroutine; `None`
/// outside a coroutine.
#[must_use]
pub fn current_cpe() -> Option<usize> {
    Local::current()
        .filter(|l| l.in_coroutine())
        .map(|l| l.shared.index)
}
