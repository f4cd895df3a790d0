//! Join handles: the hand-off of a coroutine's result to whoever joins it.
//!
//! # Invariants
//!
//! * A [`JoinSlot`] is completed exactly once: by the coroutine's
//!   [`Completer`], or, if the coroutine is dropped before it could finish
//!   (shutdown timeout, runtime gone), by the completer's `Drop` with
//!   "cancelled". So a joiner never waits for a result that cannot come.
//! * The joiner registers its waker *under the slot's lock* and the completer
//!   takes it under the same lock after storing the result, so the result is
//!   either seen by the joiner's check or its waker is woken (no lost wake).
//! * The waker is woken outside the lock.
//! * The handle's own waits (`join`, `join_async`) register in `joiner`;
//!   `wait_timeout`, which borrows the handle and so may run on several
//!   threads at once, registers in `watchers` and takes its waker out again
//!   when it times out. The completer wakes them all.
//!
//! Cancellation ([`JoinHandle::cancel`]) is requested through the slot:
//!
//! * One word ([`CancelFlag`]) says `NEW`, `REQUESTED`, or, once the
//!   coroutine started, where its waker (its *runner*) is. The start moves
//!   it `NEW -> runner` by one CAS ([`JoinSlot::start_running`]): it fails
//!   only if a cancel came first, and then the closure never runs. A cancel
//!   swaps in `REQUESTED` under the slot's lock, after checking the slot is
//!   not complete, and wakes the runner it swapped out, still under the
//!   lock: completion takes the same lock, and the runner (owned by the
//!   coroutine's task header) lives until the coroutine has completed. So a
//!   cancel finds the slot complete (and does nothing), or the coroutine
//!   not started (which then sees the request), or its runner, which it
//!   wakes; a second cancel swaps out `REQUESTED` and does nothing.
//! * The request is in place *before* that wake, so a coroutine that the
//!   wake resumes, or whose next park the wake turns into a non-suspension
//!   (`NOTIFIED`), sees it (`CancelFlag::is_requested`) and unwinds. The
//!   wake is an ordinary one: only the winner of `WAITING -> RUNNING`
//!   schedules, so a cancel never schedules twice.
//!
//! Blocking goes through the channel crate's park hook, so `join` suspends
//! only the calling coroutine on an executor thread and parks a plain thread
//! otherwise. The module only uses the crate's `sync` shim and compiles under
//! `--cfg loom`; its loom models are in `loom_tests/join.rs`.

use std::any::Any;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::panic::Location;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::sync::{Arc, AtomicUsize, Mutex, Ordering};
use swco_wait::backoff::Backoff;
use swco_wait::hook::{self, Describe, Op, WaitingOn};

/// Why a coroutine produced no value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reason {
    /// Boxed: panics are rare, and the box keeps every join slot as small
    /// as a message alone would.
    Panic(Box<Panicked>),
    Cancelled,
    ShutDown,
    Refused(String),
}

/// A coroutine's panic: its message, for display, and its payload whole,
/// for [`JoinError::into_panic`].
struct Panicked {
    /// The payload's text if it is a string, else `"Box<dyn Any>"`.
    message: String,
    /// The payload. The mutex is never locked: it only makes the error
    /// `Sync` (as `Box<dyn Any + Send>` is not) while the payload is only
    /// reached by value (`into_inner`), never through a shared reference.
    payload: std::sync::Mutex<Box<dyn Any + Send>>,
}

impl Panicked {
    fn new(payload: Box<dyn Any + Send>) -> Self {
        let message = if let Some(s) = payload.downcast_ref::<&'static str>() {
            (*s).to_owned()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "Box<dyn Any>".to_owned()
        };
        Panicked {
            message,
            payload: std::sync::Mutex::new(payload),
        }
    }

    fn into_payload(mut self) -> Box<dyn Any + Send> {
        self.take_payload()
    }

    /// The payload, leaving a unit in its place (a zero-sized box: no
    /// allocation).
    fn take_payload(&mut self) -> Box<dyn Any + Send> {
        // Never poisoned: never locked (see the field).
        let payload = self
            .payload
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::replace(payload, Box::new(()))
    }
}

