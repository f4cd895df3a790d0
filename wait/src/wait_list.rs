//! Waiter lists, kept apart from the ring: who is blocked on a full or an
//! empty channel, and how to wake them.
//!
//! A blocking operation registers here ([`Waiters::register`]), then issues
//! `fence(SeqCst)` (not needed on a [`WaitList`] when the re-check is a
//! read-modify-write of the peer's claim word: see `chan/mod.rs`, `wait_on`),
//! then re-checks the ring before parking. The peer, after
//! changing the ring, looks for waiters ([`Waiters::notify_one`]); in
//! between it is ordered against the waiter either by its own
//! `fence(SeqCst)` (a lone side, whose progress is a plain store) or by its
//! claim, a read-modify-write on a word that the waiter's re-check also
//! read-modify-writes (`Cas` and `Updt` sides; see
//! `Cursor::CLAIM_SYNCS_WITH_WAITERS`). Either way at least one side sees the
//! other: the waiter's re-check sees the progress and it does not park, or
//! the peer sees the waiter and wakes it.
//!
//! Two kinds of list, chosen per side by the mode (`Mode::TxWait`,
//! `Mode::RxWait`):
//!
//! * [`WaitList`], for a side with several endpoints: a queue of wakers
//!   under a tiny lock (CAS or add-only, by protocol). Wake-one picks the
//!   oldest waiter and *removes* it from the list: being removed is how a
//!   waiter learns it was chosen. A chosen waiter always retries its
//!   operation at least once before giving up (even on timeout), or, if it
//!   unwinds out of its park instead, wakes the next waiter in its place, so
//!   the progress it was woken for is never left unused while others sleep.
//!   Wakers are invoked after the list's lock is released.
//! * [`WaiterSlot`], for a side with one endpoint, which has one waiter at a
//!   time: no lock, no queue, no key, and the waiter's [`Waker`] is kept
//!   between blocks, so blocking again on the same channel clones nothing.
//!   Loads, stores and add-without-result only, so it serves both protocols.

use std::collections::VecDeque;
use std::task::Waker;

use crate::backoff::Backoff;
use crate::hook::{self, Park};
use crate::lock::RawLock;
use crate::sync::{fence, Ordering, UnsafeCell};
use crate::updt::UpdtCell;

/// The waiters of one side of a channel (blocked senders, or blocked
/// receivers), as the blocking path and the peer's wake path see them.
pub trait Waiters: Send + Sync + 'static {
    /// What a registered waiter holds until it leaves. Plain data, which a
    /// pending future holds: `Send` and `Sync`, so that the future's auto
    /// traits depend only on its endpoint and message, in generic code too.
    type Ticket: Copy + Send + Sync;

    /// Whether registering and [`notify_all`](Waiters::notify_all) take
    /// the same lock, so that a waiter and a disconnection that race are
    /// ordered by it: whichever takes the lock second sees the other (the
    /// waiter in the list, or the flag stored before the lock).
    const LOCKED: bool;

    /// An empty list (or slot).
    fn new() -> Self;

    /// Adds the caller, to be woken through `park`'s waker. Follow with
    /// `fence(SeqCst)`, a re-check, and then (if still blocked) the park;
    /// and on every way out, [`leave`](Waiters::leave) or (unwinding)
    /// [`abandon`](Waiters::abandon).
    fn register(&self, park: &dyn Park) -> Self::Ticket;

    /// The normal way out of a wait; the caller retries its operation next,
    /// which uses any wake it was chosen for.
    fn leave(&self, ticket: Self::Ticket);

    /// The way out when unwinding out of the park: there is no retry, so a
    /// wake this waiter was chosen for is handed on.
    fn abandon(&self, ticket: Self::Ticket);

    /// For a waiter that polls instead of parking (an async future), which
    /// still holds `ticket` when polled again: whether that registration
    /// still stands and wakes `park`, so that the poll may retry its
    /// operation while registered and, if still blocked, keep the ticket
    /// rather than leave and register again. A registration whose waker
    /// does not wake `park` may be renewed in place with `park`'s waker;
    /// it then takes the same register / `fence(SeqCst)` / re-check steps
    /// as a fresh one, with `still_blocked` (the caller's re-check, as for
    /// [`register`](Waiters::register)) as the re-check. `false` (the
    /// default) always makes it leave first.
    fn stands(
        &self,
        ticket: Self::Ticket,
        park: &dyn Park,
        still_blocked: &dyn Fn() -> bool,
    ) -> bool {
        let _ = (ticket, park, still_blocked);
        false
    }

    /// Called by the peer after it made progress: wakes one waiter, if any.
    /// `fence` is `true` when the progress was a plain store (a lone side):
    /// the list then issues the `fence(SeqCst)` of invariant 3 itself,
    /// between the progress and its look at the waiters.
    fn notify_one(&self, fence: bool);

    /// Whether a waiter may be registered: a plain look, for a caller that
    /// is ordered against registrations by other means than a fence (a
    /// zero-capacity channel's queuer, under the rendezvous lock that a
    /// waiter's re-check takes after registering). `false` means no waiter
    /// registered before that ordering point; `true` is only a hint, to be
    /// followed by [`notify_one`](Waiters::notify_one).
    fn may_have_waiters(&self) -> bool;

    /// Wakes every waiter (disconnection). The caller has already issued
    /// `fence(SeqCst)` after storing its flag.
    fn notify_all(&self);

    /// [`notify_one`](Waiters::notify_one), for progress that `k` waiters
    /// could each use (a batch): wakes up to `k`, fencing once.
    #[inline]
    fn notify_many(&self, fence_first: bool, k: usize) {
        self.notify_one(fence_first);
        for _ in 1..k {
            self.notify_one(false);
        }
    }

    /// The side's last endpoint is gone: nobody will wait here again, so let
    /// go of anything kept for the next waiter.
    fn retire(&self);
}

