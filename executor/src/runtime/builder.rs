//! Configuring and starting a [`Runtime`]: executor count, stack size and
//! guard pages, the stack limit, and placement, each checked before any
//! thread starts, so bad input is a [`BuildError`], never a hang or a
//! failure at the first spawn.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use crate::blocking::{BlockingPool, DEFAULT_BLOCKING_KEEP_ALIVE, DEFAULT_BLOCKING_THREADS};
use crate::sync::Parker;

use super::Runtime;
use crate::error::BuildError;
use crate::executor;
use crate::panic_hook::install_panic_hook;
use crate::park;
use crate::placement::Placement;
use crate::shared::{ExecutorShared, RuntimeShared};
use crate::stack::{self, page_size, DEFAULT_STACK_SIZE, MIN_STACK_SIZE};
use crate::stall::StallWatch;
use crate::trace::{TraceSink, DEFAULT_TRACE_CAPACITY};

/// The default number of executors: one per CPE of an SW26010 core group.
pub const DEFAULT_EXECUTORS: usize = 64;

/// The largest executor count [`RuntimeBuilder::build`] accepts (a whole
/// SW26010 chip has 256 CPEs). Each executor is an OS thread with its own
/// thread stack and signal stack; tens of thousands of them exhaust the
/// kernel's mapping limit and abort inside the thread start.
pub const MAX_EXECUTORS: usize = 4096;

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
    stall_report: Option<Duration>,
    dump_on_sigquit: bool,
    trace: Option<PathBuf>,
    trace_capacity: usize,
    blocking_threads: usize,
    blocking_keep_alive: Duration,
}

