//! [`Mutex`]: mutual exclusion that blocks only the calling coroutine.

use std::cell::UnsafeCell;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::task::{Context, Poll};

use swco_wait::hook::{self, Op};
use swco_wait::protocol::{self, GrantWait};
use swco_wait::sync::{fence, AtomicBool, AtomicUsize, Ordering};

use crate::queue::Queue;

/// A mutual-exclusion lock for coroutines and threads, with no poisoning.
///
/// [`lock`](Mutex::lock) blocks only the calling coroutine (a plain thread
/// blocks itself), so a coroutine may hold the [`MutexGuard`] across a
/// suspension (a channel operation, `yield_now`, another lock) while the
/// other coroutines of its executor go on running: that is what this type
/// is for, and what a `std::sync::Mutex` cannot do (holding one across a
/// suspension can freeze the executor). Threads and coroutines may share
/// one mutex.
///
/// **Fairness: hand-off, oldest first, with bounded executor affinity.**
/// Unlocking with waiters queued hands the lock to a waiter, which wakes up
/// owning it: the oldest, unless a coroutine unlocks while the oldest
/// waiter is on another executor and a waiter of its own executor is near
/// the front (among the first 32): the oldest of those is chosen instead,
/// at most 32 times in a row; then the oldest. (Waking a coroutine of
/// one's own executor is a push onto its run queue; waking one elsewhere
/// is a remote wake, and coroutines never move between executors.) Plain
/// threads are handed the lock in FIFO order. A `lock` that finds waiters
/// queued joins the queue rather than taking the lock past them. The one
/// exception is a `lock` (or [`try_lock`](Mutex::try_lock)) that races the
/// unlock itself: it may come first, once per unlock, and the waiter keeps
/// its place. A waiter woken spuriously queues again at the back.
///
/// **Recursion panics.** A coroutine (or thread) that calls `lock` on a
/// mutex it already holds panics with a message, rather than waiting for
/// itself for ever. (The holder is the party that locked: a guard moved to
/// another coroutine still counts as the locker's.)
///
/// A waiter cancelled while it waits (by `JoinHandle::cancel`, or a
/// runtime's `shutdown_timeout`) leaves the queue, and if the lock was
/// handed to it meanwhile, hands it on: no stale waiter stays behind and no
/// unlock is lost. [`lock_async`](Mutex::lock_async) is the same lock as a
/// future, cancel-safe in the same way.
///
/// ```
/// use swco_sync::Mutex;
/// use std::sync::Arc;
///
/// let m = Arc::new(Mutex::new(0));
/// let threads: Vec<_> = (0..4)
///     .map(|_| {
///         let m = Arc::clone(&m);
///         std::thread::spawn(move || for _ in 0..100 { *m.lock() += 1 })
///     })
///     .collect();
/// for t in threads { t.join().unwrap(); }
/// assert_eq!(*m.lock(), 400);
/// ```
pub struct Mutex<T> {
    locked: AtomicBool,
    /// The [`hook::current_party`] of the holder, `0` if unknown or free.
    /// Only read to recognise a recursive lock: a party reads its own id
    /// here only while it holds the lock.
    owner: AtomicUsize,
    queue: Queue,
    data: UnsafeCell<T>,
}

// SAFETY: the mutex hands out access to `data` to one holder at a time (the
// `locked` flag, acquired and released), so sharing it is sharing `T`
// between threads one after another: `T: Send` is enough, as for `std`'s.
unsafe impl<T: Send> Sync for Mutex<T> {}
// SAFETY: moving the mutex moves the `T`.
unsafe impl<T: Send> Send for Mutex<T> {}

impl<T> Mutex<T> {
    /// An unlocked mutex holding `value`.
    pub fn new(value: T) -> Self {
        Mutex {
            locked: AtomicBool::new(false),
            owner: AtomicUsize::new(0),
            queue: Queue::new(Op::Lock, "Mutex"),
            data: UnsafeCell::new(value),
        }
    }

