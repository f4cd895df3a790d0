//! [`WaiterSlot`]: the waiters of a side with one endpoint, with no lock
//! and no queue (see `wait_list.rs` for the protocol it shares with
//! [`WaitList`](crate::wait_list::WaitList)).

use std::collections::VecDeque;
use std::task::Waker;

use crate::backoff::Backoff;
use crate::hook::Park;
use crate::sync::{fence, Ordering, UnsafeCell};
use crate::updt::UpdtCell;
use crate::waiters::Waiters;

/// The waiter slot of a side with one endpoint (the sender of `spsc` and
/// `spmc`, the receiver of `spsc` and `mpsc`). `LONE_WAKER` says whether the
/// *other* side, the one that wakes, has one endpoint too (`spsc`).
///
/// One endpoint means one waiter at a time: the endpoint is not `Sync`, so
/// only one thread can use it at once. (Several coroutines of one thread can
/// still share it, through a thread-local; the second and later of those
/// wait in `overflow`, see below.) So a waiter is a word, `waiting`, and a
/// waker kept in `waker`:
///
/// * **register**: make sure `waker` wakes the caller (it usually does
///   already: the same coroutine blocking on the same channel again), then
///   store `waiting = 1`; the caller fences and re-checks (invariant 3);
/// * **wake** (the peer, after its progress and its fence or claim): if
///   `waiting` is 1, call `wake_by_ref` on the kept waker, with no clone;
/// * **leave** (every way out of the wait, unwinding included): store
///   `waiting = 0`. A wake the waiter got but did not use needs no handing
///   on: there is nobody else to hand it to, and a waiter that returns
///   normally retries its operation.
///
/// The waker stays in the slot after the waiter leaves, so the only writes
/// to `waker` are the rare replacements (a different coroutine or thread
/// blocks here next) and [`retire`](Waiters::retire). A waker that loaded
/// `waiting = 1` may still be reading `waker` after the waiter has left, so
/// a replacement first waits until no waker is reading (`quiesce`): each
/// waker counts itself into `waking` before it loads `waiting` and out after
/// its last read of `waker`, and the waiter, after storing `waiting = 0`,
/// orders itself against those counts (a fence, or an add of 0) before it
/// looks at them. Of a waker and a replacing waiter, either the waker sees
/// `waiting = 0` and leaves the cell alone, or the waiter sees the waker
/// counted in and waits for it.
///
/// Only loads, stores and add-without-result touch the shared words, so the
/// slot serves the `Updt` protocol as it is, and `Cas` too. A lone waking
/// side (`LONE_WAKER`) counts itself with a plain load and store (it has one
/// endpoint, so no other thread races it) before the `fence(SeqCst)` it
/// issues anyway after its progress; several waking endpoints count with
/// `updt`, and only when they find a waiter.
pub struct WaiterSlot<const LONE_WAKER: bool> {
    /// 1 while a waiter is registered, else 0. Stored only by the waiter side.
    waiting: UpdtCell,
    /// Wakers between counting themselves in (before loading `waiting`) and
    /// out (after their last read of `waker`). Changed only by the waking
    /// side; read by the waiter side before it writes `waker`.
    waking: UpdtCell,
    /// The waker of the waiter registered now, or of the last one. Written
    /// only by the waiter side, while `waiting` is 0 and after
    /// [`quiesce`](WaiterSlot::quiesce); read by wakers that counted
    /// themselves in and then loaded `waiting = 1`.
    waker: UnsafeCell<Option<Waker>>,
    /// Waiters that came while another was registered: coroutines of one
    /// thread sharing the endpoint. The peer never looks here; the
    /// registered waiter wakes them all when it leaves, and they retry (one
    /// of them then takes the slot). Touched only by the waiter side.
    overflow: UnsafeCell<Overflow>,
}

/// Waiters queued behind the registered one; see [`WaiterSlot`].
struct Overflow {
    entries: VecDeque<(u64, Waker)>,
    next_key: u64,
}

