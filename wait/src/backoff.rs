//! Waiting a little before retrying: exponential backoff for CAS retries and
//! randomised, growing backoff (jitter) for add-only claims.
//!
//! Both go through `sync::spin_hint`/`sync::yield_thread`, so under loom a
//! retry loop yields to the model checker instead of spinning for ever.

#[cfg(not(loom))]
use std::cell::Cell;

#[cfg(not(loom))]
use crate::sync::thread_local;
use crate::sync::{spin_hint, yield_thread};

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Default for Jitter {
    fn default() -> Self {
        Self::new()
    }
}

/// Spins before this many steps; yields the thread after.
const SPIN_LIMIT: u32 = 6;
/// After this many steps a blocking operation stops snoozing and parks.
const YIELD_LIMIT: u32 = 10;

/// Exponential backoff, as in crossbeam-utils, but loom-aware.
pub struct Backoff {
    step: u32,
}

impl Backoff {
    /// A fresh backoff, at its first step.
    #[inline]
    #[must_use]
    pub fn new() -> Self {
        Backoff { step: 0 }
    }

    /// Backs off after a lost race (a failed CAS): the winner is making
    /// progress, so a short spin is enough.
    #[inline]
    pub fn spin(&mut self) {
        if cfg!(loom) {
            // Under loom each yield is a scheduling point the model checker
            // branches on, and one yield already lets every other thread run
            // first: more per retry only multiplies the interleavings.
            spin_hint();
            return;
        }
        for _ in 0..1u32 << self.step.min(SPIN_LIMIT) {
            spin_hint();
        }
        if self.step <= SPIN_LIMIT {
            self.step += 1;
        }
    }

    /// Backs off while waiting for another thread to finish something (a
    /// peer between claim and publish): spin first, then give the CPU away,
    /// since on a small machine the peer may need our core to finish.
    #[inline]
    pub fn snooze(&mut self) {
        if cfg!(loom) {
            // One yield per retry under loom, as in `spin`.
            yield_thread();
        } else if self.step <= SPIN_LIMIT {
            for _ in 0..1u32 << self.step {
                spin_hint();
            }
        } else {
            yield_thread();
        }
        if self.step <= YIELD_LIMIT {
            self.step += 1;
        }
    }

    /// Whether snoozing has gone on long enough that parking is cheaper.
    #[inline]
    #[must_use]
    pub fn is_completed(&self) -> bool {
        self.step > YIELD_LIMIT
    }

    /// Whether the spinning steps are done: the next snooze would yield
    /// the thread.
    #[inline]
    #[must_use]
    pub fn is_spun(&self) -> bool {
        self.step > SPIN_LIMIT
    }
}

#[cfg(not(loom))]
thread_local! {
    /// Per-thread xorshift state: threads that collided draw different delays.
    /// 0 until the thread's first draw seeds it (xorshift never returns to
    /// 0). Const-initialised, so a draw is a plain thread-local access with
    /// no lazy-initialisation check: a select draws once per call.
    static SEED: Cell<u32> = const { Cell::new(0) };
}

#[cfg(not(loom))]
fn seed() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_usize(&h as *const _ as usize);
    (h.finish() as u32) | 1
}

/// The next number of this thread's xorshift sequence (also the select's
/// random start).
#[cfg(not(loom))]
#[inline]
#[must_use]
pub fn next_random() -> u32 {
    SEED.with(|s| {
        let mut x = s.get();
        if x == 0 {
            x = seed();
        }
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        s.set(x);
        x
    })
}

/// Randomised, growing backoff for the add-only claim: two claimants that
/// collided (both added, both saw the other's add, both undid) must not retry
/// in lockstep, or they would collide again for ever. Each waits a random
/// number of spins drawn from a window that doubles with every lost attempt,
/// up to a cap, and from the `JITTER_YIELD_STEP`th on also yields the
/// thread.
///
/// The yield is for the case where the claim's holder was preempted: the
/// claim is exclusive, so while its holder waits for a core nobody else can
/// claim. Yielding after a few lost attempts rather than many hands the
/// core back to a preempted holder sooner, and a loser that never yields
/// spins on a core the holder may need. Sleeping instead of yielding once
/// the holder has not committed for a while (so that the holder surely
/// gets a core) is worse: every sleeper's wake-up can preempt another
/// holder, and the stalls feed on themselves.
pub struct Jitter {
    #[cfg_attr(loom, allow(dead_code))]
    step: u32,
}

/// The lost attempt from which a claimant yields the thread after its spin.
#[cfg(not(loom))]
const JITTER_YIELD_STEP: u32 = 3;

impl Jitter {
    /// A fresh jitter, at its smallest window.
    #[inline]
    #[must_use]
    pub fn new() -> Self {
        Jitter { step: 0 }
    }

    /// Waits a random number of spins from the current window, then widens
    /// it.
    #[inline]
    pub fn wait(&mut self) {
        #[cfg(loom)]
        {
            // Loom explores the interleavings itself; delays mean nothing.
            yield_thread();
        }
        #[cfg(not(loom))]
        {
            let window = 1u32 << self.step;
            for _ in 0..=(next_random() & (window - 1)) {
                spin_hint();
            }
            if self.step >= JITTER_YIELD_STEP {
                yield_thread();
            }
            self.step = (self.step + 1).min(SPIN_LIMIT + 2);
        }
    }
}
