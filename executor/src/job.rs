//! A coroutine's job: the body an executor starts (once), how it is
//! told to start ([`Start`]), and the payload a cancelling shutdown unwinds
//! it with ([`Cancelled`](crate::panic::Cancelled)).
//!
//! # Invariants
//!
//! * A job holds no stack until it first runs: only unstarted jobs may move
//!   between executors (by stealing), and only if [`Job::stealable`].
//! * A job's body is launched exactly once per job: by the executor, with
//!   the [`Start`] that says whether to run the user's closure or only to
//!   drop it; or, if the job is dropped unstarted, as cancelled, so its
//!   joiner is released. A body shared by several jobs (the members of a
//!   [`spawn_all`](crate::Runtime::spawn_all) group, in one allocation)
//!   tells them apart by their member index: each index has one job.

use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::inbox::{SpawnNode, Spawnable};
use crate::join::SpawnInfo;

/// What a [`Job`] starts: a spawned coroutine's closure and the join slot
/// its result goes to, in one allocation (`Spawned` in `spawning.rs`); or
/// one member of a group whose members share one allocation (`Group` in
/// `group.rs`), told apart by their `member` index (0 for a body of one
/// job).
pub(crate) trait Launch: Send + Sync {
    /// Runs (or, per `start`, only drops) the closure of `member` and
    /// completes its join slot.
    ///
    /// # Safety
    ///
    /// Called at most once per allocation and member: only by the [`Job`]
    /// that owns the `Arc<dyn Launch>` made for that member, which is never
    /// cloned. The implementation takes the closure out of a cell (or
    /// writes the member's result slot) without a lock on that promise.
    unsafe fn launch(self: Arc<Self>, member: u32, start: Start);

    /// The inbox node `member`'s job travels in when it is handed to
    /// another executor (inside the same allocation, so a remote spawn
    /// allocates nothing more).
    fn spawn_node(&self, member: u32) -> NonNull<SpawnNode<Job>>;

    /// What the spawn said about the coroutine `member` (id, name, stack
    /// size).
    fn info(&self, member: u32) -> &SpawnInfo;

    /// Serves a request of the runtime to the executor itself (a job made
    /// by [`Job::request`]), in the executor loop, on the executor's own
    /// stack. Never called for a coroutine's body.
    ///
    /// The executor comes as `&dyn Any` (it is the executor loop's
    /// `Local`): jobs are what the executor runs, so this layer sits below
    /// it and names none of its types; a request, written above both,
    /// names the type it downcasts to.
    fn serve(&self, _executor: &dyn Any) {}
}

/// A coroutine body, on its way to its home executor. The executor starts
/// it exactly once, saying whether to run the user's closure or only to
/// drop it (see [`Start`]); a job dropped without being started (its
/// executor gone) drops the closure and reports "cancelled".
pub(crate) struct Job {
    /// `None` only once started.
    body: Option<Arc<dyn Launch>>,
    /// Placed by [`Placement::Local`](crate::Placement::Local): it may be
    /// started by another executor that steals it. Pinned jobs and jobs
    /// placed by the other policies start where they were placed.
    stealable: bool,
    /// Its spawn asked for a stack size of its own: the executor asks the
    /// body which (a flag here, so other spawns pay no call for it).
    custom_stack: bool,
    /// The executor whose `live` count includes this job. A thief that
    /// starts a stolen job moves the count to itself then (one job at a
    /// time, so the counts stay exact however batches race).
    counted_on: usize,
    /// A request of the runtime to the executor ([`Job::request`]), not
    /// a coroutine: counted in no `live`, served in the loop.
    request: bool,
    /// Which of its body's members this job is (0 unless the body is a
    /// group's, shared by several jobs).
    member: u32,
}

impl Job {
    /// A job for `body`, which must be the only `Arc` of its allocation
    /// that can reach [`Launch::launch`]. `custom_stack`: its info names a
    /// stack size.
    pub(crate) fn new(
        body: Arc<dyn Launch>,
        stealable: bool,
        custom_stack: bool,
        counted_on: usize,
    ) -> Self {
        Self::member(body, 0, stealable, custom_stack, counted_on)
    }

    /// A job for member `member` of `body`: the only job of that member,
    /// and the only `Arc` of the allocation that can reach its
    /// [`Launch::launch`].
    pub(crate) fn member(
        body: Arc<dyn Launch>,
        member: u32,
        stealable: bool,
        custom_stack: bool,
        counted_on: usize,
    ) -> Self {
        Job {
            body: Some(body),
            stealable,
            custom_stack,
            counted_on,
            request: false,
            member,
        }
    }

    /// A request of the runtime to executor `cpe` itself, travelling
    /// through its inbox as a job does: the executor serves it
    /// ([`Launch::serve`]) when it drains its inbox, and starts no
    /// coroutine. Dropped unserved, it is launched as cancelled, as a job.
    pub(crate) fn request(body: Arc<dyn Launch>, cpe: usize) -> Self {
        Job {
            body: Some(body),
            stealable: false,
            custom_stack: false,
            counted_on: cpe,
            request: true,
            member: 0,
        }
    }

    /// Whether this is a [`request`](Job::request), to serve rather than
    /// start.
    #[inline]
    pub(crate) fn is_request(&self) -> bool {
        self.request
    }

    /// Serves a [`request`](Job::request) on `executor` (the executor
    /// loop's `Local`; see [`Launch::serve`]).
    pub(crate) fn serve(mut self, executor: &dyn Any) {
        if let Some(body) = self.body.take() {
            body.serve(executor);
        }
    }

    /// What its spawn said about it; `None` once started.
    pub(crate) fn info(&self) -> Option<&SpawnInfo> {
        self.body.as_ref().map(|body| body.info(self.member))
    }

    /// The usable stack bytes its spawn asked for, if it asked (`None`:
    /// the runtime's size).
    pub(crate) fn stack_size(&self) -> Option<usize> {
        if !self.custom_stack {
            return None;
        }
        self.body
            .as_ref()
            .map(|body| body.info(self.member).stack_size)
            .filter(|&size| size != 0)
    }

    /// The address of the job's body (its closure and join slot), or 0
    /// once started: a hint for prefetching, never dereferenced.
    pub(crate) fn body_addr(&self) -> usize {
        self.body
            .as_ref()
            .map_or(0, |body| Arc::as_ptr(body) as *const u8 as usize)
    }

    /// The executor whose `live` count includes this job.
    pub(crate) fn counted_on(&self) -> usize {
        self.counted_on
    }

    /// Whether the job may be started by another executor that steals it.
    pub(crate) fn stealable(&self) -> bool {
        self.stealable
    }

    pub(crate) fn run(mut self, start: Start) {
        if let Some(body) = self.body.take() {
            // SAFETY: `body` is this job's own `Arc`, taken out of it, so
            // this is the one launch of its allocation and member (see
            // `Job::member`).
            unsafe { body.launch(self.member, start) }
        }
    }
}

// SAFETY: the node lives in the job's own allocation, which the job keeps
// alive (its `Arc`) while it is queued in it; each allocation has one node
// per member and one job per member, which is in at most one list at a
// time.
unsafe impl Spawnable for Job {
    fn embedded_node(&self) -> Option<NonNull<SpawnNode<Job>>> {
        self.body.as_ref().map(|body| body.spawn_node(self.member))
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(body) = self.body.take() {
            // SAFETY: as in `run`: the job's own `Arc`, launched once.
            unsafe { body.launch(self.member, Start::Cancel) }
        }
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
