//! Scoped coroutines: [`Runtime::scope`] and [`scope`], whose coroutines may
//! borrow from the caller's frame, as `std::thread::scope`'s threads do.
//!
//! # Invariants (the soundness argument; see also `docs/DESIGN.md`)
//!
//! * A child's closure is spawned with its lifetime erased to `'static`
//!   (the one `unsafe` here). That is sound only because nothing the
//!   closure borrows can go while the closure, or anything it captured,
//!   still exists: the scope's frame outlives every child.
//! * Every child is counted on the scope's [`Countdown`] before it is
//!   handed to an executor, and counted done only by the `Drop` of its
//!   [`Child`] body, *after* the user's closure and everything it captured
//!   have been dropped (field order), whether the closure ran, panicked, was
//!   unwound by a cancelling shutdown, or was dropped unrun. A child
//!   refused at spawn is dropped inside `submit`, on the spawning thread,
//!   before `spawn` returns.
//! * [`run_scope`] waits for the count to reach zero on every way out: after
//!   the scope's closure returns *and* after it panics (the panic is caught
//!   first), and the wait itself does not unwind when the waiting coroutine
//!   is cancelled (see `countdown.rs`); only then does it return or resume
//!   the unwinding. A child that never finishes (blocked for ever, or left
//!   stuck by a cancelling shutdown) makes the scope wait for ever: a hang,
//!   never a dangling borrow.
//! * A child's result, which may borrow from the scope too, lives in its
//!   [`Packet`], shared by the child and its handle; whichever drops it
//!   last drops the result, the child doing so before it is counted done.
//!   A failure nobody joined is handed to the scope then, and re-raised
//!   when the scope ends (the first by spawn order, a panic first).
//!   A handle leaked past the scope (`mem::forget`) only loses that report.
//!   A child cancelled through its handle ([`ScopedJoinHandle::cancel`]) is
//!   waited for like any other (it is counted done only once it has
//!   unwound), but its "cancelled" is not re-raised: it was asked for.

use std::any::Any;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe, Location};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::countdown::{Countdown, WaitFor};
use crate::error::SpawnError;
use crate::executor::Local;
use crate::join::join_error;
use crate::join::{JoinError, JoinHandle};
use crate::runtime::Runtime;
use crate::shared::RuntimeShared;
use crate::spawning::SpawnOptions;

/// What a scope's children share with it: the count of live children and
/// the first failure nobody joined.
struct ScopeData {
    countdown: Countdown,
    /// The failure of the first child (by spawn number; a panic before any
    /// other failure) whose packet was dropped unjoined.
    failure: Mutex<Option<(u64, JoinError)>>,
    /// Spawn numbers.
    spawned: AtomicU64,
}

impl ScopeData {
    fn record_failure(&self, seq: u64, e: JoinError) {
        let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        let better = match &*f {
            None => true,
            Some((old_seq, old)) => {
                (e.is_panic() && !old.is_panic())
                    || (e.is_panic() == old.is_panic() && seq < *old_seq)
            }
        };
        if better {
            *f = Some((seq, e));
        }
    }
}

/// Where a scoped child's outcome goes: written once by the child, taken by
/// its [`ScopedJoinHandle`]. Whoever drops it last (the child, or the
/// handle) hands a failure nobody took to the scope, to be re-raised.
struct Packet<T> {
    result: Mutex<Option<Result<T, JoinError>>>,
    scope: Arc<ScopeData>,
    seq: u64,
    /// Set by [`ScopedJoinHandle::cancel`]: a "cancelled" outcome was asked
    /// for, and is not a failure of the scope.
    cancel_requested: AtomicBool,
}

impl<T> Drop for Packet<T> {
    fn drop(&mut self) {
        let r = self.result.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(Err(e)) = r.take() {
            // Relaxed: the flag is set through the handle, which holds a
            // reference to this packet; that reference's drop (Release)
            // and the last one's (Acquire) order the store before this
            // load, or it is the same thread.
            if e.is_cancelled() && *self.cancel_requested.get_mut() {
                return;
            }
            self.scope.record_failure(self.seq, e);
        }
    }
}

