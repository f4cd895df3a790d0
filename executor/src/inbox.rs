//! An executor's inbox: how other threads hand it new coroutines and wakes,
//! and wake it up if it sleeps.
//!
//! # Invariants
//!
//! * `pending` is `true` whenever the queue may hold items the executor has
//!   not taken yet: a pusher sets it *after* pushing, the executor clears it
//!   *before* taking the queue.
//! * Whoever flips `pending` from `false` to `true` unparks the executor. The
//!   executor parks only after seeing `pending == false`, and the parker
//!   keeps an unpark that comes before the park as a token, so a hand-off is
//!   never slept through.
//! * Only the flip from `false` unparks: while the executor has not drained,
//!   further pushes cost a lock and one atomic, no syscall.
//!
//! The module only uses [`swco_channel::sync`], so it compiles under
//! `--cfg loom` and the no-sleeping-through-a-hand-off property is
//! model-checked (see `loom-tests/tests/executor.rs`).

use swco_channel::sync::{AtomicBool, Mutex, Ordering, Unparker};

/// Items handed to an executor, in arrival order per kind.
#[doc(hidden)]
pub struct InboxQueue<J> {
    /// New coroutines to start.
    pub spawns: Vec<J>,
    /// Slots of parked coroutines to put back on the run queue.
    pub wakes: Vec<usize>,
}

impl<J> Default for InboxQueue<J> {
    fn default() -> Self {
        InboxQueue {
            spawns: Vec::new(),
            wakes: Vec::new(),
        }
    }
}

impl<J> InboxQueue<J> {
    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.spawns.is_empty() && self.wakes.is_empty()
    }
}

/// See the module docs.
#[doc(hidden)]
pub struct Inbox<J> {
    pending: AtomicBool,
    queue: Mutex<InboxQueue<J>>,
    unparker: Unparker,
}

impl<J> Inbox<J> {
    /// An empty inbox that wakes its executor through `unparker`.
    pub fn new(unparker: Unparker) -> Self {
        Inbox {
            pending: AtomicBool::new(false),
            queue: Mutex::new(InboxQueue::default()),
            unparker,
        }
    }

    /// Hands a new coroutine to the executor.
    pub fn push_spawn(&self, job: J) {
        self.queue.lock().unwrap().spawns.push(job);
        self.kick();
    }

    /// Asks the executor to run the coroutine in `slot` again.
    pub fn push_wake(&self, slot: usize) {
        self.queue.lock().unwrap().wakes.push(slot);
        self.kick();
    }

    fn kick(&self) {
        // AcqRel: the push is already published by the mutex; the swap just
        // decides who unparks, and must not be reordered before the push.
        if !self.pending.swap(true, Ordering::AcqRel) {
            self.unparker.unpark();
        }
    }

    /// Wakes the executor without handing it anything (a stop request).
    pub fn unpark(&self) {
        self.unparker.unpark();
    }

    /// Whether something may have been pushed since the last drain.
    #[inline]
    pub fn is_pending(&self) -> bool {
        // Relaxed: a hint; the parker token covers a racing push.
        self.pending.load(Ordering::Relaxed)
    }

    /// If anything was pushed since the last drain, swaps the queue with
    /// `spare` (which should be empty, keeping its capacity for the next
    /// pushes) and returns `true`.
    pub fn drain_into(&self, spare: &mut InboxQueue<J>) -> bool {
        // Relaxed peek keeps the common empty case free of RMW; the swap's
        // Acquire pairs with the pusher's AcqRel swap.
        if !self.is_pending() || !self.pending.swap(false, Ordering::Acquire) {
            return false;
        }
        std::mem::swap(&mut *self.queue.lock().unwrap(), spare);
        true
    }

    /// Takes every queued spawn (used when cancelling at shutdown).
    pub fn take_spawns(&self) -> Vec<J> {
        std::mem::take(&mut self.queue.lock().unwrap().spawns)
    }
}
