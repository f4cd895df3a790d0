//! The public statistics of a runtime: [`Stats`], one [`ExecutorStats`]
//! per executor, as [`Runtime::stats`](crate::Runtime::stats) snapshots them.
//!
//! # Invariants
//!
//! * Once every coroutine has finished, `wakes == blocks` on each executor:
//!   each suspension ends with exactly one wake.

/// Counters of one executor since the runtime started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecutorStats {
    /// Coroutines created on this executor.
    pub spawned: u64,
    /// Coroutines that finished here (returned, panicked or were cancelled).
    /// Counted once the coroutine's stack is back in the pool, which can be
    /// just after its `join` returned: read it after `Runtime::shutdown`
    /// for an exact total.
    pub finished: u64,
    /// Coroutine resumptions.
    pub context_switches: u64,
    /// Of those, resumptions by a direct hand-off: a coroutine that parked
    /// ran the one it had just woken on top of its own stack, instead of
    /// going back to the executor loop (see `docs/DESIGN.md`, Scheduling);
    /// and the parked one's own resumption when that one woke it back.
    pub hand_offs: u64,
    /// Times a coroutine suspended itself to wait (blocked).
    pub blocks: u64,
    /// Wakes that put a parked coroutine back on the run queue (including
    /// expired deadlines). Once every coroutine has finished,
    /// `wakes == blocks`: each suspension ends with exactly one wake.
    pub wakes: u64,
    /// Times the executor thread itself parked, having nothing to run.
    pub parks: u64,
    /// Coroutine stacks carved fresh from the executor's stack slabs (the
    /// others reused a finished coroutine's stack), which is the most
    /// coroutine stacks the executor has had in use at once.
    pub stacks_mapped: u64,
    /// Free stacks whose memory was given back to the OS
    /// (`MADV_DONTNEED`) because they sat unused for a whole trim period
    /// (250 ms); reusing one costs a few page faults.
    pub stacks_released: u64,
    /// The deepest any coroutine stack of this executor has been used, in
    /// bytes, at page granularity (a maximum, not a count). Measured with
    /// `mincore` (resident pages) when the memory of free stacks goes back
    /// to the OS, at every [`Runtime::dump`](crate::Runtime::dump) (the
    /// live coroutines' stacks), and when the executor exits (every stack
    /// it kept): exact for the whole run once
    /// [`Runtime::shutdown`](crate::Runtime::shutdown) has returned.
    pub stack_high_water: u64,
}

/// Per-executor counters of a runtime, indexed by executor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// One entry per executor.
    pub executors: Vec<ExecutorStats>,
}

impl Stats {
    /// The counters summed over all executors.
    #[must_use]
    pub fn total(&self) -> ExecutorStats {
        self.executors
            .iter()
            .fold(ExecutorStats::default(), |a, e| ExecutorStats {
                spawned: a.spawned + e.spawned,
                finished: a.finished + e.finished,
                context_switches: a.context_switches + e.context_switches,
                hand_offs: a.hand_offs + e.hand_offs,
                blocks: a.blocks + e.blocks,
                wakes: a.wakes + e.wakes,
                parks: a.parks + e.parks,
                stacks_mapped: a.stacks_mapped + e.stacks_mapped,
                stacks_released: a.stacks_released + e.stacks_released,
                stack_high_water: a.stack_high_water.max(e.stack_high_water),
            })
    }
}
