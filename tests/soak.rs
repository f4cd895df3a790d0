//! Randomised soak of the channels between plain threads and coroutines.
//!
//! Each trial picks a mode and protocol (all eight combinations), a
//! capacity (0, a rendezvous, included), 1–3 producers and consumers (as the mode allows), and for each
//! of them whether it is an OS thread or a swco coroutine (pinned with
//! `spawn_on`, placed by the runtime's policy, or spawned with
//! `swco::spawn` from inside a launcher coroutine); every operation
//! is picked at random among the blocking, `try_` and `_timeout` forms
//! (coroutines also yield now and then). Producers stop after a random
//! number of messages and drop their sender; consumers sometimes stop early
//! and drop their receiver. Some trials cancel the runtime mid-stream with
//! `shutdown_timeout`, after which the thread endpoints must still finish.
//!
//! Every message is drop-counted in a ledger, so at the end of each trial
//! the test checks, exactly: every value is dropped once (no leak, no double
//! drop), received at most once, and a value a producer got `Ok` for is
//! received or dropped unreceived inside the channel; each consumer sees
//! each producer's sequence numbers in increasing order; a consumer told
//! "disconnected" has no sender left and left no accepted message behind;
//! each worker's closure is dropped exactly once (also when a cancelling
//! shutdown drops it unstarted); a join handle reports "cancelled" only in a
//! cancelling trial, and only if `shutdown_timeout` reported live
//! coroutines; once `shutdown_timeout` has returned, every coroutine's
//! closure has run to the end, unwound or been dropped, and its join handle
//! is complete (those it reports as `stuck` may take up to half the trial
//! limit more: none of ours blocks for good). A watchdog fails the run if a
//! trial does not finish within
//! a generous bound (a hang: a thread left blocked while a message or a
//! free slot waits for it), rather than letting CI hang.
//!
//! The soak runs in a child process (this binary, re-executed), so a crash
//! or a hang fails only this test; the parent kills the child after a
//! timeout. The seed is printed on failure.
//!
//! Environment (read by the parent and passed on to the child):
//!
//! * `SWCO_SOAK_SEED=<u64>` (decimal or `0x` hex): the first trial's seed;
//!   each trial's seed is the next splitmix64 output of the previous one, so
//!   a failing trial's printed seed with `SWCO_SOAK_TRIALS=1` reruns its
//!   configuration (interleavings are not reproducible).
//! * `SWCO_SOAK_SECS=<secs>`: time budget for trials (default 5).
//! * `SWCO_SOAK_TRIALS=<n>`: run exactly `n` trials instead.
//! * `SWCO_SOAK_REPEAT=1`: run the first trial's configuration over and
//!   over (with `SWCO_SOAK_SEED` set to a failing trial's seed: the
//!   interleaving differs each time, so this is how to reproduce a failure).
//! * `SWCO_SOAK_NO_CANCEL=1`: never cancel the runtime mid-stream.
//! * `SWCO_SOAK_NO_NESTED=1`: no coroutine spawned from inside a coroutine
//!   (those become coroutines spawned from the test thread; each trial is
//!   otherwise the same).
//! * `SWCO_SOAK_KEEP_GOING=1`: report every failing trial, not only the
//!   first (a hang still ends the run).
//! * `SWCO_SOAK_TRIAL_LIMIT_SECS=<secs>`: the per-trial watchdog (default 30).
//! * `SWCO_SOAK_TIMEOUT_SECS=<secs>`: the parent kills the child after this
//!   (default: the budget + 120).
//! * `SWCO_SOAK_VERBOSE=1`: print each trial's configuration before it runs.
//! * `SWCO_SOAK_HANG_PAUSE=1`: on a hang the child prints its report and
//!   then waits (for a debugger) instead of exiting.
//!
//! A long run: `SWCO_SOAK_SECS=600 cargo test --release --test soak -- --nocapture`.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use swco::channel::{
    mpmc, mpsc, spmc, spsc, Cas, Mode, Protocol, Receiver, RecvTimeoutError, SendTimeoutError,
    Sender, TryRecvError, TrySendError, Updt,
};
use swco::Runtime;
use swco_test_support::{in_child, run_child_for, ChildOutput};

const TEST_NAME: &str = "soak_channels_between_threads_and_coroutines";

/// At most this many producers, and this many consumers.
const MAX_SIDE: usize = 3;
/// At most this many messages per producer.
const MAX_MSGS: usize = 400;
/// Worker index: producers `0..MAX_SIDE`, consumers `MAX_SIDE..WORKERS`.
const WORKERS: usize = 2 * MAX_SIDE;

