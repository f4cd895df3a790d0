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
//!
//! # Files
//!
//! `size.rs` has the sizes (page, stack) and the high-water measure,
//! `mapping.rs` the mappings and their guard pages, `slab.rs` the pools
//! carved from them, `overflow.rs` the overflow handler. This file only
//! re-exports them: they do not name it.

mod mapping;
mod overflow;
mod size;
mod slab;

pub use mapping::GuardPages;
pub(crate) use mapping::StackConfig;
pub(crate) use overflow::{prepare_thread, room_below, running_guard_low, set_running_guard};
pub(crate) use size::{high_waters, page_size};
pub use size::{DEFAULT_STACK_SIZE, MIN_STACK_SIZE};
pub(crate) use slab::{guard_low, SlabStack, StackPool, TRIM_PERIOD};

/// The stack type coroutines run on.
pub(crate) type CoStack = SlabStack;
