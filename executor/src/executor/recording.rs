//! The executor's trace hooks: where a coroutine runs, is spawned, parks
//! and is woken, each calls this executor's [`Recorder`] (`trace.rs`) when
//! the runtime records a trace.
//!
//! # Invariants
//!
//! * With tracing off, a hook is one test of `Local::tracing` (a byte
//!   compared in memory, one instruction and a branch) and nothing more:
//!   the recording itself is out of line and cold.
//! * Only the executor thread records into its recorder; wakes from other
//!   threads are recorded as its inbox is drained.
//! * A park is read off the end of the run it ends (the resumption returns
//!   `Suspend::Park`): the suspend path has no hook of its own. There are
//!   no direct hand-offs while tracing (`Local::nested` stays set), so no
//!   run starts inside another's park.

use corosensei::CoroutineResult;

use super::Local;
use crate::job::Job;
use crate::task::{Co, Suspend};
use crate::trace::{Recorder, WakeFrom};

impl Local {
    /// Resumes `co` (the task in `slot`), recording the run when tracing.
    #[inline(always)]
    pub(super) fn resume_traced(&self, slot: usize, co: &mut Co) -> CoroutineResult<Suspend, ()> {
        match &self.trace {
            Some(recorder) if self.tracing => resume_recorded(recorder, slot, co),
            _ => co.resume(()),
        }
    }

    /// Records that `job` reached this executor.
    #[inline(always)]
    pub(super) fn trace_spawn(&self, job: &Job) {
        if !self.tracing {
            return;
        }
        if let Some(recorder) = &self.trace {
            if let Some(info) = job.info() {
                recorder.spawn(info.id, info.name.as_deref());
            }
        }
    }

    /// Names the coroutine `job` starts in `slot`, for the events that
    /// follow: its spawn info is reachable through the job until it starts,
    /// and through its header only while its closure runs.
    #[inline(always)]
    pub(super) fn trace_launch(&self, slot: usize, job: &Job) {
        if !self.tracing {
            return;
        }
        if let Some(recorder) = &self.trace {
            if let Some(info) = job.info() {
                recorder.launch(slot, info.id, info.name.as_deref());
            }
        }
    }

    /// Records a wake of the coroutine in `slot`, on this, its home thread.
    #[inline(always)]
    pub(super) fn trace_wake(&self, slot: usize, from: WakeFrom) {
        if !self.tracing {
            return;
        }
        if let Some(recorder) = &self.trace {
            recorder.wake(slot, from);
        }
    }

    /// Records the wakes other threads sent, as the inbox is drained.
    #[inline(always)]
    pub(super) fn trace_remote_wakes(&self, slots: &[usize]) {
        if !self.tracing {
            return;
        }
        if let Some(recorder) = &self.trace {
            recorder.remote_wakes(slots);
        }
    }

    /// The executor leaves its loop: its recording goes to the runtime,
    /// which writes the file once every executor thread is joined.
    pub(super) fn hand_in_trace(&self) {
        if let (Some(recorder), Some(sink)) = (&self.trace, &self.runtime.trace) {
            sink.hand_in(recorder.take());
        }
    }
}

/// [`Local::resume_traced`] with a trace: the run, and its park if it
/// parked. Out of line, so the untraced resume stays as it was.
#[cold]
#[inline(never)]
fn resume_recorded(recorder: &Recorder, slot: usize, co: &mut Co) -> CoroutineResult<Suspend, ()> {
    recorder.begin(slot);
    let result = co.resume(());
    recorder.end(matches!(result, CoroutineResult::Yield(Suspend::Park(_))));
    result
}
