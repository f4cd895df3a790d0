//! What code inside a coroutine calls on its own runtime and executor:
//! [`spawn`], [`yield_now`], [`sleep`], [`sleep_until`], [`current_cpe`],
//! [`current_name`], [`current_id`].
//! Outside a coroutine, `sleep` falls back to the thread's sleep, and
//! `spawn` panics (there is no runtime to spawn on).

use std::panic::Location;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use crate::executor::Local;
use crate::join::{JoinHandle, SpawnInfo};
use crate::spawning::SpawnOptions;
use crate::task::Suspend;
use swco_wait::hook::{Op, WaitingOn};

/// Spawns a coroutine on the current coroutine's runtime, placed by its
/// policy.
///
/// ```
/// # use swco_executor::Runtime;
/// let rt = Runtime::builder().executors(2).build().unwrap();
/// let h = rt.spawn(|| swco_executor::spawn(|| 1 + 1).join().unwrap());
/// assert_eq!(h.join().unwrap(), 2);
/// ```
///
/// The handle records the caller ([`JoinHandle::spawned_at`]).
///
/// # Panics
///
/// If called outside a coroutine (there is no runtime to spawn on): use
/// [`Runtime::spawn`](crate::Runtime::spawn) there.
#[track_caller]
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let at = Location::caller();
    let local = Local::current()
        .filter(|l| l.in_coroutine())
        .expect("swco::spawn called outside a coroutine; use Runtime::spawn from plain threads");
    let rt = local.runtime.clone();
    let (cpe, stealable) = rt.place();
    match rt.submit(cpe, f, true, stealable, SpawnOptions::at(at)) {
        Ok(h) => h,
        Err(e) => unreachable!("spawn from a live coroutine cannot fail: {e}"),
    }
}

/// What the running coroutine's spawn said about it, while its closure
/// runs; `None` elsewhere.
fn with_spawn_info<R>(f: impl FnOnce(&SpawnInfo) -> R) -> Option<R> {
    let header = Local::current()
        .filter(|l| l.in_coroutine())
        .and_then(Local::running_header)?;
    // Relaxed: set and cleared on this thread (see `TaskHeader::info`).
    let info = header.info.load(Ordering::Relaxed);
    // SAFETY: a non-null `info` points into the running coroutine's spawn
    // allocation, which its job holds while the closure runs; the job
    // clears the pointer before it lets go of it (`ShownInfo` in
    // `spawning.rs`). We are on that coroutine, inside that window, and the
    // reference does not leave this call.
    unsafe { info.as_ref() }.map(f)
}

/// The name of the running coroutine, given with
/// [`SpawnBuilder::name`](crate::SpawnBuilder::name); `None` for an
/// unnamed coroutine, and outside a coroutine (or in a `Drop` that runs
/// after its closure has returned).
///
/// ```
/// let rt = swco_executor::Runtime::builder().executors(1).build().unwrap();
/// let h = rt.spawn_builder().name("ticker").spawn(swco_executor::current_name).unwrap();
/// assert_eq!(h.join().unwrap().as_deref(), Some("ticker"));
/// assert_eq!(swco_executor::current_name(), None);
/// ```
#[must_use]
pub fn current_name() -> Option<String> {
    with_spawn_info(|info| info.name.as_deref().map(str::to_owned)).flatten()
}

/// The id of the running coroutine (its [`JoinHandle::id`]); `None`
/// outside a coroutine (or in a `Drop` that runs after its closure has
/// returned).
///
/// ```
/// let rt = swco_executor::Runtime::builder().executors(1).build().unwrap();
/// let h = rt.spawn(swco_executor::current_id);
/// let id = h.id();
/// assert_eq!(h.join().unwrap(), Some(id));
/// ```
#[must_use]
pub fn current_id() -> Option<u64> {
    with_spawn_info(|info| info.id)
}

