//! swco's benchmark harness, shared by the `table1` example (the main job)
//! and the criterion benches in `benches/`, so that the example and the
//! benches time exactly the same loops.
//!
//! Three systems run the same code through the [`System`] trait: swco
//! coroutines (either protocol, `packed` on one executor or `spread` over
//! several), crossbeam-channel on OS threads, and may coroutines. Generic
//! code is monomorphised per system, so the timed loops call each channel's
//! `send`/`recv` directly, with no dynamic dispatch inside them.

use std::marker::PhantomData;
use std::time::{Duration, Instant};

use swco::channel::{mpmc, spsc, Protocol};
use swco::Runtime;

pub mod contended;

/// Producer and consumer counts of the seed paper's Table 1.
pub const TABLE1_N: [usize; 3] = [1, 10, 32];

/// Executors of the one swco runtime every Table 1 cell uses: enough for
/// `spread` to give each of 32 coroutines its own executor (CPE).
pub const TABLE1_EXECUTORS: usize = 32;

/// The seed paper's Table 1, in ns, by n = 1, 10, 32: MPE (CAS) send and
/// receive, CPE (updt) send and receive.
pub const PAPER_MPE_SEND: [f64; 3] = [130.0, 220.0, 220.0];
pub const PAPER_MPE_RECV: [f64; 3] = [120.0, 230.0, 220.0];
pub const PAPER_CPE_SEND: [f64; 3] = [1_370.0, 30_000.0, 457_000.0];
pub const PAPER_CPE_RECV: [f64; 3] = [1_950.0, 54_000.0, 791_000.0];

