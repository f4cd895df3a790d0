//! Blocking work off the executors: the runtime's blocking pool, on whose
//! threads `unblock` and `Runtime::spawn_blocking` (their front ends are in
//! `runtime/unblocking.rs`) run a closure (the MPE side of the chip, where
//! a blocking system call may stop a whole thread), while only the
//! coroutine that waits for it suspends. The pool knows nothing of
//! executors or of the runtime: it runs closures and completes slots.
//!
//! The pool starts threads on demand (`swco-blocking-<n>`), at most
//! `RuntimeBuilder::blocking_threads` of them at once; a job that finds
//! them all busy waits in the pool's queue. A thread with nothing to do for
//! the keep-alive ([`DEFAULT_BLOCKING_KEEP_ALIVE`]) exits.
//!
//! # Invariants
//!
//! * A job's result travels through a [`JoinSlot`]: the pool thread
//!   completes it, the waiter `join`s it. So the wake-up cannot be lost
//!   (the slot's own invariants, `join.rs`), and a coroutine that waits
//!   suspends through the executor's park hook, exactly as a join on a
//!   coroutine does.
//! * Every job accepted is either run or dropped unrun; either way its
//!   slot is completed (dropping the job drops its `Completer`, which
//!   completes the slot as cancelled), so no waiter waits for ever on a job
//!   the pool let go.
//! * `notified <= idle`: a submitter that finds a waiting thread claims it
//!   (`notified += 1`) before it notifies, and the thread that wakes with a
//!   claim pending takes it back (`idle -= 1; notified -= 1`). So two jobs
//!   submitted at once never count on the same idle thread, and a job never
//!   waits in the queue while a thread could still be started for it.
//! * No user code runs under the pool's lock, and no panic (of a job, of
//!   the `Drop` of its result or of its closure) ends a pool thread or
//!   reaches the shutdown.
//! * After [`BlockingPool::shut_down`] no job is accepted: the runtime's
//!   coroutines have all finished by then, and the shutdown waits only for
//!   what it knows of.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use crate::join::{JoinError, JoinHandle, JoinSlot, SpawnInfo};
use crate::panic::drop_payload;

/// The default of [`RuntimeBuilder::blocking_threads`](crate::RuntimeBuilder::blocking_threads):
/// at most 512 pool threads, as tokio's blocking pool. Threads start only
/// when jobs need them, so the figure is a ceiling, not a cost.
pub const DEFAULT_BLOCKING_THREADS: usize = 512;

/// How long a blocking-pool thread waits for a new job before it exits:
/// 10 s, as tokio's. A burst of blocking calls keeps its threads for the
/// next burst; an idle runtime holds none.
pub const DEFAULT_BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(10);

/// A job: runs the user's closure and completes its slot. Dropped unrun,
/// it completes the slot as cancelled (its `Completer`'s `Drop`).
type Task = Box<dyn FnOnce() + Send + 'static>;

/// Why the pool did not take a job (which is handed back).
pub(crate) enum Refusal {
    /// The runtime has shut the pool down.
    ShutDown,
    /// No pool thread runs and none could be started.
    NoThread(std::io::Error),
}

struct PoolState {
    queue: VecDeque<Task>,
    /// Pool threads started and not yet exited.
    threads: usize,
    /// Threads waiting for a job.
    idle: usize,
    /// Idle threads a submitter has claimed and notified (see the module
    /// invariants).
    notified: usize,
    /// Jobs running now.
    running: usize,
    shut: bool,
    /// The threads started, so that the shutdown joins them (those that
    /// exited after their keep-alive are pruned at each start).
    handles: Vec<thread::JoinHandle<()>>,
}

/// A runtime's blocking pool (one per runtime, shared with its threads).
pub(crate) struct BlockingPool {
    max: usize,
    keep_alive: Duration,
    state: Mutex<PoolState>,
    /// A job was queued for a waiting thread, or the pool shuts down.
    work: Condvar,
    /// A thread exited (the shutdown waits for all of them).
    exited: Condvar,
    /// Names threads `swco-blocking-<n>`, `n` counting from 0 per runtime.
    next_name: AtomicUsize,
}

