//! Errors of building a runtime, spawning on it and shutting it down.

use std::fmt;

/// Why [`RuntimeBuilder::build`](crate::RuntimeBuilder::build) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `executors(0)`: a runtime needs at least one executor.
    NoExecutors,
    /// [`blocking_threads(0)`](crate::RuntimeBuilder::blocking_threads):
    /// the blocking pool needs room for at least one thread.
    NoBlockingThreads,
    /// More executors than [`MAX_EXECUTORS`](crate::MAX_EXECUTORS): each is
    /// an OS thread with its own stacks, and counts in the tens of thousands
    /// exhaust the kernel's thread and mapping limits.
    TooManyExecutors {
        /// The count asked for.
        requested: usize,
        /// The largest count accepted.
        maximum: usize,
    },
    /// The requested coroutine stack is smaller than
    /// [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE).
    StackTooSmall {
        /// The size asked for, in bytes.
        requested: usize,
        /// The smallest size accepted, in bytes.
        minimum: usize,
    },
    /// The requested coroutine stack is too large to map.
    StackTooLarge {
        /// The size asked for, in bytes.
        requested: usize,
        /// Why mapping it failed.
        error: std::io::Error,
    },
    /// The OS refused to start an executor thread.
    Thread(std::io::Error),
    /// [`dump_on_sigquit`](crate::RuntimeBuilder::dump_on_sigquit) could
    /// not install its handler or start its thread.
    Signal(std::io::Error),
    /// The trace file asked for with
    /// [`RuntimeBuilder::trace`](crate::RuntimeBuilder::trace) cannot be
    /// created (it is created, or truncated, at build time).
    Trace {
        /// The path given.
        path: std::path::PathBuf,
        /// Why creating it failed.
        error: std::io::Error,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NoExecutors => {
                f.write_str("a runtime needs at least one executor (executors(0) given)")
            }
            BuildError::NoBlockingThreads => f.write_str(
                "the blocking pool needs at least one thread (blocking_threads(0) given)",
            ),
            BuildError::TooManyExecutors { requested, maximum } => write!(
                f,
                "{requested} executors requested; at most {maximum} are supported \
                 (each is an OS thread)"
            ),
            BuildError::StackTooSmall { requested, minimum } => write!(
                f,
                "coroutine stack size {requested} bytes is below the minimum of {minimum} bytes"
            ),
            BuildError::StackTooLarge { requested, error } => write!(
                f,
                "cannot map a coroutine stack of {requested} bytes: {error}"
            ),
            BuildError::Thread(e) => write!(f, "could not start an executor thread: {e}"),
            BuildError::Signal(e) => write!(f, "could not set up the SIGQUIT dump: {e}"),
            BuildError::Trace { path, error } => write!(
                f,
                "cannot create the trace file {}: {error}",
                path.display()
            ),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Thread(e)
            | BuildError::Signal(e)
            | BuildError::StackTooLarge { error: e, .. }
            | BuildError::Trace { error: e, .. } => Some(e),
            _ => None,
        }
    }
}

/// Why a coroutine could not be spawned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpawnError {
    /// [`spawn_on`](crate::Runtime::spawn_on) named an executor that does
    /// not exist.
    OutOfRange {
        /// The executor index asked for.
        cpe: usize,
        /// How many executors the runtime has.
        executors: usize,
    },
    /// The runtime has been shut down.
    ShutDown,
    /// [`SpawnBuilder::stack_size`](crate::SpawnBuilder::stack_size) asked
    /// for less than [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE).
    StackTooSmall {
        /// The size asked for, in bytes.
        requested: usize,
        /// The smallest size accepted, in bytes.
        minimum: usize,
    },
    /// [`SpawnBuilder::stack_size`](crate::SpawnBuilder::stack_size) asked
    /// for more than an address space can hold (a size the OS cannot map
    /// at the moment is reported later, through the join handle:
    /// [`JoinError::is_refused`](crate::JoinError::is_refused)).
    StackTooLarge {
        /// The size asked for, in bytes.
        requested: usize,
    },
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::OutOfRange { cpe, executors } => write!(
                f,
                "executor index {cpe} is out of range: the runtime has {executors} executors (0..{executors})"
            ),
            SpawnError::ShutDown => f.write_str("the runtime is shut down"),
            SpawnError::StackTooSmall { requested, minimum } => write!(
                f,
                "coroutine stack size {requested} bytes is below the minimum of {minimum} bytes"
            ),
            SpawnError::StackTooLarge { requested } => write!(
                f,
                "coroutine stack size {requested} bytes is too large for the address space"
            ),
        }
    }
}

impl std::error::Error for SpawnError {}

/// [`shutdown_timeout`](crate::Runtime::shutdown_timeout) expired with
/// coroutines still live. They have been cancelled (their stacks unwound) and
/// the executor threads joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownTimeout {
    /// Live (blocked or still running) coroutines per executor when the
    /// timeout expired, indexed by executor.
    pub blocked: Vec<usize>,
    /// Cancelled coroutines still not finished when the shutdown returned:
    /// still running without having yielded (a cancellation takes effect
    /// only where a coroutine yields or blocks), or blocked in a `Drop`
    /// during their unwinding. Their executor threads were left running,
    /// detached; they finish them as they run on, or if they are woken.
    pub stuck: usize,
}

impl ShutdownTimeout {
    /// Total number of coroutines that were still live.
    #[must_use]
    pub fn total(&self) -> usize {
        self.blocked.iter().sum()
    }
}

impl fmt::Display for ShutdownTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "shutdown timed out with {} coroutines still live",
            self.total()
        )?;
        let busy: Vec<String> = self
            .blocked
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, n)| format!("cpe {i}: {n}"))
            .collect();
        if !busy.is_empty() {
            write!(f, " ({})", busy.join(", "))?;
        }
        if self.stuck > 0 {
            write!(
                f,
                "; {} were still running or blocked after cancellation \
                 (their executors are left running)",
                self.stuck
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for ShutdownTimeout {}
