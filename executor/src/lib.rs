//! CPE executors and the MPE scheduler of swco: stackful coroutines that
//! block on channels.
//!
//! A [`Runtime`] starts `executors(n)` OS threads (`swco-cpe-<i>`), each a
//! CPE executor with a runnable queue, a task table and an inbox. The
//! runtime (the MPE scheduler) places each spawned coroutine on one executor
//! (by [`Placement`]: local with stealing, round-robin or least-loaded; or
//! pinned with [`spawn_on`](Runtime::spawn_on)). It gets its stack there when
//! it first runs, and stays there for life. A coroutine
//! that blocks on a `swco-channel` channel or on a [`JoinHandle`] suspends
//! in its executor's task table; the wake puts it back on that executor's
//! runnable queue. Idle executors park. A std blocking call would stop
//! a whole executor: [`unblock`] (or [`Runtime::spawn_blocking`]) runs it
//! on the runtime's blocking pool while only the calling coroutine waits.
//!
//! ```
//! use swco_executor::Runtime;
//! use swco_channel::mpmc;
//!
//! let rt = Runtime::builder().executors(4).build().unwrap();
//! let (tx, rx) = mpmc::bounded::<u64>(1);
//! let consumer = rt.spawn(move || rx.iter().sum::<u64>());
//! let producer = rt.spawn(move || for i in 1..=100 { tx.send(i).unwrap() });
//! producer.join().unwrap();
//! assert_eq!(consumer.join().unwrap(), 5050);
//! ```
#![cfg_attr(loom, allow(dead_code, unused_imports))]
#![warn(missing_docs)]

#[cfg(not(loom))]
mod blocking;
mod chunks;
mod error;
mod inbox;
mod join;
mod wake;

#[cfg(not(loom))]
mod countdown;
#[cfg(not(loom))]
mod dump;
#[cfg(not(loom))]
mod executor;
#[cfg(not(loom))]
mod group;
#[cfg(not(loom))]
mod job;
#[cfg(not(loom))]
mod panic;
#[cfg(not(loom))]
mod panic_hook;
#[cfg(not(loom))]
mod parallel;
#[cfg(not(loom))]
mod park;
#[cfg(not(loom))]
mod placement;
#[cfg(not(loom))]
mod queues;
#[cfg(not(loom))]
mod runtime;
#[cfg(not(loom))]
mod scope;
#[cfg(not(loom))]
mod shared;
#[cfg(not(loom))]
mod sigquit;
#[cfg(not(loom))]
mod spawning;
#[cfg(not(loom))]
mod stack;
mod stall;
#[cfg(not(loom))]
mod stats;
mod sync;
#[cfg(not(loom))]
mod task;
#[cfg(not(loom))]
mod trace;

pub use error::{BuildError, ShutdownTimeout, SpawnError};
pub use join::{JoinError, JoinFuture, JoinHandle};

#[cfg(not(loom))]
pub use blocking::{DEFAULT_BLOCKING_KEEP_ALIVE, DEFAULT_BLOCKING_THREADS};
#[cfg(not(loom))]
pub use dump::{CoroutineDump, CoroutineState, RuntimeDump};
#[cfg(not(loom))]
pub use group::GroupHandle;
#[cfg(not(loom))]
pub use parallel::{parallel_for, parallel_reduce};
#[cfg(not(loom))]
pub use placement::Placement;
#[cfg(not(loom))]
pub use runtime::builder::{
    RuntimeBuilder, DEFAULT_EXECUTORS, DEFAULT_STALL_REPORT, MAX_EXECUTORS,
};
#[cfg(not(loom))]
pub use runtime::current::{
    current_cpe, current_id, current_name, shutdown_requested, sleep, sleep_until, spawn, yield_now,
};
#[cfg(not(loom))]
pub use runtime::spawn_builder::SpawnBuilder;
#[cfg(not(loom))]
pub use runtime::unblocking::unblock;
#[cfg(not(loom))]
pub use runtime::Runtime;
#[cfg(not(loom))]
pub use scope::{scope, Scope, ScopedJoinHandle};
#[cfg(not(loom))]
pub use stack::{GuardPages, DEFAULT_STACK_SIZE, MIN_STACK_SIZE};
#[cfg(not(loom))]
pub use stats::{ExecutorStats, Stats};

/// The loom models of the synchronisation cores above (wake state, inbox,
/// join slot, chunk claim, stall accounting): only in the crate's own unit
/// tests under `--cfg loom`, where the modules they need are all that is
/// built.
#[cfg(all(test, loom))]
mod loom_tests;

/// The README's example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