// ---------------------------------------------------------------------------
// The PRNG: splitmix64, no dependencies.

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        splitmix64(&mut self.0)
    }
    /// Uniform in `0..n` (`n > 0`; the modulo bias does not matter here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Uniform in `lo..=hi`.
    fn upto(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

// ---------------------------------------------------------------------------
// The ledger: one process-wide, reset at the start of each trial. Messages
// hold no heap data and find the ledger through a static, so even a double
// drop by the library is counted rather than crashing the test first.

/// Who held a message when it was dropped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
enum How {
    /// The producer: never sent, handed back by a failed send, or abandoned.
    Held = 1,
    /// Passed to a send: dropped inside the channel (buffered when the
    /// channel was freed) or while a cancelled send unwound.
    InFlight = 2,
    /// A consumer, after receiving it.
    Received = 3,
}

impl How {
    fn from_u8(v: u8) -> Option<How> {
        match v {
            1 => Some(How::Held),
            2 => Some(How::InFlight),
            3 => Some(How::Received),
            _ => None,
        }
    }
}

#[derive(Default)]
struct Slot {
    drops: AtomicU32,
    received: AtomicU32,
    accepted: AtomicBool,
    how: AtomicU8,
}

/// What a worker is doing, for the watchdog's report.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
enum Doing {
    NotStarted = 0,
    Send,
    TrySend,
    SendTimeout,
    Recv,
    TryRecv,
    RecvTimeout,
    Yield,
    Backoff,
    Finished,
    SawDisconnect,
    StoppedEarly,
}

const DOING: [Doing; 12] = [
    Doing::NotStarted,
    Doing::Send,
    Doing::TrySend,
    Doing::SendTimeout,
    Doing::Recv,
    Doing::TryRecv,
    Doing::RecvTimeout,
    Doing::Yield,
    Doing::Backoff,
    Doing::Finished,
    Doing::SawDisconnect,
    Doing::StoppedEarly,
];

#[derive(Default)]
struct Status {
    doing: AtomicU8,
    /// The sequence number being sent, or the count received so far.
    arg: AtomicU32,
    /// Messages sent (accepted) or received.
    done: AtomicU32,
}

impl Status {
    fn set(&self, doing: Doing, arg: u32) {
        self.doing.store(doing as u8, SeqCst);
        self.arg.store(arg, SeqCst);
    }
    fn describe(&self) -> String {
        let d = DOING
            .get(usize::from(self.doing.load(SeqCst)))
            .copied()
            .unwrap_or(Doing::NotStarted);
        format!(
            "{d:?} (arg {}), {} done",
            self.arg.load(SeqCst),
            self.done.load(SeqCst)
        )
    }
}

/// The trial's phase, for the watchdog's report.
const PHASES: [&str; 6] = [
    "setting up",
    "spawning workers",
    "waiting to cancel",
    "in shutdown_timeout",
    "joining workers",
    "shutting the runtime down",
];

struct Ledger {
    trial: AtomicU64,
    slots: Vec<Slot>,
    /// Per producer: how many values it created (sequence numbers `0..n`).
    created: Vec<AtomicU32>,
    total_created: AtomicU64,
    total_dropped: AtomicU64,
    total_received: AtomicU64,
    /// Per worker: how many times its closure's token was dropped.
    tokens: Vec<AtomicU32>,
    status: Vec<Status>,
    senders_alive: AtomicUsize,
    receivers_alive: AtomicUsize,
    /// A consumer got "disconnected" from a receive.
    saw_disconnect: AtomicBool,
    phase: AtomicUsize,
    /// The running trial's numbers of producers and consumers.
    np: AtomicUsize,
    nc: AtomicUsize,
    errors: Mutex<Vec<String>>,
}

fn ledger() -> &'static Ledger {
    static LEDGER: OnceLock<Ledger> = OnceLock::new();
    LEDGER.get_or_init(|| Ledger {
        trial: AtomicU64::new(0),
        slots: (0..MAX_SIDE * MAX_MSGS).map(|_| Slot::default()).collect(),
        created: (0..MAX_SIDE).map(|_| AtomicU32::new(0)).collect(),
        total_created: AtomicU64::new(0),
        total_dropped: AtomicU64::new(0),
        total_received: AtomicU64::new(0),
        tokens: (0..WORKERS).map(|_| AtomicU32::new(0)).collect(),
        status: (0..WORKERS).map(|_| Status::default()).collect(),
        senders_alive: AtomicUsize::new(0),
        receivers_alive: AtomicUsize::new(0),
        saw_disconnect: AtomicBool::new(false),
        phase: AtomicUsize::new(0),
        np: AtomicUsize::new(0),
        nc: AtomicUsize::new(0),
        errors: Mutex::new(Vec::new()),
    })
}

impl Ledger {
    fn slot(&self, pid: usize, seq: u32) -> &Slot {
        &self.slots[pid * MAX_MSGS + seq as usize]
    }

    fn error(&self, msg: String) {
        let mut e = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        if e.len() < 64 {
            e.push(msg);
        }
    }

    fn take_errors(&self) -> Vec<String> {
        std::mem::take(&mut *self.errors.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Only between trials, when no message, token or worker of the
    /// previous trial is left.
    fn reset(&self, trial: u64, producers: usize, consumers: usize) {
        self.trial.store(trial, SeqCst);
        for s in &self.slots {
            s.drops.store(0, SeqCst);
            s.received.store(0, SeqCst);
            s.accepted.store(false, SeqCst);
            s.how.store(0, SeqCst);
        }
        for c in &self.created {
            c.store(0, SeqCst);
        }
        self.total_created.store(0, SeqCst);
        self.total_dropped.store(0, SeqCst);
        self.total_received.store(0, SeqCst);
        for t in &self.tokens {
            t.store(0, SeqCst);
        }
        for s in &self.status {
            s.set(Doing::NotStarted, 0);
            s.done.store(0, SeqCst);
        }
        self.senders_alive.store(producers, SeqCst);
        self.receivers_alive.store(consumers, SeqCst);
        self.saw_disconnect.store(false, SeqCst);
        self.np.store(producers, SeqCst);
        self.nc.store(consumers, SeqCst);
        self.take_errors();
    }

    fn set_phase(&self, phase: usize) {
        self.phase.store(phase, SeqCst);
    }
}

/// A drop-counted message: producer `pid`'s `seq`-th value.
struct Msg {
    trial: u64,
    pid: usize,
    seq: u32,
    how: How,
}

impl Msg {
    fn new(pid: usize, seq: u32) -> Msg {
        let l = ledger();
        l.created[pid].store(seq + 1, SeqCst);
        l.total_created.fetch_add(1, SeqCst);
        Msg {
            trial: l.trial.load(SeqCst),
            pid,
            seq,
            how: How::Held,
        }
    }

    /// Whether the message belongs to the running trial and its fields are
    /// in range (a torn or stale read would fail this).
    fn check(&self, what: &str) -> bool {
        let l = ledger();
        let trial = l.trial.load(SeqCst);
        if self.trial != trial || self.pid >= MAX_SIDE || self.seq as usize >= MAX_MSGS {
            l.error(format!(
                "{what} a message not of this trial or out of range: trial {} (now {trial}), producer {}, seq {}",
                self.trial, self.pid, self.seq
            ));
            return false;
        }
        true
    }
}

impl Drop for Msg {
    fn drop(&mut self) {
        let l = ledger();
        l.total_dropped.fetch_add(1, SeqCst);
        if !self.check("dropped") {
            return;
        }
        let s = l.slot(self.pid, self.seq);
        s.how.store(self.how as u8, SeqCst);
        let before = s.drops.fetch_add(1, SeqCst);
        if before != 0 {
            l.error(format!(
                "double drop: producer {} seq {} dropped {} times (this time held as {:?})",
                self.pid,
                self.seq,
                before + 1,
                self.how
            ));
        }
    }
}

/// Captured by each worker's closure: dropped exactly once, whether the
/// closure ran, unwound, or was dropped unstarted by a cancelling shutdown.
struct Token {
    trial: u64,
    worker: usize,
}

impl Token {
    fn new(worker: usize) -> Token {
        Token {
            trial: ledger().trial.load(SeqCst),
            worker,
        }
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        let l = ledger();
        if self.trial != l.trial.load(SeqCst) || self.worker >= WORKERS {
            l.error(format!(
                "a worker token of trial {} (worker {}) dropped during trial {}",
                self.trial,
                self.worker,
                l.trial.load(SeqCst)
            ));
            return;
        }
        l.tokens[self.worker].fetch_add(1, SeqCst);
    }
}

// ---------------------------------------------------------------------------
// Endpoints behind trait objects, so one worker body serves every mode and
// protocol.

#[derive(Clone, Copy, Debug)]
enum Op {
    Block,
    Try,
    Timeout(Duration),
}

enum SendFail {
    Full(Msg),
    Timeout(Msg),
    Disconnected(Msg),
}

enum RecvFail {
    Empty,
    Timeout,
    Disconnected,
}

trait TxEnd: Send {
    fn put(&self, m: Msg, op: Op) -> Result<(), SendFail>;
}

trait RxEnd: Send {
    fn take(&self, op: Op) -> Result<Msg, RecvFail>;
}

impl<M: Mode, P: Protocol> TxEnd for Sender<Msg, M, P>
where
    Sender<Msg, M, P>: Send,
{
    fn put(&self, m: Msg, op: Op) -> Result<(), SendFail> {
        match op {
            Op::Block => self
                .send(m)
                .map_err(|e| SendFail::Disconnected(e.into_inner())),
            Op::Try => self.try_send(m).map_err(|e| match e {
                TrySendError::Full(m) => SendFail::Full(m),
                TrySendError::Disconnected(m) => SendFail::Disconnected(m),
            }),
            Op::Timeout(d) => self.send_timeout(m, d).map_err(|e| match e {
                SendTimeoutError::Timeout(m) => SendFail::Timeout(m),
                SendTimeoutError::Disconnected(m) => SendFail::Disconnected(m),
            }),
        }
    }
}

impl<M: Mode, P: Protocol> RxEnd for Receiver<Msg, M, P>
where
    Receiver<Msg, M, P>: Send,
{
    fn take(&self, op: Op) -> Result<Msg, RecvFail> {
        match op {
            Op::Block => self.recv().map_err(|_| RecvFail::Disconnected),
            Op::Try => self.try_recv().map_err(|e| match e {
                TryRecvError::Empty => RecvFail::Empty,
                TryRecvError::Disconnected => RecvFail::Disconnected,
            }),
            Op::Timeout(d) => self.recv_timeout(d).map_err(|e| match e {
                RecvTimeoutError::Timeout => RecvFail::Timeout,
                RecvTimeoutError::Disconnected => RecvFail::Disconnected,
            }),
        }
    }
}

/// Counts the live senders down *before* the endpoint itself is dropped
/// (`Drop::drop` runs before the fields are dropped), also when a cancelled
/// coroutine unwinds: so whoever sees the disconnection sees the count at 0.
struct TxGuard(Box<dyn TxEnd>);

impl Drop for TxGuard {
    fn drop(&mut self) {
        ledger().senders_alive.fetch_sub(1, SeqCst);
    }
}

struct RxGuard(Box<dyn RxEnd>);

impl Drop for RxGuard {
    fn drop(&mut self) {
        ledger().receivers_alive.fetch_sub(1, SeqCst);
    }
}

fn clone_n<E: Clone>(e: E, n: usize) -> Vec<E> {
    let mut v: Vec<E> = (1..n).map(|_| e.clone()).collect();
    v.push(e);
    v
}

fn boxed_tx<E: TxEnd + 'static>(v: Vec<E>) -> Vec<Box<dyn TxEnd>> {
    v.into_iter()
        .map(|e| Box::new(e) as Box<dyn TxEnd>)
        .collect()
}

fn boxed_rx<E: RxEnd + 'static>(v: Vec<E>) -> Vec<Box<dyn RxEnd>> {
    v.into_iter()
        .map(|e| Box::new(e) as Box<dyn RxEnd>)
        .collect()
}