/// The message generator of every producer of every system (Marsaglia's
/// xorshift64): the paper sends random integers, and generating them in the
/// loop costs the same few cycles everywhere.
#[inline(always)]
#[must_use]
pub fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// The batch producers' own work without a channel: `m` xorshift values
/// generated into a buffer of [`BATCH`] and summed, as [`table1_cell`]'s
/// batch producers do between their sends. Returns ns per value (the best
/// of three), the part of a batch send figure that is not the channel.
#[must_use]
pub fn batch_generation_ns(m: usize) -> f64 {
    (0..3)
        .map(|_| {
            let mut x = seed_of(1, 0);
            let mut sum = 0u64;
            let mut vals = [0u64; BATCH];
            let start = Instant::now();
            let mut left = m;
            while left > 0 {
                let now = left.min(BATCH);
                for v in &mut vals[..now] {
                    x = xorshift(x);
                    *v = x;
                    sum = sum.wrapping_add(x);
                }
                std::hint::black_box(&vals);
                left -= now;
            }
            std::hint::black_box(sum);
            start.elapsed().as_nanos() as f64 / m as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// A distinct, non-zero xorshift seed for worker `i` of a run seeded `seed`.
#[must_use]
pub fn seed_of(seed: u64, i: usize) -> u64 {
    (seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1
}

/// One worker's timed loop: when it started and ended (on the process-wide
/// monotonic clock, so spans of different threads compare), and the wrapping
/// sum of the values it moved, which checks that nothing was lost.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub start: Instant,
    pub end: Instant,
    /// CPU time the worker's OS thread used during the loop: `end - start`
    /// minus the time that thread was runnable but waiting for a core.
    pub cpu: Duration,
    pub sum: u64,
}

/// CPU time used so far by the calling OS thread (a coroutine's executor or
/// worker thread: the loops timed here never yield, so they stay on it).
/// Zero where the clock is unavailable.
#[must_use]
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration,
    // and CLOCK_THREAD_CPUTIME_ID needs nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A benchmark name for a [`System::label`]: its parts joined by `-`,
/// leaving out the `-` placeholder (`swco-cas-packed`, `crossbeam-threads`).
#[must_use]
pub fn bench_name(label: [&str; 3]) -> String {
    label
        .iter()
        .filter(|p| **p != "-")
        .copied()
        .collect::<Vec<_>>()
        .join("-")
}

/// How a system moves `u64`s and runs workers. One implementation per
/// system/protocol/placement; the benches are generic over it.
pub trait System {
    type Tx: Clone + Send + 'static;
    type Rx: Clone + Send + 'static;

    /// `system,protocol,placement` as written to the CSV.
    fn label(&self) -> [&'static str; 3];

    /// A channel of this system holding `capacity` messages (may's is
    /// unbounded and ignores it).
    fn channel(&self, capacity: usize) -> (Self::Tx, Self::Rx);
    fn send(tx: &Self::Tx, v: u64);
    /// Receives one message; `None` once the channel is disconnected and
    /// empty.
    fn recv(rx: &Self::Rx) -> Option<u64>;

    /// Messages per batch operation in [`table1_cell`]; 1 means single
    /// `send`/`recv` calls.
    fn batch(&self) -> usize {
        1
    }
    /// Sends `vals`, in order.
    fn send_many(tx: &Self::Tx, vals: &[u64]) {
        vals.iter().for_each(|&v| Self::send(tx, v));
    }
    /// Receives at least one and at most `max` messages into `out`;
    /// returns how many, 0 once the channel is disconnected and empty.
    fn recv_many(rx: &Self::Rx, out: &mut Vec<u64>, max: usize) -> usize {
        let _ = max;
        Self::recv(rx).map_or(0, |v| {
            out.push(v);
            1
        })
    }

    /// Starts worker `i` (a coroutine or thread, placed by this system's
    /// placement) and returns a function that waits for its result.
    fn start<T, F>(&self, i: usize, f: F) -> Box<dyn FnOnce() -> T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static;
}

/// Where swco coroutine `i` goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Every coroutine on executor 0: one core, like the paper's MPE.
    Packed,
    /// Coroutine `i` on executor `i`: one coroutine per executor, like the
    /// paper's CPEs.
    Spread,
    /// Chosen by the runtime's placement policy (round-robin).
    Policy,
    /// As `Spread`, moving [`BATCH`] messages per `send_batch`/`recv_batch`.
    Batch,
}

/// Messages per batch operation in the `batch` placement.
pub const BATCH: usize = 16;

/// swco coroutines on `rt`, protocol `P`.
pub struct Swco<'a, P> {
    pub rt: &'a Runtime,
    pub place: Place,
    _protocol: PhantomData<P>,
}

impl<'a, P> Swco<'a, P> {
    pub fn new(rt: &'a Runtime, place: Place) -> Self {
        Swco {
            rt,
            place,
            _protocol: PhantomData,
        }
    }
}

impl<P: Protocol> System for Swco<'_, P> {
    type Tx = mpmc::Sender<u64, P>;
    type Rx = mpmc::Receiver<u64, P>;

    fn label(&self) -> [&'static str; 3] {
        let place = match self.place {
            Place::Packed => "packed",
            Place::Spread => "spread",
            Place::Policy => "policy",
            Place::Batch => "batch",
        };
        ["swco", P::NAME, place]
    }
    fn channel(&self, capacity: usize) -> (Self::Tx, Self::Rx) {
        mpmc::bounded_with::<u64, P>(capacity)
    }
    #[inline(always)]
    fn send(tx: &Self::Tx, v: u64) {
        tx.send(v).unwrap()
    }
    #[inline(always)]
    fn recv(rx: &Self::Rx) -> Option<u64> {
        rx.recv().ok()
    }
    fn batch(&self) -> usize {
        if self.place == Place::Batch {
            BATCH
        } else {
            1
        }
    }
    #[inline(always)]
    fn send_many(tx: &Self::Tx, vals: &[u64]) {
        tx.send_batch(vals.iter().copied()).unwrap();
    }
    #[inline(always)]
    fn recv_many(rx: &Self::Rx, out: &mut Vec<u64>, max: usize) -> usize {
        rx.recv_batch(out, max).unwrap_or(0)
    }
    fn start<T, F>(&self, i: usize, f: F) -> Box<dyn FnOnce() -> T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let h = match self.place {
            Place::Packed => self.rt.spawn_on(0, f).expect("executor 0 exists"),
            Place::Spread | Place::Batch => self
                .rt
                .spawn_on(i % self.rt.executors(), f)
                .expect("executor index is in range"),
            Place::Policy => self.rt.spawn(f),
        };
        Box::new(move || h.join().expect("coroutine finished"))
    }
}

/// crossbeam-channel `bounded` between OS threads.
pub struct Crossbeam;

impl System for Crossbeam {
    type Tx = crossbeam_channel::Sender<u64>;
    type Rx = crossbeam_channel::Receiver<u64>;

