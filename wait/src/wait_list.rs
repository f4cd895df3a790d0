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

use crate::hook::{self, Park};
use crate::lock::RawLock;
use crate::sync::{fence, Ordering, UnsafeCell};
use crate::updt::UpdtCell;

pub use crate::waiter_slot::WaiterSlot;
pub use crate::waiters::Waiters;

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
    /// The waiter's [`Park::home`], `0` for none.
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
        self.hand_off(|listed| listed && grant())
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
        self.hand_off(|listed| {
            if !listed {
                release();
            }
            listed
        })
    }

    /// The hand-off both of the above make: under the lock, `go(listed)`
    /// (whether a waiter is listed) says whether to choose one; the chosen
    /// waiter is woken after the lock is released. Returns whether one was.
    fn hand_off(&self, go: impl FnOnce(bool) -> bool) -> bool {
        let home = hook::current_home();
        let chosen = self.with_locked(|q| {
            if !go(!q.entries.is_empty()) {
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
        fn thread_home(&self) -> usize {
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
