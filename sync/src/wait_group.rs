//! [`WaitGroup`]: wait until every clone is gone.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use swco_wait::hook::Op;
use swco_wait::protocol::{self, UntilWait};
use swco_wait::sync::{fence, Arc, AtomicUsize, Ordering};
use swco_wait::wait_list::Waiters;

use crate::queue::Queue;

/// Waits for a group of coroutines or threads to finish, in the shape of
/// crossbeam-utils' `WaitGroup`: each member holds a clone, and dropping
/// it counts as "done"; [`wait`](WaitGroup::wait) drops the caller's own
/// and blocks (only the calling coroutine; a plain thread blocks itself)
/// until every clone is gone. Several clones may wait at once.
///
/// **Fairness.** None is needed: the last drop releases every waiter.
///
/// **Cancellation.** A waiter cancelled while it waits (by
/// `JoinHandle::cancel` or a runtime's `shutdown_timeout`) leaves the
/// queue; its own clone was already dropped, so the count is right, and
/// the other waiters are still woken when it reaches zero.
///
/// ```
/// use swco_sync::WaitGroup;
///
/// let wg = WaitGroup::new();
/// for _ in 0..4 {
///     let wg = wg.clone();
///     std::thread::spawn(move || drop(wg));
/// }
/// wg.wait(); // every clone is gone
/// ```
pub struct WaitGroup {
    inner: Arc<Inner>,
}

struct Inner {
    /// Live clones.
    count: AtomicUsize,
    queue: Queue,
}

impl WaitGroup {
    /// A group of one: this handle.
    #[must_use]
    pub fn new() -> Self {
        WaitGroup {
            inner: Arc::new(Inner {
                count: AtomicUsize::new(1),
                queue: Queue::new(Op::Sync, "WaitGroup"),
            }),
        }
    }

    /// Drops this handle and waits until every other one is gone.
    pub fn wait(self) {
        let inner = Arc::clone(&self.inner);
        drop(self);
        protocol::wait_until(&inner.queue, inner.queue.waiting_on(), || inner.done());
    }

    /// [`wait`](WaitGroup::wait), as a future: the handle is dropped at
    /// once; the future completes when every other one is gone. Dropping
    /// it early leaves the queue (cancel-safe).
    pub fn wait_async(self) -> WaitGroupFuture {
        let inner = Arc::clone(&self.inner);
        drop(self);
        WaitGroupFuture {
            inner,
            wait: UntilWait::new(),
        }
    }
}

impl Inner {
    fn done(&self) -> bool {
        // Acquire: what every member did before dropping its handle
        // happens-before the waiter's return.
        self.count.load(Ordering::Acquire) == 0
    }
}

impl Default for WaitGroup {
    fn default() -> Self {
        WaitGroup::new()
    }
}

impl Clone for WaitGroup {
    fn clone(&self) -> Self {
        // Relaxed: a new member is made by an existing one, which keeps the
        // count above zero meanwhile.
        self.inner.count.fetch_add(1, Ordering::Relaxed);
        WaitGroup {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl Drop for WaitGroup {
    fn drop(&mut self) {
        // AcqRel: the last member's `Acquire` chains every member's
        // release, and waiters acquire from it.
        if self.inner.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Register / fence / re-check on the waiters' side; count /
            // fence / wake on ours.
            fence(Ordering::SeqCst);
            self.inner.queue.notify_all();
        }
    }
}

impl fmt::Debug for WaitGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGroup")
            .field("count", &self.inner.count.load(Ordering::Relaxed))
            .finish()
    }
}

/// The future of [`WaitGroup::wait_async`].
#[must_use = "futures do nothing unless polled"]
pub struct WaitGroupFuture {
    inner: Arc<Inner>,
    wait: UntilWait,
}

impl Future for WaitGroupFuture {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let inner = &this.inner;
        this.wait.poll(&inner.queue, cx.waker(), || inner.done())
    }
}

impl Drop for WaitGroupFuture {
    fn drop(&mut self) {
        self.wait.cancel(&self.inner.queue);
    }
}

impl fmt::Debug for WaitGroupFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGroupFuture").finish_non_exhaustive()
    }
}
