//! Flat combining for the add-only claim (Hendler, Incze, Shavit and
//! Tzafrir, 2010): under contention, one holder of an [`UpdtCursor`]'s claim
//! hands out positions to every claimant that is waiting, in one pass.
//!
//! [`UpdtCursor`]: super::UpdtCursor
//!
//! # Why
//!
//! Add-only words and loads have consensus number 1, so an `Updt` side
//! cannot do without an exclusive claim. What it can change is what losers
//! do. Without combining, a loser backs off, retries the claim's words (its
//! retries pull the claim's cache line away from the holder), and after a
//! few losses yields its thread, so with more threads than cores its loop
//! stretches over other threads' turns. With combining, a loser publishes
//! its request in a record of its own and waits on that record: whoever
//! holds the claim next serves it, and the loser gets its positions without
//! ever winning.
//!
//! # Protocol
//!
//! Each thread that uses combining owns one slot index (process-wide, from
//! [`my_slot`]); each cursor has one [`Record`] per slot and a `pending`
//! word with one bit per slot. Every word is an [`UpdtCell`].
//!
//! * **Publish** (the owner, after losing a `try_claim`): store `max` and
//!   `served = 0` in its record, then add its bit to `pending`. The add is a
//!   release: a server that sees the bit sees `max`.
//! * **Serve** (whoever holds the claim and has published): load `pending`;
//!   for each bit, in order, hand the record the run of ready positions from
//!   `pos` (or "not ready", with `n = 0`), moving `pos` on; store `pos`;
//!   subtract exactly the bits it served from `pending`; then store
//!   `served = 1` in each served record (release: the owner then sees
//!   `first` and `n`); then commit the claim.
//! * **Wait** (the owner): load `served` until it is 1; every so often try
//!   the claim, and if won, serve (its own request among the rest).
//!
//! # Invariants, and why they hold
//!
//! * **A request is served exactly once.** Its bit is in `pending` from the
//!   owner's add until a server's subtract; only a holder of the claim reads
//!   `pending` to serve, and it subtracts what it served before releasing
//!   the claim, so the next holder cannot see the bit again. The owner
//!   publishes again only after it saw `served = 1`, which is stored after
//!   the subtract, so a bit is never added twice.
//! * **Positions are handed out as a direct claim would.** The server holds
//!   the claim, so `pos` is its alone; each record gets the run that
//!   `claim_run` would have given its owner at that point, and the server
//!   stores `pos` past all of them before releasing (`Release` store; the
//!   commit releases too).
//! * **A record belongs to one thread.** Slot indices are unique among live
//!   threads, and a thread makes one request at a time: `claim_run` never
//!   suspends, so two coroutines of one executor thread cannot interleave
//!   inside it.
//! * **No lost wake-up.** A served owner goes on to look for waiters of the
//!   other side as a direct claimant does. The server's add to `claims`
//!   happens-before its `served` store, which the owner acquires, so the
//!   argument of `UpdtClaim::synchronize` carries over: a waiter whose add
//!   came first is seen by the server and so by the owner; one whose add
//!   came after waits for the commit and sees `pos`.
//! * **Nothing waits for ever on a preempted server.** An owner whose
//!   request is not served for a while yields its thread.

use crossbeam_utils::CachePadded;

use crate::ring::{Ring, Turn};
use crate::sync::{spin_hint, yield_thread, Ordering};
use crate::updt::{UpdtCell, UpdtClaim};

/// Records per cursor: one per bit of `pending`. Under loom, few, so that
/// each model stays small.
pub(crate) const SLOTS: usize = if cfg!(loom) { 4 } else { usize::BITS as usize };

/// How many turns of waiting on its record an owner takes between tries of
/// the claim: a try reads the claim's cache line, which the holder needs.
/// Owners that try often keep taking that line from the holder while it
/// serves them, so everyone waits longer; rare tries leave it there.
const TRY_EVERY: u32 = if cfg!(loom) { 1 } else { 128 };

/// Turns of waiting after which an owner yields its thread: its server was
/// preempted (serving takes a few hundred nanoseconds).
const YIELD_AFTER: u32 = if cfg!(loom) { 2 } else { 2048 };

/// One thread's request, and the answer to it.
pub(crate) struct Record {
    /// The longest run the owner wants (at least 1).
    max: UpdtCell,
    /// The first position handed out, or where the ring was not ready.
    first: UpdtCell,
    /// How many positions were handed out; 0: not ready.
    n: UpdtCell,
    /// 1 once served; 0 while pending.
    served: UpdtCell,
    /// Under loom only: whether the owner's request is outstanding (set by
    /// the owner before it publishes, taken by the server that serves it),
    /// so that serving a request twice fails the model where it happens
    /// (see `check_outstanding`). A `std` atomic, not the shim's: loom runs
    /// a model's threads one at a time on one OS thread, so it sees them in
    /// the order loom ran them, and it is no object of the search (no new
    /// branch, no happens-before edge the real code lacks).
    #[cfg(loom)]
    outstanding: std::sync::atomic::AtomicBool,
}

