//! The channel park hook of executor threads ([`CoroutinePark`]): inside a
//! coroutine, a blocking channel operation or join suspends the coroutine
//! (it stays in its executor's task table, off the run queue) instead of
//! parking the thread.
//!
//! The hook sees the executor only as a [`ParkSite`], the few things a
//! park needs of it; the executor's `Local` implements it. The hook is
//! generic over it, not a trait object, so a park calls the executor's
//! methods directly (no dynamic dispatch on the park path).
//!
//! # Invariants
//!
//! * The hook is installed on one executor thread ([`install`]) for exactly
//!   as long as that executor runs, and reaches the executor's `Local`
//!   only while it is alive: the guard [`install`] returns detaches it
//!   before the `Local` is dropped.
//! * A coroutine suspends only when its `RUNNING -> WAITING` transition
//!   (`WakeState::prepare_park`) succeeds, so a wake that came first is
//!   never slept through.

use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

use swco_wait::hook::{self, Op, Park, WaitingOn};

use crate::task::{Suspend, TaskHeader};

/// What the park hook needs of its executor (the executor's `Local`
/// implements it): whether the running coroutine may suspend, its header,
/// and the ways to suspend it.
pub(crate) trait ParkSite: 'static {
    /// Whether a coroutine of this executor is running and may suspend.
    fn can_suspend(&self) -> bool;
    /// The header of the coroutine being resumed, if any.
    fn running_header(&self) -> Option<&Arc<TaskHeader>>;
    /// Suspends the running coroutine (already `WAITING`) with no
    /// deadline, handing the thread to another coroutine if one is ready.
    fn park_running(&self);
    /// Suspends the running coroutine for `why`.
    fn suspend(&self, why: Suspend);
    /// Raises a pending cancellation in the running coroutine, if any.
    fn raise_cancel(&self);
    /// Whether nothing else is ready to run on this executor.
    fn nothing_else_to_run(&self) -> bool;
}

/// The park hook installed on executor threads: inside a coroutine, parking
/// suspends the coroutine; elsewhere it falls back to parking the thread.
///
/// It reaches its executor (`E`, the executor's `Local`) through its own
/// pointer rather than the `CURRENT` thread-local: the hook is installed on
/// one executor thread for exactly as long as that executor runs.
struct CoroutinePark<E> {
    fallback: Rc<dyn Park>,
    /// This thread's executor; set (through [`install`]) by `run_executor`
    /// while the `Local` in its frame is alive, null before that `Local` is
    /// dropped.
    local: Cell<*const E>,
}

/// A waker that owns `header`. Every coroutine waker is made here, out of
/// line, so that they all share one vtable address and
/// [`Waker::will_wake`] can recognise them.
#[inline(never)]
fn header_waker(header: Arc<TaskHeader>) -> Waker {
    Waker::from(header)
}

impl<E: ParkSite> CoroutinePark<E> {
    /// The executor and the header of the coroutine running on this thread,
    /// if a coroutine of this executor is running.
    #[inline]
    fn running(&self) -> Option<(&E, &Arc<TaskHeader>)> {
        // SAFETY: a non-null `local` points at the Local in `run_executor`'s
        // frame, which nulls it before that Local is dropped. The hook is an
        // `Rc` (this thread only), and everything that calls it (coroutines
        // and blocking calls on this thread) has returned, finished or been
        // unwound by then, so the reference does not outlive the Local.
        let local = unsafe { self.local.get().as_ref() }?;
        if !local.can_suspend() {
            return None;
        }
        Some((local, local.running_header()?))
    }
}

impl<E: ParkSite> Park for CoroutinePark<E> {
    fn waker(&self) -> Waker {
        match self.running() {
            Some((_, header)) => header_waker(Arc::clone(header)),
            None => self.fallback.waker(),
        }
    }

    fn will_wake(&self, waker: &Waker) -> bool {
        match self.running() {
            Some((_, header)) => match &header.lent {
                Some(this) => waker.will_wake(this),
                None => waker.will_wake(&lent_waker(header)),
            },
            None => self.fallback.will_wake(waker),
        }
    }

    fn waker_ref(&self) -> Option<&Waker> {
        match self.running() {
            // The running coroutine's header lives as long as its task,
            // which outlives any borrow of this hook the coroutine holds.
            Some((_, header)) => header.lent.as_deref(),
            None => self.fallback.waker_ref(),
        }
    }