    /// Locks the mutex, waiting while another party holds it; only the
    /// calling coroutine waits (a plain thread blocks). Unlocked when the
    /// guard is dropped.
    ///
    /// # Panics
    ///
    /// If the calling coroutine (or thread) already holds this mutex.
    #[must_use = "the mutex is unlocked again at once if the guard is not kept"]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        // Asked once, for the slow path's recursion check and the record.
        let me = hook::current_party();
        if self.queue.has_waiters() || !self.try_acquire() {
            self.lock_slow(me);
        }
        self.owner.store(me, Ordering::Relaxed);
        MutexGuard::new(self)
    }

    /// Waits for the lock, as party `me`.
    #[cold]
    fn lock_slow(&self, me: usize) {
        assert!(
            me == 0 || self.owner.load(Ordering::Relaxed) != me,
            "swco::sync::Mutex::lock: the calling coroutine (or thread) already holds this \
             mutex; locking it again would wait for itself for ever"
        );
        protocol::wait_for_grant(
            &self.queue,
            self.queue.waiting_on(),
            || self.try_acquire(),
            || self.unlock(),
        );
    }

    /// Locks the mutex if it is free, without waiting: `None` if another
    /// party holds it (or, rarely, takes it at the same moment).
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        if self.try_acquire() {
            self.owner.store(hook::current_party(), Ordering::Relaxed);
            Some(MutexGuard::new(self))
        } else {
            None
        }
    }

    /// [`lock`](Mutex::lock), as a future: completes with the guard once
    /// the lock is this task's, waiting as `Pending` meanwhile. Works with
    /// any executor, alongside blocking lockers.
    ///
    /// **Cancel safety.** Dropping the future before it completes leaves
    /// the queue; if the lock was handed to it meanwhile, it is handed on.
    /// No unlock is lost. (A lock taken through a future is not recognised
    /// as recursive: the tasks that one thread polls are one party to the
    /// park hook, so a task's second lock cannot be told from another
    /// task's first, and a check would misfire. tokio's mutex makes the
    /// same choice.)
    pub fn lock_async(&self) -> LockFuture<'_, T> {
        LockFuture {
            mutex: self,
            wait: GrantWait::new(),
            done: false,
        }
    }

    /// The value, through the exclusive borrow: no locking needed.
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    /// The value, taking the mutex apart.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }

    /// Takes the lock if it is free.
    #[inline]
    fn try_acquire(&self) -> bool {
        // A load first: under contention the lock is mostly held (it is
        // handed from holder to waiter without being let go), and a failed
        // compare-exchange still takes the cache line exclusive. Acquire:
        // the previous holder's writes to `data` happen-before ours.
        !self.locked.load(Ordering::Relaxed)
            && self
                .locked
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Releases the lock, or hands it to the oldest waiter.
    fn unlock(&self) {
        // Waiters listed (the common case under contention): hand the lock
        // over as it stands, still locked, under the list's lock, or, if
        // they have all gone meanwhile, let it go under that lock. That
        // saves letting go, fencing and taking the lock again on the
        // waiter's behalf. The chosen waiter learns it through the list
        // (Acquire against the list's Release), which orders our writes to
        // `data` before its. A `false` here may be stale (a waiter
        // registering right now): the path below is the one that is
        // ordered against it.
        if self.queue.has_waiters() {
            self.queue
                .hand_over_or(|| self.locked.store(false, Ordering::Release));
            return;
        }
        // Release: our writes to `data` happen-before the next holder's
        // (a waiter handed the lock acquires it through `try_acquire`
        // below, on its behalf, and then through the wait list's lock).
        self.locked.store(false, Ordering::Release);
        // Register / re-check on the waiter's side, release / fence / look
        // on ours: either the waiter's re-check sees the lock free, or we
        // see it listed and hand it over.
        fence(Ordering::SeqCst);
        if self.queue.has_waiters() {
            self.queue.wake_one_if(|| self.try_acquire());
        }
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(value: T) -> Self {
        Mutex::new(value)
    }
}

impl<T: fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Some(guard) => d.field("data", &&*guard),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish_non_exhaustive()
    }
}

/// Access to a [`Mutex`]'s value while it is locked; unlocks (handing the
/// lock to the oldest waiter, if any) when dropped. May be held across a
/// suspension of the coroutine.
#[must_use = "the mutex is unlocked again at once if the guard is not kept"]
pub struct MutexGuard<'a, T> {
    mutex: &'a Mutex<T>,
    /// Shared access to `T` across threads goes with `T: Sync`.
    _marker: PhantomData<&'a mut T>,
}

// SAFETY: unlocking does not depend on the thread (the holder is not a
// thread), so the guard may move with its coroutine, or to another thread,
// carrying exclusive access to `T`: like `&mut T`, which is `Send` when `T`
// is (`Sync` is asked too, since the guard's `Deref` shares `&T`).
unsafe impl<T: Send + Sync> Send for MutexGuard<'_, T> {}
// SAFETY: sharing the guard shares `&T`.
unsafe impl<T: Sync> Sync for MutexGuard<'_, T> {}

impl<'a, T> MutexGuard<'a, T> {
    fn new(mutex: &'a Mutex<T>) -> Self {
        MutexGuard {
            mutex,
            _marker: PhantomData,
        }
    }

    /// The mutex this guard holds, for a `Condvar` that gives the lock up
    /// and takes it again.
    pub(crate) fn mutex(&self) -> &'a Mutex<T> {
        self.mutex
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while its mutex is locked on its
        // behalf, so no other reference to `data` is live.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only
        // reference through the guard.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.mutex.owner.store(0, Ordering::Relaxed);
        self.mutex.unlock();
    }
}

impl<T: fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: fmt::Display> fmt::Display for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

/// The future of [`Mutex::lock_async`].
#[must_use = "futures do nothing unless polled"]
pub struct LockFuture<'a, T> {
    mutex: &'a Mutex<T>,
    wait: GrantWait,
    done: bool,
}

impl<'a, T> Future for LockFuture<'a, T> {
    type Output = MutexGuard<'a, T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<MutexGuard<'a, T>> {
        let this = self.get_mut();
        assert!(!this.done, "LockFuture polled after completion");
        let mutex = this.mutex;
        let ready = this.wait.poll(
            &mutex.queue,
            cx.waker(),
            || mutex.try_acquire(),
            || mutex.unlock(),
        );
        ready.map(|()| {
            this.done = true;
            MutexGuard::new(mutex)
        })
    }
}

impl<T> Drop for LockFuture<'_, T> {
    fn drop(&mut self) {
        let mutex = self.mutex;
        self.wait.cancel(&mutex.queue, || mutex.unlock());
    }
}

impl<T> fmt::Debug for LockFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockFuture").finish_non_exhaustive()
    }
}
