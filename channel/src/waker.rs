//! Waiter lists, kept apart from the ring: who is blocked on a full or an
//! empty channel, and how to wake them.
//!
//! A blocking operation registers a [`Waker`] here, then issues
//! `fence(SeqCst)`, then re-checks the ring before parking. The peer, after
//! changing the ring, looks at [`WaitList::has_waiters`]; in between it is
//! ordered against the waiter either by its own `fence(SeqCst)` (a lone side,
//! whose progress is a plain store) or by its claim, a read-modify-write on
//! a word that the waiter's re-check also read-modify-writes (`Cas` and
//! `Updt` sides; see `Cursor::CLAIM_SYNCS_WITH_WAITERS`). Either way at
//! least one side sees the other: the waiter's re-check sees the progress
//! and it does not park, or the peer sees the waiter and wakes it. Wakers are
//! invoked after the list's lock is released.
//!
//! Wake-one picks the oldest waiter and *removes* it from the list: being
//! removed is how a waiter learns it was chosen. A chosen waiter always
//! retries its operation at least once before giving up (even on timeout),
//! or, if it unwinds out of its park instead, wakes the next waiter in its
//! place (see `chan::Registered`), so the progress it was woken for is never
//! left unused while others sleep.

use std::collections::VecDeque;
use std::task::Waker;

use crate::lock::RawLock;
use crate::sync::{Ordering, UnsafeCell};
use crate::updt::UpdtCell;

pub(crate) struct WaitList<L> {
    lock: L,
    /// Guarded by `lock`.
    entries: UnsafeCell<VecDeque<(u64, Waker)>>,
    /// Guarded by `lock`.
    next_key: UnsafeCell<u64>,
    /// Mirror of `entries.len()`, stored under the lock, loaded without it on
    /// the fast path. Only loaded and stored, so an `UpdtCell` serves.
    len: UpdtCell,
}

// SAFETY: the cells are only touched with `lock` held.
unsafe impl<L: RawLock> Sync for WaitList<L> {}
// SAFETY: `Waker` is `Send`; the lock is `Send`.
unsafe impl<L: RawLock> Send for WaitList<L> {}

/// A ticket for a registered waiter.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Key(u64);

impl<L: RawLock> WaitList<L> {
    pub(crate) fn new() -> Self {
        WaitList {
            lock: L::new(),
            entries: UnsafeCell::new(VecDeque::new()),
            next_key: UnsafeCell::new(0),
            len: UpdtCell::new(0),
        }
    }

    fn with_locked<R>(&self, f: impl FnOnce(&mut VecDeque<(u64, Waker)>, &mut u64) -> R) -> R {
        self.lock.lock();
        // SAFETY: we hold the lock, so no one else is touching the cells.
        let r = self
            .entries
            .with_mut(|e| self.next_key.with_mut(|k| unsafe { f(&mut *e, &mut *k) }));
        self.lock.unlock();
        r
    }

    /// Adds a waiter. Follow with `fence(SeqCst)` and a re-check.
    pub(crate) fn register(&self, waker: Waker) -> Key {
        self.with_locked(|entries, next| {
            let key = *next;
            *next += 1;
            entries.push_back((key, waker));
            // Relaxed: the caller's fence(SeqCst) orders it before the re-check.
            self.len.store(entries.len(), Ordering::Relaxed);
            Key(key)
        })
    }

    /// Removes a waiter that stops waiting. Returns `false` if it was no
    /// longer listed, i.e. a waker chose it.
    pub(crate) fn unregister(&self, key: Key) -> bool {
        // We stored a non-zero length when we registered, so reading zero
        // (our own store or a later one) means a waker has since emptied the
        // list, taking our entry with it: no need for the lock. This is the
        // common case after a wake-up.
        // Relaxed: coherence on `len` alone is what the argument needs.
        if self.len.load(Ordering::Relaxed) == 0 {
            return false;
        }
        self.with_locked(|entries, _| {
            let found = entries.iter().position(|(k, _)| *k == key.0);
            if let Some(i) = found {
                entries.remove(i);
                self.len.store(entries.len(), Ordering::Relaxed);
            }
            found.is_some()
        })
    }

    /// Cheap check, after the caller's `fence(SeqCst)`.
    #[inline]
    pub(crate) fn has_waiters(&self) -> bool {
        // Relaxed: ordered by the caller's fence against the waiter's fence.
        self.len.load(Ordering::Relaxed) != 0
    }

    /// Wakes the oldest waiter, if any.
    pub(crate) fn notify_one(&self) {
        if let Some((_, waker)) = self.with_locked(|entries, _| {
            let first = entries.pop_front();
            self.len.store(entries.len(), Ordering::Relaxed);
            first
        }) {
            waker.wake();
        }
    }

    /// Wakes every waiter (disconnection).
    pub(crate) fn notify_all(&self) {
        let all = self.with_locked(|entries, _| {
            self.len.store(0, Ordering::Relaxed);
            std::mem::take(entries)
        });
        for (_, waker) in all {
            waker.wake();
        }
    }
}
