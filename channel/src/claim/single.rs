//! A side with one endpoint: no other claimant can race us, so the position
//! is a plain word we load and store, and a claim is a stamp check.

use super::cursor::Cursor;
use crate::ring::{Readiness, Ring, Turn};
use crate::sync::Ordering;
use crate::updt::UpdtCell;

pub struct Single {
    /// Only the one endpoint stores it; others load it for `len`.
    pos: UpdtCell,
}

impl Cursor for Single {
    fn new() -> Self {
        Single {
            pos: UpdtCell::new(0),
        }
    }

    #[inline]
    fn position(&self) -> usize {
        self.pos.load(Ordering::Acquire)
    }

    // A lone side makes progress with a plain store (no read-modify-write
    // at all), so it pays a fence before looking for waiters.
    const CLAIM_SYNCS_WITH_WAITERS: bool = false;

    #[inline]
    fn position_for_waiter(&self) -> usize {
        self.position()
    }

    #[inline]
    fn claim_run<T>(
        &self,
        ring: &Ring<T>,
        turn: Turn,
        max: usize,
    ) -> Result<(usize, usize), usize> {
        // Relaxed: we are the only writer, and moving the endpoint to another
        // thread already synchronised.
        let pos = self.pos.load(Ordering::Relaxed);
        match ring.readiness(turn, pos) {
            Readiness::Ready => {
                let (n, end) = ring.ready_run(turn, pos, max);
                // Release: pairs with `position()` in the other side's checks.
                self.pos.store(end, Ordering::Release);
                Ok((pos, n))
            }
            readiness => {
                debug_assert_eq!(readiness, Readiness::Behind, "a lone cursor is never stale");
                Err(pos)
            }
        }
    }

    fn attach(&self) {
        unreachable!("a single-endpoint side is never cloned");
    }

    #[inline]
    fn detach(&self) -> bool {
        true
    }
}
