//! The blocking layer under swco's channels and `swco::sync`.
//!
//! Everything a blocking operation needs, in one place, so that the
//! channels (`swco-channel`) and the synchronisation types (`swco-sync`)
//! share one protocol rather than each keeping a copy:
//!
//! * [`hook`]: the park context ([`hook::Park`]): how the current thread,
//!   or the coroutine running on it, blocks and is woken; an executor
//!   installs its own with [`hook::set_current`];
//! * [`wait_list`]: who is blocked and how to wake them: [`WaitList`], a
//!   FIFO of wakers under a tiny lock, and [`WaiterSlot`], the lock-free
//!   slot of a side with one endpoint;
//! * [`protocol`]: register → `fence(SeqCst)` → re-check → park, blocking
//!   and as a future, in its hand-off and broadcast shapes;
//! * [`waiting_on`]: what a parked party waits on, for a runtime's dump;
//! * [`deferred`]: unwinding put off to the next block or suspension;
//! * [`updt`], [`lock`], [`backoff`]: the add-only word and claim, the
//!   waiter lists' spin locks, and backing off;
//! * [`sync`]: the one place that chooses `std` or loom
//!   (`RUSTFLAGS="--cfg loom"`), for this crate and those built on it.
//!
//! Crates read, from the bottom up: `swco-wait` → `swco-channel` and
//! `swco-sync` → `swco-executor` → `swco`.
//!
//! [`WaitList`]: wait_list::WaitList
//! [`WaiterSlot`]: wait_list::WaiterSlot

#![warn(missing_docs)]

pub mod backoff;
pub mod deferred;
pub mod hook;
pub mod lock;
pub mod protocol;
pub mod sync;
pub mod updt;
pub mod wait_list;
mod waiter_slot;
mod waiters;
pub mod waiting_on;
