//! `spawn_all`: one coroutine on every executor, as an athread launch puts
//! one thread on every CPE, and the [`GroupHandle`] that joins them all.
//!
//! # Invariants
//!
//! * A launch is one allocation and one pass over the executors: one
//!   `Arc`'d [`Group`] holds the closure, the countdown, and per member its
//!   inbox node, its [`SpawnInfo`] and its result slot (the slots in one
//!   boxed slice beside it); each member's job is a clone of that `Arc`
//!   with the member's index ([`Job::member`]), pinned to its executor. No
//!   join slot, no join handle, no allocation per member.
//! * Every member's result slot is written exactly once, and only by one
//!   party: by its job's one launch (its value, its panic, "cancelled" if
//!   a cancelling shutdown or a dropped job kept it from running, or
//!   "refused" if no stack could be mapped for it), or, for a member
//!   refused at spawn (the runtime is shut down) and so given no job, by
//!   `spawn_all` itself, with a "shut down" error. That write happens
//!   *before* the party counts the member done on the group's
//!   [`Countdown`] (`Release`), and the joiner reads the slots only once
//!   it has seen the count at zero (`Acquire`): so the slots need no lock,
//!   and the joiner sees every outcome.
//! * The joiner is woken at most once, by the last member (not at all if
//!   the count reaches zero while it still watches before parking: see
//!   `countdown.rs`).
//! * A member refused at spawn is counted done at once, so a join never
//!   waits for it.

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe, Location};
use std::ptr::NonNull;
use std::sync::Arc;

use crate::countdown::{Countdown, WaitFor};
use crate::inbox::SpawnNode;
use crate::job::{Job, Launch, Start};
use crate::join::join_error;
use crate::join::{JoinError, SpawnInfo};
use crate::panic::drop_payload;
use crate::runtime::Runtime;
use crate::spawning::ShownInfo;

/// One member's part of its group: its inbox node, what its spawn says
/// about it, and its outcome slot (empty until it finishes).
struct Member<T> {
    /// Its job's cell in its executor's inbox.
    node: SpawnNode<Job>,
    info: SpawnInfo,
    /// Written once, before the member is counted done; read by the
    /// joiner once the count is zero (see the module invariants).
    result: UnsafeCell<Option<Result<T, JoinError>>>,
}

/// What the joiner needs of a group, whatever its closure: the countdown
/// and the members.
struct Members<T> {
    countdown: Countdown,
    members: Box<[Member<T>]>,
}

impl<T> Members<T> {
    /// Records member `i`'s outcome and counts it done.
    ///
    /// # Safety
    ///
    /// Called once per member, by the one party that owns its outcome (its
    /// job's launch, or `spawn_all` for a member given no job).
    unsafe fn finish(&self, i: usize, result: Result<T, JoinError>) {
        // SAFETY: the caller is the slot's one writer, and the joiner reads
        // it only after the `done` below (Release) has been seen (Acquire).
        unsafe { *self.members[i].result.get() = Some(result) };
        self.countdown.done();
    }
}

/// A launch's one allocation: the closure every member runs, and the
/// members.
struct Group<F, T> {
    members: Members<T>,
    f: F,
}

// SAFETY: `f` is only called through `&F` (`F: Sync`) and dropped with the
// group (`F: Send`); a result slot is written by one member's launch, on
// its executor, and read (taken) by the joiner only after that write
// happened-before (the countdown, see the module invariants), so a `T`
// only moves between threads (`T: Send`); nodes and infos are `Sync`.
unsafe impl<F: Send + Sync, T: Send> Sync for Group<F, T> {}

/// The group as its handle holds it: its closure's type erased.
trait HoldsMembers<T>: Send + Sync {
    fn members(&self) -> &Members<T>;
}

impl<F, T> HoldsMembers<T> for Group<F, T>
where
    F: Fn(usize) -> T + Send + Sync + 'static,
    T: Send + 'static,
{
    fn members(&self) -> &Members<T> {
        &self.members
    }
}

impl<F, T> Launch for Group<F, T>
where
    F: Fn(usize) -> T + Send + Sync + 'static,
    T: Send + 'static,
{
    fn spawn_node(&self, member: u32) -> NonNull<SpawnNode<Job>> {
        NonNull::from(&self.members.members[member as usize].node)
    }

    fn info(&self, member: u32) -> &SpawnInfo {
        &self.members.members[member as usize].info
    }

    unsafe fn launch(self: Arc<Self>, member: u32, start: Start) {
        let i = member as usize;
        let result = match start {
            Start::Run => {
                // No cancel flag: a member has no join handle of its own.
                let _shown = ShownInfo::show(&self.members.members[i].info, None);
                catch_unwind(AssertUnwindSafe(|| (self.f)(i))).map_err(join_error)
            }
            Start::Cancel => Err(JoinError::cancelled()),
            Start::Refuse(why) => Err(JoinError::refused(why)),
        };
        // SAFETY: this is member `i`'s one launch (the trait's contract:
        // its one job), the one party that owns its outcome.
        unsafe { self.members.finish(i, result) };
        // If the handle is gone (detached), the last reference may be ours:
        // dropping it drops the other results and the closure here, and
        // their `Drop` must not take the executor down.
        if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(self))) {
            eprintln!(
                "swco: dropping a detached group's results panicked; the executor carries on"
            );
            drop_payload(payload);
        }
    }
}