impl BlockingPool {
    /// A pool of at most `max` threads (at least 1), none started yet.
    pub(crate) fn new(max: usize, keep_alive: Duration) -> Arc<Self> {
        debug_assert!(max > 0, "the builder refuses blocking_threads(0)");
        Arc::new(BlockingPool {
            max,
            keep_alive,
            state: Mutex::new(PoolState {
                queue: VecDeque::new(),
                threads: 0,
                idle: 0,
                notified: 0,
                running: 0,
                shut: false,
                handles: Vec::new(),
            }),
            work: Condvar::new(),
            exited: Condvar::new(),
            next_name: AtomicUsize::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // No user code runs under the lock, so it is never poisoned; if it
        // were, its state is still consistent (every update is complete
        // before anything that could panic).
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `task`, waking an idle thread or starting one if all are
    /// busy and fewer than `max` run; else it waits for a thread to finish
    /// its job. Refused (and handed back) once the pool is shut down, or if
    /// no thread runs and none can be started.
    fn submit(self: &Arc<Self>, task: Task) -> Result<(), (Task, Refusal)> {
        let mut s = self.lock();
        if s.shut {
            return Err((task, Refusal::ShutDown));
        }
        // The job's identity, to find it again if no thread can run it.
        let key = (&*task as *const (dyn FnOnce() + Send)).cast::<()>();
        s.queue.push_back(task);
        if s.idle > s.notified {
            s.notified += 1;
            drop(s);
            self.work.notify_one();
            return Ok(());
        }
        if s.threads < self.max {
            s.threads += 1;
            drop(s);
            let n = self.next_name.fetch_add(1, Ordering::Relaxed);
            let pool = self.clone();
            let started = thread::Builder::new()
                .name(format!("swco-blocking-{n}"))
                .spawn(move || pool.serve());
            let mut s = self.lock();
            match started {
                Ok(handle) => {
                    s.handles.retain(|h| !h.is_finished());
                    s.handles.push(handle);
                }
                Err(e) => {
                    s.threads -= 1;
                    if s.threads == 0 {
                        // Nobody would ever run what is queued: hand ours
                        // back, and drop the others (submitted meanwhile by
                        // callers who counted on our thread), which
                        // completes their slots as cancelled.
                        let queued = std::mem::take(&mut s.queue);
                        drop(s);
                        let mut ours = None;
                        for task in queued {
                            if (&*task as *const (dyn FnOnce() + Send)).cast::<()>() == key {
                                ours = Some(task);
                            } else {
                                crate::panic::drop_closure(task);
                            }
                        }
                        if let Some(task) = ours {
                            return Err((task, Refusal::NoThread(e)));
                        }
                        return Ok(());
                    }
                    // Another thread runs and will take it.
                }
            }
        }
        Ok(())
    }

    /// A pool thread's life: take jobs until none comes for the keep-alive,
    /// or the pool is shut down and its queue is empty.
    fn serve(&self) {
        let mut s = self.lock();
        loop {
            if let Some(task) = s.queue.pop_front() {
                s.running += 1;
                drop(s);
                // The job catches its closure's panic itself; this catches
                // what could still escape (the `Drop` of a result nobody
                // will join, run as the slot goes), so the thread lives on.
                if let Err(payload) = catch_unwind(AssertUnwindSafe(task)) {
                    drop_payload(payload);
                }
                s = self.lock();
                s.running -= 1;
                continue;
            }
            if s.shut {
                break;
            }
            s.idle += 1;
            let (guard, waited) = self
                .work
                .wait_timeout(s, self.keep_alive)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            s = guard;
            s.idle -= 1;
            if s.notified > 0 {
                // A submitter counted on a waiting thread: this one goes.
                s.notified -= 1;
                continue;
            }
            if waited.timed_out() && s.queue.is_empty() {
                break;
            }
        }
        s.threads -= 1;
        drop(s);
        self.exited.notify_all();
    }

    /// Whether a job is queued or running: coroutines may be waiting on
    /// it, and a stall report would be false.
    pub(crate) fn busy(&self) -> bool {
        let s = self.lock();
        s.running > 0 || !s.queue.is_empty()
    }

    /// Refuses new jobs, then waits until every queued and running job
    /// has finished and every pool thread has exited, or until `deadline`.
    /// At the deadline, the jobs still queued are dropped unrun (their
    /// handles report cancelled) and the running ones are left to their
    /// threads, detached: a blocking call cannot be unwound. Returns how
    /// many jobs were left running.
    pub(crate) fn shut_down(&self, deadline: Option<Instant>) -> usize {
        let mut s = self.lock();
        s.shut = true;
        self.work.notify_all();
        while s.threads > 0 {
            match deadline {
                None => {
                    s = self
                        .exited
                        .wait(s)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        let dropped = std::mem::take(&mut s.queue);
                        let running = s.running;
                        drop(s);
                        for task in dropped {
                            crate::panic::drop_closure(task);
                        }
                        return running;
                    }
                    s = self
                        .exited
                        .wait_timeout(s, d - now)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
            }
        }
        // Every thread has left its loop: join them, so none outlives the
        // shutdown (a thread that counted itself out is about to return).
        let handles = std::mem::take(&mut s.handles);
        drop(s);
        for h in handles {
            // A pool thread catches every panic of its jobs.
            let _ = h.join();
        }
        0
    }

    /// Runs `f` on a pool thread; its result (or panic) comes back through
    /// the returned handle. Refused jobs come back with `f` unrun.
    #[track_caller]
    pub(crate) fn spawn<F, T>(
        self: &Arc<Self>,
        id: u64,
        f: F,
    ) -> Result<JoinHandle<T>, (F, Refusal)>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (completer, handle) = JoinSlot::pair_with(blocking_info(id, Location::caller()));
        // The closure travels in a cell the task shares with this frame, so
        // that a refused task gives it back to the caller unrun.
        let cell = Arc::new(Mutex::new(Some(f)));
        let mine = cell.clone();
        let task: Task = Box::new(move || {
            let f = mine
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some(f) = f {
                let result = catch_unwind(AssertUnwindSafe(f)).map_err(JoinError::panic);
                completer.complete(result);
            }
        });
        match self.submit(task) {
            Ok(()) => Ok(handle),
            Err((task, why)) => {
                drop(task); // completes the (unshared) slot as cancelled
                let f = cell
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take()
                    .expect("a refused task never ran");
                Err((f, why))
            }
        }
    }
}

/// What a blocking job's handle says of it (its id, where it was spawned).
pub(crate) fn blocking_info(id: u64, at: &'static Location<'static>) -> SpawnInfo {
    SpawnInfo {
        id,
        at,
        name: Some("blocking".into()),
        stack_size: 0,
    }
}
