//! Coroutine stacks: carved from per-executor slabs, guarded, reused, and a
//! loud death on overflow.
//!
//! # Slabs
//!
//! Each executor owns a [`StackPool`] that carves its coroutine stacks out
//! of large anonymous mappings, *slabs* (`slab.rs`): many stacks per `mmap`,
//! reserved lazily (`MAP_NORESERVE`; a page costs memory once touched). A
//! stack is one guard page followed by the usable stack, and stacks lie back
//! to back in their slab:
//!
//! ```text
//! slab: | guard | stack 0 | guard | stack 1 | ... | guard | stack n-1 |
//!       ^ limit()         ^ base()  (stacks grow down, towards the guard)
//! ```
//!
//! The guard page below each stack is installed once, when the stack is
//! first carved, by one of two [`GuardPages`] paths:
//!
//! * **guard regions**, `madvise(MADV_GUARD_INSTALL)` (Linux 6.13+): the
//!   page faults like an unmapped one but stays part of the slab's mapping,
//!   so a slab of hundreds of stacks is *one* kernel mapping;
//! * **`mprotect(PROT_NONE)`** elsewhere: every guard page splits the slab's
//!   mapping, so each stack still costs two mappings, as a separate `mmap`
//!   per stack did, and about 32 700 live stacks exhaust Linux's default
//!   `vm.max_map_count` (65 530). Slabs then only save the `mmap`/`munmap`
//!   calls, not mappings.
//!
//! Finished coroutines give their stack back to their executor's free list
//! (LIFO, so the next spawn reuses the hottest stack); nothing is unmapped
//! while the runtime runs. Memory goes back to the OS under the policy
//! described in `slab.rs`: every 250 ms, the free stacks of an executor
//! that nobody used during the whole period have their pages
//! `MADV_DONTNEED`ed, all but the hottest 128 (guard pages stay), so a
//! burst's memory goes back within half a second; and whole slabs are unmapped when the executor's pool
//! is dropped (at shutdown) and no stack of theirs is in use.
//!
//! # Overflow
//!
//! The guard page turns an overflow into `SIGSEGV`; `overflow.rs` turns that
//! into a message naming the executor and the stack size, and an abort.

use std::io;
use std::sync::OnceLock;

mod overflow;
mod slab;

pub(crate) use overflow::{prepare_thread, room_below, running_guard_low, set_running_guard};
pub(crate) use slab::{guard_low, SlabStack, StackPool, TRIM_PERIOD};

/// The smallest coroutine stack accepted by
/// [`RuntimeBuilder::stack_size`](crate::RuntimeBuilder::stack_size), in
/// bytes (16 KiB). Below this, the runtime's own frames (spawn wrapper, panic
/// catching, channel operations) leave too little room for user code.
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// The default coroutine stack size, in bytes (64 KiB).
pub const DEFAULT_STACK_SIZE: usize = 64 * 1024;

/// The environment variable that picks the guard-page path of runtimes
/// built with [`GuardPages::Auto`]: `madvise`, `mprotect`, or `auto`. One
/// spelling each, the system calls' names: any other value (the enum's own
/// `guard-region` included) is reported and ignored, never half-accepted.
pub(crate) const GUARD_PAGES_ENV: &str = "SWCO_GUARD_PAGES";

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

/// The stack type coroutines run on.
pub(crate) type CoStack = SlabStack;

/// How coroutine stacks get the guard page that turns an overflow into a
/// clean abort (see
/// [`RuntimeBuilder::guard_pages`](crate::RuntimeBuilder::guard_pages)).
///
/// Either way each stack has one guard page right below it and an overflow
/// is reported the same way; the paths differ in how many kernel mappings
/// the stacks cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum GuardPages {
    /// [`GuardRegion`](GuardPages::GuardRegion) where the kernel supports
    /// it, else [`Mprotect`](GuardPages::Mprotect) (the default). The
    /// environment variable `SWCO_GUARD_PAGES` overrides the choice:
    /// `madvise` forces guard regions, `mprotect` forces
    /// `mprotect`, `auto` (or empty) detects. Other values are reported on
    /// stderr and ignored.
    #[default]
    Auto,
    /// `madvise(MADV_GUARD_INSTALL)` (Linux 6.13+). The guard page does not
    /// split its slab's mapping, so stacks cost a few mappings in all,
    /// rather than two each. Building a runtime with this on a kernel
    /// without guard regions fails.
    GuardRegion,
    /// `mprotect(PROT_NONE)`: works on every kernel, but each guard page
    /// splits its slab's mapping, so each stack costs two of the process's
    /// mappings (`vm.max_map_count`, 65 530 by default on Linux).
    Mprotect,
}

