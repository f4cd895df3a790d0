//! A loud death on overflow.
//!
//! Running off the bottom of a coroutine stack touches its guard page and
//! raises `SIGSEGV`, on both guard paths (an `mprotect`ed page faults with
//! `SEGV_ACCERR`, a `MADV_GUARD_INSTALL` guard region with `SEGV_MAPERR`;
//! either way the fault address lies in the guard page). Left alone, Rust's
//! own handler would not recognise the address (it only knows the thread's
//! stack) and the process would die with a bare "Segmentation fault". So we
//! install a handler (on the alternate signal stack) that checks the fault
//! address against the guard page of the coroutine running on this thread,
//! prints which executor overflowed and the configured stack size, and
//! aborts. Faults elsewhere are handed back to the previous handler.
//!
//! # Invariants
//!
//! * `GUARD_LOW..GUARD_LOW + PAGE` is the guard page of the coroutine this
//!   thread is running right now; `GUARD_LOW` is `0` outside a coroutine.
//! * `PAGE` is set before any executor thread runs a coroutine.
//! * Every executor thread runs with an alternate signal stack, so the handler
//!   can run when the coroutine stack is exhausted.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

use super::size::page_size;

/// The OS page size (the guard page's size), set by [`prepare_thread`].
static PAGE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static GUARD_LOW: Cell<usize> = const { Cell::new(0) };
    static EXECUTOR: Cell<usize> = const { Cell::new(usize::MAX) };
    static STACK_SIZE: Cell<usize> = const { Cell::new(0) };
}

/// Records which guard page belongs to the coroutine about to run (`low` is
/// its [`guard_low`](super::guard_low)) or, with `0`, that none is running.
#[inline]
pub(crate) fn set_running_guard(low: usize) {
    GUARD_LOW.with(|g| g.set(low));
}

/// What [`set_running_guard`] recorded last (`0`: no coroutine running).
#[inline]
pub(crate) fn running_guard_low() -> usize {
    GUARD_LOW.with(Cell::get)
}

/// The running coroutine's guard page as `low..high`, or `None` outside a
/// coroutine.
#[inline]
fn running_guard() -> Option<(usize, usize)> {
    let low = GUARD_LOW.with(Cell::get);
    // Relaxed: PAGE is written once, before this thread ran a coroutine.
    (low != 0).then(|| (low, low + PAGE.load(Ordering::Relaxed)))
}

/// How many bytes of the running coroutine's stack lie below `addr` (an
/// address on it), or `None` outside a coroutine.
pub(crate) fn room_below(addr: usize) -> Option<usize> {
    let (_, high) = running_guard()?;
    (addr > high).then(|| addr - high)
}

static PREVIOUS_SEGV: OnceLock<libc::sigaction> = OnceLock::new();
static PREVIOUS_BUS: OnceLock<libc::sigaction> = OnceLock::new();
static INSTALL: Once = Once::new();

/// Installs the overflow handler (once per process) and prepares this
/// executor thread: records its index and stack size for the message and
/// makes sure it has an alternate signal stack. The returned guard removes
/// an alternate stack this function installed.
pub(crate) fn prepare_thread(executor: usize, stack_size: usize) -> AltStack {
    // Relaxed: every thread stores the same value, before it runs a
    // coroutine, and reads it only on this thread afterwards.
    PAGE.store(page_size(), Ordering::Relaxed);
    INSTALL.call_once(install_handler);
    EXECUTOR.with(|e| e.set(executor));
    STACK_SIZE.with(|s| s.set(stack_size));
    AltStack::ensure()
}

fn install_handler() {
    for (signal, previous) in [
        (libc::SIGSEGV, &PREVIOUS_SEGV),
        (libc::SIGBUS, &PREVIOUS_BUS),
    ] {
        // SAFETY: an all-zero sigaction is a valid value (SIG_DFL, empty mask,
        // no flags); we fill in the fields we need before using it.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_fault as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: zeroed is a valid sigaction to be overwritten by the kernel.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers point to valid sigaction values; sa_mask is
        // initialised by sigemptyset before the call that reads it.
        let installed = unsafe {
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, &mut old) == 0
        };
        if installed {
            let _ = previous.set(old);
        }
    }
}