// SAFETY: `waker` is written only by the waiter side, never while a waker
// may read it (see `quiesce`), and reads race only with reads. `overflow` is
// touched only by the waiter side, which is one endpoint, and that endpoint
// is not `Sync`: one thread at a time uses it, and moving it to another
// thread synchronises. Everything else is atomic.
unsafe impl<const LONE_WAKER: bool> Sync for WaiterSlot<LONE_WAKER> {}
// SAFETY: `Waker` is `Send`, and so are the words.
unsafe impl<const LONE_WAKER: bool> Send for WaiterSlot<LONE_WAKER> {}

/// What a waiter on a [`WaiterSlot`] holds.
#[derive(Clone, Copy, Debug)]
pub enum SlotTicket {
    /// Registered in the slot.
    Slot,
    /// Queued behind the registered waiter, under this key.
    Overflow(u64),
}

impl<const LONE_WAKER: bool> WaiterSlot<LONE_WAKER> {
    /// Waits until no waker reads `waker`, nor will read it before loading a
    /// `waiting = 1` stored after this returns. Called by the waiter side
    /// with `waiting` 0, before it writes `waker`.
    fn quiesce(&self) {
        if LONE_WAKER {
            // Pairs with the waker's fence between counting itself in and
            // loading `waiting`: one of the two fences comes first, so either
            // the waker loads our `waiting = 0` (and leaves the cell alone) or
            // we load its count below.
            fence(Ordering::SeqCst);
        } else {
            // An add of 0 is a read-modify-write on `waking`, ordered with
            // every waker's add of 1: if ours is later we load its count
            // below; if earlier, its add reads from ours, which releases our
            // `waiting = 0`, and it then loads 0 (or a later value).
            self.waking.updt(0);
        }
        let mut backoff = Backoff::new();
        // Acquire: a waker counts itself out with a release (a Release store,
        // or an add), after its last read of `waker`.
        while self.waking.load(Ordering::Acquire) != 0 {
            backoff.snooze();
        }
    }

    /// Whether `waker` (the last registration's) already wakes `park`.
    /// Called by the waiter side.
    fn wakes(&self, park: &dyn Park) -> bool {
        // SAFETY: we are the waiter side, the only writer of the cell;
        // wakers may be reading it too, which is fine.
        self.waker
            .with(|w| unsafe { &*w }.as_ref().is_some_and(|w| park.will_wake(w)))
    }

    /// Puts `fresh` in `waker`, for a waiter that `waker` would not wake.
    #[cold]
    #[inline(never)]
    fn replace_waker(&self, fresh: Waker) {
        self.quiesce();
        // SAFETY: we are the waiter side, the only writer; `waiting` is 0 and
        // `quiesce` saw no waker reading, and any that reads later first
        // loads the `waiting = 1` we store after this write.
        let old = self.waker.with_mut(|w| unsafe { (*w).replace(fresh) });
        drop(old);
    }

    /// Queues a waiter behind the registered one.
    #[cold]
    #[inline(never)]
    fn queue_behind(&self, park: &dyn Park) -> SlotTicket {
        let waker = park.waker();
        // SAFETY: only the waiter side touches `overflow`, one thread at a
        // time, and nothing in here can let another coroutine run.
        let key = self.overflow.with_mut(|o| unsafe {
            let o = &mut *o;
            let key = o.next_key;
            o.next_key += 1;
            o.entries.push_back((key, waker));
            key
        });
        SlotTicket::Overflow(key)
    }

    /// Wakes every waiter queued behind the one that is leaving.
    #[cold]
    #[inline(never)]
    fn wake_overflow(&self) {
        // SAFETY: as in `queue_behind`.
        let all = self
            .overflow
            .with_mut(|o| unsafe { std::mem::take(&mut (*o).entries) });
        for (_, waker) in all {
            waker.wake();
        }
    }

