//! The executor loop: drain the inbox, run what is next, fire timers, and
//! when nothing is left watch the inbox briefly, then park; stop when the
//! runtime says so and nothing is live; under a cancelling shutdown, unwind
//! what is left.
//!
//! # Invariants
//!
//! * The loop parks only through the inbox's sleep protocol, after seeing
//!   it empty (see `inbox.rs`), and never past the next timer deadline or,
//!   while free stacks hold memory, the next trim.
//! * It exits only when asked to stop and its `live` count is 0, and the
//!   exit is a Dekker pair with spawners (`exited` / `live`, both
//!   `SeqCst`): a spawner either sees it gone or it sees the spawn.
//! * Idle watching is bounded ([`IDLE_GRACE`]) and yields the core between
//!   looks unless each executor has a core and a peer executor is busy:
//!   nothing spins for ever, nor holds a core another thread needs.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::schedule::Runnable;
use super::Local;
use crate::shared::{bump, raise, StopMode};
use crate::stack;
use crate::stall::{Sighting, Verdict};
use crate::sync::Parker;

/// How long an executor with nothing to run watches its inbox before it
/// parks its thread.
const IDLE_GRACE: std::time::Duration = std::time::Duration::from_micros(20);

impl Local {
    /// Every [`stack::TRIM_PERIOD`], gives back the memory of the free
    /// stacks that nobody used during the whole period (see `stack/slab.rs`).
    fn trim_stacks_if_due(&self) {
        let now = Instant::now();
        if now < self.next_trim.get() {
            return;
        }
        self.next_trim.set(now + stack::TRIM_PERIOD);
        let mut pool = self.pool.borrow_mut();
        let released = pool.trim();
        bump(&self.shared.counters.stacks_released, released as u64);
        raise(
            &self.shared.counters.stack_high_water,
            pool.high_water() as u64,
        );
    }

    pub(super) fn run(&self, parker: &Parker) {
        let mut since_timers = 0u32;
        loop {
            self.drain_inbox();
            // A cancelling shutdown takes effect before the next resume, not
            // after the run queue drains: coroutines that keep yielding are
            // unwound at their next suspension, ones not started yet never
            // run. Relaxed first look (the common case, no shutdown, is one
            // load of a line nobody writes); Acquire pairs with
            // request_stop's Release.
            if self.shared.stop_mode(Ordering::Relaxed) == StopMode::Cancel
                && !self.cancelling.get()
                && self.shared.stop_mode(Ordering::Acquire) == StopMode::Cancel
            {
                self.cancelling.set(true);
                self.kick_cancel();
            }
            if self.idle.get() {
                self.set_idle(false);
            }
            // Timers are checked when idle, and every 64 runs so a busy
            // executor does not starve a timed-out waiter.
            let mut next = None;
            if since_timers < 64 {
                next = self.next_runnable();
            }
            if next.is_none() {
                since_timers = 0;
                self.fire_timers();
                self.trim_stacks_if_due();
                next = self.next_runnable().or_else(|| self.steal());
            }
            if let Some(runnable) = next {
                match runnable {
                    Runnable::Slot(slot) => self.run_task(slot),
                    Runnable::Job(job) => self.launch(job),
                }
                since_timers += 1;
                continue;
            }
            // Nothing runnable: other executors may offer us work.
            self.set_idle(true);
            // Acquire: pairs with request_stop's Release.
            match self.shared.stop_mode(Ordering::Acquire) {
                StopMode::Stop | StopMode::Cancel
                    if self.shared.live.load(Ordering::Relaxed) == 0 =>
                {
                    // SeqCst (both): the Dekker pair with `submit`'s `live`
                    // increment and `exited` load: either the spawner sees
                    // us gone and places its job elsewhere, or we see its
                    // job and stay.
                    self.shared.exited.store(true, Ordering::SeqCst);
                    if self.shared.live.load(Ordering::SeqCst) != 0 {
                        self.shared.exited.store(false, Ordering::SeqCst);
                        continue;
                    }
                    self.set_idle(false);
                    return;
                }
                // Coroutines left are parked in a `Drop` that blocks during
                // their unwinding (they run it to the end when woken), or
                // were passed over by `raise_cancel`: try those again once
                // something has finished.
                StopMode::Cancel if self.finished_while_cancelling.get() => {
                    self.kick_cancel();
                    continue;
                }
                StopMode::Run | StopMode::Stop | StopMode::Cancel => {}
            }
            // A short grace period before parking. Waking a parked thread
            // costs tens of microseconds on an idle virtual machine (its vCPU
            // has halted), while a peer on another executor often answers
            // within a few. The grace is bounded and short, so on a busy
            // machine it costs at most that much of the core per idle spell.
            // Then the inbox's sleep protocol: one CAS marks it `SLEEPING`
            // unless a push came in since the last look (then drain, not
            // park), and the push that clears the mark unparks us (see
            // `inbox.rs`).
            if self.idle_grace() {
                continue;
            }
            let mut earliest = self.earliest_deadline();
            // Counted idle for stall reports: no coroutine deadline here.
            let stall_at = match self.runtime.stall_report {
                Some(period) if earliest.is_none() => Some(self.enter_idle(period)),
                _ => None,
            };
            if let Some(Some(at)) = stall_at {
                earliest = Some(at);
            }
            if self.pool.borrow().holds_spare_memory() {
                // Wake up for the next trim: an idle executor gives its
                // unused stacks' memory back too.
                let trim = self.next_trim.get();
                earliest = Some(earliest.map_or(trim, |t| t.min(trim)));
            }
            if self.shared.inbox.park(parker, earliest) {
                bump(&self.shared.counters.parks, 1);
            }
            if let Some(at) = stall_at {
                self.leave_idle(at);
            }
        }
    }