/// The waiter list of a side with several endpoints.
pub struct WaitList<L> {
    lock: L,
    /// Guarded by `lock`.
    queue: UnsafeCell<Queue>,
    /// Mirror of `entries.len()`, stored under the lock, loaded without it on
    /// the fast path. Only loaded and stored, so an `UpdtCell` serves.
    len: UpdtCell,
    /// The key of the oldest listed waiter, or `next_key` when none is:
    /// stored under the lock whenever the front changes, loaded without it
    /// by [`remove`](WaitList::remove). It never goes back, so a key that
    /// precedes it has left the list for good. That lets a woken waiter
    /// learn that it was chosen without the lock and without searching a
    /// long queue (a contended mutex keeps every other contender listed,
    /// so the list is rarely empty when the chosen one looks).
    head: UpdtCell,
    /// The key of the last waiter chosen from behind the front (by
    /// [`wake_one_if`](WaitList::wake_one_if)'s preference for the giver's
    /// home), stored under the lock, `NO_KEY` before any: lets that waiter,
    /// too, learn that it was chosen without the lock, unless a later such
    /// choice has overwritten it (it then looks under the lock).
    chosen: UpdtCell,
}

/// The listed waiters, under the list's lock.
struct Queue {
    /// Keys are handed out in order and entries only leave, never move, so
    /// the keys ascend (in wrapping order) from front to back.
    entries: VecDeque<Entry>,
    next_key: usize,
    /// Hand-offs in a row that passed the front waiter over for one at the
    /// giver's home; see [`WaitList::wake_one_if`].
    passed: usize,
}

/// One listed waiter.
struct Entry {
    key: usize,
    /// The waiter's [`Park::home`](crate::hook::Park::home), `0` for none.
    home: usize,
    waker: Waker,
}

/// How many hand-offs in a row may pass the oldest waiter over for a waiter
/// at the giver's home. This bounds the unfairness: the oldest waiter is
/// chosen after at most this many others. It is the run of hand-offs a
/// lock stays on one executor while the waiters of another wait, enough to
/// make the remote wake that ends a run rare next to the local hand-offs
/// that make it up.
const MAX_PASSES: usize = 32;

/// How far behind the front a hand-off looks for a waiter at its home. The
/// scan is under the list's lock, so it is kept short; waiters of two
/// executors that alternate in the queue put one within the first two.
const HOME_WINDOW: usize = 32;

/// A key no waiter holds (`chosen` before any choice). Keys would reach it
/// only after `usize::MAX` registrations on one list.
const NO_KEY: usize = usize::MAX;

// SAFETY: the cells are only touched with `lock` held.
unsafe impl<L: RawLock> Sync for WaitList<L> {}
// SAFETY: `Waker` is `Send`; the lock is `Send`.
unsafe impl<L: RawLock> Send for WaitList<L> {}