    /// Counts a waker in, and if the waiter is (still) registered wakes it.
    /// With a lone waking side the count comes before the fence that orders
    /// the progress; with several, after the claim that does.
    #[inline]
    fn notify(&self, fence_first: bool) {
        if LONE_WAKER {
            // A load and a store, not an add: the waking side has one
            // endpoint, so only this thread changes the count. (Coroutines of
            // this thread sharing the endpoint cannot interleave between the
            // two: nothing in between can suspend.)
            let before = self.waking.load(Ordering::Relaxed);
            // Relaxed: the fence below orders it before our load of `waiting`.
            self.waking.store(before + 1, Ordering::Relaxed);
            let _out = CountOut { slot: self };
            debug_assert!(fence_first, "a lone waking side progresses by plain stores");
            fence(Ordering::SeqCst);
            // Acquire: pairs with the Release of the waiter's `waiting = 1`,
            // which comes after its write of `waker`.
            if self.waiting.load(Ordering::Acquire) != 0 {
                self.wake_waiter();
            }
        } else {
            if fence_first {
                fence(Ordering::SeqCst);
            }
            // Relaxed: a first look. Ordered against the waiter's
            // registration by the fence above or by our claim (invariant 3);
            // the Acquire load below is the one that decides.
            if self.waiting.load(Ordering::Relaxed) == 0 {
                return;
            }
            self.waking.updt(1);
            let _out = CountOut { slot: self };
            // Acquire: as above.
            if self.waiting.load(Ordering::Acquire) != 0 {
                self.wake_waiter();
            }
        }
    }

    /// Wakes the registered waiter. The caller is counted in `waking` and
    /// has since loaded `waiting = 1`.
    #[inline]
    fn wake_waiter(&self) {
        self.waker.with(|w| {
            // SAFETY: we counted ourselves in before loading `waiting = 1`, so
            // the waiter side does not write `waker` until we count ourselves
            // out (see `quiesce`), and our Acquire load of `waiting` ordered
            // us after its last write.
            if let Some(waker) = unsafe { &*w } {
                waker.wake_by_ref();
            }
        });
    }
}

/// Counts a waker out of [`WaiterSlot::waking`], also when its wake unwinds.
struct CountOut<'a, const LONE_WAKER: bool> {
    slot: &'a WaiterSlot<LONE_WAKER>,
}

impl<const LONE_WAKER: bool> Drop for CountOut<'_, LONE_WAKER> {
    #[inline]
    fn drop(&mut self) {
        if LONE_WAKER {
            // Re-read rather than restore what we read on the way in: a
            // waker that suspends (letting another coroutine of this thread
            // count itself in and out) must not undo that one's count.
            // Relaxed: only this thread stores it.
            let now = self.slot.waking.load(Ordering::Relaxed);
            // Release: our reads of `waker` come before, for a waiter that
            // loads this (Acquire) and then replaces it.
            self.slot.waking.store(now - 1, Ordering::Release);
        } else {
            // An add: a release, like the store above.
            self.slot.waking.updt(-1);
        }
    }
}

impl<const LONE_WAKER: bool> Waiters for WaiterSlot<LONE_WAKER> {
    type Ticket = SlotTicket;

    // Registering is a store of `waiting`, ordered against a disconnection
    // only by the waiter's fence.
    const LOCKED: bool = false;

    fn new() -> Self {
        WaiterSlot {
            waiting: UpdtCell::new(0),
            waking: UpdtCell::new(0),
            waker: UnsafeCell::new(None),
            overflow: UnsafeCell::new(Overflow {
                entries: VecDeque::new(),
                next_key: 0,
            }),
        }
    }

    #[inline]
    fn register(&self, park: &dyn Park) -> SlotTicket {
        // Relaxed: only the waiter side stores it, one thread at a time.
        if self.waiting.load(Ordering::Relaxed) != 0 {
            return self.queue_behind(park);
        }
        if !self.wakes(park) {
            self.replace_waker(park.waker());
        }
        // Release: a waker that loads this 1 (Acquire) sees the waker above.
        // The caller's fence(SeqCst) orders it before the re-check.
        self.waiting.store(1, Ordering::Release);
        SlotTicket::Slot
    }

