//! `spawn_all`: one coroutine on every executor, as an athread launch puts
//! one thread on every CPE, and the [`GroupHandle`] that joins them all.
//!
//! # Invariants
//!
//! * A launch is one pass over the executors: one shared `Arc` of the
//!   closure, one pinned spawn per executor, no per-member allocation
//!   beyond the spawn's own.
//! * Every member records exactly one outcome in its own result slot (its
//!   value, its panic, or "cancelled" if it never ran) *before* it counts
//!   itself done on the group's [`Countdown`]; the joiner reads the slots
//!   only once the count is zero, so it sees every outcome, and it is
//!   woken once, by the last member.
//! * A member refused at spawn (the runtime is shut down) is counted done
//!   at once with a "shut down" error, so a join never waits for it.
//! * [`GroupHandle::cancel`] cancels each member through its own join
//!   handle (kept, one `Vec` per launch, for that alone). A cancelled
//!   member records "cancelled" (caught unwinding in `Member::run`, or by
//!   `Member`'s `Drop` if it never ran) and is counted done only then,
//!   after its `Drop`s ran: a join still waits for every member.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe, Location};
use std::sync::{Arc, Mutex};

use crate::countdown::{Countdown, WaitFor};
use crate::join::{JoinError, JoinHandle};
use crate::panic::join_error;
use crate::runtime::Runtime;
use crate::spawning::SpawnOptions;

/// A member's outcome slot: empty until it finishes.
type Slot<T> = Mutex<Option<Result<T, JoinError>>>;

/// What the members of one group share: the countdown and a result slot per
/// executor.
struct Group<T> {
    countdown: Countdown,
    results: Box<[Slot<T>]>,
}

impl<T> Group<T> {
    fn record(&self, cpe: usize, result: Result<T, JoinError>) {
        // Poisoning cannot happen (nothing panics under the lock); a slot
        // already written is kept (the first outcome wins).
        let mut slot = self.results[cpe].lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(result);
        }
    }
}

/// One member's body: it runs `f(cpe)` and records the outcome, and in any
/// case (run, or dropped unrun) counts itself done, exactly once, in `Drop`.
struct Member<F, T> {
    f: Arc<F>,
    group: Arc<Group<T>>,
    cpe: usize,
}

impl<F, T> Member<F, T>
where
    F: Fn(usize) -> T,
{
    fn run(self) {
        let result = catch_unwind(AssertUnwindSafe(|| (self.f)(self.cpe))).map_err(join_error);
        self.group.record(self.cpe, result);
        // `self` dropped here: counted done.
    }
}

impl<F, T> Drop for Member<F, T> {
    fn drop(&mut self) {
        // Dropped without having run (a cancelling shutdown reached it
        // first, or no stack could be mapped for it): say so, then count.
        self.group.record(self.cpe, Err(JoinError::cancelled()));
        self.group.countdown.done();
    }
}

/// The handle of a [`spawn_all`](Runtime::spawn_all) launch: one coroutine
/// per executor, joined together.
///
/// Dropping it detaches the members: they run on and their results are
/// dropped. [`cancel`](GroupHandle::cancel) cancels them all.
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
    group: Arc<Group<T>>,
    /// The members' own handles, for [`cancel`](GroupHandle::cancel) (not
    /// for their outcomes: those travel through the group's slots). Only
    /// the members that were spawned.
    members: Vec<JoinHandle<()>>,
}

impl<T> GroupHandle<T> {
    /// The number of members: one per executor.
    #[must_use]
    pub fn len(&self) -> usize {
        self.group.results.len()
    }

