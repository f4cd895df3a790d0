//! [`OnceCell`]: a value set once, by one initialiser, while the other
//! callers wait as coroutines.

use std::cell::UnsafeCell;
use std::fmt;
use std::mem::MaybeUninit;

use swco_wait::hook::{self, Op};
use swco_wait::protocol;
use swco_wait::sync::{fence, AtomicUsize, Ordering};
use swco_wait::wait_list::Waiters;

use crate::queue::Queue;

/// No value and nobody initialising.
const EMPTY: usize = 0;
/// One caller runs its initialiser; the others wait.
const RUNNING: usize = 1;
/// The value is set, for good.
const READY: usize = 2;

/// A cell written once, for coroutines and threads: Go's `sync.Once` with
/// its value, `std::sync::OnceLock`'s shape.
///
/// [`get_or_init`](OnceCell::get_or_init) runs one caller's initialiser;
/// the callers that come meanwhile wait for it (only the calling coroutine;
/// a plain thread blocks), then all see the one value.
///
/// **An initialiser that panics** leaves the cell empty and the panic
/// goes on in its caller; one of the waiting callers then runs its own
/// initialiser, as with std's `OnceLock`.
///
/// **Re-entrance panics.** An initialiser that calls `get_or_init` on its
/// own cell would wait for itself; it panics with a message instead.
///
/// A waiter cancelled while it waits (by `JoinHandle::cancel` or a
/// runtime's `shutdown_timeout`) leaves the queue; an initialiser that is
/// cancelled counts as one that panicked.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use swco_sync::OnceCell;
///
/// let cell = Arc::new(OnceCell::new());
/// let runs = Arc::new(AtomicUsize::new(0));
/// let threads: Vec<_> = (0..4)
///     .map(|_| {
///         let (cell, runs) = (Arc::clone(&cell), Arc::clone(&runs));
///         std::thread::spawn(move || {
///             *cell.get_or_init(|| {
///                 runs.fetch_add(1, Ordering::SeqCst);
///                 42
///             })
///         })
///     })
///     .collect();
/// for t in threads {
///     assert_eq!(t.join().unwrap(), 42);
/// }
/// assert_eq!(runs.load(Ordering::SeqCst), 1);
/// assert_eq!(cell.get(), Some(&42));
/// ```
pub struct OnceCell<T> {
    /// `EMPTY`, `RUNNING` or `READY`: a word, as every atomic of the
    /// blocking layer (the shim's, which loom swaps in).
    state: AtomicUsize,
    /// The party running the initialiser, while `RUNNING`: only read to
    /// recognise re-entrance (a party reads its own id back).
    initialiser: AtomicUsize,
    queue: Queue,
    value: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: the value is written once, by the one caller that moved the
// state to `RUNNING`, before the `Release` store of `READY`; it is read
// only after an `Acquire` load of `READY`, and never written again while
// shared. Sharing the cell shares `&T` between threads (`T: Sync`) and
// lets any thread's initialiser make the `T` that another thread may drop
// (`T: Send`), as std's `OnceLock`.
unsafe impl<T: Send + Sync> Sync for OnceCell<T> {}
// SAFETY: moving the cell moves the `T`.
unsafe impl<T: Send> Send for OnceCell<T> {}

impl<T> OnceCell<T> {
    /// An empty cell.
    #[must_use]
    pub fn new() -> Self {
        OnceCell {
            state: AtomicUsize::new(EMPTY),
            initialiser: AtomicUsize::new(0),
            queue: Queue::new(Op::Sync, "OnceCell"),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// The value, if it is set.
    #[must_use]
    pub fn get(&self) -> Option<&T> {
        // Acquire: the initialiser's write of the value happens-before.
        if self.state.load(Ordering::Acquire) == READY {
            // SAFETY: `READY` is final and the value was written before it
            // was stored (Release, paired with our Acquire).
            Some(unsafe { self.value_ref() })
        } else {
            None
        }
    }

    /// The value, by exclusive borrow, if it is set.
    pub fn get_mut(&mut self) -> Option<&mut T> {
        // Relaxed: `&mut self` orders it.
        if self.state.load(Ordering::Relaxed) == READY {
            // SAFETY: set (`READY`), and `&mut self` excludes every other
            // reference.
            Some(unsafe { (*self.value.get()).assume_init_mut() })
        } else {
            None
        }
    }

    /// The value, running `init` to set it if it is not set yet. Callers
    /// that come while another's `init` runs wait for it.
    ///
    /// # Panics
    ///
    /// If `init` panics (the cell stays empty), or if `init` calls
    /// `get_or_init` (or [`set`](OnceCell::set)) on this cell.
    pub fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
        if let Some(value) = self.get() {
            return value;
        }
        let mut init = Some(init);
        loop {
            match self.claim() {
                Ok(()) => {
                    let init = init.take().expect("one initialiser run per caller");
                    self.initialise(init);
                }
                Err(READY) => {}
                Err(_) => self.wait_while_running(),
            }
            if let Some(value) = self.get() {
                return value;
            }
        }
    }

    /// Sets the value if the cell is empty (waiting for an initialiser
    /// that is running, as [`get_or_init`](OnceCell::get_or_init) would);
    /// gives `value` back if it was set already.
    ///
    /// # Errors
    ///
    /// `Err(value)` if the cell holds a value (its own, or one an
    /// initialiser running meanwhile set).
    ///
    /// # Panics
    ///
    /// If called from the initialiser of this cell.
    pub fn set(&self, value: T) -> Result<(), T> {
        let mut value = Some(value);
        self.get_or_init(|| value.take().expect("taken once"));
        match value {
            None => Ok(()),
            Some(value) => Err(value),
        }
    }

    /// The value, taking the cell apart.
    pub fn into_inner(mut self) -> Option<T> {
        // Relaxed: `self` is ours alone.
        if self.state.load(Ordering::Relaxed) == READY {
            self.state.store(EMPTY, Ordering::Relaxed);
            // SAFETY: set (`READY`); the state now says empty, so `Drop`
            // will not drop it again.
            Some(unsafe { self.value.get_mut().assume_init_read() })
        } else {
            None
        }
    }

    /// Moves the state from `EMPTY` to `RUNNING` for this caller, or says
    /// what it found.
    fn claim(&self) -> Result<(), usize> {
        let me = hook::current_party();
        match self
            .state
            .compare_exchange(EMPTY, RUNNING, Ordering::Acquire, Ordering::Acquire)
        {
            Ok(_) => {
                self.initialiser.store(me, Ordering::Relaxed);
                Ok(())
            }
            Err(RUNNING) => {
                assert!(
                    me == 0 || self.initialiser.load(Ordering::Relaxed) != me,
                    "swco::sync::OnceCell::get_or_init: called from this cell's own \
                     initialiser; it would wait for itself for ever"
                );
                Err(RUNNING)
            }
            Err(other) => Err(other),
        }
    }

    /// Runs `init` as the claimed initialiser and publishes the value; on
    /// unwinding, puts the cell back to `EMPTY` so that a waiter takes
    /// over.
    fn initialise(&self, init: impl FnOnce() -> T) {
        /// Empties the cell again if `init` unwinds.
        struct Reset<'a, T>(&'a OnceCell<T>);
        impl<T> Drop for Reset<'_, T> {
            fn drop(&mut self) {
                self.0.initialiser.store(0, Ordering::Relaxed);
                self.0.finish(EMPTY);
            }
        }
        let reset = Reset(self);
        let value = init();
        std::mem::forget(reset);
        // SAFETY: we hold `RUNNING`: nobody else writes the value, and
        // nobody reads it before `READY`.
        unsafe { (*self.value.get()).write(value) };
        self.initialiser.store(0, Ordering::Relaxed);
        self.finish(READY);
    }