/// A ticket for a registered waiter.
#[derive(Clone, Copy, Debug)]
pub struct Key(usize);

/// Whether `key` was handed out before `head`. Keys wrap; the comparison
/// holds while fewer than `isize::MAX` keys separate a waiter from the
/// front, far more than can be listed at once.
fn precedes(key: usize, head: usize) -> bool {
    (head.wrapping_sub(key) as isize) > 0
}

impl<L: RawLock> WaitList<L> {
    fn empty() -> Self {
        WaitList {
            lock: L::new(),
            queue: UnsafeCell::new(Queue {
                entries: VecDeque::new(),
                next_key: 0,
                passed: 0,
            }),
            len: UpdtCell::new(0),
            head: UpdtCell::new(0),
            chosen: UpdtCell::new(NO_KEY),
        }
    }

    fn with_locked<R>(&self, f: impl FnOnce(&mut Queue) -> R) -> R {
        self.lock.lock();
        // SAFETY: we hold the lock, so no one else is touching the cell.
        let r = self.queue.with_mut(|q| unsafe { f(&mut *q) });
        self.lock.unlock();
        r
    }

    /// Adds a waiter, woken through `waker`, at the back. Follow with
    /// `fence(SeqCst)` and a re-check; leave with [`remove`](Self::remove).
    pub fn add(&self, waker: Waker) -> Key {
        self.add_at(waker, 0)
    }

    /// [`add`](Self::add), for a waiter whose [`Park::home`] is `home`,
    /// which a hand-off ([`wake_one_if`](Self::wake_one_if)) may prefer.
    ///
    /// [`Park::home`]: crate::hook::Park::home
    pub fn add_at(&self, waker: Waker, home: usize) -> Key {
        self.with_locked(|q| {
            let key = q.next_key;
            q.next_key = key.wrapping_add(1);
            // `head` stays: a list that was empty had `head == key`, and a
            // list that was not keeps its front.
            q.entries.push_back(Entry { key, home, waker });
            // Relaxed: the caller's fence(SeqCst) orders it before the re-check.
            self.len.store(q.entries.len(), Ordering::Release);
            Key(key)
        })
    }

    /// Removes a waiter that stops waiting. Returns `false` if it was no
    /// longer listed, i.e. a waker chose it.
    pub fn remove(&self, key: Key) -> bool {
        // Our key was at or behind the front when we registered, so a front
        // that has moved past it (our own store or a later one) means a
        // waker has since taken our entry: no need for the lock. This is
        // the common case after a wake-up.
        // Acquire, with every store of `head` a Release (all made under the
        // lock): a waiter that learns here that it was chosen synchronises
        // with the waker that chose it (or with a later holder of the
        // lock), so what the waker handed over (a lock, a permit) comes
        // with what its giver wrote before. Loom's Mutex model caught a
        // Relaxed pair here: two holders at once.
        // A waiter chosen from behind the front learns it from `chosen`
        // (Acquire, as `head`), unless a later such choice overwrote it.
        if precedes(key.0, self.head.load(Ordering::Acquire))
            || self.chosen.load(Ordering::Acquire) == key.0
        {
            return false;
        }
        self.with_locked(|q| {
            let found = q.entries.iter().position(|e| e.key == key.0);
            if let Some(i) = found {
                q.entries.remove(i);
                self.publish(q);
            }
            found.is_some()
        })
    }

    /// Stores the mirrors of the queue that are read without the lock.
    /// Called under the lock after every removal. Release: see `remove`.
    fn publish(&self, q: &Queue) {
        self.len.store(q.entries.len(), Ordering::Release);
        let head = q.entries.front().map_or(q.next_key, |e| e.key);
        self.head.store(head, Ordering::Release);
    }

    /// Takes the oldest waiter, under the lock.
    fn take_front(&self, q: &mut Queue) -> Option<Waker> {
        let first = q.entries.pop_front();
        q.passed = 0;
        self.publish(q);
        first.map(|e| e.waker)
    }

    /// Cheap check, after the caller's `fence(SeqCst)` or claim: `false`
    /// means no waiter registered before that ordering point.
    #[inline]
    pub fn has_waiters(&self) -> bool {
        // Relaxed: ordered by the caller's fence against the waiter's fence
        // (or by the claim against the waiter's re-check; see the module
        // docs).
        self.len.load(Ordering::Relaxed) != 0
    }

