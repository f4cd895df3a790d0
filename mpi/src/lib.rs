//! # swco-mpi — swco channels across MPI ranks
//!
//! Remote endpoints with the channel API of [`swco::channel`]: a
//! [`RemoteSender`] on any rank sends to a [`RemoteReceiver`] on another
//! (or the same) rank; a blocking `send`/`recv` suspends only the calling
//! coroutine (or parks a plain thread). Channels are bounded across ranks
//! by credit: a receiver of capacity `C` never has more than `C` messages
//! in flight to it. Every MPI call happens on one bridge thread per rank;
//! the protocol is described in the `bridge` module's source.
//!
//! ```no_run
//! use swco_mpi::{World, Source};
//! let world = World::init()?;
//! if world.rank() == 0 {
//!     let rx = world.receiver::<u64>(Source::Others, 7, 64);
//!     let sum: u64 = rx.iter().sum();
//!     println!("sum {sum}");
//! } else {
//!     let tx = world.sender::<u64>(0, 7);
//!     for i in 0..100 { tx.send(i).unwrap(); }
//! }
//! # Ok::<(), swco_mpi::InitError>(())
//! ```
#![warn(missing_docs)]

mod bridge;
mod credit;
mod endpoint;
mod error;
mod helper;
mod inbound;
mod outbound;
mod pending;
mod posted;
mod progress;
mod shared;
mod wire;
mod world;

pub use endpoint::{Iter, ReceiverStats, RemoteReceiver, RemoteSender};
pub use error::InitError;
pub use wire::{Payload, Typed, MAX_TAG};
pub use world::{Source, World, MIN_BRIDGE_STACK};

/// The rsmpi crate this package is built on (for `#[derive(Equivalence)]`
/// and raw baselines).
pub use mpi;
/// The channel error types remote endpoints reuse.
pub use swco::channel::{
    RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};

/// The README's examples, compiled as doc tests (`no_run`: they need
/// `mpirun`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