    /// Leaves `RUNNING` for `state` and wakes every waiter.
    fn finish(&self, state: usize) {
        // Release: the value (for `READY`) happens-before every reader.
        self.state.store(state, Ordering::Release);
        // Store, fence, look: against the waiters' register, fence,
        // re-check (`wait_until`).
        fence(Ordering::SeqCst);
        if self.queue.may_have_waiters() {
            self.queue.notify_all();
        }
    }

    /// Waits until the state is not `RUNNING`.
    fn wait_while_running(&self) {
        protocol::wait_until(&self.queue, self.queue.waiting_on(), || {
            self.state.load(Ordering::Acquire) != RUNNING
        });
    }

    /// The value.
    ///
    /// # Safety
    ///
    /// The state is `READY`, as seen by an `Acquire` load (or through
    /// `&mut self`).
    unsafe fn value_ref(&self) -> &T {
        // SAFETY: the caller's contract: set, and never written again
        // while shared.
        unsafe { (*self.value.get()).assume_init_ref() }
    }
}

impl<T> Default for OnceCell<T> {
    fn default() -> Self {
        OnceCell::new()
    }
}

impl<T> From<T> for OnceCell<T> {
    fn from(value: T) -> Self {
        let cell = OnceCell::new();
        let _ = cell.set(value);
        cell
    }
}

impl<T> Drop for OnceCell<T> {
    fn drop(&mut self) {
        // Relaxed: `&mut self` orders it.
        if self.state.load(Ordering::Relaxed) == READY {
            // SAFETY: set, and `&mut self`: dropped once, here.
            unsafe { self.value.get_mut().assume_init_drop() };
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for OnceCell<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_tuple("OnceCell");
        match self.get() {
            Some(value) => d.field(value),
            None => d.field(&format_args!("<unset>")),
        };
        d.finish()
    }
}