/// Dropping an error never panics, even if its payload's `Drop` does (it
/// is caught there, as on the executor); a payload taken out with
/// [`JoinError::into_panic`] is the caller's to drop.
impl Drop for Panicked {
    fn drop(&mut self) {
        let payload = self.take_payload();
        #[cfg(not(loom))]
        crate::panic::drop_payload(payload);
        #[cfg(loom)]
        drop(payload);
    }
}

/// A payload cannot be cloned: a clone carries the message as a `String`
/// payload instead.
impl Clone for Panicked {
    fn clone(&self) -> Self {
        Panicked {
            message: self.message.clone(),
            payload: std::sync::Mutex::new(Box::new(self.message.clone())),
        }
    }
}

/// Panics compare by message (payloads cannot be compared).
impl PartialEq for Panicked {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
    }
}

impl Eq for Panicked {}

impl fmt::Debug for Panicked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Panicked")
            .field("message", &self.message)
            .finish_non_exhaustive()
    }
}

/// The error [`JoinHandle::join`] returns when the coroutine produced no
/// value: it panicked (the error carries the panic message and payload), it
/// was cancelled by [`shutdown_timeout`](crate::Runtime::shutdown_timeout),
/// or it was spawned on a runtime that had already shut down.
///
/// A clone of a panic's error carries its message but not its payload
/// (payloads cannot be cloned), and errors compare by message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinError {
    reason: Reason,
}

impl JoinError {
    /// The error of a coroutine that panicked with `payload` (kept whole).
    pub(crate) fn panic(payload: Box<dyn Any + Send>) -> Self {
        JoinError {
            reason: Reason::Panic(Box::new(Panicked::new(payload))),
        }
    }

    pub(crate) fn refused(why: String) -> Self {
        JoinError {
            reason: Reason::Refused(why),
        }
    }

    pub(crate) fn cancelled() -> Self {
        JoinError {
            reason: Reason::Cancelled,
        }
    }

    pub(crate) fn shut_down() -> Self {
        JoinError {
            reason: Reason::ShutDown,
        }
    }

    /// Whether the coroutine panicked.
    #[must_use]
    pub fn is_panic(&self) -> bool {
        matches!(self.reason, Reason::Panic(_))
    }

    /// Whether the coroutine was cancelled before it finished (by
    /// [`JoinHandle::cancel`], or a
    /// [`shutdown_timeout`](crate::Runtime::shutdown_timeout) expired).
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        matches!(self.reason, Reason::Cancelled)
    }

    /// Whether the coroutine was never run because the runtime had already
    /// shut down.
    #[must_use]
    pub fn is_shut_down(&self) -> bool {
        matches!(self.reason, Reason::ShutDown)
    }

    /// Whether the coroutine was refused when it reached its executor: no
    /// stack could be mapped for it (out of memory or address space, or the
    /// kernel's limit on mappings). [`Display`](fmt::Display) says why.
    #[must_use]
    pub fn is_refused(&self) -> bool {
        matches!(self.reason, Reason::Refused(_))
    }

    /// The panic message, if the coroutine panicked with a string payload
    /// (`"Box<dyn Any>"` for other payloads).
    #[must_use]
    pub fn panic_message(&self) -> Option<&str> {
        match &self.reason {
            Reason::Panic(p) => Some(&p.message),
            _ => None,
        }
    }

    /// The panic's payload whole, as the coroutine raised it, to inspect
    /// or to go on unwinding with [`std::panic::resume_unwind`].
    ///
    /// Dropping a `JoinError` never panics, whatever its payload's `Drop`
    /// does; once taken out here, the payload is the caller's to drop.
    ///
    /// An error that is not a panic (cancelled, shut down, refused) gives
    /// its [`Display`](fmt::Display) text as a `String` payload, so
    /// resuming it still says what happened; [`try_into_panic`] tells the
    /// two apart. A clone of a panic's error gives its message as a
    /// `String`.
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(1).build().unwrap();
    /// let err = rt.spawn(|| std::panic::panic_any(42u32)).join().unwrap_err();
    /// assert_eq!(err.into_panic().downcast_ref::<u32>(), Some(&42));
    /// ```
    ///
    /// [`try_into_panic`]: JoinError::try_into_panic
    #[must_use]
    pub fn into_panic(self) -> Box<dyn Any + Send> {
        self.try_into_panic()
            .unwrap_or_else(|e| Box::new(e.to_string()))
    }

    /// The panic's payload whole, if the coroutine panicked; the error
    /// itself otherwise.
    ///
    /// # Errors
    ///
    /// `self`, unchanged, if it is not a panic.
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send>, JoinError> {
        match self.reason {
            Reason::Panic(p) => Ok(p.into_payload()),
            reason => Err(JoinError { reason }),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Reason::Panic(p) => write!(f, "coroutine panicked: {}", p.message),
            Reason::Cancelled => f.write_str("coroutine was cancelled"),
            Reason::ShutDown => f.write_str("coroutine was not run: the runtime is shut down"),
            Reason::Refused(why) => write!(f, "coroutine was not run: {why}"),
        }
    }
}