    /// Chooses a waiter if there is one and `grant()`, called under the
    /// list's lock with a waiter there, says yes: it is removed (which is
    /// how it learns it was chosen: its [`remove`](Self::remove) returns
    /// `false`) and woken after the lock is released. Returns whether a
    /// waiter was chosen. `grant` must not block or panic; it is what hands
    /// the waiter what it waits for (a lock, a permit), so that the
    /// hand-off and the choice are one step.
    ///
    /// **Which waiter: the oldest, with bounded home affinity.** If the
    /// oldest waiter's home (see [`add_at`](Self::add_at)) is not the
    /// caller's, the oldest waiter with the caller's home among the first
    /// few is chosen instead, at most `MAX_PASSES` (32) times in a row; then
    /// the oldest. Waking a coroutine of one's own executor is a push onto
    /// its run queue; waking one of another executor is a remote wake that
    /// leaves this executor idle while the other wakes up. Keeping runs of
    /// hand-offs on one executor is what a contended lock needs to be fast
    /// without moving coroutines between threads (which Go and may do
    /// instead: they run the woken task on the waker's thread). Plain
    /// threads have no home, and are handed to in FIFO order.
    pub fn wake_one_if(&self, grant: impl FnOnce() -> bool) -> bool {
        let home = hook::current_home();
        let chosen = self.with_locked(|q| {
            if q.entries.is_empty() || !grant() {
                return None;
            }
            self.choose(q, home)
        });
        match chosen {
            Some(waker) => {
                waker.wake();
                true
            }
            None => false,
        }
    }

    /// A hand-off for a giver that still holds what it gives (a locked
    /// mutex), so that it need not let go first: chooses a waiter as
    /// [`wake_one_if`](Self::wake_one_if) does (with no `grant`: what the
    /// giver holds becomes the waiter's as it stands) and returns `true`;
    /// or, with nobody listed, calls `release` under the list's lock and
    /// returns `false`. A waiter that registers afterwards takes the lock
    /// after `release`, so its re-check sees what `release` did; one that
    /// registered before is listed. Either way nothing more is needed:
    /// no fence, no second look.
    pub fn hand_over_or(&self, release: impl FnOnce()) -> bool {
        let home = hook::current_home();
        let chosen = self.with_locked(|q| {
            if q.entries.is_empty() {
                release();
                return None;
            }
            self.choose(q, home)
        });
        match chosen {
            Some(waker) => {
                waker.wake();
                true
            }
            None => false,
        }
    }

    /// Removes the waiter a hand-off from `home` chooses from a non-empty
    /// queue, under the lock; its waker is to be woken once the lock is
    /// released.
    fn choose(&self, q: &mut Queue, home: usize) -> Option<Waker> {
        match self.nearer(q, home) {
            Some(i) => {
                let entry = q.entries.remove(i)?;
                q.passed += 1;
                // The front stays, so `head` does too; `len` changes.
                self.len.store(q.entries.len(), Ordering::Release);
                self.chosen.store(entry.key, Ordering::Release);
                Some(entry.waker)
            }
            None => self.take_front(q),
        }
    }

    /// The index of the waiter to choose instead of the front one, if the
    /// front's home is not `home` and a waiter at `home` is near it, and
    /// the front has not been passed over too often already.
    fn nearer(&self, q: &Queue, home: usize) -> Option<usize> {
        let front = q.entries.front()?;
        if home == 0 || front.home == home || q.passed >= MAX_PASSES {
            return None;
        }
        q.entries
            .iter()
            .take(HOME_WINDOW)
            .position(|e| e.home == home)
    }

    /// Wakes the oldest waiter, if any.
    fn wake_one(&self) {
        if let Some(waker) = self.with_locked(|q| self.take_front(q)) {
            waker.wake();
        }
    }
}

