//! The process panic hook wrapper swco installs (once, at the first
//! [`RuntimeBuilder::build`](crate::RuntimeBuilder::build)), for panics
//! inside coroutines.
//!
//! # Invariants
//!
//! * For a panic in a coroutine, the previous hook runs with suspension
//!   forbidden (`Local::without_suspending`): it never suspends the
//!   coroutine, so std's per-thread "in the panic hook" state is never seen
//!   by another coroutine of the executor.
//! * With less than [`PANIC_HOOK_STACK`] left on the coroutine's stack, the
//!   hook runs on the executor thread's stack instead.

use crate::stack;

/// What the panic hook needs of the executor (the executor's `Local`
/// implements it): the hook is generic over it, so it names no executor
/// type.
pub(crate) trait PanicSite: 'static {
    /// This thread's executor, if a coroutine of it is running here.
    fn current_in_coroutine() -> Option<&'static Self>;
    /// Runs `f` with suspension of the running coroutine forbidden.
    fn without_suspending(&self, f: impl FnOnce());
    /// Runs `f` on the executor thread's own stack.
    fn on_executor_stack(&self, f: impl FnOnce());
}

/// Stack a panic hook may need (the default one symbolising a backtrace
/// uses ~20-30 KiB); with less left, the hook runs on the executor's stack.
const PANIC_HOOK_STACK: usize = 40 * 1024;

/// Wraps the process's panic hook (once), for panics inside coroutines:
///
/// * the hook runs with suspension forbidden. A hook that blocks (a channel
///   `send`, a `join`) parks the executor thread, as it would a plain thread,
///   instead of suspending the coroutine: the hook may be on the executor's
///   stack (below), and std's per-thread "in the panic hook" state would
///   otherwise be seen by every coroutine the executor ran meanwhile
///   (a panic in any of them would abort the process).
/// * a panic deep in a small coroutine stack does not overflow it while
///   printing its message and backtrace: the hook then runs on the executor
///   thread's stack (the message is intact; a backtrace shows the executor's
///   frames).
pub(crate) fn install_panic_hook<E: PanicSite>() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let Some(local) = E::current_in_coroutine() else {
                return previous(info);
            };
            local.without_suspending(|| {
                let here = std::ptr::addr_of!(info) as usize;
                let tight = stack::room_below(here).is_some_and(|room| room < PANIC_HOOK_STACK);
                if tight {
                    local.on_executor_stack(|| previous(info));
                } else {
                    previous(info);
                }
            });
        }));
    });
}
