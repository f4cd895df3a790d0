//! An executor's inbox: how other threads hand it new coroutines and wakes,
//! and wake it up if it sleeps.
//!
//! A lock-free multi-producer, single-consumer stack (Treiber's push; no
//! pop: the executor takes the whole list at once) whose head word also
//! holds the executor's sleep state. `head` is one of
//!
//! * `EMPTY` (0): nothing queued; the executor is awake;
//! * `SLEEPING` (1): nothing queued; the executor is parked, or about to
//!   park, and the next pusher must unpark it;
//! * a node pointer: the items queued, newest first; the executor is awake,
//!   or has already been unparked by the pusher that replaced `SLEEPING`.
//!
//! A remote spawn or wake is one successful compare-and-swap on the one
//! line of `head`, and no allocation: a spawn travels in the node its job
//! carries ([`Spawnable`]; the coroutine's one allocation holds it), a wake
//! in the coroutine's own [`WakeLink`], which lives in its header. An unpark
//! only when the push finds the executor asleep.
//!
//! # Invariants
//!
//! * Every write to `head` is a read-modify-write (a pusher's CAS, the
//!   executor's `swap` or CAS), so each one reads the value just before it
//!   in `head`'s modification order, whatever its memory ordering.
//! * Only the executor writes `SLEEPING`, and only in place of `EMPTY` (one
//!   CAS, in [`Inbox::park`]). If that CAS succeeds, every node pushed
//!   before it has been taken; if it fails, something arrived and the
//!   executor drains instead of parking.
//! * A pusher's successful CAS both links its node and reads the state it
//!   replaced. The first push after the executor's `EMPTY -> SLEEPING` CAS
//!   reads `SLEEPING` (it is the next write), and it is the only push of
//!   that sleep to do so (it leaves a pointer): it, and only it, unparks.
//!   The parker keeps an unpark that comes before the park as a token, so a
//!   hand-off is never slept through, and pushes to an awake executor
//!   (`head` is `EMPTY` or a pointer) cost no syscall.
//! * Back from `park` (unparked, stop request, timer deadline or spurious),
//!   the executor CASes `SLEEPING -> EMPTY`; if that fails, a pusher has
//!   already replaced `SLEEPING` with its node (and unparks, or has
//!   unparked, the executor: at worst one later park returns at once).
//! * A node belongs to its pusher until the CAS that publishes it (Release),
//!   and then to the executor: only the executor takes nodes, always the
//!   whole list, with one `swap` to `EMPTY` (Acquire). Later pushers' CASes
//!   are read-modify-writes, so they continue every earlier pusher's release
//!   sequence and the one Acquire swap sees every node's contents. The
//!   executor frees each boxed spawn node it took, once, and never frees a
//!   node an item carries or a wake link (their owners do).
//! * A wake link is in the list at most once, and outlives its stay there.
//!   The caller of [`Inbox::push_wake`] promises both: in the executor, only
//!   the winner of a parked coroutine's `WAITING -> RUNNING` transition
//!   pushes its link, and nothing else can run the coroutine (so finish it
//!   and free the link) until the executor has drained it. The drain reads
//!   the link's `next` before the coroutine runs, and the next push of the
//!   link follows the coroutine's next park (`AcqRel` in `wake.rs`), so the
//!   writes and reads of `next` never race; loom checks that too.
//! * No ABA. Pushers never dereference `head`: they copy its value into
//!   their own node's `next` and CAS on it. If the node at that address was
//!   taken, freed and its memory pushed again meanwhile, the CAS still links
//!   the new node in front of the list that is there now, which is exactly
//!   right. The executor never CASes on a pointer (its `swap` is
//!   unconditional; its CASes expect the tags `EMPTY` and `SLEEPING`, which
//!   are no addresses). ABA hurts a Treiber stack's *pop*, which reads
//!   `head->next` and CASes on `head`; this stack has no pop.
//! * Node and link addresses are at least 2-aligned, so no pointer equals
//!   `SLEEPING`.
//!   `SLEEPING` is never combined with a pointer: it is only set on an
//!   empty list, and a push replaces it.
//! * Pushes come out in arrival order: the list is newest first, and the
//!   drain reverses what it took.
//!
//! The module only uses the crate's `sync` shim, so it compiles under
//! `--cfg loom`, and the hand-off (never slept through, never lost,
//! delivered once and in order, nodes read only after they were published)
//! is model-checked against a parking executor in `loom_tests/inbox.rs`.

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr;
use std::ptr::NonNull;
use std::time::Instant;