    #[inline]
    fn leave(&self, ticket: SlotTicket) {
        match ticket {
            SlotTicket::Slot => {
                // Relaxed: a waker that still loads the old 1 only wakes us
                // spuriously, which parks allow, and a replacement of the
                // waker waits for it (`quiesce`).
                self.waiting.store(0, Ordering::Relaxed);
                // SAFETY: as in `queue_behind`.
                let queued = self.overflow.with(|o| unsafe { !(*o).entries.is_empty() });
                if queued {
                    self.wake_overflow();
                }
            }
            SlotTicket::Overflow(key) => {
                // SAFETY: as in `queue_behind`. Not found: the registered
                // waiter left and woke us, and everyone else queued.
                self.overflow.with_mut(|o| unsafe {
                    let entries = &mut (*o).entries;
                    if let Some(i) = entries.iter().position(|(k, _)| *k == key) {
                        entries.remove(i);
                    }
                });
            }
        }
    }

    fn abandon(&self, ticket: SlotTicket) {
        // Nothing to hand on: the peer wakes only the registered waiter, and
        // its leaving wakes every queued one.
        self.leave(ticket);
    }

    fn stands(
        &self,
        ticket: SlotTicket,
        park: &dyn Park,
        still_blocked: &dyn Fn() -> bool,
    ) -> bool {
        // A registration in the slot is not ended by a wake, only by the
        // waiter leaving: every progress of the peer since it was made (and
        // its fence and re-check) wakes the kept waker. Leaving and
        // registering again would wake the queued waiters for nothing, and a
        // queued future of the same task would then wake the task again, for
        // ever. A queued waiter was taken off the queue by the wake, if any.
        if !matches!(ticket, SlotTicket::Slot) {
            return false;
        }
        if !self.wakes(park) {
            // Another waker for the same registration: the task moved, or
            // `Waker::will_wake` does not recognise a clone (its vtable may
            // be duplicated across codegen units, as tokio's `block_on`
            // waker's is in release builds). Swap it in place rather than
            // leave: leaving would wake the waiters queued behind, which may
            // be this very task, and polling again would repeat that for
            // ever. Out of the slot while the waker changes, as `register`
            // requires, and in again with the fence and re-check of
            // invariant 3: a peer that progressed while we were out is seen
            // by the re-check (its read-modify-write, where the claim is one,
            // orders us after that claim), so the caller's retry finds the
            // progress and no wake is lost. (A plain retry is not enough:
            // loom found the wake lost with `try_send` as the re-check.)
            // Relaxed: as in `leave`.
            self.waiting.store(0, Ordering::Relaxed);
            self.replace_waker(park.waker());
            // Release: as in `register`.
            self.waiting.store(1, Ordering::Release);
            fence(Ordering::SeqCst);
            // Whatever it says, the caller retries next; the re-check is
            // for its ordering.
            let _ = still_blocked();
        }
        true
    }

    #[inline]
    fn notify_one(&self, fence_first: bool) {
        self.notify(fence_first);
    }

    #[inline]
    fn notify_many(&self, fence_first: bool, _: usize) {
        // One waiter at a time here; the queued ones follow when it leaves.
        self.notify(fence_first);
    }

    #[inline]
    fn may_have_waiters(&self) -> bool {
        // Relaxed: the caller's ordering makes a registration before it
        // visible (see the trait).
        self.waiting.load(Ordering::Relaxed) != 0
    }

    fn notify_all(&self) {
        // The registered waiter is all the peer can wake; queued ones follow
        // when it leaves. The fence is the caller's, repeated where the count
        // must come before one.
        self.notify(LONE_WAKER);
    }

    fn retire(&self) {
        // Nobody waits here any more, normally: the side's last endpoint is
        // gone. But a leaked async waiter (a pending `SendFuture` or
        // `RecvFuture` passed to `mem::forget`) is still registered: take it
        // out, so that (as in `replace_waker`) a waker that loads `waiting`
        // after the quiesce below leaves the cell alone.
        // Relaxed: as in `leave`.
        self.waiting.store(0, Ordering::Relaxed);
        self.quiesce();
        // SAFETY: as in `replace_waker`; and nobody will register again.
        let old = self.waker.with_mut(|w| unsafe { (*w).take() });
        drop(old);
    }
}
