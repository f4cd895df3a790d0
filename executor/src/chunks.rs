//! The chunk claim of `parallel_for` and `parallel_reduce`: swYAKL's
//! dynamic schedule, a shared task counter that every worker bumps with a
//! fetch-and-add to take the next chunk of `grain` indices.
//!
//! # Invariants
//!
//! * Every index of the range is handed out exactly once, unless the
//!   counter is stopped: the chunk number a claim gets is the value its
//!   fetch-and-add returned, and a fetch-and-add returns each value to one
//!   caller only. An add that returns nothing (the Sunway CPE's `updt`)
//!   could not do this: two workers that add and then read the counter may
//!   both read the same sum and take the same chunk, and a load-then-store
//!   loses one of two concurrent bumps. So swYAKL (and this) use `faa`.
//! * The counter counts chunks, not indices, so it cannot overflow: it
//!   grows by one per claim, and every worker stops at its first claim past
//!   the end; an index counter bumped by `grain` could wrap near
//!   `usize::MAX` and hand a chunk out twice.
//! * Once [`ChunkCounter::stop`] has returned, every later claim on any
//!   thread that sees the flag returns `None`; a claim already past its
//!   check may still return one chunk (the flag only stops the handing out,
//!   it does not recall what is handed out).
//!
//! It uses only the crate's `sync` shim and compiles under `--cfg loom`;
//! its loom models are in `loom_tests/chunks.rs`.

use std::ops::Range;

use crate::sync::{AtomicBool, AtomicUsize, Ordering};

/// A shared claim on the chunks of one range.
#[derive(Debug)]
pub(crate) struct ChunkCounter {
    /// The next chunk number to hand out.
    next: AtomicUsize,
    start: usize,
    end: usize,
    grain: usize,
    chunks: usize,
    stop: AtomicBool,
}

impl ChunkCounter {
    /// A counter over `range` in chunks of `grain` indices (`grain` 0 is
    /// taken as 1). A reversed or empty range has no chunk.
    #[must_use]
    pub(crate) fn new(range: Range<usize>, grain: usize) -> Self {
        let grain = grain.max(1);
        let len = range.end.saturating_sub(range.start);
        ChunkCounter {
            next: AtomicUsize::new(0),
            start: range.start,
            end: range.start + len,
            grain,
            chunks: len / grain + usize::from(len % grain != 0),
            stop: AtomicBool::new(false),
        }
    }

    /// The next chunk not handed out yet; `None` once the range is used up
    /// or the counter is stopped.
    pub(crate) fn claim(&self) -> Option<Range<usize>> {
        // Relaxed: the flag is a hint to stop early; whatever a worker
        // reads by it, no other memory depends on it.
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        // Relaxed: uniqueness comes from the read-modify-write itself; the
        // chunks' data is published by the workers' own finish (the
        // scope's countdown), not through this counter.
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        if k >= self.chunks {
            return None;
        }
        let lo = self.start + k * self.grain;
        Some(lo..self.end.min(lo.saturating_add(self.grain)))
    }

    /// Stops the handing out of chunks (a worker's closure panicked).
    pub(crate) fn stop(&self) {
        // Relaxed: see `claim`.
        self.stop.store(true, Ordering::Relaxed);
    }

    /// The number of chunks the range was cut into.
    #[must_use]
    pub(crate) fn chunks(&self) -> usize {
        self.chunks
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::ChunkCounter;

    fn drain(c: &ChunkCounter) -> Vec<std::ops::Range<usize>> {
        std::iter::from_fn(|| c.claim()).collect()
    }

    #[test]
    fn chunks_cover_the_range_in_order_with_a_short_last_one() {
        let c = ChunkCounter::new(3..13, 4);
        assert_eq!(c.chunks(), 3);
        assert_eq!(drain(&c), [3..7, 7..11, 11..13]);
        assert_eq!(c.claim(), None);
    }

    #[test]
    #[allow(clippy::reversed_empty_ranges)]
    fn reversed_and_empty_ranges_have_no_chunk() {
        assert_eq!(drain(&ChunkCounter::new(9..2, 1)), []);
        assert_eq!(drain(&ChunkCounter::new(5..5, 3)), []);
    }

    #[test]
    fn a_range_at_the_top_of_usize_does_not_wrap() {
        let top = usize::MAX - 5..usize::MAX;
        let c = ChunkCounter::new(top.clone(), usize::MAX);
        assert_eq!(drain(&c), [top]);
        for _ in 0..10 {
            assert_eq!(c.claim(), None);
        }
        // Grain 0 is taken as 1.
        assert_eq!(drain(&ChunkCounter::new(0..2, 0)), [0..1, 1..2]);
    }

    #[test]
    fn stop_ends_the_claims() {
        let c = ChunkCounter::new(0..100, 10);
        assert_eq!(c.claim(), Some(0..10));
        c.stop();
        assert_eq!(c.claim(), None);
    }
}