impl std::error::Error for JoinError {}

/// Whatever holds a [`JoinSlot`]: the slot alone ([`JoinSlot::pair`]), or a
/// spawned coroutine's one allocation, which also carries its closure
/// (`spawning.rs`), so a spawn allocates once for both.
pub(crate) trait HoldsSlot<T>: Send + Sync {
    /// The slot.
    fn slot(&self) -> &JoinSlot<T>;
}

impl<T: Send> HoldsSlot<T> for JoinSlot<T> {
    fn slot(&self) -> &JoinSlot<T> {
        self
    }
}

/// How a handle or completer reaches its slot. With `std`, through whatever
/// allocation holds it (loom's `Arc` cannot hold a trait object; the models
/// use bare slots).
#[cfg(not(loom))]
pub(crate) type SlotRef<T> = std::sync::Arc<dyn HoldsSlot<T>>;
#[cfg(loom)]
pub(crate) type SlotRef<T> = Arc<JoinSlot<T>>;

#[cfg(not(loom))]
#[inline]
fn slot_of<T>(r: &SlotRef<T>) -> &JoinSlot<T> {
    r.slot()
}

#[cfg(loom)]
#[inline]
fn slot_of<T>(r: &SlotRef<T>) -> &JoinSlot<T> {
    r
}

/// What a spawn says about its coroutine, for its handle, for the
/// coroutine itself (`current_name`) and for its executor: an id unique in
/// its runtime, where it was spawned, and, for a builder spawn, a name and
/// a stack size. An unnamed spawn carries no string: `name` is `None`.
pub(crate) struct SpawnInfo {
    pub(crate) id: u64,
    pub(crate) at: &'static Location<'static>,
    pub(crate) name: Option<Box<str>>,
    /// Usable stack bytes asked for; 0 for the runtime's size.
    pub(crate) stack_size: usize,
}

impl SpawnInfo {
    /// Where it was spawned, as `file:line`.
    pub(crate) fn site(&self) -> String {
        format!("{}:{}", self.at.file(), self.at.line())
    }

    /// The info of a request the runtime sends its executors (never a
    /// coroutine).
    #[track_caller]
    pub(crate) fn runtime() -> Self {
        SpawnInfo {
            id: 0,
            at: Location::caller(),
            name: None,
            stack_size: 0,
        }
    }
}

/// A coroutine's info is what a join on it waits on.
impl Describe for SpawnInfo {
    fn op(&self) -> Op {
        Op::Join
    }

    fn describe(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "join on coroutine #{}", self.id)?;
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        write!(f, " spawned at {}:{}", self.at.file(), self.at.line())
    }
}

struct SlotState<T> {
    result: Option<Result<T, JoinError>>,
    done: bool,
    /// The handle's own wait (`join`, `join_async`).
    joiner: Option<Waker>,
    /// `wait_timeout` callers (several threads may share the handle).
    watchers: Vec<Waker>,
}

/// The shared cell a coroutine's result travels through.
pub(crate) struct JoinSlot<T> {
    state: Mutex<SlotState<T>>,
    info: SpawnInfo,
    cancel: CancelFlag,
}

/// A coroutine's cancel state ([`JoinHandle::cancel`]): `NEW`,
/// `REQUESTED`, or the address of its runner waker once it started
/// (see the module docs). Read lock-free by the coroutine's executor at
/// each suspension point.
#[derive(Debug)]
pub(crate) struct CancelFlag(AtomicUsize);