type Ends = (Vec<Box<dyn TxEnd>>, Vec<Box<dyn RxEnd>>);

/// The channel's endpoints, cloned only on the sides the mode allows.
fn endpoints<P: Protocol>(mode: ModeK, cap: usize, np: usize, nc: usize) -> Ends {
    match mode {
        ModeK::Spsc => {
            assert!(np == 1 && nc == 1);
            let (tx, rx) = spsc::bounded_with::<Msg, P>(cap);
            (boxed_tx(vec![tx]), boxed_rx(vec![rx]))
        }
        ModeK::Spmc => {
            assert!(np == 1);
            let (tx, rx) = spmc::bounded_with::<Msg, P>(cap);
            (boxed_tx(vec![tx]), boxed_rx(clone_n(rx, nc)))
        }
        ModeK::Mpsc => {
            assert!(nc == 1);
            let (tx, rx) = mpsc::bounded_with::<Msg, P>(cap);
            (boxed_tx(clone_n(tx, np)), boxed_rx(vec![rx]))
        }
        ModeK::Mpmc => {
            let (tx, rx) = mpmc::bounded_with::<Msg, P>(cap);
            (boxed_tx(clone_n(tx, np)), boxed_rx(clone_n(rx, nc)))
        }
    }
}

// ---------------------------------------------------------------------------
// Trial configuration.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ModeK {
    Spsc,
    Spmc,
    Mpsc,
    Mpmc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    Cas,
    Updt,
}

#[derive(Clone, Copy, Debug)]
enum Place {
    Thread,
    /// On a coroutine; `Some(cpe)` pinned with `spawn_on`, `None` placed by
    /// the runtime's policy.
    Coroutine(Option<usize>),
    /// On a coroutine spawned with `swco::spawn` by a launcher coroutine
    /// that then joins it (a local spawn, which an idle executor may steal
    /// before it starts).
    Nested,
}

impl Place {
    fn is_coroutine(self) -> bool {
        !matches!(self, Place::Thread)
    }
}

/// How a worker picks its operations: relative weights.
#[derive(Clone, Debug)]
struct Style {
    block: u64,
    try_: u64,
    timeout: u64,
    /// Coroutines: yield before an operation, one time in `n` (0: never).
    yield_one_in: u64,
    /// Producers: after a `Full` or a timeout, give the value up (drop it)
    /// and go on with the next sequence number, one time in `n` (0: never).
    abandon_one_in: u64,
}

impl Style {
    /// On a rendezvous (`cap` 0) a worker blocks now and then: `try_` and
    /// timed operations meet only a peer that is already waiting, so two
    /// workers that never block would never meet (as in Go).
    fn random(rng: &mut Rng, cap: usize) -> Style {
        let mut s = Style {
            block: rng.below(4),
            try_: rng.below(4),
            timeout: rng.below(4),
            yield_one_in: [0, 2, 5, 20][rng.below(4) as usize],
            abandon_one_in: [0, 0, 4, 20][rng.below(4) as usize],
        };
        if s.block + s.try_ + s.timeout == 0 || cap == 0 {
            s.block = s.block.max(1);
        }
        s
    }

