//! [`Semaphore`]: counted permits that block only the calling coroutine.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use swco_wait::hook::Op;
use swco_wait::protocol::{self, GrantWait};
use swco_wait::sync::{fence, AtomicUsize, Ordering};

use crate::queue::Queue;

/// A counting semaphore for coroutines and threads.
///
/// [`acquire`](Semaphore::acquire) takes one permit, waiting (only the
/// calling coroutine; a plain thread blocks) while there is none; the
/// [`SemaphorePermit`] gives it back when dropped.
/// [`add_permits`](Semaphore::add_permits) adds more.
///
/// **Fairness: hand-off, oldest first, with bounded executor affinity.** A
/// permit given back (or added) while waiters are queued goes to the
/// oldest waiter, which wakes up holding it, or, as with
/// [`Mutex`](crate::Mutex), to a waiter of the giver's executor near the
/// front, at most 32 times in a row; an `acquire` that finds waiters queued
/// joins the queue. As with
/// [`Mutex`](crate::Mutex), only an `acquire` (or
/// [`try_acquire`](Semaphore::try_acquire)) racing the return of a permit
/// may come first, and the waiter keeps its place.
///
/// **Permits are conserved.** A waiter cancelled while it waits (by
/// `JoinHandle::cancel` or a runtime's `shutdown_timeout`), or a dropped
/// [`acquire_async`](Semaphore::acquire_async) future, leaves the queue and
/// hands on any permit given to it meanwhile.
///
/// ```
/// use swco_sync::Semaphore;
///
/// let s = Semaphore::new(2);
/// let a = s.acquire();
/// let b = s.try_acquire().expect("a second permit");
/// assert!(s.try_acquire().is_none());
/// drop(a);
/// assert_eq!(s.available_permits(), 1);
/// drop(b);
/// s.add_permits(3);
/// assert_eq!(s.available_permits(), 5);
/// ```
pub struct Semaphore {
    permits: AtomicUsize,
    queue: Queue,
}

impl Semaphore {
    /// The most permits a semaphore holds: `usize::MAX >> 3`.
    pub const MAX_PERMITS: usize = usize::MAX >> 3;

    /// A semaphore with `permits` permits.
    ///
    /// # Panics
    ///
    /// If `permits` is more than [`MAX_PERMITS`](Semaphore::MAX_PERMITS).
    #[must_use]
    pub fn new(permits: usize) -> Self {
        assert!(
            permits <= Self::MAX_PERMITS,
            "swco::sync::Semaphore::new: {permits} permits, more than Semaphore::MAX_PERMITS"
        );
        Semaphore {
            permits: AtomicUsize::new(permits),
            queue: Queue::new(Op::Acquire, "Semaphore"),
        }
    }

    /// Takes a permit, waiting while there is none; only the calling
    /// coroutine waits (a plain thread blocks). The permit goes back when
    /// the returned [`SemaphorePermit`] is dropped.
    #[must_use = "the permit goes back at once if it is not kept"]
    pub fn acquire(&self) -> SemaphorePermit<'_> {
        if self.queue.has_waiters() || !self.take_one() {
            protocol::wait_for_grant(
                &self.queue,
                self.queue.waiting_on(),
                || self.take_one(),
                || self.release(1),
            );
        }
        SemaphorePermit { semaphore: self }
    }

    /// Takes a permit if there is one, without waiting.
    pub fn try_acquire(&self) -> Option<SemaphorePermit<'_>> {
        // `then`, not `then_some`: a permit made eagerly and dropped on
        // failure would give back a permit never taken.
        self.take_one().then(|| SemaphorePermit { semaphore: self })
    }

    /// [`acquire`](Semaphore::acquire), as a future: completes with the
    /// permit, waiting as `Pending` meanwhile. Works with any executor,
    /// alongside blocking callers.
    ///
    /// **Cancel safety.** Dropping the future before it completes leaves
    /// the queue, handing on a permit given to it meanwhile: no permit is
    /// lost.
    pub fn acquire_async(&self) -> AcquireFuture<'_> {
        AcquireFuture {
            semaphore: self,
            wait: GrantWait::new(),
            done: false,
        }
    }

    /// Adds `n` permits, handing them to waiters first (oldest first).
    ///
    /// # Panics
    ///
    /// If the semaphore would then hold more than
    /// [`MAX_PERMITS`](Semaphore::MAX_PERMITS) permits (as tokio's does);
    /// the permits are then left as they were.
    pub fn add_permits(&self, n: usize) {
        self.release(n);
    }

    /// How many permits are free now (a snapshot).
    #[must_use]
    pub fn available_permits(&self) -> usize {
        self.permits.load(Ordering::Acquire)
    }

    /// Takes one permit if there is one.
    #[inline]
    fn take_one(&self) -> bool {
        let mut p = self.permits.load(Ordering::Relaxed);
        while p > 0 {
            // Acquire: what the returner did before giving the permit back
            // happens-before what we do with it.
            match self
                .permits
                .compare_exchange_weak(p, p - 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => p = now,
            }
        }
        false
    }

    /// Gives back (or adds) `n` permits, then hands them to waiters.
    fn release(&self, n: usize) {
        let mut p = self.permits.load(Ordering::Relaxed);
        loop {
            let total = match p.checked_add(n) {
                Some(t) if t <= Self::MAX_PERMITS => t,
                _ => panic!(
                    "swco::sync::Semaphore::add_permits: {p} + {n} permits would overflow \
                     Semaphore::MAX_PERMITS"
                ),
            };
            match self
                .permits
                .compare_exchange_weak(p, total, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => p = now,
            }
        }
        // As in `Mutex::unlock`: of a waiter (register, fence, re-check) and
        // us (give back, fence, look), one sees the other.
        fence(Ordering::SeqCst);
        while self.queue.has_waiters() && self.queue.wake_one_if(|| self.take_one()) {}
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("permits", &self.available_permits())
            .finish_non_exhaustive()
    }
}

/// One permit of a [`Semaphore`], given back when dropped (to the oldest
/// waiter, if any).
#[must_use = "the permit goes back at once if it is not kept"]
pub struct SemaphorePermit<'a> {
    semaphore: &'a Semaphore,
}

impl SemaphorePermit<'_> {
    /// Keeps the permit out of the semaphore for good: it is not given
    /// back.
    pub fn forget(self) {
        std::mem::forget(self);
    }
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        self.semaphore.release(1);
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit").finish_non_exhaustive()
    }
}

/// The future of [`Semaphore::acquire_async`].
#[must_use = "futures do nothing unless polled"]
pub struct AcquireFuture<'a> {
    semaphore: &'a Semaphore,
    wait: GrantWait,
    done: bool,
}

impl<'a> Future for AcquireFuture<'a> {
    type Output = SemaphorePermit<'a>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<SemaphorePermit<'a>> {
        let this = self.get_mut();
        assert!(!this.done, "AcquireFuture polled after completion");
        let semaphore = this.semaphore;
        let ready = this.wait.poll(
            &semaphore.queue,
            cx.waker(),
            || semaphore.take_one(),
            || semaphore.release(1),
        );
        ready.map(|()| {
            this.done = true;
            SemaphorePermit { semaphore }
        })
    }
}

impl Drop for AcquireFuture<'_> {
    fn drop(&mut self) {
        let semaphore = self.semaphore;
        self.wait.cancel(&semaphore.queue, || semaphore.release(1));
    }
}

impl fmt::Debug for AcquireFuture<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcquireFuture").finish_non_exhaustive()
    }
}