    fn label(&self) -> [&'static str; 3] {
        ["crossbeam", "-", "threads"]
    }
    fn channel(&self, capacity: usize) -> (Self::Tx, Self::Rx) {
        crossbeam_channel::bounded(capacity)
    }
    #[inline(always)]
    fn send(tx: &Self::Tx, v: u64) {
        tx.send(v).unwrap()
    }
    #[inline(always)]
    fn recv(rx: &Self::Rx) -> Option<u64> {
        rx.recv().ok()
    }
    fn start<T, F>(&self, _i: usize, f: F) -> Box<dyn FnOnce() -> T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let h = std::thread::spawn(f);
        Box::new(move || h.join().expect("thread finished"))
    }
}

/// may coroutines with may's unbounded `mpmc` channel. may's scheduler is
/// process-global: call [`May::configure`] before anything touches may.
/// Worker `i` is spawned with `Builder::id(i)`, which queues it on may worker
/// `i % workers`; may's work stealing may move it from there.
pub struct May;

impl May {
    /// Sets may's worker count (process-global; only the first use of may
    /// reads it) and returns it. One worker per core, which is may's own
    /// default, so may runs as its authors intend.
    // Called for its effect; the count is there for those who print it.
    #[allow(clippy::must_use_candidate)]
    pub fn configure() -> usize {
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
        may::config().set_workers(workers);
        workers
    }

    /// Spawns `f` as a may coroutine queued on worker `id % workers`.
    ///
    /// # Panics
    ///
    /// If may cannot spawn the coroutine.
    pub fn spawn<T, F>(id: usize, f: F) -> may::coroutine::JoinHandle<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let builder = may::coroutine::Builder::new().id(id);
        // SAFETY: may's spawn is unsafe for two reasons, neither of which
        // applies to the closures of this harness. (1) Thread-locals: a may
        // coroutine may resume on another worker thread, so a reference to a
        // thread-local held across a suspension could dangle or alias; the
        // closures here touch no thread-locals of their own (only may's own
        // channels, which are made for coroutines, plus `Instant::now` and
        // arithmetic). (2) Stack overflow is not caught: the closures use a
        // few hundred bytes of stack, far below may's default (32 KiB on
        // 64-bit), and call nothing recursive.
        unsafe { builder.spawn(f) }.expect("may spawns a coroutine")
    }
}

impl System for May {
    type Tx = may::sync::mpmc::Sender<u64>;
    type Rx = may::sync::mpmc::Receiver<u64>;

    fn label(&self) -> [&'static str; 3] {
        // Several workers, coroutine i queued on worker i mod workers.
        ["may", "-", "spread"]
    }
    fn channel(&self, _capacity: usize) -> (Self::Tx, Self::Rx) {
        may::sync::mpmc::channel()
    }
    #[inline(always)]
    fn send(tx: &Self::Tx, v: u64) {
        tx.send(v).unwrap()
    }
    #[inline(always)]
    fn recv(rx: &Self::Rx) -> Option<u64> {
        rx.recv().ok()
    }
    fn start<T, F>(&self, i: usize, f: F) -> Box<dyn FnOnce() -> T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let h = May::spawn(i, f);
        Box::new(move || h.join().expect("may coroutine finished"))
    }
}

/// One run of the Table 1 experiment, in ns per message.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Mean over producers of (its loop's elapsed time / m).
    pub send_ns: f64,
    /// Mean over consumers of (its loop's elapsed time / m).
    pub recv_ns: f64,
    /// (last producer's end - first producer's start) / (n * m).
    pub send_wall_ns: f64,
    /// (last consumer's end - first consumer's start) / (n * m).
    pub recv_wall_ns: f64,
    /// Mean over producers of (CPU time of its thread during its loop / m):
    /// what `send_ns` would be if no producer ever waited for a core.
    pub send_cpu_ns: f64,
    /// Likewise for consumers.
    pub recv_cpu_ns: f64,
}