    /// Whether the group has no member (never: a runtime has at least one
    /// executor).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.group.results.is_empty()
    }

    /// Whether every member has finished (a [`join`](GroupHandle::join)
    /// would return at once).
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.group.countdown.is_zero()
    }

    /// Waits for every member to finish and returns their results in CPE
    /// order. Called from a coroutine, this suspends only the calling
    /// coroutine; from a plain thread it parks the thread. The joiner is
    /// woken once, by the last member to finish.
    ///
    /// # Errors
    ///
    /// Once every member has finished: the [`JoinError`] of the first
    /// member (by CPE order) that panicked; if none panicked, that of the
    /// first that was cancelled ([`GroupHandle::cancel`], or a shutdown
    /// timeout) or never ran (the runtime was shut down:
    /// [`JoinError::is_shut_down`]). [`join_each`](GroupHandle::join_each)
    /// gives every member's outcome instead.
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(2).build().unwrap();
    /// let err = rt.spawn_all(|cpe| assert!(cpe == 0, "member {cpe}")).join().unwrap_err();
    /// assert_eq!(err.panic_message(), Some("member 1"));
    /// ```
    pub fn join(self) -> Result<Vec<T>, JoinError> {
        let mut values = Vec::with_capacity(self.len());
        let mut first_error: Option<JoinError> = None;
        for outcome in self.join_each() {
            match outcome {
                Ok(v) => values.push(v),
                Err(e) => {
                    let better = match &first_error {
                        None => true,
                        Some(old) => e.is_panic() && !old.is_panic(),
                    };
                    if better {
                        first_error = Some(e);
                    }
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(values),
        }
    }

    /// Waits for every member to finish, as [`join`](GroupHandle::join)
    /// does, and returns each member's own outcome, in CPE order: its
    /// value, or the [`JoinError`] that says why there is none (it
    /// panicked, was [cancelled](GroupHandle::cancel), or never ran).
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(3).build().unwrap();
    /// let outcomes = rt.spawn_all(|cpe| assert!(cpe != 1, "member {cpe}")).join_each();
    /// assert!(outcomes[0].is_ok() && outcomes[2].is_ok());
    /// assert_eq!(outcomes[1].as_ref().unwrap_err().panic_message(), Some("member 1"));
    /// ```
    #[must_use]
    pub fn join_each(self) -> Vec<Result<T, JoinError>> {
        if let Some(payload) = self.group.countdown.wait() {
            // Cancelled while waiting: go on unwinding, the members are done.
            resume_unwind(payload);
        }
        self.group
            .results
            .iter()
            .map(|slot| {
                slot.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    // Every member records an outcome before it is counted.
                    .unwrap_or_else(|| Err(JoinError::cancelled()))
            })
            .collect()
    }

    /// Cancels every member, as [`JoinHandle::cancel`] does each: one that
    /// has not started is dropped unrun; one that is parked or running
    /// unwinds at its next suspension point, running the `Drop`s of its
    /// stack (which may still block); one that has finished keeps its
    /// value. Like `JoinSet::abort_all` in tokio.
    ///
    /// It does not wait: [`join`](GroupHandle::join) and
    /// [`join_each`](GroupHandle::join_each) still wait for every member,
    /// cancelled ones included, until it has finished unwinding. A
    /// cancelled member's outcome is an error with
    /// [`JoinError::is_cancelled`].
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(2).build().unwrap();
    /// let (done_tx, done_rx) = swco_channel::mpmc::bounded::<()>(1);
    /// let (_never, rx) = swco_channel::mpmc::bounded::<()>(1);
    /// // Member 0 says it is done and returns (a send with room does not
    /// // suspend: nothing left to cancel); member 1 would wait for ever.
    /// let group = rt.spawn_all(move |cpe| match cpe {
    ///     0 => done_tx.send(()).is_ok(),
    ///     _ => rx.recv().is_ok(),
    /// });
    /// done_rx.recv().unwrap();
    /// group.cancel();
    /// let outcomes = group.join_each();
    /// assert_eq!(outcomes[0], Ok(true));
    /// assert!(outcomes[1].as_ref().unwrap_err().is_cancelled());
    /// ```
    pub fn cancel(&self) {
        for member in &self.members {
            member.cancel();
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
    /// The launch is one pass over the executors with one shared `Arc` of
    /// `f`; the [`GroupHandle`] is woken once, when the last member
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
        let group = Arc::new(Group {
            countdown: Countdown::new(n, WaitFor::Group),
            results: (0..n).map(|_| Mutex::new(None)).collect(),
        });
        let f = Arc::new(f);
        let mut members = Vec::with_capacity(n);
        let (shared, from_coroutine) = self.spawn_context();
        for cpe in 0..n {
            let member = Member {
                f: f.clone(),
                group: group.clone(),
                cpe,
            };
            let spawned = shared.submit(
                cpe,
                move || member.run(),
                from_coroutine,
                false,
                SpawnOptions::at(at),
            );
            match spawned {
                // Kept only to cancel it: the group's countdown and slots
                // carry its outcome.
                Ok(handle) => members.push(handle),
                // Refused: the member was dropped unrun inside `submit`
                // (recorded as cancelled and counted); the real reason wins.
                Err(_) => {
                    *group.results[cpe].lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(Err(JoinError::shut_down()));
                }
            }
        }
        GroupHandle { group, members }
    }
}