impl CancelFlag {
    /// Not started, not cancelled.
    const NEW: usize = 0;
    /// Cancellation requested.
    const REQUESTED: usize = 1;
    /// Started with no runner to wake (never on an executor).
    const STARTED: usize = 2;

    /// Whether cancellation was requested.
    #[must_use]
    pub(crate) fn is_requested(&self) -> bool {
        // Acquire: pairs with the AcqRel swap in `request_cancel`. (The wake
        // that follows the request synchronises as well; this keeps a
        // coroutine that only yields correct without it.)
        self.0.load(Ordering::Acquire) == Self::REQUESTED
    }
}

impl<T: Send + 'static> JoinSlot<T> {
    /// A new, empty slot, with its producing and consuming ends (id 0,
    /// spawned at the caller).
    // For the loom models (the runtime describes its coroutines).
    #[cfg_attr(not(all(test, loom)), allow(dead_code))]
    #[must_use]
    #[track_caller]
    pub(crate) fn pair() -> (Completer<T>, JoinHandle<T>) {
        Self::pair_with(SpawnInfo {
            id: 0,
            at: Location::caller(),
            name: None,
            stack_size: 0,
        })
    }

    /// [`pair`](Self::pair), for a coroutine described by `info`.
    pub(crate) fn pair_with(info: SpawnInfo) -> (Completer<T>, JoinHandle<T>) {
        let slot: SlotRef<T> = Arc::new(JoinSlot::new(info));
        (
            Completer {
                slot: Some(slot.clone()),
            },
            JoinHandle::new(slot),
        )
    }
}

impl<T> JoinSlot<T> {
    /// An empty slot, for embedding in a larger allocation.
    pub(crate) fn new(info: SpawnInfo) -> Self {
        JoinSlot {
            state: Mutex::new(SlotState {
                result: None,
                done: false,
                joiner: None,
                watchers: Vec::new(),
            }),
            info,
            cancel: CancelFlag(AtomicUsize::new(CancelFlag::NEW)),
        }
    }

    /// The coroutine's cancel request flag.
    pub(crate) fn cancel_flag(&self) -> &CancelFlag {
        &self.cancel
    }