/// Mean per-worker ns per op, wall ns per op, and mean per-worker on-CPU ns
/// per op, of one phase.
fn phase_ns(spans: &[Span], m: usize) -> (f64, f64, f64) {
    let mean = |f: &dyn Fn(&Span) -> Duration| {
        spans
            .iter()
            .map(|s| f(s).as_nanos() as f64 / m as f64)
            .sum::<f64>()
            / spans.len() as f64
    };
    let per = mean(&|s| s.end - s.start);
    let cpu = mean(&|s| s.cpu);
    let first = spans.iter().map(|s| s.start).min().unwrap();
    let last = spans.iter().map(|s| s.end).max().unwrap();
    let wall = (last - first).as_nanos() as f64 / (spans.len() * m) as f64;
    (per, wall, cpu)
}

/// A start gate for `waiters` workers, made of the system's own channel so
/// a waiting coroutine is suspended (not spinning) and a waiting thread
/// parks: each waiter takes one token, and opening sends them all. (Not a
/// disconnect: may's `mpmc` wakes only one blocked receiver when the last
/// sender goes, so several waiting on a disconnect can hang.) The opener
/// holds the gate's sender, and the caller keeps it until every waiter has
/// passed: with the sender dropped right after the tokens, a may receiver
/// can get "disconnected" instead of the token waiting for it.
fn gate<S: System>(sys: &S, waiters: usize) -> (impl Fn(), S::Rx) {
    let (tx, rx) = sys.channel(waiters.max(1));
    let open = move || (0..waiters).for_each(|_| S::send(&tx, 0));
    (open, rx)
}

/// Waits at a [`gate`].
fn wait<S: System>(gate: &S::Rx) {
    S::recv(gate).expect("the gate opens");
}

/// Runs `n` workers of `sys`, each running `body(i)` after the start gate
/// opens, and returns their spans. The gate keeps thread and coroutine
/// start-up out of the timed loops and lets the workers start together.
fn phase<S, B>(sys: &S, n: usize, body: B) -> Vec<Span>
where
    S: System,
    B: Fn(usize) -> Box<dyn FnOnce() -> Span + Send> + Copy,
{
    let (open, gate) = gate(sys, n);
    let joins: Vec<_> = (0..n)
        .map(|i| {
            let gate = gate.clone();
            let work = body(i);
            sys.start(i, move || {
                wait::<S>(&gate);
                work()
            })
        })
        .collect();
    drop(gate);
    open();
    let spans = joins.into_iter().map(|j| j()).collect();
    // Only now: every worker has passed the gate.
    drop(open);
    spans
}

/// The seed paper's experiment, once: a channel holding all `n * m`
/// messages (so nothing blocks); `n` producers each send `m` xorshift
/// values, timing their own loop; once all are done, `n` consumers each
/// receive `m`, timing theirs. Panics if a value is lost or invented.
///
/// A system whose [`batch`](System::batch) is k > 1 sends k values per
/// [`send_many`](System::send_many) and receives up to k per
/// [`recv_many`](System::recv_many); the figures stay per message.
///
/// # Panics
///
/// If a value is lost or invented, or a worker panics.
pub fn table1_cell<S: System>(sys: &S, n: usize, m: usize, seed: u64) -> Sample {
    let (tx, rx) = sys.channel(n * m);
    let k = sys.batch();
    let sent = phase(sys, n, |i| {
        let tx = tx.clone();
        Box::new(move || {
            let mut x = seed_of(seed, i);
            let mut sum = 0u64;
            let mut vals = vec![0u64; k];
            let cpu = thread_cpu_time();
            let start = Instant::now();
            if k == 1 {
                for _ in 0..m {
                    x = xorshift(x);
                    S::send(&tx, x);
                    sum = sum.wrapping_add(x);
                }
            } else {
                let mut left = m;
                while left > 0 {
                    let now = left.min(k);
                    for v in &mut vals[..now] {
                        x = xorshift(x);
                        *v = x;
                        sum = sum.wrapping_add(x);
                    }
                    S::send_many(&tx, &vals[..now]);
                    left -= now;
                }
            }
            let end = Instant::now();
            let cpu = thread_cpu_time().saturating_sub(cpu);
            Span {
                start,
                end,
                cpu,
                sum,
            }
        })
    });
    let received = phase(sys, n, |_| {
        let rx = rx.clone();
        Box::new(move || {
            let mut sum = 0u64;
            let mut got = Vec::with_capacity(k);
            let cpu = thread_cpu_time();
            let start = Instant::now();
            if k == 1 {
                for _ in 0..m {
                    let v = S::recv(&rx).expect("the channel holds every message");
                    sum = sum.wrapping_add(v);
                }
            } else {
                let mut left = m;
                while left > 0 {
                    got.clear();
                    let now = S::recv_many(&rx, &mut got, left.min(k));
                    assert!(now > 0, "the channel holds every message");
                    sum = got.iter().fold(sum, |a, &v| a.wrapping_add(v));
                    left -= now;
                }
            }
            let end = Instant::now();
            let cpu = thread_cpu_time().saturating_sub(cpu);
            Span {
                start,
                end,
                cpu,
                sum,
            }
        })
    });
    let total = |spans: &[Span]| spans.iter().fold(0u64, |a, s| a.wrapping_add(s.sum));
    assert_eq!(
        total(&sent),
        total(&received),
        "{:?}: messages lost or invented",
        sys.label()
    );
    let (send_ns, send_wall_ns, send_cpu_ns) = phase_ns(&sent, m);
    let (recv_ns, recv_wall_ns, recv_cpu_ns) = phase_ns(&received, m);
    Sample {
        send_ns,
        recv_ns,
        send_wall_ns,
        recv_wall_ns,
        send_cpu_ns,
        recv_cpu_ns,
    }
}