/// Lets the other runnable coroutines of this executor run, then continues.
/// When none is runnable (and no timer is due, nor anything waiting in the
/// executor's inbox), it continues at once, without a trip through the
/// executor loop. A cancellation through the join handle is raised here as
/// at any suspension. Outside a coroutine (or inside a panic hook), yields
/// the OS thread.
pub fn yield_now() {
    match Local::current().filter(|l| l.can_suspend()) {
        Some(local) => {
            // A cancellation a rendezvous receive put off goes on now.
            swco_wait::hook::resume_deferred_unwind();
            local.yield_running()
        }
        None => thread::yield_now(),
    }
}

/// Suspends the current coroutine for at least `duration`, on its
/// executor's timer: the executor's other coroutines keep running, which
/// `std::thread::sleep` would stop. Outside a coroutine (or inside a panic
/// hook) it is `std::thread::sleep`.
///
/// A cancelling shutdown (`Runtime::shutdown_timeout`) unwinds a sleeping
/// coroutine like a blocked one.
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let rt = swco_executor::Runtime::builder().executors(1).build().unwrap();
/// // Two sleepers on one executor overlap: the second does not wait for
/// // the first.
/// let start = Instant::now();
/// let a = rt.spawn_on(0, || swco_executor::sleep(Duration::from_millis(50))).unwrap();
/// let b = rt.spawn_on(0, || swco_executor::sleep(Duration::from_millis(50))).unwrap();
/// a.join().unwrap();
/// b.join().unwrap();
/// assert!(start.elapsed() >= Duration::from_millis(50));
/// ```
pub fn sleep(duration: Duration) {
    match Instant::now().checked_add(duration) {
        Some(deadline) => sleep_until(deadline),
        // Further than `Instant` reaches: for ever, as good as.
        None => loop {
            sleep_until(Instant::now() + Duration::from_secs(3600 * 24 * 365));
        },
    }
}

/// Suspends the current coroutine until `deadline` (at once if it has
/// passed), on its executor's timer; see [`sleep`]. Outside a coroutine it
/// sleeps the OS thread.
// The `expect` states an internal invariant; callers cannot reach it.
#[allow(clippy::missing_panics_doc)]
pub fn sleep_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        match Local::current().filter(|l| l.can_suspend()) {
            Some(local) => {
                let header = local
                    .running_header()
                    .expect("a coroutine that can suspend is running");
                // A cancellation a rendezvous receive put off goes on now.
                swco_wait::hook::resume_deferred_unwind();
                // Nobody holds a waker for this coroutine, so only the
                // timer (or a cancelling shutdown) resumes it; the loop
                // absorbs any early return all the same.
                // SAFETY: the running coroutine, on its executor thread,
                // about to park.
                unsafe { header.waiting.set(WaitingOn::op(Op::Sleep)) };
                if header.state.prepare_park() {
                    local.suspend(Suspend::Park(Some(deadline)));
                }
            }
            None => thread::sleep(deadline - now),
        }
    }
}

/// The index of the executor (CPE) running the current coroutine; `None`
/// outside a coroutine.
#[must_use]
pub fn current_cpe() -> Option<usize> {
    Local::current()
        .filter(|l| l.in_coroutine())
        .map(|l| l.shared.index)
}

/// Whether the runtime of the current coroutine has begun shutting down
/// ([`Runtime::shutdown`](crate::Runtime::shutdown) or its drop, which wait
/// for live coroutines). A coroutine that serves others for as long as they
/// run (a bridge, a server loop) checks it to end itself, so that shutdown
/// does not wait for it for ever. `false` outside a coroutine.
///
/// ```
/// let rt = swco_executor::Runtime::builder().executors(1).build().unwrap();
/// let server = rt.spawn(|| {
///     while !swco_executor::shutdown_requested() {
///         swco_executor::sleep(std::time::Duration::from_millis(1));
///     }
/// });
/// // Ends once the server notices and returns: nothing is left to cancel.
/// assert!(rt.shutdown_timeout(std::time::Duration::from_secs(60)).is_ok());
/// assert!(server.join().is_ok());
/// ```
#[must_use]
pub fn shutdown_requested() -> bool {
    Local::current()
        .filter(|l| l.in_coroutine())
        // Relaxed: a hint polled in a loop; shutdown's own SeqCst pair with
        // `live` does not depend on this load.
        .is_some_and(|l| l.runtime.closed.load(Ordering::Relaxed))
}
