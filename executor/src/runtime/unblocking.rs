//! The front ends of the runtime's blocking pool (`blocking.rs`):
//! [`unblock`] inside a coroutine and [`Runtime::spawn_blocking`] on the
//! handle. They live here, above the executor, so that the pool itself
//! needs neither the executor nor the runtime.

use std::panic::{resume_unwind, Location};
use std::sync::atomic::Ordering;

use super::Runtime;
use crate::blocking::{blocking_info, Refusal};
use crate::executor::Local;
use crate::join::{JoinError, JoinHandle, JoinSlot};

/// Runs `f` on a thread of the current coroutine's runtime's blocking
/// pool, suspending only the calling coroutine until it returns, and
/// returns its result. The executor runs its other coroutines meanwhile.
/// This is the way to make a std blocking call (`std::thread::sleep`, file
/// or socket I/O, a contended `std::sync::Mutex`, a C library) from a
/// coroutine without stopping every coroutine of its executor.
///
/// On a plain thread (not in a coroutine), or inside a panic hook, `f`
/// runs in place, on the calling thread. After the runtime's shutdown has
/// stopped its blocking pool (a coroutine a
/// [`shutdown_timeout`](Runtime::shutdown_timeout) left running, or one
/// still running after its runtime was dropped from inside), `f` also runs
/// in place, on the executor thread, blocking it: the call still does what
/// it says, and nothing is left to block anyway. The same holds if the OS
/// refuses to start a pool thread while none runs.
///
/// A panic in `f` comes back to the caller: it is re-raised with its
/// payload whole ([`resume_unwind`]), so `catch_unwind` around `unblock`
/// sees what `f` threw.
///
/// A cancelling shutdown ([`shutdown_timeout`](Runtime::shutdown_timeout))
/// unwinds a coroutine waiting here like any other waiting coroutine; `f`
/// itself cannot be unwound and runs on (see `spawn_blocking`).
///
/// The round trip (to a pool thread and back) costs some microseconds
/// (two thread wake-ups; `executor/examples/unblock_cost.rs`): use it for
/// calls that block, not for short computations.
///
/// ```
/// use std::time::Duration;
///
/// let rt = swco_executor::Runtime::builder().executors(1).build().unwrap();
/// let (tx, rx) = swco_channel::spsc::bounded::<u32>(1);
/// // One executor: the sleep below would stop the receiver if it ran there.
/// let sleeper = rt.spawn(move || {
///     swco_executor::unblock(move || std::thread::sleep(Duration::from_millis(20)));
///     tx.send(1).unwrap();
/// });
/// let receiver = rt.spawn(move || rx.recv().unwrap());
/// sleeper.join().unwrap();
/// assert_eq!(receiver.join().unwrap(), 1);
///
/// // On a plain thread it runs in place.
/// let here = std::thread::current().id();
/// assert_eq!(swco_executor::unblock(move || std::thread::current().id()), here);
/// ```
#[track_caller]
pub fn unblock<F, T>(f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let Some(local) = Local::current().filter(|l| l.can_suspend()) else {
        return f();
    };
    let runtime = &local.runtime;
    match runtime.blocking.spawn(runtime.next_id(), f) {
        Ok(handle) => match handle.join() {
            Ok(v) => v,
            Err(e) => match e.try_into_panic() {
                Ok(payload) => resume_unwind(payload),
                Err(e) => unblock_failed(&e),
            },
        },
        // Shut down (or no thread at all): run in place, as documented.
        Err((f, _)) => f(),
    }
}

/// A job accepted and then dropped unrun: only a timed-out shutdown does
/// that, and it cancels the waiting coroutine too.
#[cold]
fn unblock_failed(e: &JoinError) -> ! {
    panic!("swco::unblock: the blocking job did not run: {e}")
}

impl Runtime {
    /// Runs `f` on a thread of this runtime's blocking pool and returns a
    /// handle on its result, as [`spawn`](Runtime::spawn) does for a
    /// coroutine: [`join`](JoinHandle::join) (which suspends only a calling
    /// coroutine), [`wait_timeout`](JoinHandle::wait_timeout),
    /// [`join_async`](JoinHandle::join_async); a panic in `f` is a
    /// [`JoinError`] with its payload. Dropping the handle detaches the
    /// job. The handle's [`cpe`](JoinHandle::cpe) is `None` (the job runs
    /// on no executor), its [`name`](JoinHandle::name) `"blocking"`.
    ///
    /// Pool threads start on demand, at most
    /// [`blocking_threads`](crate::RuntimeBuilder::blocking_threads) at once
    /// (512 by default); more jobs wait in the pool's queue, in order. A
    /// thread idle for 10 s exits.
    ///
    /// [`shutdown`](Runtime::shutdown) waits for every queued and running
    /// blocking job. [`shutdown_timeout`](Runtime::shutdown_timeout) waits
    /// until its timeout: then queued jobs are dropped unrun (their handles
    /// report [`is_cancelled`](JoinError::is_cancelled)), and running ones
    /// are left to their threads, detached, with a note on stderr: a
    /// blocking call cannot be unwound, so the shutdown does not hang on
    /// it. After shutdown, the handle reports
    /// [`is_shut_down`](JoinError::is_shut_down) and `f` is not run;
    /// while the shutdown waits for live coroutines, only those coroutines
    /// may still spawn blocking jobs.
    ///
    /// ```
    /// let rt = swco_executor::Runtime::builder().executors(1).build().unwrap();
    /// let h = rt.spawn_blocking(|| std::thread::current().name().map(str::to_owned));
    /// assert_eq!(h.join().unwrap().as_deref(), Some("swco-blocking-0"));
    /// let err = rt.spawn_blocking(|| std::panic::panic_any(7u8)).join().unwrap_err();
    /// assert_eq!(err.into_panic().downcast_ref::<u8>(), Some(&7));
    /// ```
    #[track_caller]
    pub fn spawn_blocking<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let at = Location::caller();
        let (shared, from_coroutine) = self.spawn_context();
        // SeqCst: as a spawn's look at `closed`. A plain thread's spawn
        // that passes this look and reaches a pool already shut is refused
        // there; one that reaches it first is waited for.
        if !from_coroutine && shared.closed.load(Ordering::SeqCst) {
            return shut_down_handle(shared.next_id(), at);
        }
        match shared.blocking.spawn(shared.next_id(), f) {
            Ok(h) => h,
            Err((f, Refusal::ShutDown)) => {
                crate::panic::drop_closure(f);
                shut_down_handle(shared.next_id(), at)
            }
            Err((f, Refusal::NoThread(e))) => {
                crate::panic::drop_closure(f);
                let (completer, handle) = JoinSlot::pair_with(blocking_info(shared.next_id(), at));
                completer.complete(Err(JoinError::refused(format!(
                    "no blocking-pool thread could be started: {e}"
                ))));
                handle
            }
        }
    }
}

fn shut_down_handle<T: Send + 'static>(id: u64, at: &'static Location<'static>) -> JoinHandle<T> {
    let (completer, handle) = JoinSlot::pair_with(blocking_info(id, at));
    completer.complete(Err(JoinError::shut_down()));
    handle
}