/// A scope in which coroutines that borrow from outside it can be spawned;
/// see [`Runtime::scope`].
///
/// `'scope` is the scope's own lifetime (the children's), `'env` that of
/// what they borrow, as in [`std::thread::Scope`].
pub struct Scope<'scope, 'env: 'scope> {
    shared: Arc<RuntimeShared>,
    data: Arc<ScopeData>,
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

/// A scoped child's body: the user's closure, where its result goes, and
/// its place on the scope's countdown. Fields drop in declaration order, so
/// the closure (and all it captured) is gone before `_done` counts the child
/// done, also when a `Drop` among them panics.
struct Child<F, T> {
    f: Option<F>,
    packet: Arc<Packet<T>>,
    _done: Done,
}

/// Counts a child done when dropped: the last thing a child does.
struct Done(Arc<ScopeData>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.countdown.done();
    }
}

impl<F, T> Child<F, T>
where
    F: FnOnce() -> T,
{
    fn run(mut self) {
        if let Some(f) = self.f.take() {
            // A cancellation unwinding the child is caught here too: the
            // child then reports "cancelled" (`join_error`) and finishes.
            let result = catch_unwind(AssertUnwindSafe(f)).map_err(join_error);
            *self.packet.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
        }
        // `self` dropped here: packet reference, then counted done.
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    fn new(shared: Arc<RuntimeShared>) -> Self {
        Scope {
            shared,
            data: Arc::new(ScopeData {
                countdown: Countdown::new(0, WaitFor::Scope),
                failure: Mutex::new(None),
                spawned: AtomicU64::new(0),
            }),
            scope: PhantomData,
            env: PhantomData,
        }
    }

    /// Spawns a coroutine in the scope, placed by the runtime's policy. It
    /// may borrow anything that outlives the scope; the scope waits for it
    /// before it returns.
    ///
    /// On a runtime that has shut down the coroutine does not run, and the
    /// handle's `join` says so.
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(2).build().unwrap();
    /// let mut total = 0;
    /// let data = vec![1, 2, 3];
    /// rt.scope(|s| {
    ///     let h = s.spawn(|| data.iter().sum::<i32>());
    ///     total = h.join().unwrap();
    /// });
    /// assert_eq!(total, 6);
    /// ```
    #[track_caller]
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        let (cpe, stealable) = self.shared.place();
        match self.submit(cpe, stealable, f, Location::caller()) {
            Ok(h) => h,
            // Unjoined, it fails the scope, whose work it was meant to do.
            Err(_) => ScopedJoinHandle {
                inner: None,
                packet: Arc::new(self.packet(Some(Err(JoinError::shut_down())))),
                scope: PhantomData,
            },
        }
    }

    /// Spawns a coroutine in the scope on executor `cpe` (pinned there).
    ///
    /// # Errors
    ///
    /// [`SpawnError::OutOfRange`] if there is no executor `cpe`,
    /// [`SpawnError::ShutDown`] after shutdown; `f` is then dropped
    /// unrun.
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(2).build().unwrap();
    /// let names = ["zero", "one"];
    /// rt.scope(|s| {
    ///     let h = s.spawn_on(1, || names[swco_executor::current_cpe().unwrap()]).unwrap();
    ///     assert_eq!(h.join().unwrap(), "one");
    ///     assert!(s.spawn_on(2, || ()).is_err());
    /// });
    /// ```
    #[track_caller]
    pub fn spawn_on<F, T>(
        &'scope self,
        cpe: usize,
        f: F,
    ) -> Result<ScopedJoinHandle<'scope, T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        self.submit(cpe, false, f, Location::caller())
    }

    fn submit<F, T>(
        &'scope self,
        cpe: usize,
        stealable: bool,
        f: F,
        at: &'static Location<'static>,
    ) -> Result<ScopedJoinHandle<'scope, T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        let packet = Arc::new(self.packet(None));
        // Counted before it can run (see the module invariants).
        self.data.countdown.add();
        let child = Child {
            f: Some(f),
            packet: packet.clone(),
            _done: Done(self.data.clone()),
        };
        let body: Box<dyn FnOnce() + Send + 'scope> = Box::new(move || child.run());
        // SAFETY: only the lifetime changes (same vtable and layout). The
        // body is run or dropped, and so everything it borrows is last
        // touched, before its `Done` counts it finished; the scope does not
        // return or unwind before the count is zero (`run_scope`), and
        // everything the body borrows outlives the scope (`'scope`).
        let body: Box<dyn FnOnce() + Send + 'static> = unsafe {
            std::mem::transmute::<Box<dyn FnOnce() + Send + 'scope>, Box<dyn FnOnce() + Send>>(body)
        };
        let from_coroutine = Local::current().is_some_and(|l| {
            std::ptr::eq(l.runtime.as_ref(), self.shared.as_ref()) && l.in_coroutine()
        });
        // Refused: the body was dropped inside `submit` (and counted done).
        let inner = self
            .shared
            .submit(cpe, body, from_coroutine, stealable, SpawnOptions::at(at))
            .map_err(|e| {
                // The child was dropped unrun: nothing to re-raise for it.
                *packet.result.lock().unwrap_or_else(|e| e.into_inner()) = None;
                e
            })?;
        Ok(ScopedJoinHandle {
            inner: Some(inner),
            packet,
            scope: PhantomData,
        })
    }

    /// The number of executors of the scope's runtime.
    #[must_use]
    pub fn executors(&self) -> usize {
        self.shared.executors()
    }

    /// A packet for the next child.
    fn packet<T>(&self, result: Option<Result<T, JoinError>>) -> Packet<T> {
        Packet {
            result: Mutex::new(result),
            scope: self.data.clone(),
            // Relaxed: only distinctness and order of one spawner's numbers.
            seq: self.data.spawned.fetch_add(1, Ordering::Relaxed),
            cancel_requested: AtomicBool::new(false),
        }
    }
}

