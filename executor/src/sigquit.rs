//! Go's habit, opt-in ([`RuntimeBuilder::dump_on_sigquit`]): `kill -QUIT
//! <pid>` (or Ctrl-\ in a terminal) writes a dump of every runtime that
//! asked for it to stderr, and the program goes on.
//!
//! # Why it is safe
//!
//! The signal handler does one async-signal-safe thing: it writes a byte to
//! a pipe (saving and restoring `errno` around it). A thread of its own,
//! `swco-sigquit`, blocks reading that pipe and does the real work, taking
//! the dumps as any thread may ([`Runtime::dump`]). Nothing runs inside the
//! handler that could take a lock or allocate.
//!
//! The handler is installed once per process, by the first runtime that
//! asks; runtimes register (weakly) and drop out when they are gone. A
//! handler for `SIGQUIT` installed by someone else is replaced (its
//! default, which aborts with a core dump, is what Go replaces too).
//!
//! [`RuntimeBuilder::dump_on_sigquit`]: crate::RuntimeBuilder::dump_on_sigquit
//! [`Runtime::dump`]: crate::Runtime::dump

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::dump::RuntimeDump;
use crate::shared::RuntimeShared;

/// The pipe's write end, for the handler (-1 until installed).
static WRITE_END: AtomicI32 = AtomicI32::new(-1);

/// How a registered runtime is dumped (given by its builder, which knows
/// the executor type a dump needs; this module does not).
type Dump = fn(&RuntimeShared) -> RuntimeDump;

/// The runtimes to dump, each with how.
static RUNTIMES: Mutex<Vec<(Weak<RuntimeShared>, Dump)>> = Mutex::new(Vec::new());

extern "C" fn on_sigquit(_signal: libc::c_int) {
    // Relaxed: set once before the handler is installed (the install is a
    // system call, which orders it).
    let fd = WRITE_END.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    // SAFETY: `errno` is this thread's; `write` is async-signal-safe, on a
    // valid one-byte buffer; errno is put back as the interrupted code left
    // it. A full pipe (dumps already pending) drops the byte: non-blocking.
    unsafe {
        let errno = *libc::__errno_location();
        let byte = 1u8;
        libc::write(fd, std::ptr::addr_of!(byte).cast(), 1);
        *libc::__errno_location() = errno;
    }
}

/// Installs the handler and the dumping thread, once per process.
fn install() -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| install_once().map_err(|e| e.to_string()))
        .clone()
        .map_err(io::Error::other)
}

fn install_once() -> io::Result<()> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors `pipe2` writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let [read_end, write_end] = fds;
    // The handler must never block: a non-blocking write end.
    // SAFETY: `write_end` is the descriptor `pipe2` just made.
    unsafe {
        let flags = libc::fcntl(write_end, libc::F_GETFL);
        libc::fcntl(write_end, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    WRITE_END.store(write_end, Ordering::Relaxed);
    std::thread::Builder::new()
        .name("swco-sigquit".into())
        .spawn(move || dump_on_each_byte(read_end))?;
    // SAFETY: a zeroed `sigaction` is a valid empty one; we set its handler
    // (a plain `extern "C" fn(c_int)`, no SA_SIGINFO), an empty mask and
    // SA_RESTART, and pass valid pointers.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigquit as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGQUIT, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The `swco-sigquit` thread: a dump of every registered runtime per byte.
fn dump_on_each_byte(read_end: libc::c_int) {
    let mut byte = [0u8; 1];
    loop {
        // SAFETY: reads at most one byte into `byte`, from our pipe.
        let n = unsafe { libc::read(read_end, byte.as_mut_ptr().cast(), 1) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            return;
        }
        let runtimes: Vec<(Arc<RuntimeShared>, Dump)> = {
            let mut all = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
            all.retain(|(w, _)| w.strong_count() > 0);
            all.iter()
                .filter_map(|(w, dump)| Some((w.upgrade()?, *dump)))
                .collect()
        };
        for (i, (rt, dump)) in runtimes.iter().enumerate() {
            let dump = dump(rt);
            eprintln!(
                "swco: SIGQUIT: runtime {} of {} (the program goes on)\n{dump}",
                i + 1,
                runtimes.len()
            );
        }
    }
}

/// Dumps `runtime` (with `dump`) on every `SIGQUIT` from now on (while it
/// lives).
pub(crate) fn register(runtime: &Arc<RuntimeShared>, dump: Dump) -> io::Result<()> {
    install()?;
    RUNTIMES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((Arc::downgrade(runtime), dump));
    Ok(())
}
