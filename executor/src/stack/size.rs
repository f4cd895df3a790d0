//! Sizes: the OS page, coroutine stacks' smallest and default sizes, and
//! how much of a stack has been used (its high-water mark).

/// The smallest coroutine stack accepted by
/// [`RuntimeBuilder::stack_size`](crate::RuntimeBuilder::stack_size), in
/// bytes (16 KiB). Below this, the runtime's own frames (spawn wrapper, panic
/// catching, channel operations) leave too little room for user code.
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// The default coroutine stack size, in bytes (64 KiB).
pub const DEFAULT_STACK_SIZE: usize = 64 * 1024;

/// The OS page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size <= 0 {
        4096
    } else {
        size as usize
    }
}

/// How deep the stack `low..top` (its usable part, page-aligned) has
/// been used: the bytes from `top` down to the lowest page of it that is
/// resident, as `mincore` says. `buf` is scratch space, kept by the caller
/// across calls.
///
/// Measured at page granularity, and a page counts once anything touched
/// it: a stack reused from its executor's free list still holds the pages
/// its earlier coroutines touched (until the pool gives them back to the
/// OS, after a trim period unused), so the figure is the deepest use of
/// that stack, an upper bound for the coroutine on it now.
pub(crate) fn high_water(low: usize, top: usize, buf: &mut Vec<u8>) -> usize {
    let page = page_size();
    if top <= low || low % page != 0 {
        return 0;
    }
    let pages = (top - low) / page;
    buf.clear();
    buf.resize(pages, 0);
    // SAFETY: `mincore` only reads the page tables of `low..top` and writes
    // one byte per page into `buf`, which has that many. A range that is no
    // longer (or not wholly) mapped makes it fail with `ENOMEM`, not fault.
    let r = unsafe { libc::mincore(low as *mut libc::c_void, top - low, buf.as_mut_ptr()) };
    if r != 0 {
        return 0;
    }
    buf.iter()
        .position(|&b| b & 1 != 0)
        .map_or(0, |lowest| (pages - lowest) * page)
}

/// [`high_water`] of many stacks at once: `stacks[i]` is a stack's
/// usable `(low, top)`, and its mark goes to `marks[i]`. Stacks next to
/// each other in memory (one guard page apart, as a slab carves them) are
/// measured with one `mincore` per run of them rather than one each.
pub(crate) fn high_waters(stacks: &[(usize, usize)], marks: &mut [usize]) {
    let page = page_size();
    let mut order: Vec<usize> = (0..stacks.len()).collect();
    order.sort_unstable_by_key(|&i| stacks[i].0);
    let mut buf = Vec::new();
    let mut start = 0;
    while start < order.len() {
        // The run: each next stack starts one (guard) page above the top of
        // the one before.
        let mut end = start + 1;
        while end < order.len() && stacks[order[end]].0 == stacks[order[end - 1]].1 + page {
            end += 1;
        }
        let low = stacks[order[start]].0;
        let top = stacks[order[end - 1]].1;
        let whole = (top - low) / page;
        buf.clear();
        buf.resize(whole, 0);
        // SAFETY: as in `high_water`: `mincore` writes one byte per page of
        // `low..top` into `buf`, which has that many, and fails rather
        // than faults on a range not wholly mapped.
        let r = unsafe { libc::mincore(low as *mut libc::c_void, top - low, buf.as_mut_ptr()) };
        for &i in &order[start..end] {
            let (l, t) = stacks[i];
            marks[i] = if r == 0 {
                let pages = &buf[(l - low) / page..(t - low) / page];
                pages
                    .iter()
                    .position(|&b| b & 1 != 0)
                    .map_or(0, |lowest| (pages.len() - lowest) * page)
            } else {
                high_water(l, t, &mut Vec::new())
            };
        }
        start = end;
    }
}
