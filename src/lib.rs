//! # swco — stackful coroutines and channels, modelled on the Sunway SW26010
//!
//! An MPE scheduler ([`Runtime`]) places stackful coroutines on CPE
//! executors (64 by default, one OS thread each); coroutines talk through
//! bounded ring-buffer [`channel`]s in four modes, synchronised by CAS or by
//! the add-only `updt` protocol. A blocked `send`/`recv` suspends just the
//! coroutine; the peer that makes progress possible wakes it. The same
//! channels work between plain threads, and between threads and coroutines.
//!
//! ```
//! use swco::prelude::*;
//!
//! let rt = Runtime::builder().executors(4).build()?;
//! let (tx, rx) = channel::mpmc::bounded_with::<u64, Updt>(2);
//! let producers: Vec<_> = (0..4)
//!     .map(|p| {
//!         let tx = tx.clone();
//!         rt.spawn(move || for i in 0..100 { tx.send(p * 100 + i).unwrap() })
//!     })
//!     .collect();
//! drop(tx);
//! let consumer = rt.spawn_on(0, move || rx.iter().sum::<u64>())?;
//! for p in producers {
//!     p.join()?;
//! }
//! assert_eq!(consumer.join()?, (0..400).sum());
//! rt.shutdown();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// Bounded ring-buffer channels in four modes, with CAS and add-only
/// protocols. See [`swco_channel`].
pub use swco_channel as channel;
/// Waits on several channel operations; see [`swco_channel::select!`].
pub use swco_channel::select;
/// [`select!`], taking the first ready operation in order; see
/// [`swco_channel::select_biased!`].
pub use swco_channel::select_biased;
/// Coroutine-aware `Mutex`, `Semaphore`, `Barrier` and `WaitGroup`: each
/// blocks only the calling coroutine (a plain thread blocks itself), where
/// `std`'s would block the whole executor. See [`swco_sync`].
pub use swco_sync as sync;

// --- runtime API (swco-executor) -------------------------------------------
pub use swco_executor::{
    current_cpe, current_id, current_name, shutdown_requested, sleep, sleep_until, spawn, unblock,
    yield_now, BuildError, ExecutorStats, GuardPages, JoinError, JoinFuture, JoinHandle, Placement,
    Runtime, RuntimeBuilder, ShutdownTimeout, SpawnBuilder, SpawnError, Stats, DEFAULT_EXECUTORS,
    DEFAULT_STACK_SIZE, MAX_EXECUTORS, MIN_STACK_SIZE,
};
// --- athread / swYAKL model (swco-executor) -----------------------------------
pub use swco_executor::{
    parallel_for, parallel_reduce, scope, GroupHandle, Scope, ScopedJoinHandle,
};
// --- end athread / swYAKL model ----------------------------------------------
pub use swco_executor::{DEFAULT_BLOCKING_KEEP_ALIVE, DEFAULT_BLOCKING_THREADS};
// --- end runtime API ---------------------------------------------------------

/// The names most programs need: `use swco::prelude::*;`.
pub mod prelude {
    pub use crate::channel::{self, mpmc, mpsc, spmc, spsc, Cas, Updt};
    pub use crate::{current_cpe, sleep, spawn, unblock, yield_now, JoinHandle, Runtime};
}

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
