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
//!
//! Blocking goes through the channel crate's park hook, so `join` suspends
//! only the calling coroutine on an executor thread and parks a plain thread
//! otherwise. The module only uses the crate's `sync` shim and compiles under
//! `--cfg loom`.

use std::fmt;
use std::task::Waker;

use crate::sync::{Arc, Mutex};
use swco_channel::hook;

/// Why a coroutine produced no value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reason {
    Panic(String),
    Cancelled,
    ShutDown,
    Refused(String),
}

/// The error [`JoinHandle::join`] returns when the coroutine produced no
/// value: it panicked (the error carries the panic message), it was
/// cancelled by [`shutdown_timeout`](crate::Runtime::shutdown_timeout), or it
/// was spawned on a runtime that had already shut down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinError {
    reason: Reason,
}

impl JoinError {
    pub(crate) fn panic(payload: &(dyn std::any::Any + Send)) -> Self {
        let message = if let Some(s) = payload.downcast_ref::<&'static str>() {
            (*s).to_owned()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "Box<dyn Any>".to_owned()
        };
        JoinError {
            reason: Reason::Panic(message),
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

    /// Whether the coroutine was cancelled before it finished (a
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
            Reason::Panic(m) => Some(m),
            _ => None,
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Reason::Panic(m) => write!(f, "coroutine panicked: {m}"),
            Reason::Cancelled => f.write_str("coroutine was cancelled at shutdown"),
            Reason::ShutDown => f.write_str("coroutine was not run: the runtime is shut down"),
            Reason::Refused(why) => write!(f, "coroutine was not run: {why}"),
        }
    }
}

impl std::error::Error for JoinError {}

/// Whatever holds a [`JoinSlot`]: the slot alone ([`JoinSlot::pair`]), or a
/// spawned coroutine's one allocation, which also carries its closure
/// (`spawning.rs`), so a spawn allocates once for both.
#[doc(hidden)]
pub trait HoldsSlot<T>: Send + Sync {
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

struct SlotState<T> {
    result: Option<Result<T, JoinError>>,
    done: bool,
    joiner: Option<Waker>,
}

/// The shared cell a coroutine's result travels through.
#[doc(hidden)]
pub struct JoinSlot<T> {
    state: Mutex<SlotState<T>>,
}

impl<T: Send + 'static> JoinSlot<T> {
    /// A new, empty slot, with its producing and consuming ends.
    #[must_use]
    pub fn pair() -> (Completer<T>, JoinHandle<T>) {
        let slot: SlotRef<T> = Arc::new(JoinSlot::new());
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
    pub(crate) fn new() -> Self {
        JoinSlot {
            state: Mutex::new(SlotState {
                result: None,
                done: false,
                joiner: None,
            }),
        }
    }

    /// Stores the coroutine's outcome (unless the slot is already
    /// complete) and wakes the joiner, if any.
    pub(crate) fn complete(&self, result: Result<T, JoinError>) {
        let joiner = {
            let mut s = self.state.lock().unwrap();
            if s.done {
                return;
            }
            s.done = true;
            s.result = Some(result);
            s.joiner.take()
        };
        if let Some(w) = joiner {
            w.wake();
        }
    }
}

/// The producing end of a [`JoinSlot`]. Dropping it without completing
/// completes the slot with "cancelled".
#[doc(hidden)]
pub struct Completer<T> {
    slot: Option<SlotRef<T>>,
}

impl<T> Completer<T> {
    /// Stores the coroutine's outcome and wakes the joiner, if any.
    pub fn complete(mut self, result: Result<T, JoinError>) {
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

    pub(crate) fn with_cpe(mut self, cpe: usize) -> Self {
        self.cpe = Some(cpe);
        self
    }

    /// The index of the executor (CPE) the coroutine was placed on; `None`
    /// if it was never placed (the runtime was shut down).
    #[must_use]
    pub fn cpe(&self) -> Option<usize> {
        self.cpe
    }

    /// Whether the coroutine has finished (its result is ready).
    // The lock is never poisoned: nothing panics while holding it.
    #[allow(clippy::missing_panics_doc)]
    #[must_use]
    pub fn is_finished(&self) -> bool {
        slot_of(&self.slot).state.lock().unwrap().done
    }

    /// Waits for the coroutine to finish and returns its result.
    ///
    /// Called from a coroutine, this suspends only the calling coroutine;
    /// from a plain thread it parks the thread.
    ///
    /// # Errors
    ///
    /// [`JoinError`] if the coroutine panicked (carrying the panic message),
    /// was cancelled by a shutdown timeout, or was spawned after shutdown.
    // The lock is never poisoned: nothing panics while holding it.
    #[allow(clippy::missing_panics_doc)]
    pub fn join(self) -> Result<T, JoinError> {
        let park = hook::current();
        loop {
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
            park.park(None);
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("cpe", &self.cpe)
            .field("finished", &self.is_finished())
            .finish()
    }
}
