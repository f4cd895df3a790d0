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

/// The listed waiters, under the list's lock: one FIFO per home (see
/// [`WaitList::add_at`]), so that a hand-off finds the oldest waiter of the
/// giver's home at the front of its own queue instead of searching the
/// whole list for it; the oldest waiter overall is the oldest of the
/// queues' fronts. Keys are handed out in order and entries only leave,
/// never move, so within a queue the keys ascend (in wrapping order).
struct Queue {
    /// In no particular order. An emptied queue stays for its home's next
    /// waiter while there are few; see [`SPARE_HOMES`].
    homes: Vec<HomeQueue>,
    /// Waiters listed, over all homes.
    len: usize,
    next_key: usize,
    /// Hand-offs in a row that passed the oldest waiter over for one at the
    /// giver's home; see [`WaitList::wake_one_if`].
    passed: usize,
}

/// The waiters of one home, oldest first: `(key, waker)`.
struct HomeQueue {
    home: usize,
    entries: VecDeque<(usize, Waker)>,
}

impl Queue {
    /// The queue of `home`, if it has one.
    fn find(&self, home: usize) -> Option<usize> {
        self.homes.iter().position(|h| h.home == home)
    }

    fn push(&mut self, home: usize, waker: Waker) -> usize {
        let key = self.next_key;
        self.next_key = key.wrapping_add(1);
        let i = match self.find(home) {
            Some(i) => i,
            None => match self.homes.iter().position(|h| h.entries.is_empty()) {
                Some(i) => {
                    self.homes[i].home = home;
                    i
                }
                None => {
                    self.homes.push(HomeQueue {
                        home,
                        entries: VecDeque::new(),
                    });
                    self.homes.len() - 1
                }
            },
        };
        self.homes[i].entries.push_back((key, waker));
        self.len += 1;
        key
    }

    /// The queue whose front is the oldest waiter, if any is listed.
    fn oldest(&self) -> Option<usize> {
        // Oldest: the furthest behind `next_key`, in wrapping order.
        let age = |k: usize| self.next_key.wrapping_sub(k);
        let mut best: Option<(usize, usize)> = None;
        for (i, h) in self.homes.iter().enumerate() {
            if let Some(&(k, _)) = h.entries.front() {
                if best.map_or(true, |(_, b)| age(k) > age(b)) {
                    best = Some((i, k));
                }
            }
        }
        best.map(|(i, _)| i)
    }

    /// The key of the oldest listed waiter, or `next_key` if none is.
    fn head(&self) -> usize {
        self.oldest()
            .and_then(|i| self.homes[i].entries.front())
            .map_or(self.next_key, |&(k, _)| k)
    }

    /// Takes the front of queue `i` (which is not empty).
    fn pop_from(&mut self, i: usize) -> (usize, Waker) {
        let taken = self.homes[i].entries.pop_front().expect("a listed waiter");
        self.len -= 1;
        self.tidy(i);
        taken
    }

    /// Removes the waiter with `key`, if it is listed.
    fn remove_key(&mut self, key: usize) -> bool {
        for i in 0..self.homes.len() {
            let entries = &mut self.homes[i].entries;
            if let Some(j) = entries.iter().position(|&(k, _)| k == key) {
                entries.remove(j);
                self.len -= 1;
                self.tidy(i);
                return true;
            }
        }
        false
    }

    /// Drops queue `i` if it is empty and there are more than a few:
    /// homes come and go (a runtime's executors, with each runtime).
    fn tidy(&mut self, i: usize) {
        if self.homes[i].entries.is_empty() && self.homes.len() > SPARE_HOMES {
            self.homes.swap_remove(i);
        }
    }

    /// Takes every waiter.
    fn take_all(&mut self) -> Vec<Waker> {
        let mut all = Vec::with_capacity(self.len);
        for h in &mut self.homes {
            all.extend(h.entries.drain(..).map(|(_, w)| w));
        }
        self.len = 0;
        self.homes.truncate(SPARE_HOMES);
        all
    }
}

/// Queues kept for homes with no waiter at the moment (so that the waiters
/// of a few executors that come and go reuse their queues).
const SPARE_HOMES: usize = 4;

/// How many hand-offs in a row may pass the oldest waiter over for a waiter
/// at the giver's home. This bounds the unfairness: the oldest waiter is
/// chosen after at most this many others. It is the run of hand-offs a
/// lock stays on one executor while the waiters of another wait: long
/// enough that the remote wake that ends a run (the next executor's caches
/// refilled with the lock's lines) is rare next to the local hand-offs that
/// make it up.
const MAX_PASSES: usize = 32;

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
                homes: Vec::new(),
                len: 0,
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
            // `head` stays: a list that was empty had `head == key`, and a
            // list that was not keeps its oldest.
            let key = q.push(home, waker);
            // Relaxed: the caller's fence(SeqCst) orders it before the re-check.
            self.len.store(q.len, Ordering::Release);
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
            let found = q.remove_key(key.0);
            if found {
                self.publish(q);
            }
            found
        })
    }

    /// Stores the mirrors of the queue that are read without the lock.
    /// Called under the lock after every removal. Release: see `remove`.
    fn publish(&self, q: &Queue) {
        self.len.store(q.len, Ordering::Release);
        self.head.store(q.head(), Ordering::Release);
    }

    /// Takes the oldest waiter, under the lock.
    fn take_front(&self, q: &mut Queue) -> Option<Waker> {
        let i = q.oldest()?;
        let (_, waker) = q.pop_from(i);
        q.passed = 0;
        self.publish(q);
        Some(waker)
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
    /// caller's, the oldest waiter with the caller's home is chosen instead,
    /// at most `MAX_PASSES` (32) times in a row; then the oldest. Waking a coroutine of one's own executor is a push onto
    /// its run queue; waking one of another executor is a remote wake that
    /// leaves this executor idle while the other wakes up. Keeping runs of
    /// hand-offs on one executor is what a contended lock needs to be fast
    /// without moving coroutines between threads (which Go and may do
    /// instead: they run the woken task on the waker's thread). Plain
    /// threads have no home, and are handed to in FIFO order.
    pub fn wake_one_if(&self, grant: impl FnOnce() -> bool) -> bool {
        let home = hook::current_home();
        let chosen = self.with_locked(|q| {
            if q.len == 0 || !grant() {
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
            if q.len == 0 {
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
        let oldest = q.oldest()?;
        let mine = match q.find(home) {
            Some(i) if home != 0 && q.passed < MAX_PASSES && i != oldest => {
                Some(i).filter(|&i| !q.homes[i].entries.is_empty())
            }
            _ => None,
        };
        let Some(i) = mine else {
            return self.take_front(q);
        };
        let (key, waker) = q.pop_from(i);
        q.passed += 1;
        // The oldest stays, so `head` does too; `len` changes.
        self.len.store(q.len, Ordering::Release);
        self.chosen.store(key, Ordering::Release);
        Some(waker)
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
            let all = q.take_all();
            q.passed = 0;
            self.publish(q);
            all
        });
        for waker in all {
            waker.wake();
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