    fn park(&self, deadline: Option<Instant>) {
        self.park_on(deadline, WaitingOn::op(Op::Park));
    }

    fn park_on(&self, deadline: Option<Instant>, on: WaitingOn<'_>) {
        let Some((local, header)) = self.running() else {
            return self.fallback.park_on(deadline, on);
        };
        // Recorded first, so that `on` need not be kept across the calls
        // below. If the coroutine does not suspend after all, nothing reads
        // it: it is read only while the coroutine is parked, and every park
        // records its own first.
        // SAFETY: the running coroutine, on its executor thread, about to
        // park in the operation `on` borrows from (or not park at all).
        unsafe { header.waiting.set(on) };
        // A cancellation a rendezvous receive put off goes on now.
        hook::resume_deferred_unwind();
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return;
        }
        if header.state.prepare_park() {
            match deadline {
                None => local.park_running(),
                Some(_) => local.suspend(Suspend::Park(deadline)),
            }
        } else {
            // A wake came first: it may be the one a cancel through the
            // join handle sent, which must not be lost by not suspending.
            local.raise_cancel();
        }
    }

    fn spin_before_park(&self) -> bool {
        match self.running() {
            // Inside a coroutine, parking is a cheap switch that lets a
            // neighbour run: spin only while there is no neighbour to run.
            // Parking would then only send the executor into its idle spin,
            // and the waker would pay for a remote wake (an inbox push and
            // a cross-core hand-off) that spinning here avoids.
            Some((local, _)) => local.nothing_else_to_run(),
            // Outside, defer to the thread parker.
            None => self.fallback.spin_before_park(),
        }
    }

    fn home(&self) -> usize {
        // A coroutine is woken onto its own executor's run queue: that
        // executor is its home. (A blocking call outside a coroutine parks
        // the thread: no home.)
        match self.running() {
            Some((local, _)) => local as *const E as usize,
            None => 0,
        }
    }

    fn waiter(&self) -> (Waker, usize) {
        match self.running() {
            Some((local, header)) => (header_waker(Arc::clone(header)), local as *const E as usize),
            None => (self.fallback.waker(), 0),
        }
    }

    fn thread_home(&self) -> usize {
        // The executor's, whatever runs: as `home` answers for its
        // coroutines.
        self.local.get() as usize
    }

    fn party(&self) -> usize {
        // SAFETY: as in `running`: a non-null `local` points at the live
        // Local of this thread's executor.
        let local = unsafe { self.local.get().as_ref() };
        // The running coroutine, also where it cannot suspend (its header
        // lives as long as its task, wherever it runs): a lock it holds is
        // still its own there.
        match local.and_then(E::running_header) {
            Some(header) => Arc::as_ptr(header) as usize,
            None => self.fallback.party(),
        }
    }
}

/// A waker for `header`'s coroutine that owns no reference count: valid
/// while `header` is alive, and never to be dropped (`ManuallyDrop`).
pub(crate) fn lent_waker(header: &Arc<TaskHeader>) -> ManuallyDrop<Waker> {
    // SAFETY: the pointer is that of a live `Arc<TaskHeader>`, and
    // `ManuallyDrop` keeps the `Arc` made from it from being released, so
    // the count never moves.
    ManuallyDrop::new(header_waker(unsafe { Arc::from_raw(Arc::as_ptr(header)) }))
}

/// Installs the park hook on this thread for `local`, the thread's
/// executor (`run_executor` calls it with the `Local` in its frame).
/// Dropping the returned guard puts the previous hook back and nulls the
/// hook's pointer to `local`: it must be dropped before `local` is.
pub(crate) fn install<E: ParkSite>(local: &E) -> Installed<E> {
    let park = Rc::new(CoroutinePark {
        fallback: hook::current(),
        local: Cell::new(local),
    });
    let previous = hook::set_current(Some(park.clone()));
    Installed { park, previous }
}

/// The park hook as installed on an executor thread, by [`install`].
pub(crate) struct Installed<E> {
    park: Rc<CoroutinePark<E>>,
    previous: Option<Rc<dyn Park>>,
}

impl<E> Drop for Installed<E> {
    fn drop(&mut self) {
        hook::set_current(self.previous.take());
        self.park.local.set(std::ptr::null());
    }
}