use crate::sync::{AtomicUsize, Ordering, Parker, Unparker, UnsafeCell};

/// `head`: nothing queued, executor awake.
const EMPTY: usize = 0;
/// `head`: nothing queued, executor parked or about to park.
const SLEEPING: usize = 1;

/// Items handed to an executor, in arrival order per kind.
pub(crate) struct InboxQueue<J> {
    /// New coroutines to start.
    pub(crate) spawns: Vec<J>,
    /// Slots of parked coroutines to put back on the run queue.
    pub(crate) wakes: Vec<usize>,
}

impl<J> Default for InboxQueue<J> {
    fn default() -> Self {
        InboxQueue {
            spawns: Vec::new(),
            wakes: Vec::new(),
        }
    }
}

/// `Link::slot` of a spawn node (no coroutine slot is this large).
const SPAWN: usize = usize::MAX;

/// The list cell every queued thing starts with: a whole [`WakeLink`], or
/// the head of a boxed [`SpawnNode`].
///
/// `next` is a cell so that loom checks that the executor reads it only
/// after the push that wrote it happened-before (with `std` it is a plain
/// `UnsafeCell`).
#[repr(C)]
struct Link {
    /// The next older link, or null.
    next: UnsafeCell<*mut Link>,
    /// The coroutine slot a wake link wakes, or [`SPAWN`].
    slot: usize,
}

/// A new coroutine's cell in the list. Where it lives is the item's choice
/// ([`Spawnable`]): a box per push, freed by the drain, or a cell the item
/// carries with it (a spawned coroutine's one allocation), so that a
/// remote spawn allocates nothing of its own.
#[repr(C)]
pub(crate) struct SpawnNode<J> {
    /// First, so a `*mut Link` to it is a `*mut SpawnNode<J>` (`repr(C)`).
    link: Link,
    /// Written by the push, moved out by the drain (never dropped in
    /// place).
    job: UnsafeCell<MaybeUninit<J>>,
}

