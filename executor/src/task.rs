//! A coroutine as its executor holds it ([`Task`]), and the part of it
//! every waker holds ([`TaskHeader`]): its wake state (`wake.rs`), slot and
//! home executor. A [`Suspend`] says why a coroutine handed control back.
//!
//! # Invariants
//!
//! * **No migration.** A coroutine is created, resumed and dropped only on its
//!   home executor thread. Other threads only ever see its [`TaskHeader`]
//!   (wake state, slot, home), which is `Send + Sync`.

use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

use corosensei::{Coroutine, Yielder};
use std::cell::UnsafeCell;
use swco_wait::hook::{Op, WaitingOn};

use crate::inbox::WakeLink;
use crate::join::{CancelFlag, SpawnInfo};
use crate::shared::ExecutorShared;
use crate::stack;
use crate::wake::WakeState;

/// Why a coroutine handed control back to its executor.
pub(crate) enum Suspend {
    /// `yield_now`: run me again after the others.
    Yield,
    /// Parked on a channel or join: run me when woken or at the deadline.
    Park(Option<Instant>),
}

pub(crate) type Co = Coroutine<(), Suspend, (), stack::CoStack>;

/// What every waker of a coroutine holds: enough to put it back on its home
/// executor's run queue from any thread.
///
/// Its [`Wake`](std::task::Wake) impl is in `executor/schedule.rs`, with the run
/// queue it schedules onto.
pub(crate) struct TaskHeader {
    pub(crate) state: WakeState,
    /// Its cell in the home executor's inbox, for remote wakes.
    pub(crate) link: WakeLink,
    pub(crate) slot: usize,
    pub(crate) home: Arc<ExecutorShared>,
    /// Set once a cancelling shutdown has dealt with this coroutine (raised
    /// [`Cancelled`](crate::panic::Cancelled) in it, or started it as
    /// [`Start::Cancel`](crate::job::Start::Cancel)); it then runs
    /// its unwinding to the end, suspending as it needs, and is never
    /// cancelled twice. Only the home executor thread touches it.
    pub(crate) cancel_raised: AtomicBool,
    /// Where its stack lies and where it last parked, for the wake that
    /// prefetches its frames.
    pub(crate) parked: ParkedAt,
    /// A waker for this coroutine that owns no reference count, lent to
    /// blocking channel operations for the length of a wait
    /// (`Park::waker_ref`): the header outlives every wait of its
    /// coroutine. Set once, right after the header is made
    /// (`park::lent_waker`); it points at the header itself, so it stays
    /// right when the header is reused.
    pub(crate) lent: Option<ManuallyDrop<Waker>>,
    /// What its spawn said about it (id, name), while its closure runs;
    /// null otherwise. Set and cleared by the job around the closure
    /// (`Spawned::launch`), which holds the allocation it points into;
    /// only the home executor thread touches it.
    pub(crate) info: AtomicPtr<SpawnInfo>,
    /// Its cancel request flag ([`JoinHandle::cancel`](crate::JoinHandle::cancel)),
    /// while its closure runs; null otherwise. Set and cleared with `info`,
    /// in the same allocation, on the home executor thread only.
    pub(crate) cancel: AtomicPtr<CancelFlag>,
    /// What it waits on, as its last park said (for a runtime's dump).
    pub(crate) waiting: WaitingCell,
}