    /// The coroutine is about to run its closure, woken by `*runner` when
    /// parked (null: nothing to wake): registers `runner` for
    /// [`request_cancel`](Self::request_cancel) and returns `true`, or
    /// returns `false` if cancellation was requested first: then the closure
    /// must not run. Called at most once per slot.
    ///
    /// # Safety
    ///
    /// A non-null `runner` stays valid until the slot is complete.
    pub(crate) unsafe fn start_running(&self, runner: *const Waker) -> bool {
        let word = if runner.is_null() {
            CancelFlag::STARTED
        } else {
            runner as usize
        };
        // AcqRel: Release publishes nothing the canceller needs beyond the
        // runner's address (the waker was made before); Acquire, on failure,
        // the request. A `Waker` is word-aligned: never 0, 1 or 2.
        self.cancel
            .0
            .compare_exchange(CancelFlag::NEW, word, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Requests cancellation, and wakes the coroutine if it started (and
    /// has not completed). Nothing if it has completed.
    ///
    /// # Panics
    ///
    /// Never: the lock is never poisoned (nothing panics holding it).
    pub(crate) fn request_cancel(&self) {
        let s = self.state.lock().unwrap();
        if s.done {
            return;
        }
        // AcqRel: Release pairs with `is_requested` and a failing start;
        // Acquire with the start's CAS that published the runner.
        let was = self.cancel.0.swap(CancelFlag::REQUESTED, Ordering::AcqRel);
        if was > CancelFlag::STARTED {
            let runner = was as *const Waker;
            // SAFETY: the start stored a runner that lives until the slot
            // is complete (`start_running`'s contract), and it is not: we
            // checked under the lock that completion takes. Woken under
            // that lock for that reason; the wake takes no slot lock.
            unsafe { (*runner).wake_by_ref() };
        }
    }

    /// What the spawn said about the coroutine.
    pub(crate) fn info(&self) -> &SpawnInfo {
        &self.info
    }

    /// Stores the coroutine's outcome (unless the slot is already
    /// complete) and wakes whoever waits for it.
    pub(crate) fn complete(&self, result: Result<T, JoinError>) {
        let (joiner, watchers) = {
            let mut s = self.state.lock().unwrap();
            if s.done {
                return;
            }
            s.done = true;
            s.result = Some(result);
            (s.joiner.take(), std::mem::take(&mut s.watchers))
        };
        if let Some(w) = joiner {
            w.wake();
        }
        for w in watchers {
            w.wake();
        }
    }
}

/// The producing end of a [`JoinSlot`]. Dropping it without completing
/// completes the slot with "cancelled".
pub(crate) struct Completer<T> {
    slot: Option<SlotRef<T>>,
}

impl<T> Completer<T> {
    /// Stores the coroutine's outcome and wakes the joiner, if any.
    pub(crate) fn complete(mut self, result: Result<T, JoinError>) {
        if let Some(slot) = self.slot.take() {
            slot_of(&slot).complete(result);
        }
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            slot_of(&slot).complete(Err(JoinError::cancelled()));
        }
    }
}

/// An owned permission to wait for a coroutine's result.
///
/// Dropping the handle detaches the coroutine: it keeps running and its
/// result is dropped.
///
/// Three ways to wait: [`join`](JoinHandle::join) blocks (only the calling
/// coroutine, inside one), [`wait_timeout`](JoinHandle::wait_timeout)
/// blocks at most a while without taking the result, and
/// [`join_async`](JoinHandle::join_async) (or `.await` on the handle) is a
/// future any async executor can poll.
///
/// ```
/// # use swco_executor::Runtime;
/// let rt = Runtime::builder().executors(2).build().unwrap();
/// let h = rt.spawn(|| 6 * 7);
/// assert_eq!(h.join().unwrap(), 42);
/// ```
pub struct JoinHandle<T> {
    slot: SlotRef<T>,
    cpe: Option<usize>,
}

impl<T> JoinHandle<T> {
    /// A handle on `slot`, not placed yet.
    pub(crate) fn new(slot: SlotRef<T>) -> Self {
        JoinHandle { slot, cpe: None }
    }

    /// The slot, for the loom models to play the coroutine's side
    /// ([`JoinSlot::start_running`], [`JoinSlot::cancel_flag`]).
    #[cfg(all(test, loom))]
    pub(crate) fn slot(&self) -> &JoinSlot<T> {
        slot_of(&self.slot)
    }

    pub(crate) fn with_cpe(mut self, cpe: usize) -> Self {
        self.cpe = Some(cpe);
        self
    }

    fn info(&self) -> &SpawnInfo {
        slot_of(&self.slot).info()
    }

    /// The index of the executor (CPE) the coroutine was placed on; `None`
    /// if it was never placed (the runtime was shut down).
    #[must_use]
    pub fn cpe(&self) -> Option<usize> {
        self.cpe
    }

    /// The coroutine's id: unique among the coroutines of its runtime
    /// (across all its executors), in spawn order per spawning thread.
    #[must_use]
    pub fn id(&self) -> u64 {
        self.info().id
    }

    /// The name given with [`SpawnBuilder::name`](crate::SpawnBuilder::name),
    /// if any.
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(1).build().unwrap();
    /// let h = rt.spawn_builder().name("worker").spawn(|| ()).unwrap();
    /// assert_eq!(h.name(), Some("worker"));
    /// assert_eq!(rt.spawn(|| ()).name(), None);
    /// ```
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        self.info().name.as_deref()
    }

    /// Where the coroutine was spawned: the caller of `spawn`, `spawn_on`,
    /// `try_spawn`, `swco::spawn` or `SpawnBuilder::spawn`.
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(1).build().unwrap();
    /// let h = rt.spawn(|| ());
    /// assert_eq!(h.spawned_at().file(), file!());
    /// ```
    #[must_use]
    pub fn spawned_at(&self) -> &'static Location<'static> {
        self.info().at
    }

    /// Whether the coroutine has finished (its result is ready).
    // The lock is never poisoned: nothing panics while holding it.
    #[allow(clippy::missing_panics_doc)]
    #[must_use]
    pub fn is_finished(&self) -> bool {
        slot_of(&self.slot).state.lock().unwrap().done
    }

    /// Waits at most `timeout` for the coroutine to finish: `true` once it
    /// has (its result is then ready for [`join`](JoinHandle::join)),
    /// `false` if the time ran out first. The result stays in the handle.
    ///
    /// Called from a coroutine, this suspends only the calling coroutine
    /// (on its executor's timer); from a plain thread it parks the thread.
    /// Several threads may wait on one handle at once. A timeout too large
    /// to represent waits until the coroutine finishes.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(1).build().unwrap();
    /// let (tx, rx) = swco_channel::mpmc::bounded::<()>(1);
    /// let h = rt.spawn(move || rx.recv().unwrap());
    /// assert!(!h.wait_timeout(Duration::from_millis(1)));
    /// tx.send(()).unwrap();
    /// assert!(h.wait_timeout(Duration::from_secs(60)));
    /// h.join().unwrap();
    /// ```
    // The lock is never poisoned: nothing panics while holding it.
    #[allow(clippy::missing_panics_doc)]
    #[must_use]
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        let slot = slot_of(&self.slot);
        let park = hook::current();
        let mut registered: Option<Waker> = None;
        loop {
            {
                let mut s = slot.state.lock().unwrap();
                if s.done {
                    // The completer took (and wakes) every watcher.
                    return true;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    // Take our waker back: a wake after we left would only
                    // disturb this thread's (or coroutine's) next park.
                    if let Some(mine) = registered {
                        if let Some(i) = s.watchers.iter().position(|w| w.will_wake(&mine)) {
                            s.watchers.swap_remove(i);
                        }
                    }
                    return false;
                }
                if registered.is_none() {
                    // Registered under the lock the completer takes: see
                    // the module invariants.
                    let waker = park.waker();
                    s.watchers.push(waker.clone());
                    registered = Some(waker);
                }
            }
            park.park_on(deadline, WaitingOn::on(&slot.info));
        }
    }