/// The handle of a [`spawn_all`](Runtime::spawn_all) launch: one coroutine
/// per executor, joined together.
///
/// Dropping it detaches the members: they run on and their results are
/// dropped.
///
/// ```
/// # use swco_executor::Runtime;
/// let rt = Runtime::builder().executors(4).build().unwrap();
/// let group = rt.spawn_all(|cpe| cpe * 10);
/// assert_eq!(group.len(), 4);
/// assert_eq!(group.join().unwrap(), vec![0, 10, 20, 30]);
/// ```
#[must_use = "dropping a GroupHandle detaches its coroutines"]
pub struct GroupHandle<T> {
    group: Arc<dyn HoldsMembers<T>>,
}

impl<T> GroupHandle<T> {
    /// The number of members: one per executor.
    #[must_use]
    pub fn len(&self) -> usize {
        self.group.members().members.len()
    }

    /// Whether the group has no member (never: a runtime has at least one
    /// executor).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.group.members().members.is_empty()
    }

    /// Whether every member has finished (a [`join`](GroupHandle::join)
    /// would return at once).
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.group.members().countdown.is_zero()
    }

    /// Waits for every member to finish and returns their results in CPE
    /// order. Called from a coroutine, this suspends only the calling
    /// coroutine; from a plain thread it parks the thread, after watching
    /// the group for a few microseconds (members that finish that soon
    /// cost it no park). The joiner is woken at most once, by the last
    /// member to finish.
    ///
    /// # Errors
    ///
    /// Once every member has finished: the [`JoinError`] of the first
    /// member (by CPE order) that panicked; if none panicked, that of the
    /// first that was cancelled or never ran (the runtime was shut down:
    /// [`JoinError::is_shut_down`]).
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(2).build().unwrap();
    /// let err = rt.spawn_all(|cpe| assert!(cpe == 0, "member {cpe}")).join().unwrap_err();
    /// assert_eq!(err.panic_message(), Some("member 1"));
    /// ```
    pub fn join(self) -> Result<Vec<T>, JoinError> {
        let group = self.group.members();
        if let Some(payload) = group.countdown.wait() {
            // Cancelled while waiting: go on unwinding, the members are done.
            resume_unwind(payload);
        }
        let mut values = Vec::with_capacity(self.len());
        let mut first_error: Option<JoinError> = None;
        for member in group.members.iter() {
            // SAFETY: the count is zero (`wait` returned): every slot's one
            // write happened-before (module invariants), no member touches
            // its slot again, and `join` owns the handle, so this is the
            // only reader.
            let outcome = unsafe { (*member.result.get()).take() };
            match outcome {
                Some(Ok(v)) => values.push(v),
                Some(Err(e)) => {
                    let better = match &first_error {
                        None => true,
                        Some(old) => e.is_panic() && !old.is_panic(),
                    };
                    if better {
                        first_error = Some(e);
                    }
                }
                // Every member records an outcome before it is counted.
                None => first_error = first_error.or_else(|| Some(JoinError::cancelled())),
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(values),
        }
    }
}

impl<T> std::fmt::Debug for GroupHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupHandle")
            .field("len", &self.len())
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl Runtime {
    /// Spawns one coroutine on every executor, running `f(cpe)` with the
    /// executor's index: the athread model's launch, one thread per CPE.
    /// Each member is pinned to its executor for life.
    ///
    /// The launch is one allocation and one pass over the executors; the
    /// [`GroupHandle`] is woken at most once, when the last member
    /// finishes. On a runtime that has shut down, no member runs and
    /// [`GroupHandle::join`] returns a "shut down" [`JoinError`].
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(3).build().unwrap();
    /// let cpes = rt.spawn_all(|cpe| swco_executor::current_cpe() == Some(cpe));
    /// assert_eq!(cpes.join().unwrap(), vec![true; 3]);
    /// ```
    #[track_caller]
    pub fn spawn_all<F, T>(&self, f: F) -> GroupHandle<T>
    where
        F: Fn(usize) -> T + Send + Sync + 'static,
        T: Send + 'static,
    {
        let at = Location::caller();
        let n = self.executors();
        let (shared, from_coroutine) = self.spawn_context();
        let first_id = shared.next_ids(n);
        let group = Arc::new(Group {
            members: Members {
                countdown: Countdown::new(n, WaitFor::Group),
                members: (0..n)
                    .map(|cpe| Member {
                        node: SpawnNode::new(),
                        info: SpawnInfo {
                            id: first_id + cpe as u64,
                            at,
                            name: None,
                            stack_size: 0,
                        },
                        result: UnsafeCell::new(None),
                    })
                    .collect(),
            },
            f,
        });
        for cpe in 0..n {
            match shared.admit(cpe, from_coroutine) {
                Ok(on) => {
                    let body: Arc<dyn Launch> = group.clone();
                    // `cpe < n`, and `n` executor threads exist.
                    #[allow(clippy::cast_possible_truncation)]
                    let job = Job::member(body, cpe as u32, false, false, on);
                    shared.hand_over(on, job);
                }
                // SAFETY: refused, so no job was made for this member: we
                // own its outcome.
                Err(_) => unsafe {
                    group.members.finish(cpe, Err(JoinError::shut_down()));
                },
            }
        }
        GroupHandle { group }
    }
}