/// A cursor's records and its `pending` word.
pub(crate) struct Publication {
    pending: CachePadded<UpdtCell>,
    records: Box<[CachePadded<Record>]>,
}

impl Publication {
    pub(crate) fn new() -> Self {
        #[cfg(loom)]
        make_slot_counter();
        Publication {
            pending: CachePadded::new(UpdtCell::new(0)),
            records: (0..SLOTS)
                .map(|_| {
                    CachePadded::new(Record {
                        max: UpdtCell::new(0),
                        first: UpdtCell::new(0),
                        n: UpdtCell::new(0),
                        served: UpdtCell::new(0),
                        #[cfg(loom)]
                        outstanding: std::sync::atomic::AtomicBool::new(false),
                    })
                })
                .collect(),
        }
    }

    /// Publishes a request for up to `max` positions in `slot`'s record and
    /// waits until it is served, by another holder of `claim` or by us.
    /// The result is `claim_run`'s: `Ok((first, n))` or `Err(pos)`.
    pub(crate) fn request<T>(
        &self,
        slot: usize,
        claim: &UpdtClaim,
        pos: &UpdtCell,
        ring: &Ring<T>,
        turn: Turn,
        max: usize,
    ) -> Result<(usize, usize), usize> {
        let record = &self.records[slot];
        // Relaxed: the add to `pending` below releases them.
        record.max.store(max, Ordering::Relaxed);
        record.served.store(0, Ordering::Relaxed);
        #[cfg(loom)]
        record
            .outstanding
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.pending.updt(1isize.wrapping_shl(slot as u32));
        let mut turns = 0u32;
        let mut served_myself = false;
        loop {
            // Acquire: pairs with the server's Release store, so `first`
            // and `n` are the server's.
            if record.served.load(Ordering::Acquire) == 1 {
                let n = record.n.load(Ordering::Relaxed);
                let first = record.first.load(Ordering::Relaxed);
                return if n == 0 { Err(first) } else { Ok((first, n)) };
            }
            // Our own serve saw our bit (our add comes before its load), or
            // a server that took it out committed before we won the claim,
            // and its `served` store with it: either way we are served now.
            // If not, our bit was lost from `pending` and we would wait for
            // ever; say so rather than spin until loom's branch limit (or
            // for ever, outside loom).
            assert!(
                !served_myself,
                "combining: slot {slot}'s request not served by its own serve \
                 (its bit was lost from `pending`)"
            );
            // Try at once (the holder may have just gone), then every
            // TRY_EVERY turns.
            // (Under loom `TRY_EVERY` is 1: every turn tries.)
            #[allow(clippy::modulo_one)]
            let due = turns % TRY_EVERY == 0;
            if due && claim.try_claim() {
                self.serve(claim, pos, ring, turn);
                served_myself = true;
                continue;
            }
            turns += 1;
            if turns >= YIELD_AFTER {
                yield_thread();
                turns = 0;
            } else {
                spin_hint();
            }
        }
    }

    /// Under loom: fails the model if a bit of `mask` (a `pending` load) is
    /// not an outstanding request, and marks the requests served.
    ///
    /// A bit in `pending` is a request nobody has served yet. A request
    /// served again would hand positions to an owner that no longer waits
    /// for them: a producer's slot would stay unwritten, and a consumer
    /// would wait for it for ever (a livelock loom reports only at its
    /// branch limit, and not at all if another thread's panic is unwinding
    /// by then). So fail here, before anything is handed out, and give the
    /// claim back first: the endpoints dropped while this thread unwinds
    /// then do not wait for a claim nobody will release.
    #[cfg(loom)]
    fn check_outstanding(&self, mask: usize, claim: &UpdtClaim) {
        let stale = bits(mask).find(|&slot| {
            !self.records[slot]
                .outstanding
                .load(std::sync::atomic::Ordering::Relaxed)
        });
        if let Some(slot) = stale {
            claim.undo();
            panic!(
                "combining: slot {slot}'s request served twice \
                 (its bit left in `pending`: {mask:#b})"
            );
        }
        for slot in bits(mask) {
            self.records[slot]
                .outstanding
                .store(false, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Serves every published request, then releases `claim`, which the
    /// caller holds.
    fn serve<T>(&self, claim: &UpdtClaim, pos: &UpdtCell, ring: &Ring<T>, turn: Turn) {
        // SeqCst (an acquire): we see the `max` of every request whose bit
        // we see.
        let mask = self.pending.load(Ordering::SeqCst);
        // Relaxed: the claim orders us after the previous holder's store.
        let mut next = pos.load(Ordering::Relaxed);
        #[cfg(loom)]
        self.check_outstanding(mask, claim);
        for slot in bits(mask) {
            let record = &self.records[slot];
            let max = record.max.load(Ordering::Relaxed);
            record.first.store(next, Ordering::Relaxed);
            let n = match ring.run_from(turn, next, max) {
                Some((n, end)) => {
                    next = end;
                    n
                }
                None => 0,
            };
            record.n.store(n, Ordering::Relaxed);
        }
        // Release: pairs with `position()` in the other side's checks.
        pos.store(next, Ordering::Release);
        // Before any `served`: an owner publishes again only after seeing
        // it, and its bit must be gone by then.
        self.pending.updt((mask as isize).wrapping_neg());
        for slot in bits(mask) {
            // Release: the owner's Acquire load then sees `first` and `n`.
            self.records[slot].served.store(1, Ordering::Release);
        }
        #[cfg(all(test, loom))]
        SERVED.with(|n| n.set(n.get() + mask.count_ones() as usize));
        claim.commit();
    }
}

/// The indices of the set bits of `mask`, lowest first.
fn bits(mut mask: usize) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let i = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        Some(i)
    })
}