impl std::fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("countdown", &self.data.countdown)
            .finish_non_exhaustive()
    }
}

/// The handle of a coroutine spawned in a [`Scope`]; it cannot outlive the
/// scope. Dropping it leaves the coroutine to the scope, which waits for
/// it and re-raises its panic.
pub struct ScopedJoinHandle<'scope, T> {
    /// `None` for a coroutine refused at spawn.
    inner: Option<JoinHandle<()>>,
    packet: Arc<Packet<T>>,
    scope: PhantomData<&'scope ()>,
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Waits for the coroutine and returns its result; a panic joined here
    /// is not re-raised by the scope. Called from a coroutine, this
    /// suspends only the calling coroutine.
    ///
    /// # Errors
    ///
    /// [`JoinError`] if the coroutine panicked, was cancelled (by
    /// [`cancel`](Self::cancel) or a shutdown timeout), or never ran (the
    /// runtime was shut down).
    pub fn join(self) -> Result<T, JoinError> {
        let waited = self.inner.map(JoinHandle::join);
        let stored = self
            .packet
            .result
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match (stored, waited) {
            (Some(result), _) => result,
            // Never ran: the spawn's own error says why.
            (None, Some(Err(e))) => Err(e),
            (None, _) => Err(JoinError::cancelled()),
        }
    }

    /// Whether the coroutine has finished.
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.inner.as_ref().map_or(true, JoinHandle::is_finished)
    }

    /// Cancels the coroutine, as [`JoinHandle::cancel`] does: if it has
    /// not started, its closure is dropped unrun; if it is parked or
    /// running, it unwinds at its next suspension point, running the
    /// `Drop`s of its stack (which may still block). Its
    /// [`join`](Self::join) then returns an error with
    /// [`JoinError::is_cancelled`]. A coroutine that has finished keeps its
    /// result.
    ///
    /// The scope still waits for it: the scope does not return (nor
    /// unwind) before a cancelled child has finished unwinding, since its
    /// `Drop`s may use what it borrows. A child cancelled here and not
    /// joined does not make the scope panic, as an unjoined child that
    /// was cancelled otherwise (by a shutdown timeout) does.
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(2).build().unwrap();
    /// let (_tx, rx) = swco_channel::mpmc::bounded::<u32>(1);
    /// rt.scope(|s| {
    ///     // Borrows `rx`, and would wait for ever.
    ///     let h = s.spawn(|| rx.recv());
    ///     h.cancel();
    ///     assert!(h.join().unwrap_err().is_cancelled());
    /// });
    /// ```
    pub fn cancel(&self) {
        // Relaxed: read by the packet's last owner (see `Packet::drop`).
        self.packet.cancel_requested.store(true, Ordering::Relaxed);
        if let Some(inner) = &self.inner {
            inner.cancel();
        }
    }

    /// The executor the coroutine was placed on (`None` if it was refused).
    #[must_use]
    pub fn cpe(&self) -> Option<usize> {
        self.inner.as_ref().and_then(JoinHandle::cpe)
    }
}

