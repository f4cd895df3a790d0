//! The randomness of a select: which ready operation it takes, and in which
//! order it queues its rendezvous packets. A xorshift per thread, seeded
//! once; a [`Select`](crate::Select) keeps its own.

/// A random index below `n` (0 when `n` is 0), from the thread's xorshift.
#[inline]
pub(super) fn random_below(n: usize) -> usize {
    #[cfg(loom)]
    {
        // Loom needs every execution of a model to be deterministic.
        let _ = n;
        0
    }
    #[cfg(not(loom))]
    {
        if n <= 1 {
            0
        } else {
            // Multiply-shift: maps a 32-bit random number onto 0..n.
            ((u64::from(crate::backoff::next_random()) * n as u64) >> 32) as usize
        }
    }
}

/// A random `u32` from the thread's xorshift (0 under loom, which needs
/// every execution of a model to be deterministic).
#[inline]
pub(super) fn random_u32() -> u32 {
    #[cfg(loom)]
    {
        0
    }
    #[cfg(not(loom))]
    {
        crate::backoff::next_random()
    }
}

/// One of the set bits of `ready` (not 0), chosen uniformly by `random`:
/// the index of the `k`th lowest, `k` being `random` scaled onto the number
/// of bits set (multiply-shift, as in [`random_below`]). This is what makes
/// a select fair: every ready operation is equally likely wherever it sits.
/// Picking the first ready operation at or after a random start is not: an
/// operation after a run of never-ready ones is picked for every start in
/// that run (Go's `TestSelectFairness` shape, two idle arms and then two
/// ready ones, picks the first ready one for three starts of four).
///
/// The loop runs `k` times, and `k` is below the number of ready
/// operations: nothing when one is ready, at most once for two.
#[inline]
pub(super) fn nth_ready(ready: u64, random: u32) -> usize {
    debug_assert!(ready != 0);
    let count = u64::from(ready.count_ones());
    let k = (u64::from(random) * count) >> 32;
    let mut rest = ready;
    for _ in 0..k {
        // Clear the lowest set bit.
        rest &= rest - 1;
    }
    rest.trailing_zeros() as usize
}

/// Shuffles `order` uniformly (Fisher-Yates) with the thread's xorshift.
pub(super) fn shuffle(order: &mut [usize]) {
    for i in (1..order.len()).rev() {
        order.swap(i, random_below(i + 1));
    }
}

/// A seed for a [`Select`](crate::Select)'s own sequence (a constant under loom, which
/// needs every execution of a model to be deterministic).
pub(super) fn seed() -> u32 {
    #[cfg(loom)]
    {
        1
    }
    #[cfg(not(loom))]
    {
        crate::backoff::next_random()
    }
}