impl<L: RawLock + 'static> Waiters for WaitList<L> {
    type Ticket = Key;

    const LOCKED: bool = true;

    fn new() -> Self {
        Self::empty()
    }

    #[inline]
    fn register(&self, park: &dyn Park) -> Key {
        self.add(park.waker())
    }

    #[inline]
    fn leave(&self, key: Key) {
        self.remove(key);
    }

    fn abandon(&self, key: Key) {
        if !self.remove(key) {
            // A wake-one chose us (or a wake-all took everyone, in which
            // case this is a harmless spurious wake). Hand it on.
            self.wake_one();
        }
    }

    #[inline]
    fn notify_one(&self, fence_first: bool) {
        if fence_first {
            fence(Ordering::SeqCst);
        }
        if self.has_waiters() {
            self.wake_one();
        }
    }

    #[inline]
    fn notify_many(&self, fence_first: bool, k: usize) {
        if fence_first {
            fence(Ordering::SeqCst);
        }
        for _ in 0..k {
            if !self.has_waiters() {
                break;
            }
            self.wake_one();
        }
    }

    #[inline]
    fn may_have_waiters(&self) -> bool {
        self.has_waiters()
    }

    fn notify_all(&self) {
        let all = self.with_locked(|q| {
            let all = std::mem::take(&mut q.entries);
            q.passed = 0;
            self.publish(q);
            all
        });
        for entry in all {
            entry.waker.wake();
        }
    }

    fn retire(&self) {}
}

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

#[cfg(all(test, not(loom)))]
mod tests {
    use std::rc::Rc;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    use std::task::{Wake, Waker};
    use std::time::Instant;

    use super::{WaitList, MAX_PASSES};
    use crate::hook::{self, Park};
    use crate::lock::CasLock;

    /// A waker that counts its wakes.
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// A waker nobody looks at.
    fn idle_waker() -> Waker {
        Waker::from(Arc::new(Count(AtomicUsize::new(0))))
    }

    /// A park context whose only point is its home.
    struct Home(usize);
    impl Park for Home {
        fn waker(&self) -> Waker {
            idle_waker()
        }
        fn park(&self, _deadline: Option<Instant>) {}
        fn home(&self) -> usize {
            self.0
        }
    }

    /// Runs `f` as a giver at `home`.
    fn at_home<R>(home: usize, f: impl FnOnce() -> R) -> R {
        let previous = hook::set_current(Some(Rc::new(Home(home))));
        let r = f();
        hook::set_current(previous);
        r
    }

    #[test]
    fn a_hand_off_prefers_the_givers_home_for_a_bounded_run() {
        let list = WaitList::<CasLock>::empty();
        // Waiters alternate between homes 2 and 1, oldest first; each has
        // its own counting waker.
        let wakes: Vec<_> = (0..4)
            .map(|_| Arc::new(Count(AtomicUsize::new(0))))
            .collect();
        let keys: Vec<_> = (0..4)
            .map(|i| list.add_at(Waker::from(wakes[i].clone()), 2 - i % 2))
            .collect();
        // From home 1: the oldest home-1 waiter (index 1), past the front.
        assert!(at_home(1, || list.wake_one_if(|| true)));
        assert_eq!(wakes[1].0.load(SeqCst), 1);
        assert!(!list.remove(keys[1]), "the chosen waiter learns it");
        // From home 0 (a plain thread): FIFO.
        assert!(list.wake_one_if(|| true));
        assert_eq!(wakes[0].0.load(SeqCst), 1);
        assert!(!list.remove(keys[0]));
        // Left: key 2 (home 2), key 3 (home 1). A refused grant chooses
        // nobody.
        assert!(!at_home(1, || list.wake_one_if(|| false)));
        assert!(at_home(1, || list.wake_one_if(|| true)));
        assert_eq!(wakes[3].0.load(SeqCst), 1);
        assert!(!list.remove(keys[3]));
        assert!(list.remove(keys[2]), "still listed, leaves");
        assert!(!list.has_waiters());
    }

    #[test]
    fn the_oldest_waiter_is_passed_over_at_most_max_passes_times() {
        let list = WaitList::<CasLock>::empty();
        let front = Arc::new(Count(AtomicUsize::new(0)));
        let front_key = list.add_at(Waker::from(front.clone()), 2);
        let mut passes = 0;
        while front.0.load(SeqCst) == 0 {
            // A home-1 waiter keeps arriving behind it.
            let key = list.add_at(idle_waker(), 1);
            assert!(at_home(1, || list.wake_one_if(|| true)));
            if front.0.load(SeqCst) == 0 {
                assert!(!list.remove(key), "the home-1 waiter was chosen");
                passes += 1;
            } else {
                assert!(list.remove(key), "the front was chosen instead");
            }
            assert!(passes <= MAX_PASSES, "the front waits for ever");
        }
        assert_eq!(passes, MAX_PASSES);
        assert!(!list.remove(front_key));
    }
}