/// Moves `messages` from `pairs` producers to `pairs` consumers through a
/// channel of `capacity`, and returns the time from opening the start gate
/// until every worker has finished, scaled to exactly `messages` (each
/// producer sends `messages / pairs` rounded up). Producer `i` is worker
/// `2i`, its consumer `2i + 1`. With a small capacity most operations take
/// the blocking path.
///
/// # Panics
///
/// If messages are lost (the sums sent and received differ), or a worker
/// panics.
pub fn throughput<S: System>(sys: &S, pairs: usize, capacity: usize, messages: u64) -> Duration {
    let per = messages.div_ceil(pairs as u64).max(1);
    let (tx, rx) = sys.channel(capacity);
    let (open, gate) = gate(sys, 2 * pairs);
    let mut joins = Vec::with_capacity(2 * pairs);
    for i in 0..pairs {
        let (ptx, pgate) = (tx.clone(), gate.clone());
        joins.push(sys.start(2 * i, move || {
            wait::<S>(&pgate);
            let mut x = seed_of(7, i);
            let mut sum = 0u64;
            for _ in 0..per {
                x = xorshift(x);
                S::send(&ptx, x);
                sum = sum.wrapping_add(x);
            }
            sum
        }));
        let (crx, cgate) = (rx.clone(), gate.clone());
        joins.push(sys.start(2 * i + 1, move || {
            wait::<S>(&cgate);
            let mut sum = 0u64;
            for _ in 0..per {
                sum = sum.wrapping_add(S::recv(&crx).expect("a message"));
            }
            sum
        }));
    }
    // Each consumer takes `per` messages, so the total matches and no one
    // depends on being woken by a disconnect.
    drop((tx, rx, gate));
    let start = Instant::now();
    open();
    let sums: Vec<u64> = joins.into_iter().map(|j| j()).collect();
    let elapsed = start.elapsed();
    // Only now: every worker has passed the gate.
    drop(open);
    let sent = sums.iter().step_by(2).fold(0u64, |a, s| a.wrapping_add(*s));
    let received = sums
        .iter()
        .skip(1)
        .step_by(2)
        .fold(0u64, |a, s| a.wrapping_add(*s));
    assert_eq!(sent, received, "{:?}: messages lost", sys.label());
    elapsed.mul_f64(messages as f64 / (per * pairs as u64) as f64)
}

/// The median of `v` (upper median for even lengths); NaN-free input.
///
/// # Panics
///
/// If `v` is empty or holds a NaN.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Criterion's per-iteration time for the Table 1 experiment: one iteration
/// is one operation as seen by one producer (`recv == false`) or consumer.
/// Runs the experiment with about `iters / n` messages per worker, in rounds
/// of at most [`TABLE1_M`] (so a worker's loop still fits in a time slice),
/// and returns the mean per-operation time times `iters`. The real time
/// spent is about that of the phase timed plus the other phase, so
/// criterion's time budget stays honest.
pub fn table1_iters<S: System>(sys: &S, n: usize, iters: u64, recv: bool) -> Duration {
    let mut left = iters.div_ceil(n as u64).max(1) as usize;
    let mut round = 0u64;
    let mut ns = 0.0;
    let mut ops = 0usize;
    while left > 0 {
        let m = left.min(TABLE1_M);
        let s = table1_cell(sys, n, m, round);
        ns += if recv { s.recv_ns } else { s.send_ns } * m as f64;
        ops += m;
        left -= m;
        round += 1;
    }
    Duration::from_nanos((ns / ops as f64 * iters as f64) as u64)
}

