//! A coroutine's job: the boxed body an executor starts (once), how it is
//! told to start ([`Start`]), and the payload a cancelling shutdown unwinds
//! it with ([`Cancelled`]).
//!
//! # Invariants
//!
//! * A job holds no stack until it first runs: only unstarted jobs may move
//!   between executors (by stealing), and only if [`Job::stealable`].
//! * The executor calls a job's body exactly once, with the [`Start`] that
//!   says whether to run the user's closure or only to drop it.

/// A coroutine body, boxed so it can travel to its home executor. The
/// executor calls it exactly once, saying whether to run the user's closure
/// or only to drop it (see [`Start`]).
pub(crate) struct Job {
    body: Box<dyn FnOnce(Start) + Send>,
    /// Placed by [`Placement::Local`](crate::Placement::Local): it may be
    /// started by another executor that steals it. Pinned jobs and jobs
    /// placed by the other policies start where they were placed.
    stealable: bool,
    /// The executor whose `live` count includes this job. A thief that
    /// starts a stolen job moves the count to itself then (one job at a
    /// time, so the counts stay exact however batches race).
    counted_on: usize,
}

impl Job {
    pub(crate) fn new(
        body: Box<dyn FnOnce(Start) + Send>,
        stealable: bool,
        counted_on: usize,
    ) -> Self {
        Job {
            body,
            stealable,
            counted_on,
        }
    }

    /// The executor whose `live` count includes this job.
    pub(crate) fn counted_on(&self) -> usize {
        self.counted_on
    }

    /// Whether the job may be started by another executor that steals it.
    pub(crate) fn stealable(&self) -> bool {
        self.stealable
    }

    pub(crate) fn run(self, start: Start) {
        (self.body)(start)
    }
}

/// How the executor starts a [`Job`].
pub(crate) enum Start {
    /// Run the closure (on a coroutine stack).
    Run,
    /// A cancelling shutdown reached the coroutine before it first ran: drop
    /// the closure (on its coroutine stack, so a `Drop` may still block) and
    /// report "cancelled".
    Cancel,
    /// No stack could be mapped for it: drop the closure (on the executor's
    /// own stack) and report why through the join handle.
    Refuse(String),
}

/// The panic payload a cancelling shutdown raises inside a coroutine, at the
/// suspension point it is parked in, to unwind its stack. Never shown to
/// users: the join handle reports "cancelled".
pub(crate) struct Cancelled;
