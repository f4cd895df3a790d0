//! Stack slabs: an executor's coroutine stacks, carved out of large
//! mappings.
//!
//! # Sizes
//!
//! A stack occupies a *stride* of one guard page plus its usable size. An
//! executor's first slab holds [`FIRST_SLAB_STACKS`] stacks, and each further
//! slab twice as many as the one before, up to [`MAX_SLAB_BYTES`] (but at
//! least one stack): with 64 KiB stacks, slabs of 16, 32, ... 256, then 481
//! stacks (about 32 MiB) each, so 40 000 stacks take ~90 slabs (and fewer
//! kernel mappings with guard regions: the kernel merges adjacent slabs,
//! which have the same flags, into one mapping). A runtime
//! that spawns little maps little; one that spawns much maps few, large
//! slabs. Slabs are `MAP_NORESERVE` (memory is committed page by page as
//! stacks touch it) and opted out of transparent huge pages, which would
//! commit 2 MiB at a time for stacks that mostly use a few KiB.
//!
//! A spawn may ask for a larger stack than the runtime's
//! ([`StackPool::take_at_least`]): that one gets a mapping of its own,
//! unmapped when its coroutine finishes (an `mmap` and a `munmap` per such
//! spawn, none for the others). A smaller request is served by the pool.
//!
//! # Free list and give-back policy
//!
//! * A finished coroutine's stack goes on its executor's free list, which is
//!   LIFO: the next spawn reuses the most recently used stack, whose pages
//!   are resident and likely cached. Nothing is unmapped while the executor
//!   runs.
//! * The free list remembers which of its stacks (the coldest, at its
//!   bottom) have had their memory given back, and the fewest free stacks
//!   holding memory it has had since the last give-back (a low-water mark:
//!   that many at its bottom have not been used since). Every
//!   [`TRIM_PERIOD`] (the executor calls [`StackPool::trim`], and an idle
//!   executor holding such stacks wakes up for it), the stacks that stayed
//!   unused for the whole period are `MADV_DONTNEED`ed in one batch,
//!   leaving the [`KEEP_HOT`] hottest. So a workload that keeps cycling
//!   through many coroutines reuses resident stacks as Go reuses goroutine
//!   stacks between collections, never paying a `madvise` and zeroed page
//!   faults per coroutine; and a burst's memory goes back to the OS within
//!   two periods of the burst's end, busy or idle. A released stack costs a
//!   few microseconds of page faults when reused, against the tens that an
//!   `mmap` + `mprotect` + `munmap` per stack cost.
//! * Stacks adjacent in memory are released with one call (the guard pages
//!   between them are included: `MADV_DONTNEED` keeps both `mprotect` guards
//!   and `MADV_GUARD_INSTALL` guard regions in place). A released stack is
//!   reused like any other; its pages come back zeroed on first touch.
//! * Slabs are unmapped whole when the pool is dropped (the executor thread
//!   exiting, at shutdown). Each [`SlabStack`] also holds a reference to its
//!   slab, so a stack that outlives the pool (a leaked coroutine) keeps its
//!   slab mapped rather than dangling.
//!
//! # Guards
//!
//! A stack's guard page is installed when the stack is first carved (never
//! again: it survives reuse and release), with the runtime's
//! [`GuardPages`](super::mapping::GuardPages) path.

use std::io;
use std::num::NonZeroUsize;
use std::rc::Rc;

use corosensei::stack::{Stack, StackPointer};

use super::mapping::{Mapping, StackConfig};
use super::size::{high_water, page_size};

/// Stacks in an executor's first slab; each later slab doubles this, up to
/// [`MAX_SLAB_BYTES`].
const FIRST_SLAB_STACKS: usize = 16;

/// The largest slab, in bytes (unless a single stack is larger).
const MAX_SLAB_BYTES: usize = 32 << 20;

/// How often an executor gives back the memory of free stacks that stayed
/// unused for a whole period.
pub(crate) const TRIM_PERIOD: std::time::Duration = std::time::Duration::from_millis(250);

/// Free stacks left holding memory by a give-back (the hottest ones).
const KEEP_HOT: usize = 128;

/// One coroutine stack, carved from a slab: a guard page at `limit`, then
/// usable memory up to `base`.
///
/// # Invariants
///
/// `limit..base` lies inside `slab`; its first page is a guard installed
/// with the pool's [`GuardPages`](super::mapping::GuardPages) path, and the rest (at least
/// `MIN_STACK_SIZE` bytes) is read-write memory no other `SlabStack` covers.
pub(crate) struct SlabStack {
    base: StackPointer,
    limit: StackPointer,
    /// Keeps the slab mapped while the stack exists.
    _slab: Rc<Mapping>,
}