    fn pick(&self, rng: &mut Rng) -> Op {
        let r = rng.below(self.block + self.try_ + self.timeout);
        if r < self.block {
            Op::Block
        } else if r < self.block + self.try_ {
            Op::Try
        } else {
            let us = match rng.below(4) {
                0 => 0,
                1 => rng.upto(1, 50),
                2 => rng.upto(50, 500),
                _ => rng.upto(500, 3000),
            };
            Op::Timeout(Duration::from_micros(us))
        }
    }
}

#[derive(Clone, Debug)]
struct Worker {
    place: Place,
    /// Producers: how many values to create (then the sender is dropped).
    msgs: u32,
    /// Consumers: stop after this many receives and drop the receiver.
    stop_after: Option<u32>,
    style: Style,
    seed: u64,
}

#[derive(Clone, Copy, Debug)]
enum CancelWait {
    /// Sleep this long after spawning (0: cancel straight away, so some
    /// coroutines have not started yet).
    Micros(u64),
    /// Until consumers have received this many messages (or every worker
    /// is done, or 2 s have passed).
    Received(u64),
}

#[derive(Clone, Copy, Debug)]
struct Cancel {
    wait: CancelWait,
    /// `shutdown_timeout`'s grace period.
    timeout_us: u64,
}

#[derive(Clone, Debug)]
struct Trial {
    index: u64,
    seed: u64,
    mode: ModeK,
    proto: Proto,
    cap: usize,
    executors: usize,
    stack: usize,
    /// `None`: the runtime's default.
    placement: Option<swco::Placement>,
    producers: Vec<Worker>,
    consumers: Vec<Worker>,
    /// Producers first (`false`) or consumers first (`true`); then the
    /// order within each side is shuffled by `spawn_seed`.
    spawn_seed: u64,
    cancel: Option<Cancel>,
}

impl Trial {
    fn generate(index: u64, seed: u64, allow_cancel: bool, allow_nested: bool) -> Trial {
        let mut rng = Rng(seed);
        let mode = [ModeK::Spsc, ModeK::Spmc, ModeK::Mpsc, ModeK::Mpmc][rng.below(4) as usize];
        let proto = if rng.one_in(2) {
            Proto::Cas
        } else {
            Proto::Updt
        };
        // One slot is where every operation blocks and wake-ups matter most.
        let cap = match rng.below(8) {
            // Zero: a rendezvous, where every operation meets a peer.
            0 => 0,
            1 => 1,
            2 => [9, 16, 33, 64, 1024][rng.below(5) as usize],
            _ => rng.upto(2, 8) as usize,
        };
        let many_p = matches!(mode, ModeK::Mpsc | ModeK::Mpmc);
        let many_c = matches!(mode, ModeK::Spmc | ModeK::Mpmc);
        let np = if many_p { rng.upto(1, 3) } else { 1 } as usize;
        let nc = if many_c { rng.upto(1, 3) } else { 1 } as usize;
        let executors = rng.upto(1, 3) as usize;
        let stack = [32 * 1024, 64 * 1024, 128 * 1024][rng.below(3) as usize];
        let placement = [
            None,
            Some(swco::Placement::RoundRobin),
            Some(swco::Placement::LeastLoaded),
        ][rng.below(3) as usize];
        let place = |rng: &mut Rng| match rng.below(8) {
            0..=3 => Place::Thread,
            4 | 5 => Place::Coroutine(None),
            6 => Place::Coroutine(Some(rng.below(executors as u64) as usize)),
            _ if allow_nested => Place::Nested,
            _ => Place::Coroutine(None),
        };
        let producers: Vec<Worker> = (0..np)
            .map(|_| Worker {
                place: place(&mut rng),
                msgs: match rng.below(6) {
                    0 => rng.upto(0, 10),
                    5 => rng.upto(100, MAX_MSGS as u64),
                    _ => rng.upto(10, 150),
                } as u32,
                stop_after: None,
                style: Style::random(&mut rng, cap),
                seed: rng.next(),
            })
            .collect();
        let consumers: Vec<Worker> = (0..nc)
            .map(|_| Worker {
                place: place(&mut rng),
                msgs: 0,
                stop_after: rng.one_in(4).then(|| rng.upto(0, 40) as u32),
                style: Style::random(&mut rng, cap),
                seed: rng.next(),
            })
            .collect();
        let spawn_seed = rng.next();
        let cancel = (allow_cancel && rng.one_in(2)).then(|| {
            let total: u64 = producers.iter().map(|p| u64::from(p.msgs)).sum();
            Cancel {
                wait: if rng.one_in(2) {
                    CancelWait::Micros(
                        [0, rng.upto(1, 300), rng.upto(300, 5000)][rng.below(3) as usize],
                    )
                } else {
                    CancelWait::Received(rng.upto(0, total / 2 + 1))
                },
                timeout_us: [0, rng.upto(1, 500), rng.upto(500, 5000)][rng.below(3) as usize],
            }
        });
        let mut t = Trial {
            index,
            seed,
            mode,
            proto,
            cap,
            executors,
            stack,
            placement,
            producers,
            consumers,
            spawn_seed,
            cancel,
        };
        // A cancellation needs a coroutine to cancel.
        if t.cancel.is_some() && !t.workers().any(|w| w.place.is_coroutine()) {
            let n = t.producers.len() + t.consumers.len();
            let k = rng.below(n as u64) as usize;
            let w = if k < t.producers.len() {
                &mut t.producers[k]
            } else {
                &mut t.consumers[k - t.producers.len()]
            };
            w.place = Place::Coroutine(None);
        }
        // Half the time, a side with several endpoints mixes threads and
        // coroutines: a cancelled coroutine then shares the waiter list
        // with a thread that must still be woken.
        if t.cancel.is_some() && rng.one_in(2) {
            let side = match (t.producers.len() > 1, t.consumers.len() > 1) {
                (true, true) if rng.one_in(2) => Some(&mut t.producers),
                (true, _) => Some(&mut t.producers),
                (_, true) => Some(&mut t.consumers),
                _ => None,
            };
            if let Some(side) = side {
                let threads = side
                    .iter()
                    .filter(|w| matches!(w.place, Place::Thread))
                    .count();
                if threads == 0 {
                    side[0].place = Place::Thread;
                } else if threads == side.len() {
                    side[0].place = Place::Coroutine(None);
                }
            }
        }
        t
    }

    fn workers(&self) -> impl Iterator<Item = &Worker> {
        self.producers.iter().chain(self.consumers.iter())
    }

    fn combo(&self) -> String {
        format!("{:?}/{:?}", self.mode, self.proto).to_lowercase()
    }