/// What a coroutine waits on, as its last park said: written by the
/// coroutine as it parks, read by its executor's dump while it is parked;
/// both on the home executor thread, so no synchronisation.
///
/// The descriptor borrows from the frame of the operation that parks
/// (its channel, say), which stays on the coroutine's suspended stack until
/// the coroutine is resumed; its lifetime is erased here, and only a read
/// while the coroutine is still parked in that operation may look at it.
pub(crate) struct WaitingCell(UnsafeCell<WaitingOn<'static>>);

// SAFETY: only the home executor thread touches the cell (the contracts of
// `set` and `get`); other threads holding the header never do.
unsafe impl Send for WaitingCell {}
// SAFETY: as above.
unsafe impl Sync for WaitingCell {}

impl WaitingCell {
    fn new() -> Self {
        WaitingCell(UnsafeCell::new(WaitingOn::op(Op::Park)))
    }

    /// Records what the coroutine is about to park on.
    ///
    /// # Safety
    ///
    /// Called by the coroutine itself, on its home executor thread, on its
    /// way into a park in the operation that `on` borrows from (it may
    /// still not suspend, if a wake came first).
    #[inline(always)]
    pub(crate) unsafe fn set(&self, on: WaitingOn<'_>) {
        // SAFETY: only the lifetime changes; `get`'s contract keeps reads
        // within the park that `on` outlives. Only this thread touches the
        // cell (our contract), and nothing reads it while this runs.
        unsafe {
            *self.0.get() = std::mem::transmute::<WaitingOn<'_>, WaitingOn<'static>>(on);
        }
    }

    /// What the coroutine's current park waits on.
    ///
    /// # Safety
    ///
    /// On the home executor thread, between resumes, while the coroutine
    /// is parked (its wake state `WAITING`): its last park set the cell
    /// (every park does), and the borrow inside lasts until it is resumed.
    pub(crate) unsafe fn get(&self) -> WaitingOn<'_> {
        // SAFETY: our contract: this thread only, no write under way.
        unsafe { *self.0.get() }
    }
}

/// Where a coroutine's stack is, and about where its stack pointer was and
/// which scheduling decision its executor was at when it last parked:
/// enough for a local wake to start loading the frames its resumption
/// returns through, and its job's body, which it completes when it returns
/// (`Local::prefetch`), and to skip that when it parked so recently that
/// they are still in cache.
///
/// Written and read only by the home executor thread (a remote wake does
/// not prefetch); the atomics, all `Relaxed`, are there because the header
/// is shared with wakers on other threads, which never touch these.
pub(crate) struct ParkedAt {
    /// Highest address of the stack (its frames start just below).
    top: AtomicUsize,
    /// Its job's body (closure and join slot), which it completes when it
    /// returns.
    body: AtomicUsize,
    /// 0 until it first parks.
    sp: AtomicUsize,
    tick: AtomicU32,
}

impl ParkedAt {
    /// How much of a woken coroutine's stack a wake prefetches.
    const MAX_BYTES: usize = 1536;
    /// How far below its last frame a parked coroutine's saved registers
    /// reach (the switch pushes them there).
    const SWITCH_FRAME: usize = 256;
    /// A coroutine that parked fewer scheduling decisions ago than this is
    /// taken to be still in cache: its top frames in the core's L2 at
    /// least, where a prefetch saves less than its own instructions cost.
    const RECENT: u32 = 128;

    /// A coroutine that has not parked yet, whose stack's highest address
    /// is `top` and whose job body is at `body`.
    fn new(top: usize, body: usize) -> Self {
        ParkedAt {
            top: AtomicUsize::new(top),
            body: AtomicUsize::new(body),
            sp: AtomicUsize::new(0),
            tick: AtomicU32::new(0),
        }
    }

    /// Records that the running coroutine parks with its stack pointer
    /// about `sp`, at scheduling decision `tick`.
    #[inline]
    pub(crate) fn record(&self, sp: usize, tick: u32) {
        self.sp.store(sp, Ordering::Relaxed);
        self.tick.store(tick, Ordering::Relaxed);
    }

    /// The stack range worth prefetching for a wake at decision `tick`:
    /// from just below where it parked up through the frames it returns
    /// through, at most [`Self::MAX_BYTES`]. `None` if it never parked or
    /// parked recently.
    #[inline]
    pub(crate) fn frames(&self, tick: u32) -> Option<(usize, usize)> {
        let sp = self.sp.load(Ordering::Relaxed);
        if sp == 0 || tick.wrapping_sub(self.tick.load(Ordering::Relaxed)) < Self::RECENT {
            return None;
        }
        let from = sp.saturating_sub(Self::SWITCH_FRAME);
        let top = self.top.load(Ordering::Relaxed);
        Some((from, top.min(from + Self::MAX_BYTES)))
    }

    /// The highest address of its stack.
    #[inline]
    pub(crate) fn top(&self) -> usize {
        self.top.load(Ordering::Relaxed)
    }

