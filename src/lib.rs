//! # swco — stackful coroutines and channels, modelled on the Sunway SW26010
//!
//! See the README for an overview. The channel crate is re-exported as
//! [`channel`].

/// Bounded ring-buffer channels in four modes, with CAS and add-only
/// protocols. See [`swco_channel`].
pub use swco_channel as channel;

// --- runtime API (swco-executor) -------------------------------------------
pub use swco_executor::{
    current_cpe, spawn, yield_now, BuildError, ExecutorStats, JoinError, JoinHandle, Placement,
    Runtime, RuntimeBuilder, ShutdownTimeout, SpawnError, Stats, DEFAULT_EXECUTORS,
    DEFAULT_STACK_SIZE, MIN_STACK_SIZE,
};
// --- end runtime API ---------------------------------------------------------