    /// Waits for the coroutine to finish and returns its result.
    ///
    /// Called from a coroutine, this suspends only the calling coroutine;
    /// from a plain thread it parks the thread.
    ///
    /// # Errors
    ///
    /// [`JoinError`] if the coroutine panicked (carrying the panic message
    /// and payload), was cancelled by a shutdown timeout, or was spawned
    /// after shutdown.
    // The lock is never poisoned: nothing panics while holding it.
    #[allow(clippy::missing_panics_doc)]
    pub fn join(self) -> Result<T, JoinError> {
        let park = hook::current();
        let mut backoff = Backoff::new();
        loop {
            // A short spin before parking, as a blocked channel operation
            // does: a thread joining a batch it spawned finds most of it
            // about to finish, and each park ended soon after costs a
            // futex wake (and an idle vCPU's wake-up). `try_lock`: a look,
            // never a wait behind the completer.
            if !backoff.is_completed() && park.spin_before_park() {
                let done = slot_of(&self.slot).state.try_lock().is_ok_and(|s| s.done);
                if !done {
                    backoff.snooze();
                    continue;
                }
            }
            {
                let mut s = slot_of(&self.slot).state.lock().unwrap();
                if let Some(result) = s.result.take() {
                    return result;
                }
                // Registered under the lock the completer takes: see the
                // module invariants.
                let waker = park.waker();
                if !s.joiner.as_ref().is_some_and(|w| w.will_wake(&waker)) {
                    s.joiner = Some(waker);
                }
            }
            park.park_on(None, WaitingOn::on(&slot_of(&self.slot).info));
        }
    }

    /// Cancels the coroutine: if it has not started, its closure is
    /// dropped and never runs; if it is parked or running, it is unwound
    /// at its next suspension point (a channel operation or join that
    /// blocks, a [`sleep`](crate::sleep), a [`yield_now`](crate::yield_now)),
    /// running the `Drop`s of its stack, which may still block. Its
    /// [`join`](JoinHandle::join) then returns an error with
    /// [`JoinError::is_cancelled`].
    ///
    /// Cancelling a coroutine that has finished does nothing (its result
    /// stays), and so does cancelling it again. Any thread or coroutine may
    /// cancel, the coroutine itself included (it unwinds at its next
    /// suspension). A coroutine that finishes without suspending again
    /// keeps its result. A coroutine that never suspends cannot be
    /// cancelled.
    ///
    /// Channels lose nothing: a message a cancelled receiver had not taken
    /// stays for another receiver, and a value a cancelled sender was
    /// sending is either delivered or dropped.
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(1).build().unwrap();
    /// let (_tx, rx) = swco_channel::mpmc::bounded::<u32>(1);
    /// let h = rt.spawn(move || rx.recv());
    /// h.cancel();
    /// assert!(h.join().unwrap_err().is_cancelled());
    /// ```
    pub fn cancel(&self) {
        slot_of(&self.slot).request_cancel();
    }