/// The signal handler. Only async-signal-safe work: thread-local `Cell`
/// reads (const-initialised, no lazy init), formatting into a stack buffer,
/// `write`, `abort`, `sigaction`, or a call to the previous handler.
extern "C" fn on_fault(signal: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers, and
    // SIGSEGV/SIGBUS carry a fault address.
    let addr = unsafe { (*info).si_addr() } as usize;
    if running_guard().is_some_and(|(low, high)| (low..high).contains(&addr)) {
        let mut msg = MessageBuf::new();
        msg.push(b"\nswco: stack overflow in a coroutine on executor swco-cpe-");
        msg.push_num(EXECUTOR.with(Cell::get));
        msg.push(b" (coroutine stack size ");
        msg.push_num(STACK_SIZE.with(Cell::get));
        msg.push(b" bytes; raise it with RuntimeBuilder::stack_size). Aborting.\n");
        // SAFETY: write and abort are async-signal-safe; the buffer is valid
        // for its length.
        unsafe {
            libc::write(2, msg.buf.as_ptr().cast(), msg.len);
            libc::abort();
        }
    }
    // Not ours: hand the signal to whoever handled it before us.
    let previous = if signal == libc::SIGSEGV {
        PREVIOUS_SEGV.get()
    } else {
        PREVIOUS_BUS.get()
    };
    match previous {
        Some(prev) if prev.sa_sigaction == libc::SIG_IGN => {}
        Some(prev) if prev.sa_sigaction != libc::SIG_DFL => {
            if prev.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: with SA_SIGINFO, sa_sigaction is the address of a
                // three-argument handler installed by its owner; we forward
                // the kernel's own arguments.
                unsafe {
                    let handler: extern "C" fn(
                        libc::c_int,
                        *mut libc::siginfo_t,
                        *mut libc::c_void,
                    ) = std::mem::transmute(prev.sa_sigaction);
                    handler(signal, info, ctx);
                }
            } else {
                // SAFETY: without SA_SIGINFO, sa_sigaction is the address of
                // a one-argument handler installed by its owner.
                unsafe {
                    let handler: extern "C" fn(libc::c_int) =
                        std::mem::transmute(prev.sa_sigaction);
                    handler(signal);
                }
            }
        }
        _ => {
            // Default action: reinstate it and return; the faulting
            // instruction runs again and the process dies as it would have
            // without us.
            // SAFETY: a zeroed sigaction is SIG_DFL with an empty mask.
            unsafe {
                let default: libc::sigaction = std::mem::zeroed();
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
    }
}

struct MessageBuf {
    buf: [u8; 256],
    len: usize,
}

impl MessageBuf {
    fn new() -> Self {
        MessageBuf {
            buf: [0; 256],
            len: 0,
        }
    }
    fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.len < self.buf.len() {
                self.buf[self.len] = b;
                self.len += 1;
            }
        }
    }
    fn push_num(&mut self, mut n: usize) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}

/// An alternate signal stack this thread installed itself (none if the
/// thread already had one, as Rust's std threads usually do).
pub(crate) struct AltStack {
    mapping: Option<(*mut libc::c_void, usize)>,
}

impl AltStack {
    const SIZE: usize = 64 * 1024;

    fn ensure() -> AltStack {
        // SAFETY: zeroed is a valid stack_t to be overwritten by the kernel.
        let mut current: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: querying with a null new stack only writes `current`.
        let ok = unsafe { libc::sigaltstack(std::ptr::null(), &mut current) } == 0;
        if !ok || current.ss_flags & libc::SS_DISABLE == 0 {
            return AltStack { mapping: None };
        }
        // SAFETY: an anonymous private mapping with no address hint has no
        // preconditions; failure is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return AltStack { mapping: None };
        }
        let stack = libc::stack_t {
            ss_sp: ptr,
            ss_flags: 0,
            ss_size: Self::SIZE,
        };
        // SAFETY: `stack` describes the mapping just created, which stays
        // mapped until this AltStack is dropped (after disabling it).
        unsafe { libc::sigaltstack(&stack, std::ptr::null_mut()) };
        AltStack {
            mapping: Some((ptr, Self::SIZE)),
        }
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        if let Some((ptr, len)) = self.mapping.take() {
            let disable = libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: disabling the alternate stack first means the kernel no
            // longer uses the mapping, which we then unmap (it is ours).
            unsafe {
                libc::sigaltstack(&disable, std::ptr::null_mut());
                libc::munmap(ptr, len);
            }
        }
    }
}
