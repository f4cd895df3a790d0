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
//!   `wait/src/updt.rs`).
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

use super::combine::{my_slot, Publication};
use super::cursor::Cursor;
use crate::ring::{Ring, Turn};
use crate::spaced::Spaced;
use crate::sync::Ordering;
use crate::updt::{UpdtCell, UpdtClaim};

// `repr(C)`: `claim`'s gap then keeps `pos` off the claim's lines.
#[repr(C)]
pub struct UpdtCursor {
    /// On a cache line of its own. Claimants that lost poll these two words
    /// while the holder works; with `pos` beside them, the holder's store of
    /// the next position would have to take the line back from the pollers
    /// first, on every claim.
    claim: Spaced<UpdtClaim>,
    /// The side's next position; guarded by `claim`, loaded by anyone.
    pos: UpdtCell,
    endpoints: UpdtCell,
    /// A `*const Publication` (see `combine.rs`), or 0 until the claim is
    /// first contended: stored once, under the claim, and freed on drop.
    /// An allocation, like the channel's own, is the host's business.
    publication: UpdtCell,
}

impl UpdtCursor {
    /// The cursor's records for combining, once allocated.
    #[inline]
    fn publication(&self) -> Option<&Publication> {
        // Acquire: pairs with the Release store in `publish_records`, so the
        // records are initialised when we see the pointer.
        let p = self.publication.load(Ordering::Acquire);
        // SAFETY: a non-zero value is a `Box<Publication>` leaked by
        // `publish_records` and freed only in `drop`, which has `&mut self`.
        (p != 0).then(|| unsafe { &*(p as *const Publication) })
    }

    /// Allocates the records for combining if nobody has yet. The caller
    /// holds the claim, so no two threads allocate.
    #[cold]
    fn publish_records(&self) {
        if self.publication.load(Ordering::Relaxed) == 0 {
            let p = Box::into_raw(Box::new(Publication::new()));
            // Release: pairs with the Acquire load in `publication`.
            self.publication.store(p as usize, Ordering::Release);
        }
    }

    /// `claim_run` once a first try has lost: wait to be served (see
    /// `combine.rs`) rather than fight for the claim. Out of line, so the
    /// uncontended path stays small.
    #[cold]
    #[inline(never)]
    fn claim_run_contended<T>(
        &self,
        ring: &Ring<T>,
        turn: Turn,
        max: usize,
    ) -> Result<(usize, usize), usize> {
        if let (Some(publication), Some(slot)) = (self.publication(), my_slot()) {
            return publication.request(slot, &self.claim, &self.pos, ring, turn, max);
        }
        // The first contention (the records are allocated under the claim),
        // or a thread without a slot.
        self.claim.claim();
        self.publish_records();
        self.take_run(ring, turn, max)
    }

    /// The run of ready positions from `pos`, with the claim held; releases
    /// the claim.
    #[inline]
    fn take_run<T>(&self, ring: &Ring<T>, turn: Turn, max: usize) -> Result<(usize, usize), usize> {
        // Relaxed: the claim's SeqCst operations order us after the previous
        // holder's store.
        let pos = self.pos.load(Ordering::Relaxed);
        // A batch looks further ahead, still under the one claim.
        if let Some((n, end)) = ring.run_from(turn, pos, max) {
            // Release: pairs with `position()` in the other side's checks.
            self.pos.store(end, Ordering::Release);
            self.claim.commit();
            Ok((pos, n))
        } else {
            self.claim.undo();
            Err(pos)
        }
    }
}

impl Drop for UpdtCursor {
    fn drop(&mut self) {
        let p = self.publication.load(Ordering::Relaxed);
        if p != 0 {
            // SAFETY: `p` came from `Box::into_raw` in `publish_records`,
            // and with `&mut self` nobody else can be using it.
            drop(unsafe { Box::from_raw(p as *mut Publication) });
        }
    }
}

impl Cursor for UpdtCursor {
    fn new() -> Self {
        let cursor = UpdtCursor {
            claim: Spaced::new(UpdtClaim::new()),
            pos: UpdtCell::new(0),
            endpoints: UpdtCell::new(1),
            publication: UpdtCell::new(0),
        };
        // Under loom, from the start: a model is too short to contend twice.
        if cfg!(loom) {
            cursor.publish_records();
        }
        cursor
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
        if self.claim.try_claim() {
            return self.take_run(ring, turn, max);
        }
        self.claim_run_contended(ring, turn, max)
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
