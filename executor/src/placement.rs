//! The placement policy of spawns: the public [`Placement`] enum. Choosing
//! an executor by it is the spawn path's job (`spawning.rs`); offering spare
//! work to idle executors is `shared.rs`'s.
//!
//! # Invariants
//!
//! * Only [`Placement::Local`] makes jobs stealable; the other policies (and
//!   pinned spawns) start a job where it was placed.

/// How [`Runtime::spawn`](crate::Runtime::spawn) (and
/// [`spawn`](crate::spawn) inside a coroutine) picks an executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Placement {
    /// Local with stealing (the default), as Go and tokio schedule. A
    /// coroutine spawned from inside a coroutine goes on its spawner's
    /// executor, and the newest such spawn starts first, so a tree of
    /// coroutines unfolds depth-first and holds few stacks at once; an idle
    /// executor steals the oldest spawns that have not started (a started
    /// coroutine never moves). A plain thread's spawns all go to one
    /// executor, chosen round-robin at its first spawn, start there newest
    /// first as well (of a batch spawned from `main`, the last starts
    /// first, unless an idle executor steals the older ones), and may be
    /// stolen likewise. Code that needs spawns to start in the order made
    /// uses [`RoundRobin`](Placement::RoundRobin) or
    /// [`Runtime::spawn_all`](crate::Runtime::spawn_all).
    #[default]
    Local,
    /// Executors in turn: 0, 1, 2, ...; no stealing.
    RoundRobin,
    /// The executor with the fewest live coroutines (ties: lowest index);
    /// no stealing.
    LeastLoaded,
}