/// Messages per worker in one Table 1 run (see `examples/table1.rs`).
pub const TABLE1_M: usize = 10_000;

/// `iters` round trips between two workers of `sys` (worker 0 pings, worker
/// 1 echoes) over two channels of capacity 1, timed by the pinger.
///
/// # Panics
///
/// If a reply is not the ping it answers, or a channel disconnects early.
pub fn pingpong<S: System>(sys: &S, iters: u64) -> Duration {
    let (ping_tx, ping_rx) = sys.channel(1);
    let (pong_tx, pong_rx) = sys.channel(1);
    let echo = sys.start(1, move || {
        for _ in 0..iters {
            let v = S::recv(&ping_rx).expect("a ping");
            S::send(&pong_tx, v);
        }
    });
    let pinger = sys.start(0, move || {
        let start = Instant::now();
        for i in 0..iters {
            S::send(&ping_tx, i);
            assert_eq!(S::recv(&pong_rx), Some(i));
        }
        start.elapsed()
    });
    let elapsed = pinger();
    echo();
    elapsed
}

/// `iters` round trips between a coroutine on executor `a` (pinging) and
/// one on executor `b` (echoing) of `rt`, through two capacity-1 SPSC
/// `Cas` channels (the mode with a single-waiter slot on each side).
///
/// # Panics
///
/// If a reply is not the ping it answers, or an executor does not exist.
pub fn pingpong_spsc(rt: &Runtime, a: usize, b: usize, iters: u64) -> Duration {
    let (ping_tx, ping_rx) = spsc::bounded::<u64>(1);
    let (pong_tx, pong_rx) = spsc::bounded::<u64>(1);
    let echo = rt
        .spawn_on(b, move || {
            for _ in 0..iters {
                pong_tx.send(ping_rx.recv().expect("a ping")).unwrap();
            }
        })
        .expect("executor b exists");
    let pinger = rt
        .spawn_on(a, move || {
            let start = Instant::now();
            for i in 0..iters {
                ping_tx.send(i).unwrap();
                assert_eq!(pong_rx.recv(), Ok(i));
            }
            start.elapsed()
        })
        .expect("executor a exists");
    let elapsed = pinger.join().expect("the pinger finished");
    echo.join().expect("the echo finished");
    elapsed
}

/// `iters` round trips between the calling OS thread (pinging) and one
/// worker of `sys` (echoing).
///
/// # Panics
///
/// If a reply is not the ping it answers, or a channel disconnects early.
pub fn pingpong_from_thread<S: System>(sys: &S, iters: u64) -> Duration {
    let (ping_tx, ping_rx) = sys.channel(1);
    let (pong_tx, pong_rx) = sys.channel(1);
    let echo = sys.start(0, move || {
        for _ in 0..iters {
            let v = S::recv(&ping_rx).expect("a ping");
            S::send(&pong_tx, v);
        }
    });
    let start = Instant::now();
    for i in 0..iters {
        S::send(&ping_tx, i);
        assert_eq!(S::recv(&pong_rx), Some(i));
    }
    let elapsed = start.elapsed();
    echo();
    elapsed
}

/// Spawns `count` trivial workers of `sys` and joins them all, keeping at
/// most `window` spawned and not yet joined: worker `i` is joined right
/// after worker `i + window` is spawned.
///
/// The window keeps the peers comparable: a live coroutine holds its stack
/// (swco carves stacks from slabs, so the kernel's `vm.max_map_count` no
/// longer caps live coroutines, but memory still grows with them).
pub fn spawn_join<S: System>(sys: &S, count: usize, window: usize) -> Duration {
    spawn_window(count, window, |i| sys.start(i, move || i))
}