impl<J> SpawnNode<J> {
    /// An empty node, in no list.
    #[must_use]
    pub(crate) fn new() -> Self {
        SpawnNode {
            link: Link {
                next: UnsafeCell::new(ptr::null_mut()),
                slot: SPAWN,
            },
            job: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }
}

impl<J> Default for SpawnNode<J> {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: a node is written only by the one pusher that owns the item it
// carries, and read only by the drain after that push happened-before (as
// for `WakeLink`); the item itself crosses threads, hence `J: Send`.
unsafe impl<J: Send> Send for SpawnNode<J> {}
// SAFETY: as above.
unsafe impl<J: Send> Sync for SpawnNode<J> {}

/// How an item handed to [`Inbox::push_spawn`] travels.
///
/// # Safety
///
/// A node that [`embedded_node`](Spawnable::embedded_node) returns must stay
/// alive while the item is queued in it (the item keeping its allocation
/// alive does), and must not be in a list when the item is pushed: one
/// node per item, and one item per node at a time.
pub(crate) unsafe trait Spawnable: Sized {
    /// The node this item carries with it, or `None` to box one per push.
    fn embedded_node(&self) -> Option<NonNull<SpawnNode<Self>>> {
        None
    }
}

// The loom models' items: boxed nodes.
// SAFETY: no embedded node.
unsafe impl Spawnable for u32 {}

/// A coroutine's own cell in its executor's inbox: a remote wake queues it
/// instead of allocating a node. It belongs in what it wakes (the
/// coroutine's header), which outlives every stay of the link in the list.
pub(crate) struct WakeLink(Link);

impl WakeLink {
    /// The link of the coroutine in `slot`.
    ///
    /// # Panics
    ///
    /// If `slot` is `usize::MAX`, which marks spawn nodes.
    #[must_use]
    pub(crate) fn new(slot: usize) -> Self {
        assert_ne!(slot, SPAWN, "slot usize::MAX is reserved");
        WakeLink(Link {
            next: UnsafeCell::new(ptr::null_mut()),
            slot,
        })
    }
}

// SAFETY: `next` is written only by the one pusher that holds the link out
// of the list (the caller's promise in `push_wake`) and read only by the
// drain after that push happened-before; `slot` never changes.
unsafe impl Send for WakeLink {}
// SAFETY: as above.
unsafe impl Sync for WakeLink {}

/// See the module docs.
pub(crate) struct Inbox<J: Spawnable> {
    /// `EMPTY`, `SLEEPING` or the newest node (see the module docs).
    head: AtomicUsize,
    unparker: Unparker,
    /// The inbox owns the `J`s queued in its nodes.
    _items: PhantomData<J>,
}

// SAFETY: through `&Inbox`, a `J` is only ever moved in (by a pusher) or out
// (by a drain, which owns the nodes its `swap` took, even if two threads
// drained at once); no `&J` is shared between threads. So sharing the inbox
// needs `J: Send` only, as for `Mutex<Vec<J>>`.
unsafe impl<J: Send + Spawnable> Sync for Inbox<J> {}

impl<J: Spawnable> Inbox<J> {
    /// An empty inbox that wakes its executor through `unparker`.
    #[must_use]
    pub(crate) fn new(unparker: Unparker) -> Self {
        Inbox {
            head: AtomicUsize::new(EMPTY),
            unparker,
            _items: PhantomData,
        }
    }

    /// Hands a new coroutine to the executor, in the node the item carries
    /// or in a boxed one.
    pub(crate) fn push_spawn(&self, job: J) {
        let node = match job.embedded_node() {
            Some(node) => node.as_ptr(),
            None => Box::into_raw(Box::new(SpawnNode::new())),
        };
        // SAFETY: the node is alive and in no list (a fresh box, or the
        // item's own node: `Spawnable`'s contract), so only this thread
        // touches it until the push below publishes it; `link` is its first
        // field (`repr(C)`), so the drain can cast back.
        unsafe {
            (*node).job.with_mut(|p| (*p).write(job));
            self.push(node.cast::<Link>());
        }
    }

    /// Asks the executor to run the coroutine whose link this is again.
    ///
    /// # Safety
    ///
    /// `link` is not in this inbox's list already (each push of it is
    /// drained before the next), and it stays alive until the executor has
    /// drained it (or the inbox is dropped). See the module invariants for
    /// how the executor keeps both.
    pub(crate) unsafe fn push_wake(&self, link: &WakeLink) {
        let link = (&link.0 as *const Link).cast_mut();
        // SAFETY: the caller's promise: out of the list and alive, so ours
        // to link in.
        unsafe { self.push(link) }
    }

    /// Links `node` in at the head.
    ///
    /// # Safety
    ///
    /// `node` is alive, in no list, and nobody else writes its `next`
    /// until the drain that takes it.
    unsafe fn push(&self, node: *mut Link) {
        // Relaxed: only a first guess for the CAS; never dereferenced.
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            let next = if head == SLEEPING {
                ptr::null_mut()
            } else {
                head as *mut Link
            };
            // SAFETY: `node` is ours until the CAS below publishes it (the
            // caller's promise).
            unsafe { (*node).next.with_mut(|p| *p = next) };
            // Release on success: publishes the node (its `next` and item)
            // to the executor's Acquire swap. Relaxed on failure: the value
            // read is only the next guess.
            match self.head.compare_exchange_weak(
                head,
                node as usize,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => head = now,
            }
        }
        if head == SLEEPING {
            // We replaced `SLEEPING`: ours is the only push of this sleep to
            // do so, and the parker keeps the unpark if the executor has not
            // parked yet.
            self.unparker.unpark();
        }
    }

