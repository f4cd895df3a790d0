//! [`Barrier`]: a reusable rendezvous of `n` parties.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use swco_wait::hook::Op;
use swco_wait::protocol::{self, UntilWait};
use swco_wait::sync::{fence, AtomicUsize, Ordering};
use swco_wait::wait_list::Waiters;

use crate::queue::Queue;

/// A barrier for `n` coroutines or threads: each [`wait`](Barrier::wait)
/// blocks (only the calling coroutine; a plain thread blocks itself) until
/// `n` parties have called it, then all go on, and the barrier is ready for
/// the next round (generation). One of each round's parties, the last to
/// arrive, is its leader ([`BarrierWaitResult::is_leader`]).
///
/// **Fairness.** None is needed: a round releases all its parties at once.
///
/// **Generations.** The barrier counts arrivals; round `g` is made of
/// arrivals `g·n` to `g·n + n − 1`, and its parties wait until the count
/// reaches `(g + 1)·n`. A party of the next round that arrives before every
/// party of this one has woken does not hold them up or get counted in
/// their round.
///
/// **`Barrier::new(0)`** behaves as `std`'s does: as `Barrier::new(1)`,
/// every `wait` returns at once and leads.
///
/// **Cancellation.** A waiter cancelled while it waits (by
/// `JoinHandle::cancel` or a runtime's `shutdown_timeout`) leaves the
/// queue, but its arrival stays counted (as with `std`'s barrier, which
/// has no way back): its round completes when the rest of it arrives. The
/// same holds for a [`wait_async`](Barrier::wait_async) future dropped
/// after its first poll.
///
/// ```
/// use swco_sync::Barrier;
/// use std::sync::Arc;
///
/// let b = Arc::new(Barrier::new(3));
/// let threads: Vec<_> = (0..3)
///     .map(|_| {
///         let b = Arc::clone(&b);
///         std::thread::spawn(move || b.wait().is_leader())
///     })
///     .collect();
/// let leaders = threads.into_iter();
/// let leaders = leaders.map(|t| t.join().unwrap()).filter(|&l| l).count();
/// assert_eq!(leaders, 1);
/// ```
pub struct Barrier {
    /// Arrivals so far, all rounds together. (It would take 2^64 arrivals
    /// on a 64-bit target to wrap it.)
    arrivals: AtomicUsize,
    /// Parties per round (at least 1).
    n: usize,
    queue: Queue,
}

impl Barrier {
    /// A barrier for rounds of `n` parties (`0` counts as `1`, as in `std`).
    #[must_use]
    pub fn new(n: usize) -> Self {
        Barrier {
            arrivals: AtomicUsize::new(0),
            n: n.max(1),
            queue: Queue::new(Op::Sync, "Barrier"),
        }
    }

    /// Arrives, and waits until the round's `n` parties have all arrived;
    /// only the calling coroutine waits (a plain thread blocks).
    pub fn wait(&self) -> BarrierWaitResult {
        match self.arrive() {
            Arrival::Leader => BarrierWaitResult { leader: true },
            Arrival::Waiting(round) => {
                protocol::wait_until(&self.queue, self.queue.waiting_on(), || {
                    self.round_over(round)
                });
                BarrierWaitResult { leader: false }
            }
        }
    }

    /// [`wait`](Barrier::wait), as a future: arrives at its first poll,
    /// and completes once the round is complete.
    pub fn wait_async(&self) -> BarrierWaitFuture<'_> {
        BarrierWaitFuture {
            barrier: self,
            round: None,
            wait: UntilWait::new(),
        }
    }

    fn arrive(&self) -> Arrival {
        // AcqRel: every party's writes before its arrival happen-before
        // what every party of the round does after (the arrivals form a
        // release sequence that each waiter's `Acquire` load reads from).
        let a = self.arrivals.fetch_add(1, Ordering::AcqRel);
        let round = a / self.n;
        if (a + 1) % self.n == 0 {
            // The round is complete: wake its parties, which re-check
            // after registering (register, fence, re-check; here: arrive,
            // fence, wake).
            fence(Ordering::SeqCst);
            self.queue.notify_all();
            Arrival::Leader
        } else {
            Arrival::Waiting(round)
        }
    }

    fn round_over(&self, round: usize) -> bool {
        self.arrivals.load(Ordering::Acquire) / self.n != round
    }
}

enum Arrival {
    Leader,
    Waiting(usize),
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier")
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}

/// What [`Barrier::wait`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierWaitResult {
    leader: bool,
}

impl BarrierWaitResult {
    /// Whether this party was its round's leader: exactly one per round.
    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.leader
    }
}

/// The future of [`Barrier::wait_async`].
#[must_use = "futures do nothing unless polled"]
pub struct BarrierWaitFuture<'a> {
    barrier: &'a Barrier,
    /// `Some(round)` once arrived and not the leader.
    round: Option<usize>,
    wait: UntilWait,
}

impl Future for BarrierWaitFuture<'_> {
    type Output = BarrierWaitResult;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<BarrierWaitResult> {
        let this = self.get_mut();
        let barrier = this.barrier;
        let round = match this.round {
            Some(round) => round,
            None => match barrier.arrive() {
                Arrival::Leader => return Poll::Ready(BarrierWaitResult { leader: true }),
                Arrival::Waiting(round) => {
                    this.round = Some(round);
                    round
                }
            },
        };
        this.wait
            .poll(&barrier.queue, cx.waker(), || barrier.round_over(round))
            .map(|()| BarrierWaitResult { leader: false })
    }
}

impl Drop for BarrierWaitFuture<'_> {
    fn drop(&mut self) {
        self.wait.cancel(&self.barrier.queue);
    }
}

impl fmt::Debug for BarrierWaitFuture<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BarrierWaitFuture").finish_non_exhaustive()
    }
}
