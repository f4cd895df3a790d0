//! A coroutine as its executor holds it ([`Task`]), and the part of it
//! every waker holds ([`TaskHeader`]): its wake state (`wake.rs`), slot and
//! home executor. A [`Suspend`] says why a coroutine handed control back.
//!
//! # Invariants
//!
//! * **No migration.** A coroutine is created, resumed and dropped only on its
//!   home executor thread. Other threads only ever see its [`TaskHeader`]
//!   (wake state, slot, home), which is `Send + Sync`.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use corosensei::{Coroutine, Yielder};

use crate::inbox::WakeLink;
use crate::shared::ExecutorShared;
use crate::stack;
use crate::wake::WakeState;

/// Why a coroutine handed control back to its executor.
pub(crate) enum Suspend {
    /// `yield_now`: run me again after the others.
    Yield,
    /// Parked on a channel or join: run me when woken or at the deadline.
    Park(Option<Instant>),
}

pub(crate) type Co = Coroutine<(), Suspend, (), stack::CoStack>;

/// What every waker of a coroutine holds: enough to put it back on its home
/// executor's run queue from any thread.
///
/// Its [`Wake`](std::task::Wake) impl is in `executor/schedule.rs`, with the run
/// queue it schedules onto.
pub(crate) struct TaskHeader {
    pub(crate) state: WakeState,
    /// Its cell in the home executor's inbox, for remote wakes.
    pub(crate) link: WakeLink,
    pub(crate) slot: usize,
    pub(crate) home: Arc<ExecutorShared>,
    /// Set once a cancelling shutdown has dealt with this coroutine (raised
    /// [`Cancelled`](crate::job::Cancelled) in it, or started it as
    /// [`Start::Cancel`](crate::job::Start::Cancel)); it then runs
    /// its unwinding to the end, suspending as it needs, and is never
    /// cancelled twice. Only the home executor thread touches it.
    pub(crate) cancel_raised: AtomicBool,
}

impl TaskHeader {
    /// The header of a new coroutine in `slot` of executor `home`.
    pub(crate) fn new(slot: usize, home: Arc<ExecutorShared>) -> Self {
        TaskHeader {
            state: WakeState::new(),
            link: WakeLink::new(slot),
            slot,
            home,
            cancel_raised: AtomicBool::new(false),
        }
    }
}

/// One coroutine as its executor holds it.
pub(crate) struct Task {
    pub(crate) co: Co,
    pub(crate) header: Arc<TaskHeader>,
    /// The coroutine's yielder, known after its first run (null before).
    pub(crate) yielder: *const Yielder<(), Suspend>,
    /// Lowest address of the stack's guard page (for the overflow message).
    pub(crate) guard: usize,
    /// Identifies this task's live timer heap entry (0: none). Cleared when
    /// the entry fires or the task is resumed before it (the entry then
    /// stays in the heap, stale, until it fires or is compacted away).
    pub(crate) timer_seq: u64,
}
