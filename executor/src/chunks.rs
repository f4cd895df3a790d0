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
//! It uses only the crate's `sync` shim and compiles under `--cfg loom`
//! (`loom-tests/tests/chunks.rs`).

use std::ops::Range;

use crate::sync::{AtomicBool, AtomicUsize, Ordering};

/// A shared claim on the chunks of one range.
#[derive(Debug)]
pub struct ChunkCounter {
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
    pub fn new(range: Range<usize>, grain: usize) -> Self {
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
    pub fn claim(&self) -> Option<Range<usize>> {
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
        Some(lo..self.end.min(lo + self.grain))
    }

    /// Stops the handing out of chunks (a worker's closure panicked).
    pub fn stop(&self) {
        // Relaxed: see `claim`.
        self.stop.store(true, Ordering::Relaxed);
    }

    /// The number of chunks the range was cut into.
    #[must_use]
    pub fn chunks(&self) -> usize {
        self.chunks
    }
}
