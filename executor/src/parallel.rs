//! `parallel_for` and `parallel_reduce`: swYAKL's loops on the athread
//! model. One worker coroutine per executor (a scoped child, so the loop
//! body may borrow), a shared fetch-and-add counter handing out chunks of
//! `grain` indices ([`ChunkCounter`]: dynamic scheduling), and the caller
//! waiting for all of them, as the MPE waits for its CPEs.
//!
//! # Invariants
//!
//! * Every index runs exactly once when no body panics: the counter hands
//!   each chunk out once, and a worker runs every chunk it claims.
//! * A panicking body stops the handing out of chunks (the counter's
//!   flag, set by a guard that is disarmed only on a normal finish, since
//!   `thread::panicking` is per thread and so shared by the coroutines of
//!   an executor); the scope re-raises the first worker's panic once every
//!   worker has stopped.
//! * Nested loops cannot deadlock: an outer worker that runs an inner loop
//!   suspends (its executor runs the inner workers meanwhile), and an outer
//!   worker that does not suspend finishes after a bounded number of
//!   chunks, after which its executor runs the inner workers queued on it.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use crate::chunks::ChunkCounter;
use crate::executor::Local;
use crate::runtime::Runtime;
use crate::scope::{run_scope, Scope};
use crate::shared::RuntimeShared;

/// The grain `grain == 0` stands for: about eight chunks per executor, so
/// that dynamic scheduling can even out uneven chunks, and at least one
/// index per chunk.
fn auto_grain(len: usize, executors: usize) -> usize {
    (len / (8 * executors.max(1))).max(1)
}

/// Sets the counter's stop flag unless disarmed: a worker's body panicked
/// (or was unwound by a cancelling shutdown).
struct StopOnUnwind<'a> {
    counter: &'a ChunkCounter,
    armed: bool,
}

impl Drop for StopOnUnwind<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.counter.stop();
        }
    }
}

/// One worker: claims and maps chunks until none is left, folding its
/// results into `acc`.
fn work<T>(
    counter: &ChunkCounter,
    mut acc: T,
    map: &(impl Fn(Range<usize>) -> T + Sync),
    reduce: &(impl Fn(T, T) -> T + Sync),
) -> T {
    let mut guard = StopOnUnwind {
        counter,
        armed: true,
    };
    while let Some(chunk) = counter.claim() {
        acc = reduce(acc, map(chunk));
    }
    guard.armed = false;
    acc
}

/// The loop proper, in `scope`: one worker per executor, each leaving its
/// partial result in its own slot; the caller folds them in CPE order.
fn reduce_in<'scope, T, M, R>(
    s: &'scope Scope<'scope, '_>,
    counter: &'scope ChunkCounter,
    slots: &'scope [Mutex<Option<T>>],
    identity: &T,
    map: &'scope M,
    reduce: &'scope R,
) where
    T: Clone + Send + 'scope,
    M: Fn(Range<usize>) -> T + Sync,
    R: Fn(T, T) -> T + Sync,
{
    for (cpe, slot) in slots.iter().enumerate() {
        let init = identity.clone();
        let spawned = s.spawn_on(cpe, move || {
            let acc = work(counter, init, map, reduce);
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(acc);
        });
        if let Err(e) = spawned {
            // The runtime is shut down: no chunk may be left unrun quietly.
            counter.stop();
            panic!("swco: parallel loop could not start its workers: {e}");
        }
        // The handle is dropped: the scope waits for the worker and
        // re-raises its panic.
    }
}

/// `parallel_reduce` on the runtime `shared` (a runtime's, or the current
/// coroutine's).
fn parallel_reduce_on<T, M, R>(
    shared: Arc<RuntimeShared>,
    range: Range<usize>,
    grain: usize,
    identity: T,
    map: M,
    reduce: R,
) -> T
where
    T: Clone + Send,
    M: Fn(Range<usize>) -> T + Sync,
    R: Fn(T, T) -> T + Sync,
{
    let executors = shared.executors();
    let len = range.end.saturating_sub(range.start);
    if len == 0 {
        return identity;
    }
    let grain = if grain == 0 {
        auto_grain(len, executors)
    } else {
        grain
    };
    let counter = ChunkCounter::new(range, grain);
    // No more workers than chunks: the others would find nothing to do.
    let workers = executors.min(counter.chunks());
    let slots: Vec<Mutex<Option<T>>> = (0..workers).map(|_| Mutex::new(None)).collect();
    run_scope(shared, |s| {
        reduce_in(s, &counter, &slots, &identity, &map, &reduce);
    });
    let mut acc = identity;
    for slot in slots {
        // Every worker finished normally (the scope re-raised otherwise).
        if let Some(part) = slot.into_inner().unwrap_or_else(|e| e.into_inner()) {
            acc = reduce(acc, part);
        }
    }
    acc
}

