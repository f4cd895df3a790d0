//! A mixed stress of zero-capacity (rendezvous) channels: every kind of
//! send against every kind of select receive, between coroutines and plain
//! threads, on a two-executor runtime.
//!
//! Three capacity-0 channels (`mpmc` `Cas`, `mpmc` `Updt`, `spmc` `Updt`).
//! Producers: two threads and three coroutines; the first coroutine is the
//! only sender of the `spmc` channel, the others share the `mpmc` ones. Each
//! sends its own distinct ids, choosing per message among `send`,
//! `send_timeout`, `try_send` and a `select!` send arm with `default(t)`
//! (a refused message is offered again, so every id is sent exactly once).
//! Consumers: two coroutines and two threads, each receiving from all three
//! channels with `select!` (with `default`, `default(t)` or neither) while
//! all three are open, then with `Select` (random or biased; `select`,
//! `select_timeout`, `try_select`), removing a channel once it disconnects.
//! A ledger counts every id: each is received exactly once.
//!
//! A lost wake-up hangs a round. The test runs in a child process with a
//! watchdog: a round that does not finish in time prints which producers and
//! consumers are still working and what they did last, then aborts.
//!
//! Environment: `SWCO_RV_STRESS_SECS` (default 3) is the time budget of
//! rounds; `SWCO_RV_STRESS_ROUND_LIMIT_SECS` (default 60) the watchdog;
//! `SWCO_RV_STRESS_SEED` the first seed; `SWCO_RV_STRESS_IDS` (default
//! 2 000) the ids each producer sends in a round; `SWCO_RV_STRESS_FOCUS`
//! has only the `spmc` channel's lone sender send (the case seen hanging);
//! `SWCO_RV_STRESS_PARTNER` has every producer send through `select!` only
//! (receivers' tries then keep waiting on a selecting send's fill, the
//! other case seen hanging); `SWCO_RV_STRESS_HANG_PAUSE` keeps
//! a hung child alive for a debugger instead of aborting it. The child process has a fixed hang
//! guard, so a long run for the record runs as the child itself (the
//! watchdog still aborts a hung round):
//! `SWCO_TEST_CHILD=1 SWCO_RV_STRESS_SECS=600 cargo test --release -p swco-executor --test rendezvous_stress -- --nocapture`
//! (run two or three at once on a two-core machine: oversubscription is
//! what the races need).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::in_child_process;
use swco_channel::{
    mpmc, select, spmc, Cas, RecvTimeoutError, Select, SendTimeoutError, TryRecvError,
    TrySendError, Updt,
};
use swco_executor::Runtime;

const PRODUCERS: usize = 5;
const CONSUMERS: usize = 4;

/// splitmix64: a small, seedable generator for the choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn micros(&mut self, max: u64) -> Duration {
        Duration::from_micros(self.below(max + 1))
    }
}

/// What every worker of a round shares: the ledger and the progress the
/// watchdog reports.
struct Round {
    per_producer: u64,
    /// Receipts per id.
    received: Vec<AtomicU8>,
    /// Per worker (producers first): messages done, and the last operation
    /// started (for the watchdog's report).
    done: Vec<AtomicU64>,
    doing: Vec<AtomicU8>,
    finished: Vec<AtomicBool>,
}

const OPS: [&str; 8] = [
    "send",
    "send_timeout",
    "try_send",
    "select send",
    "select! recv",
    "Select recv",
    "idle",
    "finished",
];

