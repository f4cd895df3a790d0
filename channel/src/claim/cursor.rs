//! The [`Cursor`] trait every side's claim implements (in a file of its
//! own, so that the implementations and the folder's re-exports do not
//! import each other).

use crate::ring::{Ring, Turn};

/// One side's claim on the ring.
pub trait Cursor: Send + Sync + 'static {
    fn new() -> Self;

    /// The side's next position. Loaded with `Acquire`, for `len` and for the
    /// other side's full/empty checks.
    fn position(&self) -> usize;

    /// Whether a won claim is a read-modify-write on a word that
    /// [`position_for_waiter`](Cursor::position_for_waiter) also
    /// read-modify-writes. Then, of a claimant that goes on to look for
    /// waiters and a waiter that re-checks, one always sees the other: the
    /// two RMWs are totally ordered, and the later one reads from (and
    /// synchronises with) the earlier (an `Updt` waiter whose add comes
    /// second also waits for the holder's commit). If not, the claimant must issue
    /// `fence(SeqCst)` between its claim and its look at the waiter list.
    const CLAIM_SYNCS_WITH_WAITERS: bool;

    /// The side's position, read by a waiter of the *other* side for its
    /// re-check, after registering and after its own `fence(SeqCst)`.
    fn position_for_waiter(&self) -> usize;

    /// Claims the side's next position if its slot is ready for `turn`.
    ///
    /// `Ok(pos)`: `pos` is ours alone; the caller must copy and publish it
    /// (`Ring::write`/`Ring::read`) without suspending in between.
    /// `Err(pos)`: the slot at `pos` is still the other side's (the ring is
    /// full or empty, or the peer is between its claim and its publish).
    #[inline]
    fn claim<T>(&self, ring: &Ring<T>, turn: Turn) -> Result<usize, usize> {
        self.claim_run(ring, turn, 1).map(|(pos, _)| pos)
    }

    /// Claims a run of up to `max` (at least 1) consecutive positions, from
    /// the side's next one, whose slots are all ready for `turn`: one claim
    /// for the lot, which is what makes batches cheap.
    ///
    /// `Ok((pos, n))`: the `n` positions from `pos` on (`1 <= n <= max`) are
    /// ours alone, to copy and publish in order without suspending in
    /// between. `Err(pos)`: as for [`claim`](Cursor::claim).
    fn claim_run<T>(&self, ring: &Ring<T>, turn: Turn, max: usize)
        -> Result<(usize, usize), usize>;

    /// Another endpoint of this side exists (a clone).
    fn attach(&self);

    /// An endpoint of this side is gone. Returns `true` if it may have been
    /// the last; disconnecting twice is harmless, so a false `true` is
    /// allowed, a false `false` is not.
    fn detach(&self) -> bool;
}