// SAFETY: `limit..base` is exclusively this stack's, with a guard page at
// its bottom and at least `MIN_STACK_SIZE` (16 KiB, more than corosensei's
// 4 KiB minimum) usable bytes above it (type invariants). Both addresses are
// page-aligned, hence aligned to `STACK_ALIGNMENT`. The memory stays mapped
// while this value lives: it holds an `Rc` to its slab.
unsafe impl Stack for SlabStack {
    #[inline]
    fn base(&self) -> StackPointer {
        self.base
    }

    #[inline]
    fn limit(&self) -> StackPointer {
        self.limit
    }
}

impl SlabStack {
    /// The usable part, `limit + page .. base`.
    fn usable(&self, page: usize) -> (usize, usize) {
        (self.limit.get() + page, self.base.get())
    }
}

/// The lowest address of a stack's guard page.
pub(crate) fn guard_low(stack: &SlabStack) -> usize {
    stack.limit().get()
}

/// An executor's stacks: the slab being carved, and the free list.
///
/// # Invariants
///
/// * Every stack in `free` belongs to no coroutine; `free[..released]` have
///   had their memory given back since they were last used.
/// * `free[released..released + unused]` have not been taken since the last
///   [`trim`](StackPool::trim) (the free list is LIFO: its bottom is the
///   part nobody reached).
/// * `current`, if any, is the slab being carved: `next..current.len` is not
///   yet part of any stack.
pub(crate) struct StackPool {
    config: StackConfig,
    page: usize,
    /// Guard page plus usable size: one stack's share of a slab.
    stride: usize,
    free: Vec<SlabStack>,
    released: usize,
    /// The deepest use measured of any stack whose memory was given back
    /// (`release`), or found at [`measure_free`](Self::measure_free).
    high_water: usize,
    /// Low-water mark of the free stacks holding memory since the last trim.
    unused: usize,
    current: Option<Rc<Mapping>>,
    next: usize,
    /// Stacks carved so far (live and free).
    carved: usize,
    /// Slabs mapped so far (for the growth schedule).
    slabs: u32,
}

impl StackPool {
    pub(crate) fn new(config: StackConfig) -> Self {
        let page = page_size();
        StackPool {
            config,
            page,
            stride: config.size() + page,
            free: Vec::new(),
            released: 0,
            high_water: 0,
            unused: 0,
            current: None,
            next: 0,
            carved: 0,
            slabs: 0,
        }
    }

    /// The usable size of the stacks handed out.
    pub(crate) fn stack_size(&self) -> usize {
        self.config.size()
    }

    /// A stack for a new coroutine: the most recently freed one if any, else
    /// a fresh one carved from a slab (then `true`).
    ///
    /// # Errors
    ///
    /// No free stack, and no new slab or guard page could be mapped, or the
    /// executor's stack limit is reached.
    pub(crate) fn take(&mut self) -> io::Result<(SlabStack, bool)> {
        match self.free.pop() {
            Some(s) => {
                self.released = self.released.min(self.free.len());
                self.unused = self.unused.min(self.free.len() - self.released);
                Ok((s, false))
            }
            None => self.carve().map(|s| (s, true)),
        }
    }

    /// A stack of at least `size` usable bytes for a spawn that asked for
    /// one (`None`: the pool's size). Sizes up to the pool's come from the
    /// pool, as [`take`](Self::take); a larger one is *dedicated*: its own
    /// mapping, guarded like the others, and unmapped when given back
    /// (then `true`, as for a fresh stack). Dedicated stacks do not count
    /// towards the executor's stack limit.
    ///
    /// # Errors
    ///
    /// As [`take`](Self::take), or the dedicated stack could not be mapped
    /// or guarded.
    pub(crate) fn take_at_least(&mut self, size: Option<usize>) -> io::Result<(SlabStack, bool)> {
        match size {
            Some(size) if size > self.config.size() => self.dedicated(size).map(|s| (s, true)),
            _ => self.take(),
        }
    }