    fn describe(&self) -> String {
        let mut s = format!(
            "trial #{} (seed {:#x}): {} capacity {}, runtime of {} executor(s), {} KiB stacks, {} placement",
            self.index,
            self.seed,
            self.combo(),
            self.cap,
            self.executors,
            self.stack / 1024,
            match self.placement {
                None => "default".to_owned(),
                Some(p) => format!("{p:?}"),
            },
        );
        let place = |p: Place| match p {
            Place::Thread => "OS thread".to_owned(),
            Place::Coroutine(None) => "coroutine".to_owned(),
            Place::Coroutine(Some(c)) => format!("coroutine on cpe {c}"),
            Place::Nested => "coroutine spawned by a coroutine".to_owned(),
        };
        let style = |w: &Worker, producer: bool| {
            let st = &w.style;
            let mut s = format!(
                "ops block:try:timeout = {}:{}:{}",
                st.block, st.try_, st.timeout
            );
            if w.place.is_coroutine() && st.yield_one_in != 0 {
                s += &format!(", yields 1 in {}", st.yield_one_in);
            }
            if producer && st.abandon_one_in != 0 {
                s += &format!(
                    ", gives a full/timed-out value up 1 in {}",
                    st.abandon_one_in
                );
            }
            s
        };
        for (i, p) in self.producers.iter().enumerate() {
            s += &format!(
                "\n  producer {i}: {}, {} messages, {}",
                place(p.place),
                p.msgs,
                style(p, true)
            );
        }
        for (i, c) in self.consumers.iter().enumerate() {
            let stop = match c.stop_after {
                Some(k) => format!("stops after {k}"),
                None => "drains".to_owned(),
            };
            s += &format!(
                "\n  consumer {i}: {}, {stop}, {}",
                place(c.place),
                style(c, false)
            );
        }
        match self.cancel {
            Some(c) => {
                s += &format!(
                    "\n  cancel: after {:?}, shutdown_timeout({} µs)",
                    c.wait, c.timeout_us
                )
            }
            None => s += "\n  no cancellation",
        }
        s
    }
}

// ---------------------------------------------------------------------------
// The workers.

fn backoff(in_co: bool, tries: u32, rng: &mut Rng, st: &Status) {
    st.doing.store(Doing::Backoff as u8, SeqCst);
    if in_co {
        swco::yield_now();
    } else if tries < 4 {
        thread::yield_now();
    } else {
        thread::sleep(Duration::from_micros(rng.upto(5, 200)));
    }
}

fn op_doing(op: Op, send: bool) -> Doing {
    match (op, send) {
        (Op::Block, true) => Doing::Send,
        (Op::Try, true) => Doing::TrySend,
        (Op::Timeout(_), true) => Doing::SendTimeout,
        (Op::Block, false) => Doing::Recv,
        (Op::Try, false) => Doing::TryRecv,
        (Op::Timeout(_), false) => Doing::RecvTimeout,
    }
}

fn produce(pid: usize, plan: &Worker, tx: TxGuard, in_co: bool) {
    let l = ledger();
    let st = &l.status[pid];
    let mut rng = Rng(plan.seed);
    let style = &plan.style;
    for seq in 0..plan.msgs {
        let mut msg = Msg::new(pid, seq);
        let mut tries = 0;
        loop {
            if in_co && style.yield_one_in != 0 && rng.one_in(style.yield_one_in) {
                st.set(Doing::Yield, seq);
                swco::yield_now();
            }
            let op = style.pick(&mut rng);
            st.set(op_doing(op, true), seq);
            msg.how = How::InFlight;
            match tx.0.put(msg, op) {
                Ok(()) => {
                    l.slot(pid, seq).accepted.store(true, SeqCst);
                    st.done.fetch_add(1, SeqCst);
                    break;
                }
                Err(SendFail::Disconnected(mut m)) => {
                    m.how = How::Held;
                    if l.receivers_alive.load(SeqCst) != 0 {
                        l.error(format!(
                            "producer {pid}: send of seq {seq} ({op:?}) said disconnected with {} receiver(s) alive",
                            l.receivers_alive.load(SeqCst)
                        ));
                    }
                    drop(m);
                    st.set(Doing::SawDisconnect, seq);
                    return;
                }
                Err(SendFail::Full(mut m)) | Err(SendFail::Timeout(mut m)) => {
                    m.how = How::Held;
                    if style.abandon_one_in != 0 && rng.one_in(style.abandon_one_in) {
                        drop(m);
                        break;
                    }
                    msg = m;
                    tries += 1;
                    backoff(in_co, tries, &mut rng, st);
                }
            }
        }
    }
    st.set(Doing::Finished, plan.msgs);
    drop(tx);
}