    /// A future of the coroutine's result, for async code: it does not
    /// block, so any async executor (tokio, a hand-written `block_on`) can
    /// poll it. Dropping it before it is
    /// ready is fine: the coroutine runs on, detached, as if the handle had
    /// been dropped. `.await` on the handle itself does the same.
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     use std::task::{Context, Poll, Wake, Waker};
    /// #     struct Unpark(std::thread::Thread);
    /// #     impl Wake for Unpark { fn wake(self: std::sync::Arc<Self>) { self.0.unpark() } }
    /// #     let waker = Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop {
    /// #         if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(&waker)) { return v; }
    /// #         std::thread::park();
    /// #     }
    /// # }
    /// let rt = Runtime::builder().executors(1).build().unwrap();
    /// let h = rt.spawn(|| 6 * 7);
    /// assert_eq!(block_on(h.join_async()).unwrap(), 42);
    /// ```
    #[must_use = "a future does nothing unless polled"]
    pub fn join_async(self) -> JoinFuture<T> {
        JoinFuture { handle: Some(self) }
    }
}

impl<T> IntoFuture for JoinHandle<T> {
    type Output = Result<T, JoinError>;
    type IntoFuture = JoinFuture<T>;

    /// [`join_async`](JoinHandle::join_async).
    fn into_future(self) -> JoinFuture<T> {
        self.join_async()
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("cpe", &self.cpe)
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// The future of [`JoinHandle::join_async`]: the coroutine's result, or
/// why there is none.
///
/// Cancel-safe: dropping it before it is ready withdraws its waker and
/// detaches the coroutine, which runs on.
pub struct JoinFuture<T> {
    /// `None` once the result is taken.
    handle: Option<JoinHandle<T>>,
}

impl<T> Future for JoinFuture<T> {
    type Output = Result<T, JoinError>;

    /// # Panics
    ///
    /// If polled again after it returned `Ready`, as futures may.
    // The lock is never poisoned: nothing panics while holding it.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `JoinFuture` is `Unpin`: it holds no self-reference.
        let this = self.get_mut();
        let handle = this
            .handle
            .as_ref()
            .expect("swco: JoinFuture polled after it returned Ready");
        let result = {
            let mut s = slot_of(&handle.slot).state.lock().unwrap();
            match s.result.take() {
                Some(result) => result,
                None => {
                    // Registered under the lock the completer takes: see
                    // the module invariants.
                    if !s.joiner.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        s.joiner = Some(cx.waker().clone());
                    }
                    return Poll::Pending;
                }
            }
        };
        this.handle = None;
        Poll::Ready(result)
    }
}

impl<T> Drop for JoinFuture<T> {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            // Nobody will poll again: drop the executor's waker now rather
            // than when the coroutine finishes. (A poisoned lock cannot
            // happen, and would only keep the waker a while longer.)
            let waker = match slot_of(&handle.slot).state.lock() {
                Ok(mut s) => s.joiner.take(),
                Err(_) => None,
            };
            // Dropped outside the lock, as wakes are.
            drop(waker);
        }
    }
}

impl<T> fmt::Debug for JoinFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinFuture")
            .field("handle", &self.handle)
            .finish()
    }
}

/// Maps a coroutine's panic payload to its join error. A user's payload is
/// kept in the error whole (for `JoinError::into_panic`); a cancellation's
/// is ours and is dropped here.
#[cfg(not(loom))]
pub(crate) fn join_error(payload: Box<dyn std::any::Any + Send>) -> JoinError {
    if payload.is::<crate::panic::Cancelled>() {
        crate::panic::drop_payload(payload);
        JoinError::cancelled()
    } else {
        JoinError::panic(payload)
    }
}