    /// The address of its job's body (see [`Job::body_addr`](crate::job::Job::body_addr)).
    #[inline]
    pub(crate) fn body(&self) -> usize {
        self.body.load(Ordering::Relaxed)
    }
}

impl TaskHeader {
    /// Makes a header that nothing else references (its finished
    /// coroutine's, taken back by its executor) the header of a new
    /// coroutine of the same executor, as [`new`](Self::new) would with the
    /// same `home`. `&mut` proves that no waker, inbox or task holds it.
    pub(crate) fn reuse(&mut self, slot: usize, stack_top: usize, body: usize) {
        self.state = WakeState::new();
        self.link = WakeLink::new(slot);
        self.slot = slot;
        *self.cancel_raised.get_mut() = false;
        *self.info.get_mut() = std::ptr::null_mut();
        *self.cancel.get_mut() = std::ptr::null_mut();
        self.waiting = WaitingCell::new();
        self.parked = ParkedAt::new(stack_top, body);
    }

    /// The header of a new coroutine in `slot` of executor `home`, whose
    /// stack's highest address is `stack_top`.
    pub(crate) fn new(
        slot: usize,
        home: Arc<ExecutorShared>,
        stack_top: usize,
        body: usize,
    ) -> Self {
        TaskHeader {
            state: WakeState::new(),
            link: WakeLink::new(slot),
            slot,
            home,
            cancel_raised: AtomicBool::new(false),
            parked: ParkedAt::new(stack_top, body),
            lent: None,
            info: AtomicPtr::new(std::ptr::null_mut()),
            cancel: AtomicPtr::new(std::ptr::null_mut()),
            waiting: WaitingCell::new(),
        }
    }
}

impl TaskHeader {
    /// Whether cancellation of this coroutine was requested through its
    /// join handle. On the home executor thread, while the coroutine runs.
    #[inline]
    pub(crate) fn cancel_requested(&self) -> bool {
        // Relaxed: only this thread writes the pointer.
        let flag = self.cancel.load(Ordering::Relaxed);
        // SAFETY: a non-null pointer was set by the job's launch around the
        // closure and is cleared before that launch lets go of the
        // allocation it points into (`ShownInfo` in `spawning.rs`); we are
        // on the home thread, inside the running coroutine, so inside that
        // launch.
        !flag.is_null() && unsafe { (*flag).is_requested() }
    }
}

/// One coroutine as its executor holds it.
pub(crate) struct Task {
    pub(crate) co: Co,
    pub(crate) header: Arc<TaskHeader>,
    /// The coroutine's yielder, known after its first run (null before).
    pub(crate) yielder: *const Yielder<(), Suspend>,
    /// Lowest address of the stack's guard page (for the overflow message).
    pub(crate) guard: usize,
    /// Identifies this task's live timer heap entry (0: none). Cleared when
    /// the entry fires or the task is resumed before it (the entry then
    /// stays in the heap, stale, until it fires or is compacted away).
    pub(crate) timer_seq: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_start_below_the_parking_point_and_stop_at_the_top() {
        let top = 0x10_0000;
        let p = ParkedAt::new(top, 0);
        assert_eq!(p.frames(1_000), None, "never parked: nothing to prefetch");
        p.record(top - 0x300, 7);
        assert_eq!(p.frames(7 + ParkedAt::RECENT - 1), None, "parked recently");
        let (from, to) = p.frames(7 + ParkedAt::RECENT).expect("parked long ago");
        assert_eq!(from, top - 0x300 - ParkedAt::SWITCH_FRAME);
        assert_eq!(to, top, "a shallow stack is prefetched up to its top");
        // A deep stack: only the frames nearest the parking point.
        p.record(top - 0x8000, u32::MAX - 2);
        let later = (u32::MAX - 2).wrapping_add(ParkedAt::RECENT);
        let (from, to) = p.frames(later).expect("ticks wrap");
        assert_eq!(to - from, ParkedAt::MAX_BYTES);
        assert_eq!(from, top - 0x8000 - ParkedAt::SWITCH_FRAME);
    }
}