/// Spawns `count` workers with `spawn(i)` (each returns `i` through the
/// join function `spawn` hands back), joining worker `i` once worker
/// `i + window` is spawned, and checks every result; returns the elapsed
/// time. The loop behind [`spawn_join`] and the benches' spawn-from-inside
/// variants.
///
/// # Panics
///
/// If a worker's result is not its index, or a worker panics.
pub fn spawn_window<J: FnOnce() -> usize>(
    count: usize,
    window: usize,
    mut spawn: impl FnMut(usize) -> J,
) -> Duration {
    let start = Instant::now();
    let mut live = std::collections::VecDeque::with_capacity(window + 1);
    for i in 0..count {
        live.push_back((i, spawn(i)));
        if live.len() > window {
            let (i, j) = live.pop_front().unwrap();
            assert_eq!(j(), i);
        }
    }
    for (i, j) in live {
        assert_eq!(j(), i);
    }
    start.elapsed()
}

/// The criterion settings every bench binary uses. No plots: drawing them
/// costs about as much as a short benchmark, and the whole suite must finish
/// in 15 minutes on 2 cores.
#[must_use]
pub fn criterion_config() -> criterion::Criterion {
    criterion::Criterion::default().without_plots()
}

/// A daisy chain of swco coroutines, spawned by [`spawn_chain`].
pub struct SwcoChain {
    /// Feeds the first link.
    pub first: spsc::Sender<u64>,
    /// What the last link sends: the value sent to `first`, plus one per
    /// link.
    pub last: spsc::Receiver<u64>,
    /// One per link, in order.
    pub links: Vec<swco::JoinHandle<()>>,
}

impl SwcoChain {
    /// Sends 1 into the first link and waits for what leaves the last.
    ///
    /// # Errors
    ///
    /// `Err(got)` if what left the last link is not 1 plus the number of
    /// links: a link lost or doubled a step.
    ///
    /// # Panics
    ///
    /// If a channel of the chain disconnects before the value passes.
    pub fn pass(&self) -> Result<(), u64> {
        self.first.send(1).expect("the first link waits");
        let got = self.last.recv().expect("the last link sends");
        if got == 1 + self.links.len() as u64 {
            Ok(())
        } else {
            Err(got)
        }
    }

    /// Joins every link.
    ///
    /// # Panics
    ///
    /// If a link was lost (it panicked, or its runtime refused or
    /// cancelled it).
    pub fn join(self) {
        for link in self.links {
            link.join().expect("a chain coroutine was lost");
        }
    }
}

/// Spawns `n` coroutines on `rt` (placed by its policy), each blocked in
/// `recv` on its left channel, sending one more than it gets to its right:
/// the daisy chain of `skynet` and `chain_phases`, capacity-1 SPSC channels.
///
/// # Panics
///
/// If `rt` refuses a spawn (it is shut down). A link panics (and its join
/// reports it) if a neighbour's channel disconnects before the value
/// passes.
pub fn spawn_chain(rt: &Runtime, n: usize) -> SwcoChain {
    let (first, mut left) = spsc::bounded::<u64>(1);
    let mut links = Vec::with_capacity(n);
    for _ in 0..n {
        let (tx, right) = spsc::bounded::<u64>(1);
        let l = std::mem::replace(&mut left, right);
        links.push(rt.spawn(move || tx.send(1 + l.recv().unwrap()).unwrap()));
    }
    SwcoChain {
        first,
        last: left,
        links,
    }
}

/// The daisy chain: `len` workers, each receiving from its left neighbour
/// and sending one more to its right, all spawned, one value passed from
/// end to end, all joined. Measures spawning plus one blocking hand-off per
/// worker.
///
/// # Panics
///
/// If the value does not arrive at the end of the chain intact, or a
/// channel disconnects early.
pub fn chain<S: System>(sys: &S, len: usize) -> Duration {
    let start = Instant::now();
    let (head, mut rx) = sys.channel(1);
    let mut joins = Vec::with_capacity(len);
    for i in 0..len {
        let (tx, next) = sys.channel(1);
        let left = std::mem::replace(&mut rx, next);
        joins.push(sys.start(i, move || {
            let v = S::recv(&left).expect("a value from the left");
            S::send(&tx, v + 1);
        }));
    }
    S::send(&head, 0);
    assert_eq!(S::recv(&rx), Some(len as u64));
    joins.into_iter().for_each(|j| j());
    start.elapsed()
}
