//! The Sunway CPE's only read-modify-write, `updt(n, addr)`, and the claim
//! built from it.
//!
//! A CPE can add to a word in memory atomically, but the add returns nothing:
//! there is no compare-and-swap, no swap, no fetch-and-add. [`UpdtCell`] is
//! the only way an `Updt` channel touches a shared word, and it offers
//! exactly `updt(n)`, `load` and `store`, so no stronger operation can creep
//! in.
//!
//! # The claim ([`UpdtClaim`]), the seed paper's Figure 6 corrected
//!
//! Two words: `claims` (the paper's `write`) and `done` (the paper's
//! `to_write`). A claimant reads `t = claims`; if `t != done`, someone holds
//! the claim, so it backs off. Otherwise it adds 1 to `claims` and reads it
//! again: if it reads exactly `t + 1` it has won; if not, another claimant
//! added too, so it subtracts its 1 again and backs off with jitter.
//!
//! Invariants, and why they hold:
//!
//! 1. **`claims == done + k`, where `k` is the number of claimants between
//!    their add and their release.** Every claimant adds 1 exactly once per
//!    attempt and takes it back exactly once: by `updt(-1)` on `claims` (a
//!    lost race, or [`undo`](UpdtClaim::undo)), or by moving `done` on by
//!    one ([`commit`](UpdtClaim::commit)), which turns its add into part of
//!    the baseline. Only the holder commits, so the commit is a plain store
//!    of `done + 1`: a won claim costs one read-modify-write.
//! 2. **At most one claimant holds the claim.** A winner read `done == t` and
//!    then `claims == t + 1` after its own add; by (1), at that moment `k ==
//!    1`: it was the only claimant with an outstanding add. A later claimant
//!    that adds while the winner holds sees `claims >= done + 2` and loses; an
//!    earlier one that added before the winner's read would have made the
//!    winner read `t + 2`. (Adds are read-modify-writes, so they are totally
//!    ordered on `claims` and each sees all earlier ones.)
//! 3. **A collision costs both sides a retry, never correctness.** Two
//!    claimants that add at once both read `t + 2`, both undo; the jittered
//!    backoff (randomised, doubling window) makes a repeat of the same
//!    collision ever less likely, so one of them wins.
//! 4. **No suspension inside a claim.** The holder runs a few loads and
//!    stores and releases before doing anything that could block, so waiters
//!    spin only for that long (and yield the thread if the holder's thread
//!    was preempted).
//! 5. **A waiter that re-checks never misses a holder's progress.** A waiter
//!    (of the other side) adds 0 to `claims` and waits until `done` has
//!    caught up ([`synchronize`](UpdtClaim::synchronize)): a holder whose add
//!    came first has then committed, and the waiter's `Acquire` load of
//!    `done` sees its stores; a holder whose add came after reads the
//!    waiter's add, and so sees the waiter's registration.
//!
//! What the paper's Figure 6 gets wrong, and what the channel built on this
//! claim (see `claim/updt_cursor.rs`) does instead: the paper checks `full`
//! before claiming and never re-checks, so two producers that both saw room can
//! overfill the ring; here the holder checks the slot (its stamp) *after*
//! winning and undoes the claim if the ring is full. And the paper publishes
//! nothing per slot, so the critical section must cover the copy; here a
//! per-slot stamp, stored after the data, publishes the slot, so the claim
//! ends before the copy.
//!
//! In an `Updt` channel every shared word goes through [`UpdtCell`]: the
//! cursors' claims and positions, the combining records and their `pending`
//! word (`claim/combine.rs`), the slots' stamps, the waiter lists' claims
//! and lengths, the endpoint counts and the disconnection flags. Three
//! things are outside the protocol on purpose: the reference count of the
//! `Arc` that owns the channel's memory, and the allocation of the
//! combining records (allocation is the host's business; on a Sunway chip
//! the MPE allocates and frees); the wakers, which belong to the executor
//! (or thread) being woken; and the registry that gives each thread its
//! combining slot, which stands for the id a CPE has in hardware.
//!
//! # Under contention: flat combining
//!
//! A claimant that loses its first try does not fight for the claim: it
//! publishes its request in a record of its own and waits there, and
//! whoever holds the claim next hands out positions to every published
//! request in one pass (`claim/combine.rs`). Against backing off and
//! yielding, this matters most when there are more claimants than cores: a
//! loser no longer needs a core to retry, only to be served (the `updt`
//! `spread` rows of `benches/results/table1.txt` show the effect).
//!
//! Loads and adds are `SeqCst`: on x86 and Arm a `SeqCst` load costs what an
//! `Acquire` load does and the add is the same locked instruction either way,
//! and the argument in (2) is simplest under a single total order. The
//! commit is a `Release` store, because a `SeqCst` store is a locked
//! exchange on x86; the next claimant's `SeqCst` load of `done` acquires it.

use crate::backoff::Jitter;
use crate::sync::{AtomicUsize, Ordering};

/// A shared word that can only be added to (`updt`), loaded and stored,
/// like memory as seen from a Sunway CPE.
///
/// ```
/// use swco_wait::updt::UpdtCell;
/// use std::sync::atomic::Ordering;
///
/// let w = UpdtCell::new(5);
/// w.updt(1);
/// w.updt(-2);
/// assert_eq!(w.load(Ordering::SeqCst), 4);
/// w.store(0, Ordering::SeqCst);
/// assert_eq!(w.load(Ordering::SeqCst), 0);
/// ```
#[derive(Debug)]
pub struct UpdtCell(AtomicUsize);

impl UpdtCell {
    /// A word holding `value`.
    #[must_use]
    pub fn new(value: usize) -> Self {
        UpdtCell(AtomicUsize::new(value))
    }