/// This thread's slot, if it has one: unique among live threads, taken at
/// the first use and given back when the thread exits. `None` once
/// [`SLOTS`] threads hold one; such a thread claims without combining.
#[cfg(not(loom))]
pub(crate) fn my_slot() -> Option<usize> {
    use std::sync::Mutex;

    /// Which slots live threads hold, one bit each.
    static TAKEN: Mutex<usize> = Mutex::new(0);

    struct Slot(Option<usize>);

    impl Drop for Slot {
        fn drop(&mut self) {
            if let Some(i) = self.0 {
                let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
                *taken &= !(1 << i);
            }
        }
    }

    std::thread_local! {
        static SLOT: Slot = {
            let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
            let free = !*taken;
            Slot((free != 0).then(|| {
                let i = free.trailing_zeros() as usize;
                *taken |= 1 << i;
                i
            }))
        };
    }

    // `try_with`: a thread already tearing down its thread-locals claims
    // without combining.
    SLOT.try_with(|s| s.0).ok().flatten()
}

/// Under loom: each model thread takes the next index, from a counter that
/// lives for one execution (a loom `lazy_static`: loom drops its statics at
/// the end of each execution and makes them afresh in the next), so every
/// execution numbers its threads from 0 and nothing needs resetting between
/// executions. The index itself is a loom thread-local, which lives as long
/// as its model thread.
#[cfg(loom)]
pub(crate) fn my_slot() -> Option<usize> {
    crate::sync::thread_local! {
        static SLOT: Option<usize> = {
            // Relaxed, and a `std` atomic: loom runs a model's threads one
            // at a time on one OS thread, so this is no object of the search.
            let i = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (i < SLOTS).then_some(i)
        };
    }
    SLOT.with(|s| *s)
}

#[cfg(loom)]
crate::sync::lazy_static! {
    /// The next slot index to hand out in this execution.
    static ref NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
}

/// Makes this execution's slot counter now, if it is not made yet. Loom
/// models a `lazy_static`'s initialisation as a release and every access as
/// an acquire of it, so the first thread to use the counter would order
/// every later user after itself: an edge the real code does not have,
/// which could hide a missing one. Made when a cursor is (before the model
/// hands its endpoints to other threads), it adds none.
#[cfg(loom)]
pub(crate) fn make_slot_counter() {
    let _ = NEXT.load(std::sync::atomic::Ordering::Relaxed);
}

#[cfg(all(test, loom))]
std::thread_local! {
    /// Requests served by combining on this OS thread (under loom, the
    /// test's), so a model can check that it covered the path.
    static SERVED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many requests combining has served on this test thread so far.
#[cfg(all(test, loom))]
pub(crate) fn served_requests() -> usize {
    SERVED.with(|n| n.get())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_gives_its_slot_back_when_it_exits() {
        // Far more threads than slots, one after another: each finds one
        // free, which it could not if exiting threads kept theirs.
        for _ in 0..3 * SLOTS {
            let slot = std::thread::spawn(my_slot).join().unwrap();
            assert!(slot.is_some_and(|i| i < SLOTS));
        }
    }

    #[test]
    fn live_threads_hold_distinct_slots() {
        let barrier = std::sync::Barrier::new(8);
        let slots: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        let slot = my_slot();
                        // Everyone holds theirs at once.
                        barrier.wait();
                        slot.expect("a free slot")
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut sorted = slots.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            slots.len(),
            "two live threads shared a slot: {slots:?}"
        );
    }
}