fn consume(cid: usize, plan: &Worker, rx: RxGuard, in_co: bool) {
    let l = ledger();
    let st = &l.status[MAX_SIDE + cid];
    let mut rng = Rng(plan.seed);
    let style = &plan.style;
    let mut last: [Option<u32>; MAX_SIDE] = [None; MAX_SIDE];
    let mut got = 0u32;
    let mut tries = 0;
    loop {
        if plan.stop_after.is_some_and(|k| got >= k) {
            st.set(Doing::StoppedEarly, got);
            drop(rx);
            return;
        }
        if in_co && style.yield_one_in != 0 && rng.one_in(style.yield_one_in) {
            st.set(Doing::Yield, got);
            swco::yield_now();
        }
        let op = style.pick(&mut rng);
        st.set(op_doing(op, false), got);
        match rx.0.take(op) {
            Ok(mut m) => {
                m.how = How::Received;
                tries = 0;
                got += 1;
                st.done.fetch_add(1, SeqCst);
                l.total_received.fetch_add(1, SeqCst);
                if m.check("received") {
                    let before = l.slot(m.pid, m.seq).received.fetch_add(1, SeqCst);
                    if before != 0 {
                        l.error(format!(
                            "consumer {cid}: producer {} seq {} received {} times",
                            m.pid,
                            m.seq,
                            before + 1
                        ));
                    }
                    if let Some(prev) = last[m.pid] {
                        if m.seq <= prev {
                            l.error(format!(
                                "consumer {cid}: FIFO broken: producer {} seq {} after seq {prev}",
                                m.pid, m.seq
                            ));
                        }
                    }
                    last[m.pid] = Some(m.seq);
                }
                // Now and then hold the message across a suspension point.
                if in_co && rng.one_in(8) {
                    swco::yield_now();
                }
                drop(m);
            }
            Err(RecvFail::Empty) | Err(RecvFail::Timeout) => {
                tries += 1;
                backoff(in_co, tries, &mut rng, st);
            }
            Err(RecvFail::Disconnected) => {
                let alive = l.senders_alive.load(SeqCst);
                if alive != 0 {
                    l.error(format!(
                        "consumer {cid}: receive ({op:?}) said disconnected with {alive} sender(s) alive"
                    ));
                }
                l.saw_disconnect.store(true, SeqCst);
                st.set(Doing::SawDisconnect, got);
                return;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// One trial.

enum Handle {
    Thread(usize, thread::JoinHandle<()>),
    /// The result is the nested coroutine's, for [`Place::Nested`].
    Coroutine(usize, swco::JoinHandle<Result<(), swco::JoinError>>),
}

type Body = Box<dyn FnOnce(bool) + Send>;

#[derive(Default, Debug)]
struct Outcome {
    errors: Vec<String>,
    /// Per worker: its coroutine was cancelled.
    cancelled: Vec<usize>,
    /// `shutdown_timeout` reported live coroutines.
    report: Option<String>,
    /// Cancelled coroutines whose closure never ran.
    unstarted: usize,
    /// The trial was abandoned with workers still blocked: stop the run.
    fatal: bool,
    /// `shutdown_timeout` counted this many cancelled coroutines as stuck.
    stuck: usize,
    received: u64,
    created: u64,
}

/// The running trial's worker indices.
fn trial_workers() -> impl Iterator<Item = usize> {
    let l = ledger();
    (0..l.np.load(SeqCst)).chain((0..l.nc.load(SeqCst)).map(|c| MAX_SIDE + c))
}

fn worker_name(w: usize) -> String {
    if w < MAX_SIDE {
        format!("producer {w}")
    } else {
        format!("consumer {}", w - MAX_SIDE)
    }
}

/// Runs one trial. `patience`: how long coroutines that `shutdown_timeout`
/// reported as stuck may take to finish after it returned.
fn run_trial(t: &Trial, patience: Duration) -> Outcome {
    let l = ledger();
    let np = t.producers.len();
    let nc = t.consumers.len();
    l.set_phase(0);
    l.reset(t.index + 1, np, nc);
    let mut builder = Runtime::builder()
        .executors(t.executors)
        .stack_size(t.stack);
    if let Some(p) = t.placement {
        builder = builder.placement(p);
    }
    let rt = builder.build().expect("runtime");
    let (txs, rxs) = match t.proto {
        Proto::Cas => endpoints::<Cas>(t.mode, t.cap, np, nc),
        Proto::Updt => endpoints::<Updt>(t.mode, t.cap, np, nc),
    };
    // (worker index, placement, body)
    let mut jobs: Vec<(usize, Place, Body)> = Vec::new();
    for (pid, tx) in txs.into_iter().enumerate() {
        let plan = t.producers[pid].clone();
        let tx = TxGuard(tx);
        jobs.push((
            pid,
            plan.place,
            Box::new(move |in_co| produce(pid, &plan, tx, in_co)),
        ));
    }
    for (cid, rx) in rxs.into_iter().enumerate() {
        let plan = t.consumers[cid].clone();
        let rx = RxGuard(rx);
        jobs.push((
            MAX_SIDE + cid,
            plan.place,
            Box::new(move |in_co| consume(cid, &plan, rx, in_co)),
        ));
    }
    let mut rng = Rng(t.spawn_seed);
    for i in (1..jobs.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        jobs.swap(i, j);
    }
    l.set_phase(1);
    let mut handles = Vec::new();
    let mut places = [Place::Thread; WORKERS];
    for (w, place, body) in jobs {
        places[w] = place;
        let token = Token::new(w);
        let run = move |in_co: bool| {
            let _token = token;
            body(in_co)
        };
        handles.push(match place {
            Place::Thread => Handle::Thread(
                w,
                thread::Builder::new()
                    .name(format!("soak-{}", worker_name(w).replace(' ', "-")))
                    .spawn(move || run(false))
                    .expect("spawn thread"),
            ),
            Place::Coroutine(cpe) => {
                let co = move || {
                    run(true);
                    Ok(())
                };
                let h = match cpe {
                    Some(c) => rt.spawn_on(c, co).expect("spawn_on"),
                    None => rt.try_spawn(co).expect("spawn"),
                };
                Handle::Coroutine(w, h)
            }
            Place::Nested => {
                let launcher = move || swco::spawn(move || run(true)).join();
                Handle::Coroutine(w, rt.try_spawn(launcher).expect("spawn"))
            }
        });
    }

    let mut out = Outcome::default();
    let mut shutdown_ok = None;
    let mut live_at_timeout = 0;
    let mut stuck = 0;
    if let Some(c) = t.cancel {
        l.set_phase(2);
        match c.wait {
            CancelWait::Micros(us) => thread::sleep(Duration::from_micros(us)),
            CancelWait::Received(k) => {
                let until = Instant::now() + Duration::from_secs(2);
                let workers = np + nc;
                while l.total_received.load(SeqCst) < k
                    && l.tokens
                        .iter()
                        .map(|t| t.load(SeqCst) as usize)
                        .sum::<usize>()
                        < workers
                    && Instant::now() < until
                {
                    thread::sleep(Duration::from_micros(50));
                }
            }
        }
        l.set_phase(3);
        match rt.shutdown_timeout(Duration::from_micros(c.timeout_us)) {
            Ok(()) => shutdown_ok = Some(true),
            Err(report) => {
                out.report = Some(format!("{report:?}"));
                shutdown_ok = Some(false);
                live_at_timeout = report.total();
                stuck = report.stuck;
                out.stuck = stuck;
            }
        }
        // Every coroutine has now finished or been cancelled: its closure
        // ran to the end, unwound, or was dropped unstarted, and its join
        // handle is complete; except those the report counts as `stuck`,
        // which finish later on detached executor threads (ours never block
        // for good, so they must). A leftover keeps its endpoint alive and
        // the thread workers might wait for it for ever: fail now instead.
        let leftovers = || {
            let mut left = Vec::new();
            for h in &handles {
                if let Handle::Coroutine(w, h) = h {
                    if !h.is_finished() {
                        left.push(format!("{}'s join handle is not finished", worker_name(*w)));
                    }
                }
            }
            for w in trial_workers() {
                if places[w].is_coroutine() && l.tokens[w].load(SeqCst) == 0 {
                    left.push(format!(
                        "the closure of {} ({:?}, {}) was neither run to the end, unwound, nor dropped",
                        worker_name(w),
                        places[w],
                        l.status[w].describe()
                    ));
                }
            }
            left
        };
        let mut left = leftovers();
        if !left.is_empty() && stuck > 0 {
            let until = Instant::now() + patience;
            while !left.is_empty() && Instant::now() < until {
                thread::sleep(Duration::from_millis(1));
                left = leftovers();
            }
            left = left
                .into_iter()
                .map(|e| {
                    format!(
                        "{patience:?} after shutdown_timeout returned (reporting {stuck} stuck), {e}"
                    )
                })
                .collect();
        } else {
            left = left
                .into_iter()
                .map(|e| format!("after shutdown_timeout returned (none stuck), {e}"))
                .collect();
        }
        if !left.is_empty() {
            for e in left {
                l.error(e);
            }
            // Leave the blocked threads and the runtime behind: dropping it
            // could wait for the leftover for ever.
            std::mem::forget(rt);
            drop(handles);
            out.fatal = true;
            out.errors = l.take_errors();
            return out;
        }
    }

    l.set_phase(4);
    for h in handles {
        match h {
            Handle::Thread(w, h) => {
                if let Err(p) = h.join() {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_default();
                    l.error(format!("{} (thread) panicked: {msg}", worker_name(w)));
                }
            }
            Handle::Coroutine(w, h) => match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) | Err(e) if e.is_cancelled() && t.cancel.is_some() => {
                    out.cancelled.push(w)
                }
                Ok(Err(e)) | Err(e) => {
                    l.error(format!("{} (coroutine): join error: {e}", worker_name(w)))
                }
            },
        }
    }
    l.set_phase(5);
    rt.shutdown();
    drop(rt);

    if shutdown_ok == Some(true) && !out.cancelled.is_empty() {
        l.error(format!(
            "shutdown_timeout returned Ok, yet coroutines were cancelled: {:?}",
            out.cancelled
        ));
    }
    if out.cancelled.len() > live_at_timeout {
        l.error(format!(
            "{} coroutines cancelled, but shutdown_timeout reported only {live_at_timeout} live",
            out.cancelled.len()
        ));
    }
    out.unstarted = out
        .cancelled
        .iter()
        .filter(|&&w| l.status[w].doing.load(SeqCst) == Doing::NotStarted as u8)
        .count();
    verify(t, &out.cancelled);
    out.errors = l.take_errors();
    out.received = l.total_received.load(SeqCst);
    out.created = l.total_created.load(SeqCst);
    out
}

/// The end-of-trial checks, once every worker is joined and the runtime
/// is shut down, so the channel has been freed.
fn verify(t: &Trial, cancelled: &[usize]) {
    let l = ledger();
    let mut errs = Vec::new();
    for w in (0..t.producers.len()).chain((0..t.consumers.len()).map(|c| MAX_SIDE + c)) {
        let n = l.tokens[w].load(SeqCst);
        if n != 1 {
            errs.push(format!(
                "{}'s closure dropped {n} times (cancelled: {})",
                worker_name(w),
                cancelled.contains(&w)
            ));
        }
    }
    let saw_disconnect = l.saw_disconnect.load(SeqCst);
    for pid in 0..MAX_SIDE {
        let created = l.created[pid].load(SeqCst);
        let producer_cancelled = cancelled.contains(&pid);
        for seq in 0..MAX_MSGS as u32 {
            let s = l.slot(pid, seq);
            let drops = s.drops.load(SeqCst);
            let received = s.received.load(SeqCst);
            let accepted = s.accepted.load(SeqCst);
            let how = How::from_u8(s.how.load(SeqCst));
            let what = format!("producer {pid} seq {seq}");
            if seq >= created {
                if drops != 0 || received != 0 || accepted {
                    errs.push(format!(
                        "{what} was never created, yet dropped {drops}, received {received}, accepted {accepted}"
                    ));
                }
                continue;
            }
            if drops != 1 {
                errs.push(format!(
                    "{what}: dropped {drops} times, want exactly once{} (accepted {accepted}, received {received}, last held as {how:?})",
                    if drops == 0 { " (leak)" } else { "" }
                ));
                continue;
            }
            // The last value a cancelled producer created may have been
            // inside its send when it was unwound.
            let unwound = producer_cancelled && seq + 1 == created;
            let ok = match (accepted, received, how) {
                (true, 1, Some(How::Received)) => true,
                (true, 0, Some(How::InFlight)) => {
                    if saw_disconnect {
                        errs.push(format!(
                            "{what}: accepted, never received, dropped in the channel, although a consumer was told the channel was disconnected (hence empty)"
                        ));
                    }
                    true
                }
                (false, 0, Some(How::Held)) => true,
                (false, 0, Some(How::InFlight)) | (false, 1, Some(How::Received)) => unwound,
                _ => false,
            };
            if !ok {
                errs.push(format!(
                    "{what}: inconsistent: accepted {accepted}, received {received}, dropped while held as {how:?} (producer cancelled: {producer_cancelled}, created {created})"
                ));
            }
        }
    }
    let created = l.total_created.load(SeqCst);
    let dropped = l.total_dropped.load(SeqCst);
    if created != dropped {
        errs.push(format!("{created} values created, {dropped} dropped"));
    }
    for e in errs {
        l.error(e);
    }
}

// ---------------------------------------------------------------------------
// The child: trials under a watchdog.

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={v}: not a number")))
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// What the watchdog prints if a trial hangs.
static CURRENT: Mutex<Option<(Instant, String)>> = Mutex::new(None);

fn watchdog(limit: Duration) {
    loop {
        thread::sleep(Duration::from_millis(100));
        let cur = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
        let Some((start, desc)) = &*cur else { continue };
        if start.elapsed() < limit {
            continue;
        }
        let l = ledger();
        let mut s = format!(
            "\nSWCO SOAK HANG: a trial did not finish within {limit:?} (phase: {})\n{desc}\n",
            PHASES[l.phase.load(SeqCst).min(PHASES.len() - 1)]
        );
        for w in trial_workers() {
            let finished = l.tokens[w].load(SeqCst) != 0;
            s += &format!(
                "  {}: {}, {}\n",
                worker_name(w),
                l.status[w].describe(),
                if finished {
                    "closure finished or dropped"
                } else {
                    "closure still alive"
                }
            );
        }
        let accepted = l.slots.iter().filter(|s| s.accepted.load(SeqCst)).count();
        let received = l.total_received.load(SeqCst);
        s += &format!(
            "  values created {}, dropped {}; sends accepted {accepted}, received {received} \
             (so {} accepted message(s) not received: in the buffer, or dropped with it if every \
             receiver is gone); senders alive {}, receivers alive {}\n",
            l.total_created.load(SeqCst),
            l.total_dropped.load(SeqCst),
            (accepted as u64).saturating_sub(received),
            l.senders_alive.load(SeqCst),
            l.receivers_alive.load(SeqCst),
        );
        s += &format!(
            "Rerun this trial's configuration with SWCO_SOAK_SEED={0:#x} SWCO_SOAK_TRIALS=1, \
             or over and over with SWCO_SOAK_SEED={0:#x} SWCO_SOAK_REPEAT=1\n",
            seed_of(desc)
        );
        eprintln!("{s}");
        if env_flag("SWCO_SOAK_HANG_PAUSE") {
            // Leave the hung process for a debugger (the parent still kills
            // it at its own timeout).
            eprintln!(
                "SWCO_SOAK_HANG_PAUSE: pid {} left hanging",
                std::process::id()
            );
            loop {
                thread::sleep(Duration::from_secs(3600));
            }
        }
        std::process::exit(3);
    }
}

/// The seed printed in a trial's description.
fn seed_of(desc: &str) -> u64 {
    desc.split("(seed 0x")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or(0)
}

fn child_main() {
    let base = env_u64("SWCO_SOAK_SEED").expect("the parent sets SWCO_SOAK_SEED");
    let trials = env_u64("SWCO_SOAK_TRIALS");
    let budget = Duration::from_secs(env_u64("SWCO_SOAK_SECS").unwrap_or(5));
    let allow_cancel = !env_flag("SWCO_SOAK_NO_CANCEL");
    let allow_nested = !env_flag("SWCO_SOAK_NO_NESTED");
    let keep_going = env_flag("SWCO_SOAK_KEEP_GOING");
    let repeat = env_flag("SWCO_SOAK_REPEAT");
    let verbose = env_flag("SWCO_SOAK_VERBOSE");
    let limit = Duration::from_secs(env_u64("SWCO_SOAK_TRIAL_LIMIT_SECS").unwrap_or(30));
    thread::Builder::new()
        .name("soak-watchdog".into())
        .spawn(move || watchdog(limit))
        .unwrap();

    let start = Instant::now();
    let mut seed = base;
    let mut index = 0u64;
    let mut failures: Vec<String> = Vec::new();
    let mut with_cancel = 0u64;
    let mut cancelled_coroutines = 0usize;
    let mut unstarted = 0usize;
    let mut stuck_reports = 0u64;
    let mut slowest = (Duration::ZERO, 0u64);
    let mut reports = 0u64;
    let mut received = 0u64;
    let mut created = 0u64;
    let mut combos: std::collections::BTreeMap<String, u64> = Default::default();
    loop {
        match trials {
            Some(n) if index >= n => break,
            None if start.elapsed() >= budget => break,
            _ => {}
        }
        let t = Trial::generate(index, seed, allow_cancel, allow_nested);
        let desc = t.describe();
        if verbose {
            eprintln!("{desc}");
        }
        *CURRENT.lock().unwrap() = Some((Instant::now(), desc.clone()));
        let began = Instant::now();
        let out = run_trial(&t, limit / 2);
        let took = began.elapsed();
        if took > slowest.0 {
            slowest = (took, t.seed);
        }
        *CURRENT.lock().unwrap() = None;
        *combos.entry(t.combo()).or_default() += 1;
        with_cancel += u64::from(t.cancel.is_some());
        cancelled_coroutines += out.cancelled.len();
        stuck_reports += u64::from(out.stuck > 0);
        unstarted += out.unstarted;
        reports += u64::from(out.report.is_some());
        received += out.received;
        created += out.created;
        if !out.errors.is_empty() {
            let mut f =
                format!(
                "\nSWCO SOAK FAILURE in {desc}\n  shutdown_timeout report: {:?}; cancelled: {:?}\n",
                out.report,
                out.cancelled.iter().map(|&w| worker_name(w)).collect::<Vec<_>>()
            );
            for e in &out.errors {
                f += &format!("  - {e}\n");
            }
            f += &format!(
                "Rerun this trial's configuration with SWCO_SOAK_SEED={:#x} SWCO_SOAK_TRIALS=1, \
                 or over and over with SWCO_SOAK_SEED={:#x} SWCO_SOAK_REPEAT=1 (base seed {base:#x})\n",
                t.seed, t.seed
            );
            if out.fatal {
                f += "  (this trial's threads are left blocked, so the run stops here)\n";
            }
            eprintln!("{f}");
            failures.push(f);
            if !keep_going || out.fatal {
                break;
            }
        }
        if !repeat {
            seed = {
                let mut s = seed;
                splitmix64(&mut s)
            };
        }
        index += 1;
    }
    println!(
        "\nswco soak: {index} trials in {:.1} s (base seed {base:#x}); {with_cancel} with a cancellation \
         ({reports} cut short with live coroutines, {cancelled_coroutines} coroutines cancelled, {unstarted} of them before they ran, {stuck_reports} reports of stuck coroutines); \
         {created} values created, {received} received; slowest trial {:.0} ms (seed {:#x}); \
         trials per combination: {combos:?}",
        start.elapsed().as_secs_f64(),
        slowest.0.as_secs_f64() * 1e3,
        slowest.1,
    );
    if !failures.is_empty() {
        let shown = 5;
        panic!(
            "{} of {index} trials failed (base seed {base:#x}); first {}:\n{}",
            failures.len(),
            shown.min(failures.len()),
            failures[..shown.min(failures.len())].join("")
        );
    }
}

// ---------------------------------------------------------------------------
// The parent.

#[test]
fn soak_channels_between_threads_and_coroutines() {
    if in_child() {
        child_main();
        return;
    }
    let seed = env_u64("SWCO_SOAK_SEED").unwrap_or_else(|| {
        let mut s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ (u64::from(std::process::id()) << 32);
        splitmix64(&mut s)
    });
    let budget = env_u64("SWCO_SOAK_SECS").unwrap_or(5);
    let timeout = Duration::from_secs(env_u64("SWCO_SOAK_TIMEOUT_SECS").unwrap_or(budget + 120));
    println!("swco soak: base seed {seed:#x} (set SWCO_SOAK_SEED to repeat)");
    let seed_text = format!("{seed:#x}");
    let ChildOutput {
        status,
        stdout,
        stderr,
    } = run_child_for(
        TEST_NAME,
        "1",
        &[("SWCO_SOAK_SEED", &seed_text)],
        &[],
        timeout,
    );
    let summary: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("swco soak:"))
        .collect();
    for line in &summary {
        println!("{line}");
    }
    match status {
        None => panic!(
            "the soak child was killed after {timeout:?} (base seed {seed:#x}); \
             stdout:\n{stdout}\nstderr:\n{stderr}"
        ),
        Some(s) if !s.success() => panic!(
            "the soak child failed ({s}, base seed {seed:#x}); stdout:\n{stdout}\nstderr:\n{stderr}"
        ),
        Some(_) => assert!(
            !summary.is_empty(),
            "the soak child printed no summary (was the test renamed?); stdout:\n{stdout}\nstderr:\n{stderr}"
        ),
    }
}