impl GuardPages {
    /// The concrete path (never `Auto`): `self`, the environment's choice
    /// for `Auto`, or what the kernel supports.
    fn resolve(self) -> io::Result<GuardPages> {
        let wanted = match self {
            GuardPages::Auto => from_env(),
            explicit => explicit,
        };
        match wanted {
            GuardPages::Auto if guard_regions_supported() => Ok(GuardPages::GuardRegion),
            GuardPages::Auto => Ok(GuardPages::Mprotect),
            GuardPages::GuardRegion if !guard_regions_supported() => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "guard regions (madvise MADV_GUARD_INSTALL) need Linux 6.13 or later; \
                 use GuardPages::Mprotect or GuardPages::Auto",
            )),
            concrete => Ok(concrete),
        }
    }
}

/// The guard-page path `SWCO_GUARD_PAGES` asks for (`Auto` if unset).
fn from_env() -> GuardPages {
    let Some(value) = std::env::var_os(GUARD_PAGES_ENV) else {
        return GuardPages::Auto;
    };
    match value.to_str().map(str::trim) {
        Some("madvise") => GuardPages::GuardRegion,
        Some("mprotect") => GuardPages::Mprotect,
        Some("auto" | "") => GuardPages::Auto,
        _ => {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                eprintln!(
                    "swco: ignoring {GUARD_PAGES_ENV}={value:?} \
                     (expected madvise, mprotect or auto)"
                );
            });
            GuardPages::Auto
        }
    }
}

/// Whether this kernel supports `MADV_GUARD_INSTALL` (tried once per
/// process, on a scratch mapping).
pub(crate) fn guard_regions_supported() -> bool {
    static SUPPORTED: OnceLock<bool> = OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        let page = page_size();
        let Ok(scratch) = slab::Mapping::new(2 * page) else {
            return false;
        };
        // An older kernel rejects the unknown advice with EINVAL.
        // SAFETY: the scratch mapping was just made and nothing uses it.
        unsafe { scratch.install_guard(0, page, GuardPages::GuardRegion) }.is_ok()
    })
}

/// How an executor's [`StackPool`] makes stacks; one per runtime.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StackConfig {
    /// Usable bytes per stack, a whole number of pages.
    size: usize,
    /// The guard-page path, resolved (never `Auto`).
    guard: GuardPages,
    /// The most stacks one executor may carve (live and free together).
    max_stacks: usize,
}

impl StackConfig {
    /// Resolves `guard`, then maps and guards one stack of `size` usable
    /// bytes (a whole number of pages) and unmaps it again, so that a size
    /// the OS cannot provide, or a guard path it lacks, is a build error
    /// rather than a failure at every spawn. `max_stacks` bounds the stacks
    /// of each executor.
    pub(crate) fn new(size: usize, guard: GuardPages, max_stacks: usize) -> io::Result<Self> {
        let guard = guard.resolve()?;
        let page = page_size();
        let len = size
            .checked_add(page)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let probe = slab::Mapping::new(len)?;
        // SAFETY: the probe mapping was just made and nothing uses it.
        unsafe { probe.install_guard(0, page, guard) }?;
        Ok(StackConfig {
            size,
            guard,
            max_stacks,
        })
    }

    /// Usable bytes per stack.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// The guard-page path (never `Auto`).
    pub(crate) fn guard_pages(&self) -> GuardPages {
        self.guard
    }
}