    /// Atomically adds `n` (wrapping); like the CPE's `updt`, returns
    /// nothing.
    #[inline]
    pub fn updt(&self, n: isize) {
        self.0.fetch_add(n as usize, Ordering::SeqCst);
    }

    /// Loads the word.
    #[inline]
    #[must_use]
    pub fn load(&self, order: Ordering) -> usize {
        self.0.load(order)
    }

    /// Stores to the word.
    #[inline]
    pub fn store(&self, value: usize, order: Ordering) {
        self.0.store(value, order)
    }
}

/// Mutual exclusion from add-only words: the seed paper's Figure 6 claim,
/// corrected. See the module docs for the protocol and its invariants.
///
/// ```
/// use swco_wait::updt::UpdtClaim;
///
/// let c = UpdtClaim::new();
/// assert!(c.try_claim());
/// assert!(!c.try_claim()); // held
/// c.commit();
/// assert!(c.try_claim());
/// c.undo();
/// ```
#[derive(Debug)]
pub struct UpdtClaim {
    /// The paper's `write`: every claimant adds 1 here.
    claims: UpdtCell,
    /// The paper's `to_write`: the number of committed claims.
    done: UpdtCell,
}

impl Default for UpdtClaim {
    fn default() -> Self {
        Self::new()
    }
}

impl UpdtClaim {
    /// A claim that nobody holds.
    #[must_use]
    pub fn new() -> Self {
        UpdtClaim {
            claims: UpdtCell::new(0),
            done: UpdtCell::new(0),
        }
    }

    /// One attempt to win the claim; `true` if won. A loser leaves no trace.
    #[inline]
    #[must_use]
    pub fn try_claim(&self) -> bool {
        let t = self.claims.load(Ordering::SeqCst);
        if t != self.done.load(Ordering::SeqCst) {
            return false; // held by someone, or a collision is being undone
        }
        self.claims.updt(1);
        if self.claims.load(Ordering::SeqCst) == t.wrapping_add(1) {
            return true;
        }
        self.claims.updt(-1);
        false
    }

    /// Wins the claim, backing off with jitter between attempts (see
    /// `Jitter`: it spins a little, then also yields the thread, so that a
    /// holder preempted on this core gets it back).
    #[inline]
    pub fn claim(&self) {
        if self.try_claim() {
            return;
        }
        let mut jitter = Jitter::new();
        loop {
            jitter.wait();
            if self.try_claim() {
                return;
            }
        }
    }

    /// Releases a won claim, counting it as done.
    ///
    /// A plain store, not an add: only the holder writes `done`, so
    /// `done + 1` is the only value it can have next, and a claim then costs
    /// one read-modify-write (the add that wins it), not two.
    #[inline]
    pub fn commit(&self) {
        // Relaxed load: we hold the claim, and the claim's winning load of
        // `done` (SeqCst) already showed us the last value stored.
        let done = self.done.load(Ordering::Relaxed);
        // Release: the holder's writes (a cursor's next position) happen-
        // before whatever the next claimant or a waiter does after loading
        // this value.
        self.done.store(done.wrapping_add(1), Ordering::Release);
    }

    /// For a waiter about to re-check what holders of this claim guard:
    /// orders us against every claim, so that either the claim's holder
    /// sees what we did before (our registration), or we see what it did
    /// under the claim.
    ///
    /// We add 0 to `claims`, the word every claimant adds to. A claim whose
    /// add comes before ours in `claims`' order is seen through ours, but its
    /// holder may not have stored yet, so we wait until `done` catches up
    /// with `claims` (every claim counted in `claims` committed or undone;
    /// the `Acquire` load of `done` then sees the holders' stores). A claim
    /// whose add comes after ours reads our add, so its holder sees what we
    /// did before it. Commits are plain stores, so this wait is what keeps
    /// the fast path at one read-modify-write.
    #[inline]
    pub fn synchronize(&self) {
        self.claims.updt(0);
        let mut backoff = crate::backoff::Backoff::new();
        loop {
            // `claims` first: a claim counted in it has committed once `done`
            // (loaded after) is at least as large.
            let claims = self.claims.load(Ordering::SeqCst);
            let done = self.done.load(Ordering::SeqCst);
            if claims.wrapping_sub(done) as isize <= 0 {
                return;
            }
            // A holder is between its add and its release: a few loads and
            // stores, never a suspension.
            backoff.snooze();
        }
    }

    /// Releases a won claim as if it had never been made.
    #[inline]
    pub fn undo(&self) {
        self.claims.updt(-1);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::cell::UnsafeCell;
    use std::sync::Arc;

    struct Guarded {
        claim: UpdtClaim,
        counter: UnsafeCell<u64>,
    }
    // SAFETY: `counter` is only touched while `claim` is held.
    unsafe impl Sync for Guarded {}

    #[test]
    fn claim_excludes_under_contention() {
        const THREADS: u64 = 4;
        const ROUNDS: u64 = 20_000;
        let g = Arc::new(Guarded {
            claim: UpdtClaim::new(),
            counter: UnsafeCell::new(0),
        });
        let threads: Vec<_> = (0..THREADS)
            .map(|i| {
                let g = g.clone();
                std::thread::spawn(move || {
                    for r in 0..ROUNDS {
                        g.claim.claim();
                        // SAFETY: we hold the claim.
                        unsafe { *g.counter.get() += 1 };
                        // Release both ways, so both paths are exercised.
                        if (r + i) % 2 == 0 {
                            g.claim.commit();
                        } else {
                            g.claim.undo();
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        // SAFETY: every thread is joined.
        assert_eq!(unsafe { *g.counter.get() }, THREADS * ROUNDS);
        // Nobody holds the claim, so it can be won at once.
        assert!(g.claim.try_claim());
    }
}