    /// A stack of `size` usable bytes (rounded up to whole pages) in a
    /// mapping of its own.
    fn dedicated(&mut self, size: usize) -> io::Result<SlabStack> {
        let invalid = || io::Error::from(io::ErrorKind::InvalidInput);
        let len = size
            .checked_next_multiple_of(self.page)
            .and_then(|usable| usable.checked_add(self.page))
            .ok_or_else(invalid)?;
        let mapping = Rc::new(Mapping::new(len)?);
        // SAFETY: the mapping was just made and nothing uses it yet.
        unsafe { mapping.install_guard(0, self.page, self.config.guard_pages()) }?;
        Ok(SlabStack {
            limit: NonZeroUsize::new(mapping.addr()).expect("a mapping is never at address 0"),
            base: NonZeroUsize::new(mapping.addr() + len).expect("inside a mapping"),
            _slab: mapping,
        })
    }

    /// Returns the stack of a finished coroutine: to the free list, or, for
    /// a dedicated stack (not the pool's size), back to the OS.
    pub(crate) fn give_back(&mut self, stack: SlabStack) {
        if stack.base.get() - stack.limit.get() != self.stride {
            // Dropping its only reference unmaps its mapping.
            return drop(stack);
        }
        self.free.push(stack);
    }

    /// Gives back the memory of the free stacks that nobody took since the
    /// last trim, leaving the [`KEEP_HOT`] hottest holding memory; returns
    /// how many were released. Meant to be called every [`TRIM_PERIOD`].
    pub(crate) fn trim(&mut self) -> usize {
        let resident = self.free.len() - self.released;
        let cold = self.unused.min(resident.saturating_sub(KEEP_HOT));
        if cold > 0 {
            self.release(self.released..self.released + cold);
            self.released += cold;
        }
        self.unused = self.free.len() - self.released;
        cold
    }

    /// Whether some free stacks hold memory a later [`trim`](Self::trim)
    /// could give back: an idle executor should not sleep past the next one.
    pub(crate) fn holds_spare_memory(&self) -> bool {
        self.free.len() - self.released > KEEP_HOT
    }

    /// Carves a new stack, mapping a new slab if the current one is full.
    fn carve(&mut self) -> io::Result<SlabStack> {
        if self.carved >= self.config.max_stacks() {
            return Err(io::Error::other(format!(
                "the executor's limit of {} stacks (RuntimeBuilder::max_stacks) is reached",
                self.config.max_stacks()
            )));
        }
        let slab = match &self.current {
            Some(slab) if self.next + self.stride <= slab.len() => slab.clone(),
            _ => self.map_slab()?,
        };
        // SAFETY: `next..` of the current slab is not part of any stack yet
        // (type invariant), so nothing uses its first page.
        unsafe { slab.install_guard(self.next, self.page, self.config.guard_pages()) }?;
        let limit = slab.addr() + self.next;
        let stack = SlabStack {
            limit: NonZeroUsize::new(limit).expect("a mapping is never at address 0"),
            base: NonZeroUsize::new(limit + self.stride).expect("inside a mapping"),
            _slab: slab,
        };
        self.next += self.stride;
        self.carved += 1;
        Ok(stack)
    }

    /// Maps the next slab and makes it current.
    fn map_slab(&mut self) -> io::Result<Rc<Mapping>> {
        let per_slab = (MAX_SLAB_BYTES / self.stride).max(1);
        let grown = FIRST_SLAB_STACKS.saturating_mul(1 << self.slabs.min(20));
        let room = self.config.max_stacks() - self.carved;
        let stacks = grown.min(per_slab).min(room).max(1);
        let mapping = match Mapping::new(stacks * self.stride) {
            Ok(m) => m,
            // Short of address space or commit: try for just one stack.
            Err(_) if stacks > 1 => Mapping::new(self.stride)?,
            Err(e) => return Err(e),
        };
        let slab = Rc::new(mapping);
        self.current = Some(slab.clone());
        self.next = 0;
        self.slabs = self.slabs.saturating_add(1);
        Ok(slab)
    }

    /// The deepest use of a stack measured so far: of every stack whose
    /// memory went back to the OS (measured just before), and of the free
    /// stacks at the last [`measure_free`](Self::measure_free).
    pub(crate) fn high_water(&self) -> usize {
        self.high_water
    }

    /// Measures the free stacks that still hold memory (at executor exit:
    /// the stacks of every coroutine that ran here, or of the last to use
    /// each); returns [`high_water`](Self::high_water).
    pub(crate) fn measure_free(&mut self) -> usize {
        let mut buf = Vec::new();
        for stack in &self.free[self.released..] {
            let (low, top) = stack.usable(self.page);
            self.high_water = self.high_water.max(high_water(low, top, &mut buf));
        }
        self.high_water
    }