    /// Wakes the executor without handing it anything (a stop request).
    pub(crate) fn unpark(&self) {
        self.unparker.unpark();
    }

    /// Whether something was pushed since the last drain.
    #[inline]
    pub(crate) fn is_pending(&self) -> bool {
        // Relaxed: a hint; `drain_into`'s swap is the synchronising read,
        // and `park`'s CAS decides for certain before sleeping.
        self.head.load(Ordering::Relaxed) > SLEEPING
    }

    /// If anything was pushed since the last drain, appends it to `queue`
    /// (in arrival order per kind) and returns `true`. Executor thread only.
    pub(crate) fn drain_into(&self, queue: &mut InboxQueue<J>) -> bool {
        // The Relaxed peek keeps the common empty case free of RMW.
        if !self.is_pending() {
            return false;
        }
        // Acquire: pairs with the Release CAS of every push in the list
        // (each later push's CAS continues the release sequence). Only the
        // drain takes nodes, so the list seen above is still there.
        let head = self.head.swap(EMPTY, Ordering::Acquire);
        debug_assert!(head > SLEEPING, "the inbox emptied under its drain");
        let (spawns, wakes) = (queue.spawns.len(), queue.wakes.len());
        // (Never a tag for the one executor; a misused concurrent drain
        // could see one, and takes no node then.)
        let mut node = if head > SLEEPING {
            head as *mut Link
        } else {
            ptr::null_mut()
        };
        while !node.is_null() {
            // SAFETY: `node` was published by its pusher's Release CAS, which
            // our Acquire swap synchronises with, and was reachable from the
            // head we swapped out: it is ours alone now. A wake link is alive
            // (the pusher's promise); a spawn node is a live box.
            let (next, slot) = unsafe { ((*node).next.with(|p| *p), (*node).slot) };
            if slot == SPAWN {
                let spawn = node.cast::<SpawnNode<J>>();
                // SAFETY: the link is a spawn node's first field; the
                // pusher's write of the job happened-before (above), and it
                // is moved out once, here.
                let job = unsafe { (*spawn).job.with(|p| (*p).assume_init_read()) };
                if job.embedded_node().is_none() {
                    // SAFETY: a node the item does not carry came from
                    // `Box::into_raw` in `push_spawn`; we free it exactly
                    // once, here (`MaybeUninit` drops no job).
                    drop(unsafe { Box::from_raw(spawn) });
                }
                queue.spawns.push(job);
            } else {
                queue.wakes.push(slot);
            }
            node = next;
        }
        // The list was newest first.
        queue.spawns[spawns..].reverse();
        queue.wakes[wakes..].reverse();
        true
    }

    /// Parks the executor on `parker` (until `deadline`, if any) unless
    /// something arrived: `false` if it did not park because the inbox is not
    /// empty (drain it). Executor thread only, with the inbox just seen
    /// empty; on return the executor is awake again (`head` is not
    /// `SLEEPING`).
    pub(crate) fn park(&self, parker: &Parker, deadline: Option<Instant>) -> bool {
        // Relaxed, both ways: the CAS publishes no data (a push's contents
        // travel by its Release CAS and the drain's Acquire swap), and the
        // wake-up is the parker's business; what matters is that the CAS is
        // a read-modify-write (module invariants). Failure: a pointer is
        // there; the caller drains.
        if self
            .head
            .compare_exchange(EMPTY, SLEEPING, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        parker.park(deadline);
        // Relaxed: as above. Failure: a pusher replaced `SLEEPING` with its
        // node (and unparks us, or did); the caller's drain takes it.
        let _ = self
            .head
            .compare_exchange(SLEEPING, EMPTY, Ordering::Relaxed, Ordering::Relaxed);
        true
    }
}

impl<J: Spawnable> Drop for Inbox<J> {
    fn drop(&mut self) {
        // Frees the spawn nodes left (and drops their jobs), in arrival
        // order; wake links belong to their coroutines.
        let mut left = InboxQueue::default();
        self.drain_into(&mut left);
    }
}
