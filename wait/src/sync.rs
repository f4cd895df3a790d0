//! The one place that decides between `std` and `loom`.
//!
//! Every atomic, cell, spin hint, thread-local and parker used by this
//! crate, by the channels and by the `swco::sync` types comes from here, so
//! that `RUSTFLAGS="--cfg loom"` swaps them all onto loom's model checker at
//! once. Nothing else in those crates names `std::sync::atomic` or `loom`
//! directly. The executor parks its threads with this module's parker
//! (`hook::Parker`), so they park the way a blocked channel user does, under
//! loom too.

#[cfg(loom)]
mod imp {
    pub use loom::sync::atomic::{fence, AtomicBool, AtomicUsize};
    pub use loom::sync::Arc;
    pub use loom::thread_local;

    /// Loom only (`std` has no `lazy_static`): a static whose value loom
    /// makes afresh in every execution, for state that must start over with
    /// each one (the channels' combining slot numbering).
    pub use loom::lazy_static;

    /// Loom's cell: every access is tracked, so an unsynchronised read of a
    /// slot that is being written is reported as a data race.
    pub use loom::cell::UnsafeCell;

    /// A spin-loop hint. Under loom a spinning thread must yield, or the model
    /// checker would explore the spin forever.
    #[inline]
    pub fn spin_hint() {
        loom::thread::yield_now();
    }

    /// Gives the OS thread (the loom thread) away.
    #[inline]
    pub fn yield_thread() {
        loom::thread::yield_now();
    }

    /// A per-thread token parker: a `loom::sync::Notify` per parking thread.
    ///
    /// Not loom's `thread::park`/`Thread::unpark`: loom's `unpark` releases
    /// the target from *whatever* it is blocked on (a `join`, a loom
    /// `Mutex`), where `std`'s only leaves a token for the next `park`. The
    /// channel may deliver a late wake (a waiter that already returned), and
    /// under loom that woke threads blocked in `join`, tripping loom's own
    /// assertions. A `Notify` holds exactly one token, like `std`'s parker,
    /// and may wake spuriously once, which `park`'s contract allows.
    pub struct Parker {
        notify: std::sync::Arc<loom::sync::Notify>,
    }

    /// Wakes the [`Parker`] it came from.
    #[derive(Clone)]
    pub struct Unparker {
        notify: std::sync::Arc<loom::sync::Notify>,
    }

    impl Parker {
        /// A parker with no token.
        #[must_use]
        pub fn new() -> Self {
            Parker {
                notify: std::sync::Arc::new(loom::sync::Notify::new()),
            }
        }
        /// The handle that wakes this parker, from any thread.
        #[must_use]
        pub fn unparker(&self) -> Unparker {
            Unparker {
                notify: self.notify.clone(),
            }
        }
        /// Loom has no clock: a deadline is treated as "no deadline".
        pub fn park(&self, _deadline: Option<std::time::Instant>) {
            self.notify.wait();
        }
    }

    impl Default for Parker {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Unparker {
        /// Leaves a token, waking the parker if it is parked.
        pub fn unpark(&self) {
            self.notify.notify();
        }
    }
}

#[cfg(not(loom))]
mod imp {
    pub use std::sync::atomic::{fence, AtomicBool, AtomicUsize};
    pub use std::sync::Arc;
    pub use std::thread_local;

    /// `std`'s `UnsafeCell` with loom's closure-based access API, so the same
    /// code compiles against both.
    #[derive(Debug)]
    #[repr(transparent)]
    pub struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        /// A cell holding `value`.
        #[inline]
        pub const fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }
        /// Runs `f` with a pointer for reading the value.
        #[inline]
        pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }
        /// Runs `f` with a pointer for writing the value.
        #[inline]
        pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }

    /// A spin-loop hint.
    #[inline]
    pub fn spin_hint() {
        std::hint::spin_loop();
    }

    /// Gives the OS thread away.
    #[inline]
    pub fn yield_thread() {
        std::thread::yield_now();
    }

    /// A per-thread token parker (crossbeam-utils').
    #[derive(Default)]
    pub struct Parker(crossbeam_utils::sync::Parker);

    /// Wakes the [`Parker`] it came from.
    #[derive(Clone)]
    pub struct Unparker(crossbeam_utils::sync::Unparker);

    impl Parker {
        /// A parker with no token.
        #[must_use]
        pub fn new() -> Self {
            Parker(crossbeam_utils::sync::Parker::new())
        }
        /// The handle that wakes this parker, from any thread.
        #[must_use]
        pub fn unparker(&self) -> Unparker {
            Unparker(self.0.unparker().clone())
        }
        /// Blocks the thread until a token is there (consuming it) or the
        /// deadline passes; may return spuriously.
        pub fn park(&self, deadline: Option<std::time::Instant>) {
            match deadline {
                None => self.0.park(),
                Some(d) => self.0.park_deadline(d),
            }
        }
    }

    impl Unparker {
        /// Leaves a token, waking the parker if it is parked.
        pub fn unpark(&self) {
            self.0.unpark();
        }
    }
}

pub use imp::*;
pub use std::sync::atomic::Ordering;