/// The default period of [`RuntimeBuilder::stall_report`].
pub const DEFAULT_STALL_REPORT: Duration = Duration::from_secs(10);

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder {
            executors: DEFAULT_EXECUTORS,
            stack_size: DEFAULT_STACK_SIZE,
            placement: Placement::default(),
            guard_pages: stack::GuardPages::Auto,
            max_stacks: usize::MAX,
            stall_report: Some(DEFAULT_STALL_REPORT),
            dump_on_sigquit: false,
            trace: None,
            trace_capacity: DEFAULT_TRACE_CAPACITY,
            blocking_threads: DEFAULT_BLOCKING_THREADS,
            blocking_keep_alive: DEFAULT_BLOCKING_KEEP_ALIVE,
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
    /// spawn failure; unlimited otherwise.
    #[cfg(test)]
    #[must_use]
    pub(crate) fn max_stacks(mut self, per_executor: usize) -> Self {
        self.max_stacks = per_executor;
        self
    }

    /// After how long a stalled runtime reports itself on stderr (`None`:
    /// never); 10 s by default.
    ///
    /// A runtime is stalled when it has live coroutines, none of them is
    /// runnable, none waits with a deadline (a sleep, a timed operation),
    /// and nothing has been woken for that long: typically coroutines that
    /// wait on each other. It then writes a [`dump`](Runtime::dump) of its
    /// coroutines to stderr, once per stall, under a first line that
    /// contains `stalled`. It is a report, not an abort: a plain thread may
    /// still wake them, and the runtime goes on.
    ///
    /// Dropping (or shutting down) a runtime whose coroutines do not finish
    /// writes the same report after the same period, and keeps waiting.
    ///
    /// The accounting happens only when an executor parks and unparks, so
    /// a busy runtime pays nothing for it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use swco_executor::Runtime;
    /// let rt = Runtime::builder()
    ///     .executors(2)
    ///     .stall_report(Some(Duration::from_secs(60)))
    ///     .build()
    ///     .unwrap();
    /// # drop(rt);
    /// ```
    #[must_use]
    pub fn stall_report(mut self, after: Option<Duration>) -> Self {
        self.stall_report = after;
        self
    }

    /// Whether `SIGQUIT` (`kill -QUIT <pid>`, or Ctrl-\\ in a terminal)
    /// writes a [`dump`](Runtime::dump) of this runtime to stderr, as Go
    /// does for goroutines; off by default. Unlike Go, the program goes on.
    ///
    /// The signal handler only writes a byte to a pipe; a thread of its own
    /// (`swco-sigquit`, one per process) takes the dumps. It replaces any
    /// other `SIGQUIT` handler, so leave it off in a program that has one.
    /// Failing to install it is a [`BuildError::Signal`].
    #[must_use]
    pub fn dump_on_sigquit(mut self, on: bool) -> Self {
        self.dump_on_sigquit = on;
        self
    }

    /// The placement policy of [`Runtime::spawn`].
    #[must_use]
    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Records a trace of the runtime and writes it to `path` at shutdown,
    /// as Chrome trace-event JSON: open it in [Perfetto](https://ui.perfetto.dev)
    /// or `chrome://tracing`.
    ///
    /// The trace has one track per executor (thread `swco-cpe-<i>`, `tid`
    /// `i`). Each run of a coroutine, from its resumption until it suspends
    /// or returns, is a complete event named after the coroutine (its
    /// [spawn name](crate::SpawnBuilder::name), else `#<id>`, the id of
    /// [`current_id`](crate::current_id)), with its id in `args`. Spawns
    /// (where the new coroutine's job arrives), parks and wakes are
    /// instant events on the executor where they happen; a wake's `args`
    /// say whether it came from a coroutine of the same executor
    /// (`local`), from another thread (`remote`, recorded when the executor
    /// takes it from its inbox) or from a deadline (`timer`). Times are in
    /// microseconds since the runtime was built.
    ///
    /// Each executor keeps at most [`trace_capacity`](Self::trace_capacity)
    /// events (1 Mi by default, 24 bytes each); later ones are counted and
    /// dropped, and the file says how many (`otherData`, and a
    /// "trace buffer full" instant where each executor began dropping).
    ///
    /// The file is created (or truncated) by [`build`](Self::build), so a
    /// path that cannot be written is a [`BuildError::Trace`] there; it is
    /// written when the runtime shuts down ([`Runtime::shutdown`], or its
    /// drop), from what every executor recorded until it stopped. An
    /// executor a [`shutdown_timeout`](Runtime::shutdown_timeout) leaves
    /// running, detached, contributes only its track's name. With tracing
    /// off, recording costs one test of a field per run, wake and spawn.
    ///
    /// ```
    /// use swco_channel::spsc;
    /// use swco_executor::Runtime;
    ///
    /// let path = std::env::temp_dir().join(format!("swco-doc-trace-{}.json", std::process::id()));
    /// let rt = Runtime::builder().executors(2).trace(&path).build().unwrap();
    /// let (tx, rx) = spsc::bounded::<u32>(1);
    /// let consumer = rt.spawn_builder().name("consumer").spawn(move || rx.iter().sum::<u32>()).unwrap();
    /// rt.spawn(move || (1..=10).for_each(|i| tx.send(i).unwrap()));
    /// assert_eq!(consumer.join().unwrap(), 55);
    /// rt.shutdown(); // writes the file
    ///
    /// let json = std::fs::read_to_string(&path).unwrap();
    /// assert!(json.starts_with("{\"traceEvents\":["));
    /// assert!(json.contains("\"name\":\"consumer\",\"cat\":\"run\",\"ph\":\"X\""));
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    #[must_use]
    pub fn trace(mut self, path: impl Into<PathBuf>) -> Self {
        self.trace = Some(path.into());
        self
    }

    /// The most events each executor keeps for the
    /// [`trace`](Self::trace) (1 Mi by default); events past it are counted
    /// as dropped. Without `trace`, this does nothing.
    #[must_use]
    pub fn trace_capacity(mut self, events: usize) -> Self {
        self.trace_capacity = events;
        self
    }

    /// The most threads of the blocking pool, which runs
    /// [`unblock`](crate::unblock) and
    /// [`Runtime::spawn_blocking`] jobs: [`DEFAULT_BLOCKING_THREADS`] (512)
    /// by default. None is started at build time; each starts when a job
    /// finds every running one busy (named `swco-blocking-<n>`), and exits
    /// after [`DEFAULT_BLOCKING_KEEP_ALIVE`] (10 s) without a job. With
    /// `max` threads busy, further jobs wait in the pool's queue, in order.
    /// Zero is a [`BuildError::NoBlockingThreads`].
    ///
    /// ```
    /// let rt = swco_executor::Runtime::builder()
    ///     .executors(1)
    ///     .blocking_threads(2)
    ///     .build()
    ///     .unwrap();
    /// let jobs: Vec<_> = (0..4u64).map(|i| rt.spawn_blocking(move || i * i)).collect();
    /// let sum: u64 = jobs.into_iter().map(|h| h.join().unwrap()).sum();
    /// assert_eq!(sum, 14);
    /// ```
    #[must_use]
    pub fn blocking_threads(mut self, max: usize) -> Self {
        self.blocking_threads = max;
        self
    }

    /// How long an idle blocking-pool thread waits for a job before it
    /// exits ([`DEFAULT_BLOCKING_KEEP_ALIVE`] otherwise). For tests.
    #[cfg(test)]
    #[must_use]
    pub(crate) fn blocking_keep_alive(mut self, keep_alive: Duration) -> Self {
        self.blocking_keep_alive = keep_alive;
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
    /// [`BuildError`] for zero executors (or blocking threads), a stack below [`MIN_STACK_SIZE`] or
    /// too large to map, a trace file that cannot be created, or a failure
    /// to start a thread.
    // The lock is never poisoned: nothing panics while holding it.
    #[allow(clippy::missing_panics_doc)]
    pub fn build(self) -> Result<Runtime, BuildError> {
        if self.executors == 0 {
            return Err(BuildError::NoExecutors);
        }
        if self.blocking_threads == 0 {
            return Err(BuildError::NoBlockingThreads);
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
        install_panic_hook::<executor::Local>();
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

        let trace = match self.trace {
            Some(path) => {
                match TraceSink::create(path.clone(), self.trace_capacity, self.executors) {
                    Ok(sink) => Some(sink),
                    Err(error) => return Err(BuildError::Trace { path, error }),
                }
            }
            None => None,
        };

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
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            idle: Mutex::new(0),
            idle_changed: Condvar::new(),
            stall: StallWatch::new(),
            stall_report: self.stall_report,
            trace,
            blocking: BlockingPool::new(self.blocking_threads, self.blocking_keep_alive),
            core_each: thread::available_parallelism().is_ok_and(|n| self.executors <= n.get()),
        });
        if self.dump_on_sigquit {
            crate::sigquit::register(&shared, |rt| rt.dump::<executor::Local>(None))
                .map_err(BuildError::Signal)?;
        }
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

/// Here rather than with the rest of `Runtime` (`mod.rs`), which then
/// does not name the builder.
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
}
