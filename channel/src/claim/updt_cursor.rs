//! Several endpoints claiming with add-only `updt` (the seed paper's CPE
//! protocol, Figure 6, corrected).
//!
//! Every shared word here is an [`UpdtCell`]: loads, stores and `updt(n)`,
//! nothing else.
//!
//! # Protocol
//!
//! To claim the side's next position, a claimant
//!
//! 1. wins the [`UpdtClaim`] (add 1 to `claims`, win if it rose by exactly
//!    that 1, otherwise subtract and back off with jitter);
//! 2. loads `pos` and checks the stamp of the slot at `pos` — the other
//!    side's progress — *after* winning;
//! 3. if the slot is not ready (the ring is full, for producers; empty, for
//!    consumers) it undoes the claim and reports so; otherwise it stores the
//!    next position into `pos` and commits the claim (a plain store: the add
//!    of step 1 is the only read-modify-write of an uncontended claim);
//! 4. only then copies the message in (or out) and stores the slot's stamp.
//!
//! # Invariants, and why each holds
//!
//! * **One claimant at a time reads and writes `pos`.** Only the holder of
//!   the claim touches it, and the claim is exclusive (see [`UpdtClaim`], in
//!   `channel/src/updt.rs`).
//! * **A position is claimed at most once.** The holder moves `pos` past the
//!   position before releasing, and the next holder's `Acquire` of the claim
//!   (its `SeqCst` load of `done`) sees that store.
//! * **The ring never overfills (or underflows).** The readiness check is
//!   made after the claim is won, against the slot's stamp, which the other
//!   side stores only after it is done with the slot; nobody else can move
//!   `pos` between the check and the store of the next position.
//!   (The paper checks `full` before claiming and never again.)
//! * **No slot is read before it is written.** A consumer claims a position
//!   only if the slot's stamp says "written at this position", and the
//!   producer stores that stamp (`Release`) after the data.
//! * **The claim is short.** It covers a few loads and stores, not the copy,
//!   and never a suspension, so spinning claimants wait only for that long.

use crossbeam_utils::CachePadded;

use super::Cursor;
use crate::ring::{Readiness, Ring, Turn};
use crate::sync::Ordering;
use crate::updt::{UpdtCell, UpdtClaim};

pub struct UpdtCursor {
    /// On a cache line of its own. Claimants that lost poll these two words
    /// while the holder works; with `pos` beside them, the holder's store of
    /// the next position would have to take the line back from the pollers
    /// first. Measured (`table1`, `updt` `spread`, n = 32, 2 cores), the
    /// padding halved the wall and on-CPU time per message.
    claim: CachePadded<UpdtClaim>,
    /// The side's next position; guarded by `claim`, loaded by anyone.
    pos: UpdtCell,
    endpoints: UpdtCell,
}

impl Cursor for UpdtCursor {
    fn new() -> Self {
        UpdtCursor {
            claim: CachePadded::new(UpdtClaim::new()),
            pos: UpdtCell::new(0),
            endpoints: UpdtCell::new(1),
        }
    }

    #[inline]
    fn position(&self) -> usize {
        self.pos.load(Ordering::Acquire)
    }

    // A claim begins with an add to the claim's `claims` word, and a waiter
    // adds 0 to the same word, then waits out any holder whose add came
    // first, before reading `pos` (`UpdtClaim::synchronize`). The two adds
    // are totally ordered: either the holder read the waiter's add (and sees
    // its registration when it looks at the waiter list after the claim), or
    // the waiter reads `pos` after the holder's commit. So no fence is
    // needed on the fast path (and no CAS either).
    const CLAIM_SYNCS_WITH_WAITERS: bool = true;

    #[inline]
    fn position_for_waiter(&self) -> usize {
        self.claim.synchronize();
        self.pos.load(Ordering::Acquire)
    }

    #[inline]
    fn claim_run<T>(
        &self,
        ring: &Ring<T>,
        turn: Turn,
        max: usize,
    ) -> Result<(usize, usize), usize> {
        self.claim.claim();
        // Relaxed: the claim's SeqCst operations order us after the previous
        // holder's store.
        let pos = self.pos.load(Ordering::Relaxed);
        if ring.readiness(turn, pos) == Readiness::Ready {
            // A batch looks further ahead, still under the one claim.
            let (n, end) = ring.ready_run(turn, pos, max);
            // Release: pairs with `position()` in the other side's checks.
            self.pos.store(end, Ordering::Release);
            self.claim.commit();
            Ok((pos, n))
        } else {
            self.claim.undo();
            Err(pos)
        }
    }

    #[inline]
    fn attach(&self) {
        self.endpoints.updt(1);
    }

    #[inline]
    fn detach(&self) -> bool {
        // Without a fetch-and-add we cannot learn whether *our* decrement
        // made the count zero, only whether it is zero now. Both of the last
        // two endpoints may see zero; that only disconnects twice, which is
        // harmless. Seeing zero while an endpoint lives is impossible: a
        // clone adds before it exists, and zero, once reached, stays.
        self.endpoints.updt(-1);
        self.endpoints.load(Ordering::SeqCst) == 0
    }
}