impl<T> std::fmt::Debug for ScopedJoinHandle<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedJoinHandle")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// Runs `f` in a new scope on `shared`, waits for all its children (on
/// every way out), then returns `f`'s value or resumes the first panic.
pub(crate) fn run_scope<'env, F, R>(shared: Arc<RuntimeShared>, f: F) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    let scope = Scope::new(shared);
    let result = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    // Not before every child is gone, however we leave (module invariants).
    let cancelled: Option<Box<dyn Any + Send>> = scope.data.countdown.wait();
    let value = match result {
        Err(payload) => {
            if let Some(c) = cancelled {
                crate::panic::drop_payload(c);
            }
            resume_unwind(payload)
        }
        Ok(value) => value,
    };
    if let Some(c) = cancelled {
        resume_unwind(c);
    }
    let failure = scope
        .data
        .failure
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some((_, e)) = failure {
        drop(value);
        match e.try_into_panic() {
            Ok(payload) => resume_unwind(payload),
            Err(e) => panic!("swco: a scoped coroutine produced no value: {e}"),
        }
    }
    value
}

impl Runtime {
    /// Runs `f` with a [`Scope`] in which coroutines that borrow from the
    /// caller can be spawned, as [`std::thread::scope`] does for threads;
    /// returns once every coroutine spawned in it has finished.
    ///
    /// Called from one of this runtime's coroutines, the wait suspends only
    /// that coroutine; from a plain thread it parks the thread.
    ///
    /// # Panics
    ///
    /// With `f`'s own panic, once every child has finished; otherwise with
    /// the panic of the first (by spawn order) child that panicked and was
    /// not joined. A child that was not joined and produced no value for
    /// another reason (cancelled by a shutdown timeout, or never run
    /// because the runtime was shut down) makes the scope panic with a
    /// message saying so; one cancelled through its handle
    /// ([`ScopedJoinHandle::cancel`]) does not.
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(4).build().unwrap();
    /// let mut parts = vec![0u64; 4];
    /// rt.scope(|s| {
    ///     for (i, part) in parts.iter_mut().enumerate() {
    ///         s.spawn(move || *part = (i as u64 + 1) * 100);
    ///     }
    /// });
    /// assert_eq!(parts, [100, 200, 300, 400]);
    /// ```
    pub fn scope<'env, F, R>(&self, f: F) -> R
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        run_scope(self.shared_arc().clone(), f)
    }
}

/// [`Runtime::scope`] on the runtime of the current coroutine: its children
/// may borrow from the caller's frame, and the wait suspends only the
/// calling coroutine.
///
/// ```
/// # use swco_executor::Runtime;
/// let rt = Runtime::builder().executors(2).build().unwrap();
/// let h = rt.spawn(|| {
///     let words = ["a", "bb", "ccc"];
///     let mut lens = [0; 3];
///     swco_executor::scope(|s| {
///         for (w, l) in words.iter().zip(lens.iter_mut()) {
///             s.spawn(move || *l = w.len());
///         }
///     });
///     lens
/// });
/// assert_eq!(h.join().unwrap(), [1, 2, 3]);
/// ```
///
/// # Panics
///
/// If called outside a coroutine (there is no runtime to spawn on): use
/// [`Runtime::scope`] there. Otherwise as [`Runtime::scope`].
pub fn scope<'env, F, R>(f: F) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    let shared = Local::current()
        .filter(|l| l.in_coroutine())
        .expect("swco::scope called outside a coroutine; use Runtime::scope from plain threads")
        .runtime
        .clone();
    run_scope(shared, f)
}
