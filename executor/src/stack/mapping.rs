//! The mappings stacks are carved from ([`Mapping`]) and the guard pages
//! below each stack: the [`GuardPages`] paths, which of them this kernel
//! supports, and a [`StackConfig`] checked against it.

use std::io;
use std::sync::OnceLock;

use super::size::page_size;

/// The environment variable that picks the guard-page path of runtimes
/// built with [`GuardPages::Auto`]: `madvise`, `mprotect`, or `auto`. One
/// spelling each, the system calls' names: any other value (the enum's own
/// `guard-region` included) is reported and ignored, never half-accepted.
pub(crate) const GUARD_PAGES_ENV: &str = "SWCO_GUARD_PAGES";

/// `madvise` advice installing guard regions (Linux 6.13+); not all `libc`
/// versions define it. Its value is the same on every Linux architecture.
#[cfg(any(target_os = "linux", target_os = "android"))]
const MADV_GUARD_INSTALL: libc::c_int = 102;

#[cfg(any(target_os = "linux", target_os = "android"))]
const MAP_FLAGS: libc::c_int =
    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const MAP_FLAGS: libc::c_int = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;

/// An anonymous read-write mapping of ours, unmapped on drop.
///
/// # Invariants
///
/// `addr..addr + len` is a private anonymous mapping created by
/// [`Mapping::new`], owned by this value alone (no other code unmaps or
/// remaps it), page-aligned, with `len > 0`.
pub(crate) struct Mapping {
    addr: usize,
    len: usize,
}

impl Mapping {
    /// Where it starts (page-aligned, never 0).
    #[inline]
    pub(crate) fn addr(&self) -> usize {
        self.addr
    }

    /// Its length in bytes (whole pages).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Maps `len` bytes (a whole number of pages), lazily reserved.
    pub(crate) fn new(len: usize) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        // SAFETY: an anonymous private mapping with no address hint touches
        // no existing memory; failure is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                MAP_FLAGS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mapping = Mapping {
            addr: ptr as usize,
            len,
        };
        // Stacks use a few KiB each; a transparent huge page would commit
        // 2 MiB at once. Advisory: a kernel without THP refuses, harmlessly.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        // SAFETY: the range is exactly our own mapping; the advice changes
        // only how it may be backed, not its contents or protection.
        unsafe {
            libc::madvise(ptr, len, libc::MADV_NOHUGEPAGE);
        }
        Ok(mapping)
    }

    /// Turns `offset..offset + len` (page-aligned, inside the mapping) into a
    /// guard: any access faults with `SIGSEGV`.
    ///
    /// # Safety
    ///
    /// Nothing may use the range: no stack handed out covers it, and nothing
    /// points into it.
    pub(crate) unsafe fn install_guard(
        &self,
        offset: usize,
        len: usize,
        how: GuardPages,
    ) -> io::Result<()> {
        assert!(offset.checked_add(len).is_some_and(|end| end <= self.len));
        let addr = (self.addr + offset) as *mut libc::c_void;
        let result = match how {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            // SAFETY: the range lies inside our own mapping (asserted above)
            // and nothing uses it (the caller's contract), so dropping its
            // pages and making it fault on access affects nobody.
            GuardPages::GuardRegion => unsafe { libc::madvise(addr, len, MADV_GUARD_INSTALL) },
            // SAFETY: as above; PROT_NONE only makes the range fault on
            // access.
            _ => unsafe { libc::mprotect(addr, len, libc::PROT_NONE) },
        };
        if result == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours alone (type invariant), and dropping
        // `self` ends every use of it: stacks carved from it hold an `Rc` to
        // it, so it is dropped only once none is left.
        let result = unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
        debug_assert_eq!(result, 0, "munmap of a stack slab failed");
    }
}

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
        let Ok(scratch) = Mapping::new(2 * page) else {
            return false;
        };
        // An older kernel rejects the unknown advice with EINVAL.
        // SAFETY: the scratch mapping was just made and nothing uses it.
        unsafe { scratch.install_guard(0, page, GuardPages::GuardRegion) }.is_ok()
    })
}

/// How an executor's [`StackPool`](super::StackPool) makes stacks; one per runtime.
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
        let probe = Mapping::new(len)?;
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

    /// How many stacks a pool of this configuration may carve.
    pub(crate) fn max_stacks(&self) -> usize {
        self.max_stacks
    }

    /// The guard-page path (never `Auto`).
    pub(crate) fn guard_pages(&self) -> GuardPages {
        self.guard
    }
}
