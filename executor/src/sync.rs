//! The one place in this crate that decides between `std` and `loom`.
//!
//! Every atomic, lock and cell the executor shares between threads comes
//! from here, so that `RUSTFLAGS="--cfg loom"` swaps them all onto loom's
//! model checker at once. The thread parker is the channel crate's
//! ([`swco_wait::hook::Parker`]), which makes the same choice itself, so
//! an executor thread parks the way a blocked channel user does.

#[cfg(loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
    pub(crate) use loom::sync::{Arc, Mutex};
}

#[cfg(not(loom))]
mod imp {
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
    pub(crate) use std::sync::{Arc, Mutex};

    /// `std`'s `UnsafeCell` with loom's closure-based access API, so the
    /// same code compiles against both.
    #[derive(Debug)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        #[inline]
        pub(crate) const fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }
        #[inline]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }
        #[inline]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

pub(crate) use imp::*;
pub(crate) use std::sync::atomic::Ordering;
pub(crate) use swco_wait::hook::{Parker, Unparker};