    /// Gives back the memory of the free stacks `free[cold]`, measuring
    /// how deep they were used first.
    fn release(&mut self, cold: std::ops::Range<usize>) {
        let mut ranges: Vec<(usize, usize)> = self.free[cold]
            .iter()
            .map(|s| s.usable(self.page))
            .collect();
        let mut buf = Vec::new();
        for &(low, top) in &ranges {
            self.high_water = self.high_water.max(high_water(low, top, &mut buf));
        }
        ranges.sort_unstable();
        // Merge stacks adjacent in memory (only a guard page apart); the
        // guard pages in between survive MADV_DONTNEED.
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
        for (start, end) in ranges {
            match merged.last_mut() {
                Some(last) if last.1 + self.page == start => last.1 = end,
                _ => merged.push((start, end)),
            }
        }
        for (start, end) in merged {
            // The result is ignored: on failure (e.g. the process locked its
            // memory with mlockall) the memory just stays resident.
            // SAFETY: the range covers free stacks (no coroutine uses them)
            // and the guard pages between them, all inside our slabs (stacks
            // adjacent in memory are in the same slab or in slabs adjacent
            // in memory, both ours). MADV_DONTNEED only drops the pages'
            // contents (free stacks hold none we need) and keeps guards.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::mapping::GuardPages;
    use crate::stack::size::MIN_STACK_SIZE;

    fn pool(guard: GuardPages, max_stacks: usize) -> StackPool {
        StackPool::new(StackConfig::new(MIN_STACK_SIZE, guard, max_stacks).unwrap())
    }

    /// The paths this kernel supports.
    fn paths() -> Vec<GuardPages> {
        let mut paths = vec![GuardPages::Mprotect];
        if crate::stack::mapping::guard_regions_supported() {
            paths.push(GuardPages::GuardRegion);
        }
        paths
    }

    /// Touches every usable page of `stack`.
    fn dirty(stack: &SlabStack, page: usize) {
        let (start, end) = stack.usable(page);
        for addr in (start..end).step_by(page) {
            // SAFETY: the usable part of a stack no coroutine runs on is
            // read-write memory of ours.
            unsafe { (addr as *mut u8).write_volatile(1) };
        }
    }

    /// How many of `stack`'s usable pages are resident.
    fn resident(stack: &SlabStack, page: usize) -> usize {
        let (start, end) = stack.usable(page);
        let mut vec = vec![0u8; (end - start) / page];
        // SAFETY: the range is mapped (ours) and `vec` has one byte per page.
        let r = unsafe { libc::mincore(start as *mut _, end - start, vec.as_mut_ptr()) };
        assert_eq!(r, 0);
        vec.iter().filter(|&&b| b & 1 != 0).count()
    }

    #[test]
    fn stacks_are_carved_back_to_back_and_reused_lifo() {
        for guard in paths() {
            let mut pool = pool(guard, usize::MAX);
            let page = pool.page;
            let (a, fresh_a) = pool.take().unwrap();
            let (b, fresh_b) = pool.take().unwrap();
            assert!(fresh_a && fresh_b);
            assert_eq!(b.limit().get(), a.base().get(), "{guard:?}");
            assert_eq!(a.base().get() - a.limit().get(), MIN_STACK_SIZE + page);
            assert_eq!(guard_low(&a), a.limit().get());
            let b_base = b.base();
            pool.give_back(a);
            pool.give_back(b);
            let (again, fresh) = pool.take().unwrap();
            assert!(!fresh);
            assert_eq!(again.base(), b_base, "the hottest stack comes back first");
        }
    }

    #[test]
    fn larger_stacks_are_dedicated_and_not_kept() {
        for guard in paths() {
            let mut pool = pool(guard, 1);
            let page = pool.page;
            let (small, _) = pool.take_at_least(Some(1)).unwrap();
            assert_eq!(small.base().get() - small.limit().get(), pool.stride);
            // Over the pool's size, and over its limit of one stack.
            let want = 4 * MIN_STACK_SIZE + 1;
            let (big, fresh) = pool.take_at_least(Some(want)).unwrap();
            assert!(fresh, "{guard:?}");
            let usable = big.base().get() - big.limit().get() - page;
            assert_eq!(usable, want.next_multiple_of(page), "{guard:?}");
            assert_eq!(guard_low(&big), big.limit().get());
            pool.give_back(big);
            assert!(pool.free.is_empty(), "a dedicated stack is unmapped");
            pool.give_back(small);
            assert_eq!(pool.free.len(), 1);
        }
    }

    #[test]
    fn slabs_grow_and_hold_many_stacks() {
        let mut pool = pool(GuardPages::Mprotect, usize::MAX);
        let stacks: Vec<SlabStack> = (0..1000).map(|_| pool.take().unwrap().0).collect();
        // 16 + 32 + 64 + 128 + 256 + 512 = 1008 >= 1000: six slabs.
        assert_eq!(pool.slabs, 6);
        let distinct = {
            let mut v: Vec<*const Mapping> = stacks.iter().map(|s| Rc::as_ptr(&s._slab)).collect();
            v.dedup();
            v.len()
        };
        assert_eq!(distinct, 6);
    }

    #[test]
    fn the_limit_refuses_with_a_reason() {
        let mut pool = pool(GuardPages::Mprotect, 3);
        let held: Vec<_> = (0..3).map(|_| pool.take().unwrap().0).collect();
        let err = pool.take().err().expect("a fourth stack is over the limit");
        assert!(err.to_string().contains("max_stacks"), "{err}");
        pool.give_back(held.into_iter().next().unwrap());
        assert!(!pool.take().unwrap().1, "a freed stack is reused");
    }

    #[test]
    fn cold_free_stacks_give_their_memory_back() {
        for guard in paths() {
            let mut pool = pool(guard, usize::MAX);
            let page = pool.page;
            let n = 2 * KEEP_HOT + 1;
            let stacks: Vec<SlabStack> = (0..n).map(|_| pool.take().unwrap().0).collect();
            for s in &stacks {
                dirty(s, page);
            }
            let pages = MIN_STACK_SIZE / page;
            // Given back in carving order: the first ones are the coldest.
            let firsts: Vec<(usize, usize)> = stacks.iter().map(|s| s.usable(page)).collect();
            for s in stacks {
                pool.give_back(s);
            }
            // Nothing was free for the whole period yet.
            assert_eq!(pool.trim(), 0, "{guard:?}");
            assert_eq!(pool.released, 0, "{guard:?}");
            assert!(pool.holds_spare_memory());
            // One stack taken and given back during the next period: the
            // hottest stays resident, the rest (but KEEP_HOT) goes.
            let hot = pool.take().unwrap().0;
            pool.give_back(hot);
            assert_eq!(pool.trim(), n - KEEP_HOT, "{guard:?}");
            assert_eq!(pool.released, n - KEEP_HOT, "{guard:?}");
            assert!(!pool.holds_spare_memory());
            assert_eq!(pool.trim(), 0, "nothing more to give back");
            let by_base = |(start, _): (usize, usize)| {
                pool.free
                    .iter()
                    .find(|s| s.usable(page).0 == start)
                    .unwrap()
            };
            assert_eq!(resident(by_base(firsts[0]), page), 0, "{guard:?}");
            assert_eq!(
                resident(by_base(firsts[n - KEEP_HOT - 1]), page),
                0,
                "{guard:?}"
            );
            assert_eq!(resident(by_base(firsts[n - 1]), page), pages, "{guard:?}");
            // Taking down into the released part keeps the bookkeeping.
            let taken: Vec<_> = (0..KEEP_HOT + 10).map(|_| pool.take().unwrap().0).collect();
            assert_eq!(pool.released, n - KEEP_HOT - 10);
            for s in taken {
                pool.give_back(s);
            }
        }
    }

    #[test]
    fn explicit_guard_regions_fail_cleanly_where_unsupported() {
        let built = StackConfig::new(MIN_STACK_SIZE, GuardPages::GuardRegion, 1);
        match built {
            Ok(c) => {
                assert!(crate::stack::mapping::guard_regions_supported());
                assert_eq!(c.guard_pages(), GuardPages::GuardRegion);
            }
            Err(e) => {
                assert!(!crate::stack::mapping::guard_regions_supported());
                assert!(e.to_string().contains("MADV_GUARD_INSTALL"), "{e}");
            }
        }
        let c = StackConfig::new(MIN_STACK_SIZE, GuardPages::Mprotect, 1).unwrap();
        assert_eq!(c.guard_pages(), GuardPages::Mprotect);
    }
}