    /// Counts this executor idle, about to park with no coroutine
    /// deadline. If that makes every executor idle, it watches for a stall:
    /// the time at which to report one (kept across parks while nothing
    /// runs, so a wake for a stack trim does not put the report off).
    fn enter_idle(&self, period: std::time::Duration) -> Option<Instant> {
        let n = self.runtime.executors();
        if !self.runtime.stall.enter(n) {
            self.watch.set(None);
            return None;
        }
        // Read after counting in: see `stall.rs`.
        let watch = self.runtime.progress();
        let since = match self.watch.get() {
            Some((held, since)) if held == watch => since,
            _ => Instant::now(),
        };
        self.watch.set(Some((watch, since)));
        Some(since + period)
    }

    /// Back from a park counted idle (`stall_at`: when a stall would be
    /// reported, if this executor watches): reports the stall if it is
    /// due, still holds and was not reported yet, then counts itself out.
    fn leave_idle(&self, stall_at: Option<Instant>) {
        let stall = &self.runtime.stall;
        if let (Some(at), Some((watch, since))) = (stall_at, self.watch.get()) {
            if Instant::now() >= at {
                let n = self.runtime.executors();
                let seen = Sighting {
                    // SeqCst: pairs with spawns and finishes
                    // (`RuntimeShared::live`).
                    live: self.runtime.live.load(Ordering::SeqCst),
                    blocking_busy: self.runtime.blocking.busy(),
                    all_idle: stall.all_idle(n),
                    progress_unchanged: self.runtime.progress() == watch,
                    inbox_pending: self
                        .runtime
                        .executor_shared()
                        .iter()
                        .any(|e| e.inbox.is_pending()),
                };
                match seen.verdict() {
                    Verdict::Rewatch => self.watch.set(Some((watch, Instant::now()))),
                    Verdict::Stalled if stall.claim_report(watch) => {
                        let dump = self.runtime.dump(Some(self));
                        eprintln!(
                            "swco: stalled: {}, none runnable and none with a deadline, nothing \
                             woken for {:.1?}. This is a report, not an abort: a plain thread (or \
                             a coroutine of another runtime) may still wake them.\n{dump}",
                            crate::dump::count(seen.live, "live coroutine"),
                            since.elapsed()
                        );
                    }
                    Verdict::Stalled | Verdict::NoStall => {}
                }
            }
        }
        stall.leave();
    }

    /// Publishes whether this executor has nothing to run.
    fn set_idle(&self, idle: bool) {
        self.idle.set(idle);
        // Relaxed: a hint for `offer_work`; see `ExecutorShared::idle`.
        self.shared.idle.store(idle, Ordering::Relaxed);
    }

    /// Cancelling shutdown: makes every parked coroutine not yet cancelled
    /// runnable, winning its `WAITING -> RUNNING` transition like a wake (so
    /// no waker can schedule it a second time); it unwinds when resumed
    /// (`raise_cancel`). Coroutines already runnable unwind when they run;
    /// ones not yet started only drop their closure.
    fn kick_cancel(&self) {
        self.finished_while_cancelling.set(false);
        let table = self.tasks.borrow();
        let mut run_queue = self.run_queue.borrow_mut();
        for slot in 0..table.slot_count() {
            let Some(task) = table.get(slot) else {
                continue;
            };
            // Relaxed: only this thread touches the flag.
            if !task.header.cancel_raised.load(Ordering::Relaxed) && task.header.state.expire() {
                run_queue.0.push_back(slot);
                bump(&self.shared.counters.wakes, 1);
            }
        }
    }

    /// Watches the inbox for up to [`IDLE_GRACE`]; `true` if something
    /// arrived.
    fn idle_grace(&self) -> bool {
        let start = Instant::now();
        loop {
            for _ in 0..64 {
                if self.shared.inbox.is_pending() {
                    return true;
                }
                std::hint::spin_loop();
            }
            if start.elapsed() >= IDLE_GRACE {
                return self.shared.inbox.is_pending();
            }
            // Give the core away between looks: when more threads want to
            // run than there are cores (MPI ranks with their bridge threads,
            // other programs), the thread that would feed the inbox may be
            // waiting for this very core. With nobody else runnable the
            // yield returns at once, but it is a system call: one thread
            // yielding in a loop slows a coroutine workload on the other
            // core (the hypervisor and the kernel's scheduler both take
            // their share), while a `pause` loop does not. So while a peer
            // executor works and every executor has a core of its own, the
            // likely feeder is that peer, running, and the watch does not
            // yield. Spinning always was measured the other way: it slowed
            // an MPI rank's executor whose feeder is a bridge thread of the
            // same process.
            if !(self.runtime.core_each && self.runtime.peer_busy(self.shared.index)) {
                std::thread::yield_now();
            }
        }
    }

    /// The executor is exiting: nothing is live here any more. A task still
    /// in the task table would be a bookkeeping bug; it is leaked rather
    /// than dropped, because dropping a suspended corosensei coroutine
    /// unwinds it from outside, where a blocking `Drop` cannot suspend.
    pub(super) fn leak_leftovers(&self) {
        let deepest = self.pool.borrow_mut().measure_free();
        crate::shared::raise(&self.shared.counters.stack_high_water, deepest as u64);
        let mut table = self.tasks.borrow_mut();
        while let Some(task) = table.take_any() {
            eprintln!(
                "swco: executor swco-cpe-{} exits with a live coroutine; it is leaked",
                self.shared.index
            );
            std::mem::forget(task);
        }
        self.run_queue.borrow_mut().0.clear();
        self.run_next.set(None);
    }
}
