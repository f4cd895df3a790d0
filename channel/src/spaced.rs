//! Keeping a channel's hot words apart without over-aligning the channel.
//!
//! A producer's cursor, a consumer's cursor and the two waiter lists are
//! written by different threads; on one cache line (or on the two lines
//! that x86's adjacent-line prefetcher fetches together) every write by
//! one would evict the others. crossbeam's `CachePadded` keeps them apart
//! by aligning each to 128 bytes, which makes the whole `Chan` 128-aligned,
//! and an over-aligned `Arc<Chan>` is allocated with `posix_memalign`. With
//! glibc that takes a slower path than `malloc` and splits free chunks,
//! and every channel pays it once: a program that makes a channel per hop
//! (a daisy chain) pays it on every hop.
//!
//! [`Spaced`] keeps the same distance without the alignment: its value is
//! followed by [`GAP`] bytes that are never written, so two `Spaced` values
//! in a `#[repr(C)]` struct are at least `GAP` bytes apart, and two
//! addresses that far apart are never in one 128-byte block.

use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};

/// Bytes kept free after a [`Spaced`] value: x86-64's false-sharing unit
/// (a pair of 64-byte lines) and the largest cache line of aarch64.
pub(crate) const GAP: usize = 128;

/// Never read or written: only keeps `GAP` bytes of distance.
pub(crate) type Gap = MaybeUninit<[u8; GAP]>;

/// The gap's value: uninitialised, so making a `Spaced` writes no padding.
pub(crate) const fn gap() -> Gap {
    MaybeUninit::uninit()
}

/// A value followed by [`GAP`] unused bytes. Only a `#[repr(C)]` struct
/// keeps its fields in order, so only there do two of these stay apart.
#[repr(C)]
pub(crate) struct Spaced<T> {
    value: T,
    _gap: Gap,
}

impl<T> Spaced<T> {
    pub(crate) const fn new(value: T) -> Self {
        Spaced { value, _gap: gap() }
    }
}

impl<T> Deref for Spaced<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for Spaced<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}