impl Round {
    fn new(per_producer: u64) -> Self {
        let ids = per_producer as usize * PRODUCERS;
        let workers = PRODUCERS + CONSUMERS;
        Round {
            per_producer,
            received: (0..ids).map(|_| AtomicU8::new(0)).collect(),
            done: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            doing: (0..workers).map(|_| AtomicU8::new(6)).collect(),
            finished: (0..workers).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    fn receive(&self, id: u64, worker: usize) {
        let before = self.received[id as usize].fetch_add(1, SeqCst);
        assert_eq!(before, 0, "id {id} received twice");
        self.done[worker].fetch_add(1, SeqCst);
    }

    fn report(&self) -> String {
        let mut out = String::new();
        for w in 0..self.done.len() {
            let role = if w < PRODUCERS {
                format!("producer {w}")
            } else {
                format!("consumer {}", w - PRODUCERS)
            };
            out += &format!(
                "  {role}: {} done, {} ({})\n",
                self.done[w].load(SeqCst),
                OPS[self.doing[w].load(SeqCst) as usize],
                if self.finished[w].load(SeqCst) {
                    "finished"
                } else {
                    "working"
                }
            );
        }
        out
    }
}

/// A producer's senders: the `spmc` one alone, or both `mpmc` ones.
enum Senders {
    Spmc(spmc::Sender<u64, Updt>),
    Mpmc(mpmc::Sender<u64, Cas>, mpmc::Sender<u64, Updt>),
}

/// Sends one message through a randomly chosen operation; gives it back
/// when the operation did not take it.
fn offer<S: SendOps>(tx: &S, id: u64, rng: &mut Rng, round: &Round, me: usize) -> Option<u64> {
    // Partner-focused: every send is a selecting one, so receivers' tries
    // keep meeting message-less select packets and wait for their fill.
    let op = if partner_focus() { 3 } else { rng.below(4) };
    round.doing[me].store(op as u8, SeqCst);
    match op {
        0 => {
            tx.send(id).expect("the consumers are alive");
            None
        }
        1 => match tx.send_timeout(id, rng.micros(300)) {
            Ok(()) => None,
            Err(SendTimeoutError::Timeout(back)) => Some(back),
            Err(SendTimeoutError::Disconnected(_)) => panic!("the consumers are alive"),
        },
        2 => match tx.try_send(id) {
            Ok(()) => None,
            Err(TrySendError::Full(back)) => Some(back),
            Err(TrySendError::Disconnected(_)) => panic!("the consumers are alive"),
        },
        _ => tx.select_send(id, rng.micros(300)),
    }
}

/// `SWCO_RV_STRESS_PARTNER`: producers send only through `select!` send
/// arms (see `offer`).
fn partner_focus() -> bool {
    static FOCUS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FOCUS.get_or_init(|| std::env::var_os("SWCO_RV_STRESS_PARTNER").is_some())
}

/// The send operations of one sender type, so that `offer` is written once.
trait SendOps {
    fn send(&self, v: u64) -> Result<(), swco_channel::SendError<u64>>;
    fn send_timeout(&self, v: u64, d: Duration) -> Result<(), SendTimeoutError<u64>>;
    fn try_send(&self, v: u64) -> Result<(), TrySendError<u64>>;
    /// `select! { send(tx, v) -> r => …, default(d) => … }`: `Some(v)` back
    /// on the default.
    fn select_send(&self, v: u64, d: Duration) -> Option<u64>;
}

macro_rules! send_ops {
    ($ty:ty) => {
        impl SendOps for $ty {
            fn send(&self, v: u64) -> Result<(), swco_channel::SendError<u64>> {
                <$ty>::send(self, v)
            }
            fn send_timeout(&self, v: u64, d: Duration) -> Result<(), SendTimeoutError<u64>> {
                <$ty>::send_timeout(self, v, d)
            }
            fn try_send(&self, v: u64) -> Result<(), TrySendError<u64>> {
                <$ty>::try_send(self, v)
            }
            fn select_send(&self, v: u64, d: Duration) -> Option<u64> {
                select! {
                    send(self, v) -> r => {
                        r.expect("the consumers are alive");
                        None
                    },
                    default(d) => Some(v),
                }
            }
        }
    };
}

send_ops!(spmc::Sender<u64, Updt>);
send_ops!(mpmc::Sender<u64, Cas>);
send_ops!(mpmc::Sender<u64, Updt>);

fn produce(me: usize, senders: Senders, seed: u64, round: &Round) {
    let mut rng = Rng(seed);
    let first = me as u64 * round.per_producer;
    // Focused: only the `spmc` channel's lone sender sends.
    let count = if me > 0 && std::env::var_os("SWCO_RV_STRESS_FOCUS").is_some() {
        0
    } else {
        round.per_producer
    };
    for id in first..first + count {
        let mut pending = Some(id);
        while let Some(id) = pending {
            pending = match &senders {
                Senders::Spmc(tx) => offer(tx, id, &mut rng, round, me),
                Senders::Mpmc(cas, updt) => {
                    if rng.below(2) == 0 {
                        offer(cas, id, &mut rng, round, me)
                    } else {
                        offer(updt, id, &mut rng, round, me)
                    }
                }
            };
        }
        round.done[me].fetch_add(1, SeqCst);
    }
    round.doing[me].store(7, SeqCst);
    round.finished[me].store(true, SeqCst);
}

struct Receivers {
    cas: mpmc::Receiver<u64, Cas>,
    updt: mpmc::Receiver<u64, Updt>,
    single: spmc::Receiver<u64, Updt>,
}

fn consume(me: usize, rx: &Receivers, seed: u64, round: &Round) {
    let mut rng = Rng(seed);
    // While all three channels are open: the `select!` macro.
    let mut open = [true; 3];
    loop {
        round.doing[me].store(4, SeqCst);
        let got: [Option<Result<u64, ()>>; 3] = match rng.below(3) {
            0 => select! {
                recv(rx.cas) -> m => [Some(m.map_err(drop)), None, None],
                recv(rx.updt) -> m => [None, Some(m.map_err(drop)), None],
                recv(rx.single) -> m => [None, None, Some(m.map_err(drop))],
                default => [None, None, None],
            },
            1 => select! {
                recv(rx.cas) -> m => [Some(m.map_err(drop)), None, None],
                recv(rx.updt) -> m => [None, Some(m.map_err(drop)), None],
                recv(rx.single) -> m => [None, None, Some(m.map_err(drop))],
                default(rng.micros(300)) => [None, None, None],
            },
            _ => select! {
                recv(rx.cas) -> m => [Some(m.map_err(drop)), None, None],
                recv(rx.updt) -> m => [None, Some(m.map_err(drop)), None],
                recv(rx.single) -> m => [None, None, Some(m.map_err(drop))],
            },
        };
        let mut closed = false;
        for (i, g) in got.into_iter().enumerate() {
            match g {
                Some(Ok(id)) => round.receive(id, me),
                Some(Err(())) => {
                    open[i] = false;
                    closed = true;
                }
                None => {}
            }
        }
        if closed {
            break;
        }
    }
    // Then `Select`, over the channels still open.
    while open.iter().any(|&o| o) {
        round.doing[me].store(5, SeqCst);
        let mut sel = if rng.below(2) == 0 {
            Select::new()
        } else {
            Select::new_biased()
        };
        let mut which = Vec::new();
        for (i, &o) in open.iter().enumerate() {
            if o {
                which.push(i);
                match i {
                    0 => sel.recv(&rx.cas),
                    1 => sel.recv(&rx.updt),
                    _ => sel.recv(&rx.single),
                };
            }
        }
        let op = match rng.below(3) {
            0 => sel.select(),
            1 => match sel.select_timeout(rng.micros(300)) {
                Ok(op) => op,
                Err(_) => continue,
            },
            _ => match sel.try_select() {
                Ok(op) => op,
                Err(_) => {
                    // Keep a thread from starving the executors it shares
                    // the machine with while it polls.
                    thread::yield_now();
                    continue;
                }
            },
        };
        let i = which[op.index()];
        let got = match i {
            0 => op.recv(&rx.cas),
            1 => op.recv(&rx.updt),
            _ => op.recv(&rx.single),
        };
        match got {
            Ok(id) => round.receive(id, me),
            Err(_) => open[i] = false,
        }
    }
    // Each channel says so once its senders are gone.
    assert_eq!(rx.cas.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(
        rx.updt.recv_timeout(Duration::ZERO),
        Err(RecvTimeoutError::Disconnected)
    );
    assert_eq!(rx.single.try_recv(), Err(TryRecvError::Disconnected));
    round.doing[me].store(7, SeqCst);
    round.finished[me].store(true, SeqCst);
}

/// One round; every id is received exactly once.
fn round(seed: u64, per_producer: u64, limit: Duration) {
    let round = Arc::new(Round::new(per_producer));
    let over = Arc::new(AtomicBool::new(false));
    let rt = Arc::new(Runtime::builder().executors(2).build().unwrap());
    let watchdog = {
        let (round, over, rt) = (round.clone(), over.clone(), rt.clone());
        thread::spawn(move || {
            let start = Instant::now();
            while !over.load(SeqCst) {
                if start.elapsed() > limit {
                    eprintln!(
                        "rendezvous stress: round with seed {seed:#x} hung after {limit:?}:\n{}",
                        round.report()
                    );
                    // Who is parked, on what (a spinning select gives way
                    // to the dump request in its executor's inbox).
                    eprintln!("{}", rt.dump());
                    if std::env::var_os("SWCO_RV_STRESS_HANG_PAUSE").is_some() {
                        eprintln!("pid {} left hanging for a debugger", std::process::id());
                        loop {
                            thread::sleep(Duration::from_secs(3600));
                        }
                    }
                    std::process::abort();
                }
                thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let (cas_tx, cas_rx) = mpmc::bounded_with::<u64, Cas>(0);
    let (updt_tx, updt_rx) = mpmc::bounded_with::<u64, Updt>(0);
    let (single_tx, single_rx) = spmc::bounded_with::<u64, Updt>(0);
    let mut single_tx = Some(single_tx);
    let mut coroutines = Vec::new();
    let mut threads = Vec::new();
    for p in 0..PRODUCERS {
        let senders = if p == 0 {
            Senders::Spmc(single_tx.take().expect("one spmc sender"))
        } else {
            Senders::Mpmc(cas_tx.clone(), updt_tx.clone())
        };
        let r = round.clone();
        let s = seed ^ (p as u64 + 1).wrapping_mul(0x51_7cc1_b727_220a);
        // Producers 0, 1, 2 are coroutines (0 and 1 on executor 0), 3 and 4
        // threads.
        if p < 3 {
            let h = rt
                .spawn_on(p / 2, move || produce(p, senders, s, &r))
                .unwrap();
            coroutines.push(h);
        } else {
            threads.push(thread::spawn(move || produce(p, senders, s, &r)));
        }
    }
    drop((cas_tx, updt_tx));
    for c in 0..CONSUMERS {
        let rx = Receivers {
            cas: cas_rx.clone(),
            updt: updt_rx.clone(),
            single: single_rx.clone(),
        };
        let r = round.clone();
        let me = PRODUCERS + c;
        let s = seed ^ (me as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
        if c < 2 {
            let h = rt.spawn_on(c, move || consume(me, &rx, s, &r)).unwrap();
            coroutines.push(h);
        } else {
            threads.push(thread::spawn(move || consume(me, &rx, s, &r)));
        }
    }
    drop((cas_rx, updt_rx, single_rx));
    for h in coroutines {
        h.join().expect("a coroutine of the round finished");
    }
    for t in threads {
        t.join().expect("a thread of the round finished");
    }
    rt.shutdown();
    over.store(true, SeqCst);
    watchdog.join().unwrap();
    let focus = std::env::var_os("SWCO_RV_STRESS_FOCUS").is_some();
    let missing: Vec<usize> = (0..round.received.len())
        .filter(|&i| {
            let expected = u8::from(!focus || (i as u64) < per_producer);
            round.received[i].load(SeqCst) != expected
        })
        .collect();
    assert!(
        missing.is_empty(),
        "seed {seed:#x}: {} ids not received exactly once (first: {:?})",
        missing.len(),
        &missing[..missing.len().min(8)]
    );
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn rendezvous_sends_against_selecting_receivers_lose_nothing() {
    in_child_process(
        "rendezvous_sends_against_selecting_receivers_lose_nothing",
        || {
            let secs = env_u64("SWCO_RV_STRESS_SECS").unwrap_or(3);
            let limit =
                Duration::from_secs(env_u64("SWCO_RV_STRESS_ROUND_LIMIT_SECS").unwrap_or(60));
            let budget = Duration::from_secs(secs);
            let start = Instant::now();
            let mut seed = env_u64("SWCO_RV_STRESS_SEED").unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
            let ids = env_u64("SWCO_RV_STRESS_IDS").unwrap_or(2_000);
            let mut rounds = 0u64;
            while rounds == 0 || start.elapsed() < budget {
                seed = Rng(seed).next();
                round(seed, ids, limit);
                rounds += 1;
            }
            println!("rendezvous stress: {rounds} rounds");
        },
    );
}
