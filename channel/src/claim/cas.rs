//! Several endpoints claiming by compare-and-swap (the seed paper's MPE
//! protocol, Figure 5, corrected).
//!
//! The paper checks `full` and then CASes `write` forward, never re-checking,
//! and publishes the position before the data is copied. Here the claimant
//! first reads the slot's stamp at the position it is about to claim: the
//! CAS can only win a position whose slot was free (or full, for consumers)
//! when looked at, and since nobody else can claim that position while it is
//! ours, the check still holds after the win. Publication is the stamp,
//! stored after the data (see `ring.rs`).

use super::cursor::Cursor;
use crate::backoff::Backoff;
use crate::ring::{Readiness, Ring, Turn};
use crate::sync::{AtomicUsize, Ordering};

pub struct CasCursor {
    pos: AtomicUsize,
    endpoints: AtomicUsize,
}

impl Cursor for CasCursor {
    fn new() -> Self {
        CasCursor {
            pos: AtomicUsize::new(0),
            endpoints: AtomicUsize::new(1),
        }
    }

    #[inline]
    fn position(&self) -> usize {
        self.pos.load(Ordering::Acquire)
    }

    // The claim is a CAS on `pos`, and a waiter re-reads `pos` with an RMW:
    // no fence on the fast path.
    const CLAIM_SYNCS_WITH_WAITERS: bool = true;

    #[inline]
    fn position_for_waiter(&self) -> usize {
        // AcqRel through SeqCst: if our RMW comes after a claim's CAS, we see
        // its position; if before, the CAS reads from us and the claimant
        // sees our registration.
        self.pos.fetch_add(0, Ordering::SeqCst)
    }

    #[inline(always)]
    fn claim_run<T>(
        &self,
        ring: &Ring<T>,
        turn: Turn,
        max: usize,
    ) -> Result<(usize, usize), usize> {
        let mut backoff = Backoff::new();
        // Relaxed: only a first guess; the stamp and the CAS decide.
        let mut pos = self.pos.load(Ordering::Relaxed);
        loop {
            match ring.readiness(turn, pos) {
                Readiness::Ready => {
                    // A batch counts the ready run first; the CAS then wins
                    // the whole run or none of it (`pos` unmoved means no
                    // position of the run was claimed by anyone else).
                    let (n, end) = ring.ready_run(turn, pos, max);
                    // SeqCst on success: the position is published to the
                    // other side's checks (which load it with Acquire); the
                    // slot's own ordering comes from its stamp.
                    match self.pos.compare_exchange_weak(
                        pos,
                        end,
                        Ordering::SeqCst,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return Ok((pos, n)),
                        Err(current) => {
                            pos = current;
                            backoff.spin();
                        }
                    }
                }
                Readiness::Behind => return Err(pos),
                Readiness::Stale => {
                    backoff.spin();
                    pos = self.pos.load(Ordering::Relaxed);
                }
            }
        }
    }

    #[inline]
    fn attach(&self) {
        // Relaxed: a clone is made from a live endpoint, so the count cannot
        // be reaching zero concurrently.
        self.endpoints.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    fn detach(&self) -> bool {
        // AcqRel: the last one out must see every other endpoint's work.
        self.endpoints.fetch_sub(1, Ordering::AcqRel) == 1
    }
}