impl Runtime {
    /// Runs `f` over `range` in chunks of `grain` indices, spread over one
    /// worker coroutine per executor that claim chunks from a shared
    /// fetch-and-add counter (dynamic scheduling, as swYAKL's
    /// `parallel_for` on the CPEs). Returns once every index has run; `f`
    /// may borrow from the caller. A reversed or empty range runs nothing.
    ///
    /// `grain == 0` chooses the grain: `max(1, len / (8 * executors))`,
    /// about eight chunks per executor. Called from one of this runtime's
    /// coroutines, it suspends only that coroutine; loops may nest.
    ///
    /// # Panics
    ///
    /// If `f` panics: no chunk is handed out after that, and the first
    /// worker's panic (by CPE order) is re-raised here once every worker
    /// has stopped. Also if the runtime is shut down (no worker can run).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(4).build().unwrap();
    /// let sum = AtomicU64::new(0);
    /// rt.parallel_for(0..1000, 64, |chunk| {
    ///     let part: u64 = chunk.map(|i| i as u64).sum();
    ///     sum.fetch_add(part, Ordering::Relaxed);
    /// });
    /// assert_eq!(sum.into_inner(), 499_500);
    /// ```
    pub fn parallel_for<F>(&self, range: Range<usize>, grain: usize, f: F)
    where
        F: Fn(Range<usize>) + Sync,
    {
        self.parallel_reduce(range, grain, (), f, |(), ()| ());
    }

    /// Maps every chunk of `range` (cut as by
    /// [`parallel_for`](Runtime::parallel_for)) with `map` and folds the
    /// results with `reduce`, starting from `identity` in each worker and
    /// then across workers. `reduce` should be associative and `identity`
    /// its identity: which worker takes which chunk varies from run to run
    /// (so a floating-point sum may vary in its last bits).
    ///
    /// # Panics
    ///
    /// As [`parallel_for`](Runtime::parallel_for), if `map` or `reduce`
    /// panics.
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(4).build().unwrap();
    /// let data: Vec<u64> = (1..=100).collect();
    /// let sum = rt.parallel_reduce(0..data.len(), 8, 0, |r| data[r].iter().sum(), |a, b| a + b);
    /// assert_eq!(sum, 5050);
    /// ```
    pub fn parallel_reduce<T, M, R>(
        &self,
        range: Range<usize>,
        grain: usize,
        identity: T,
        map: M,
        reduce: R,
    ) -> T
    where
        T: Clone + Send,
        M: Fn(Range<usize>) -> T + Sync,
        R: Fn(T, T) -> T + Sync,
    {
        parallel_reduce_on(
            self.shared_arc().clone(),
            range,
            grain,
            identity,
            map,
            reduce,
        )
    }
}

/// The runtime of the current coroutine.
fn current_runtime() -> Arc<RuntimeShared> {
    Local::current()
        .filter(|l| l.in_coroutine())
        .expect(
            "swco::parallel_for / parallel_reduce called outside a coroutine; \
             use Runtime::parallel_for from plain threads",
        )
        .runtime
        .clone()
}

/// [`Runtime::parallel_for`] on the runtime of the current coroutine,
/// which it suspends (only it) until every index has run.
///
/// ```
/// # use swco_executor::Runtime;
/// let rt = Runtime::builder().executors(2).build().unwrap();
/// let h = rt.spawn(|| {
///     let mut squares = vec![0usize; 100];
///     let out = std::sync::Mutex::new(&mut squares);
///     swco_executor::parallel_for(0..100, 10, |chunk| {
///         let mut out = out.lock().unwrap();
///         for i in chunk {
///             out[i] = i * i;
///         }
///     });
///     squares[9]
/// });
/// assert_eq!(h.join().unwrap(), 81);
/// ```
///
/// # Panics
///
/// Outside a coroutine (use [`Runtime::parallel_for`] there); otherwise as
/// [`Runtime::parallel_for`].
pub fn parallel_for<F>(range: Range<usize>, grain: usize, f: F)
where
    F: Fn(Range<usize>) + Sync,
{
    parallel_reduce(range, grain, (), f, |(), ()| ());
}

/// [`Runtime::parallel_reduce`] on the runtime of the current coroutine,
/// which it suspends (only it) until every chunk is folded.
///
/// ```
/// # use swco_executor::Runtime;
/// let rt = Runtime::builder().executors(2).build().unwrap();
/// let h = rt.spawn(|| swco_executor::parallel_reduce(0..10, 3, 0, |r| r.sum(), |a, b| a + b));
/// assert_eq!(h.join().unwrap(), 45);
/// ```
///
/// # Panics
///
/// Outside a coroutine (use [`Runtime::parallel_reduce`] there); otherwise
/// as [`Runtime::parallel_reduce`].
pub fn parallel_reduce<T, M, R>(
    range: Range<usize>,
    grain: usize,
    identity: T,
    map: M,
    reduce: R,
) -> T
where
    T: Clone + Send,
    M: Fn(Range<usize>) -> T + Sync,
    R: Fn(T, T) -> T + Sync,
{
    parallel_reduce_on(current_runtime(), range, grain, identity, map, reduce)
}
