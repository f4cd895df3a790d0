//! How long a blocked `select!` waits when its peers only ever try: one OS
//! thread blocks in a `select!` with `recv` arms on two channels (no
//! `default`), while two peer threads spin on non-blocking selects
//! (`select!{ send(tx, v) -> _ => .., default => {} }`, i.e. try-sends),
//! one on each channel. This is the shape of a reported problem: under
//! load the swco select took milliseconds where crossbeam's took
//! microseconds. Here both run in the same process, alternately, so that
//! whatever else the machine does falls on all of them alike.
//!
//! A round: the receiver opens it (a shared counter), takes the time, and
//! selects; the peer whose turn it is (rounds alternate between the two
//! channels) try-sends the round's number until a try succeeds, while the
//! other peer spins on the counter. So exactly one message is in flight per
//! round and the select starts with both channels empty; what is measured
//! is the time from the select's call to its return. The peers never
//! sleep: with two of them on a two-core machine, a select that parks has
//! to get a core back from a spinner when it is woken, which is the load
//! the report was about.
//!
//! The figures are per library, protocol (`cas`, `updt` for swco) and
//! capacity (0: rendezvous, where a try-send succeeds only against a
//! receiver that waits in the rendezvous; 1: a one-slot ring). Each
//! configuration runs in a few short chunks, interleaved with the others,
//! and every chunk checks that each message was received exactly once, by
//! the right arm, in order (count and sum).
//!
//! Where the wait goes: the receiving thread's own scheduler counters
//! (Linux `/proc/thread-self/schedstat` and `status`), per round: time on a
//! core, time runnable but waiting for a core (a run queue), the rest of
//! the mean asleep (parked), and its context switches: voluntary (it
//! blocked) and involuntary (preempted, or a `sched_yield` that gave the
//! core away).
//!
//! One more row is an experiment, `cas nospin`: swco `cas` with the
//! receiving thread's park context replaced (through the public
//! `hook::set_current`) by one that parks without spinning and yielding
//! first, as crossbeam's select does. The library itself is unchanged.
//!
//! ```sh
//! cargo run -p swco-channel --release --example select_latency
//! # one configuration only, e.g. under `strace -c -f` or `perf record`:
//! # LIBRARY (cas | updt | nospin | crossbeam) CAPACITY ROUNDS
//! target/release/examples/select_latency cas 0 1000
//! ```

use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use swco_channel::hook::{self, Park};
use swco_channel::{mpmc, Cas, Protocol, Updt};

/// Chunks per configuration, interleaved with the other configurations'.
const CHUNKS: usize = 4;
/// Rounds per chunk, at most...
const ROUNDS: u64 = 500;
/// ...and at most this long per chunk, so a slow configuration stays short.
const CHUNK_BUDGET: Duration = Duration::from_secs(1);
/// The round counter's value that tells the peers to stop.
const STOP: u64 = u64::MAX;

/// A channel library as this benchmark uses it.
trait Lib {
    const NAME: &'static str;
    /// Whether the receiving thread keeps its default park context.
    const SPIN: bool = true;
    type Tx: Send + 'static;
    type Rx: Send + 'static;
    fn channel(cap: usize) -> (Self::Tx, Self::Rx);
    /// One non-blocking select with a single send arm: whether it sent.
    fn try_send(tx: &Self::Tx, v: u64) -> bool;
    /// A blocking select receiving from either channel: (arm, message).
    fn recv_either(a: &Self::Rx, b: &Self::Rx) -> (u64, u64);
    /// Whether the channel holds nothing now.
    fn is_empty(rx: &Self::Rx) -> bool;
}

/// swco with protocol `P`; `SPIN`: the receiving thread keeps the default
/// park context, which spins and yields before it parks (else
/// [`NoSpinPark`], an experiment).
struct Swco<P, const SPIN: bool>(PhantomData<P>);

impl<P: Protocol, const SPIN: bool> Lib for Swco<P, SPIN> {
    const NAME: &'static str = P::NAME;
    const SPIN: bool = SPIN;
    type Tx = mpmc::Sender<u64, P>;
    type Rx = mpmc::Receiver<u64, P>;
    fn channel(cap: usize) -> (Self::Tx, Self::Rx) {
        mpmc::bounded_with::<u64, P>(cap)
    }
    fn try_send(tx: &Self::Tx, v: u64) -> bool {
        swco_channel::select! {
            send(tx, v) -> res => { res.unwrap(); true }
            default => false,
        }
    }
    fn recv_either(a: &Self::Rx, b: &Self::Rx) -> (u64, u64) {
        swco_channel::select! {
            recv(a) -> m => (0, m.unwrap()),
            recv(b) -> m => (1, m.unwrap()),
        }
    }
    fn is_empty(rx: &Self::Rx) -> bool {
        rx.try_recv().is_err()
    }
}

struct Crossbeam;

impl Lib for Crossbeam {
    const NAME: &'static str = "crossbeam";
    type Tx = crossbeam_channel::Sender<u64>;
    type Rx = crossbeam_channel::Receiver<u64>;
    fn channel(cap: usize) -> (Self::Tx, Self::Rx) {
        crossbeam_channel::bounded(cap)
    }
    fn try_send(tx: &Self::Tx, v: u64) -> bool {
        crossbeam_channel::select! {
            send(tx, v) -> res => { res.unwrap(); true }
            default => false,
        }
    }
    fn recv_either(a: &Self::Rx, b: &Self::Rx) -> (u64, u64) {
        crossbeam_channel::select! {
            recv(a) -> m => (0, m.unwrap()),
            recv(b) -> m => (1, m.unwrap()),
        }
    }
    fn is_empty(rx: &Self::Rx) -> bool {
        rx.try_recv().is_err()
    }
}

/// An experiment, through the public hook API only: a park context for
/// the receiving thread that parks it at once, like the default one but
/// for its [`Park::spin_before_park`], which says no. A blocked swco select
/// then registers and parks as soon as its tries fail, with no spinning or
/// `sched_yield` before (as crossbeam-channel's select does), so the rows
/// with and without it show what that phase costs.
struct NoSpinPark {
    waker: Waker,
}

struct Unpark(thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

impl NoSpinPark {
    fn install() -> Option<Rc<dyn Park>> {
        let waker = Waker::from(Arc::new(Unpark(thread::current())));
        hook::set_current(Some(Rc::new(NoSpinPark { waker })))
    }
}

impl Park for NoSpinPark {
    fn waker(&self) -> Waker {
        self.waker.clone()
    }
    fn will_wake(&self, waker: &Waker) -> bool {
        waker.will_wake(&self.waker)
    }
    fn park(&self, deadline: Option<Instant>) {
        // A wake before the park leaves the thread's token set, so this
        // returns at once, as the contract asks.
        match deadline {
            None => thread::park(),
            Some(d) => thread::park_timeout(d.saturating_duration_since(Instant::now())),
        }
    }
    fn spin_before_park(&self) -> bool {
        false
    }
}

/// Peer `id`: sends round `r` (the message `r`) on its channel for every
/// round `r` with `r % 2 == id`, by trying until a try succeeds; between
/// its turns it spins on the round counter. Returns (messages, their sum).
fn peer<L: Lib>(id: u64, tx: L::Tx, round: &AtomicU64) -> (u64, u64) {
    let (mut count, mut sum) = (0, 0);
    let mut next = id;
    loop {
        // The round number is all there is to read: no payload to acquire.
        let open = round.load(Ordering::Acquire);
        if open == STOP {
            return (count, sum);
        }
        // `open` is the open round plus one (0: none yet).
        if open == next + 1 {
            while !L::try_send(&tx, next) {
                std::hint::spin_loop();
            }
            count += 1;
            sum += next;
            next += 2;
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The calling thread's scheduler counters: nanoseconds on a core and
/// waiting on a run queue, context switches voluntary (blocking) and not
/// (preempted, or a `sched_yield` that gave the core away); zeros where
/// Linux's `/proc` is not there.
#[derive(Clone, Copy, Default)]
struct Sched {
    on_cpu: u64,
    runq: u64,
    voluntary: u64,
    involuntary: u64,
}

impl Sched {
    fn now() -> Sched {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        let mut f = stat.split_whitespace().map(|x| x.parse().unwrap_or(0));
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
        let count = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map_or(0, |v| v.trim().parse().unwrap_or(0))
        };
        Sched {
            on_cpu: f.next().unwrap_or(0),
            runq: f.next().unwrap_or(0),
            voluntary: count("voluntary_ctxt_switches:"),
            involuntary: count("nonvoluntary_ctxt_switches:"),
        }
    }

    fn since(self, before: Sched) -> Sched {
        Sched {
            on_cpu: self.on_cpu - before.on_cpu,
            runq: self.runq - before.runq,
            voluntary: self.voluntary - before.voluntary,
            involuntary: self.involuntary - before.involuntary,
        }
    }

    fn add(&mut self, other: Sched) {
        self.on_cpu += other.on_cpu;
        self.runq += other.runq;
        self.voluntary += other.voluntary;
        self.involuntary += other.involuntary;
    }
}

/// One chunk: up to `rounds` rounds (within `budget`); the wait of each,
/// in nanoseconds, and the receiving thread's scheduler counters over them.
fn chunk<L: Lib>(cap: usize, rounds: u64, budget: Duration) -> (Vec<u64>, Sched) {
    let (tx0, rx0) = L::channel(cap);
    let (tx1, rx1) = L::channel(cap);
    let round = Arc::new(AtomicU64::new(0));
    let peers: Vec<_> = [(0, tx0), (1, tx1)]
        .into_iter()
        .map(|(id, tx)| {
            let round = Arc::clone(&round);
            thread::spawn(move || peer::<L>(id, tx, &round))
        })
        .collect();
    let mut waits = Vec::with_capacity(rounds as usize);
    let (mut count, mut sum) = (0u64, 0u64);
    let previous = if L::SPIN { None } else { NoSpinPark::install() };
    let started = Instant::now();
    let sched = Sched::now();
    for r in 0..rounds {
        if started.elapsed() > budget {
            break;
        }
        // Opens round `r`: only the number itself is published.
        round.store(r + 1, Ordering::Release);
        let t0 = Instant::now();
        let (arm, msg) = L::recv_either(&rx0, &rx1);
        waits.push(t0.elapsed().as_nanos() as u64);
        assert_eq!(
            (arm, msg),
            (r % 2, r),
            "{} cap {cap}: wrong message",
            L::NAME
        );
        count += 1;
        sum += msg;
    }
    let sched = Sched::now().since(sched);
    if !L::SPIN {
        hook::set_current(previous);
    }
    round.store(STOP, Ordering::Release);
    let (mut sent, mut sent_sum) = (0, 0);
    for p in peers {
        let (c, s) = p.join().expect("a peer panicked");
        sent += c;
        sent_sum += s;
    }
    // Every message sent was received once, and nothing else was.
    let n = waits.len() as u64;
    assert_eq!((count, sum), (n, n * n.saturating_sub(1) / 2));
    assert_eq!((sent, sent_sum), (count, sum), "{} cap {cap}", L::NAME);
    assert!(L::is_empty(&rx0) && L::is_empty(&rx1));
    (waits, sched)
}

/// The `q` quantile of sorted `v`, in microseconds.
fn quantile(v: &[u64], q: f64) -> f64 {
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i] as f64 / 1e3
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

type Run = fn(usize, u64, Duration) -> (Vec<u64>, Sched);

/// crossbeam last: the others' medians are compared with its.
const LIBS: [(&str, Run); 4] = [
    ("swco cas", chunk::<Swco<Cas, true>>),
    ("swco updt", chunk::<Swco<Updt, true>>),
    ("cas nospin", chunk::<Swco<Cas, false>>),
    ("crossbeam", chunk::<Crossbeam>),
];

/// One line of the table: the waits' quantiles, and the mean wait split
/// into time on a core, on a run queue and (the rest) asleep.
fn report(name: &str, cap: usize, waits: &mut [u64], sched: Sched, crossbeam_median: f64) {
    waits.sort_unstable();
    let n = waits.len() as f64;
    let mean = waits.iter().sum::<u64>() as f64 / n / 1e3;
    let cpu = sched.on_cpu as f64 / n / 1e3;
    let runq = sched.runq as f64 / n / 1e3;
    let median = quantile(waits, 0.5);
    println!(
        "{name:<10} {cap:>3} {:>5} {median:>8.1} {:>8.1} {:>8.1} {:>8.1} {mean:>8.1} {cpu:>7.1} {runq:>7.1} {:>7.1} {:>5.2} {:>5.2} {:>6.3}",
        waits.len(),
        quantile(waits, 0.9),
        quantile(waits, 0.99),
        quantile(waits, 1.0),
        (mean - cpu - runq).max(0.0),
        sched.voluntary as f64 / n,
        sched.involuntary as f64 / n,
        median / crossbeam_median,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(lib) = args.first() {
        // One configuration, for strace or perf.
        let cap = args.get(1).map_or(0, |c| c.parse().expect("a capacity"));
        let rounds = args.get(2).map_or(ROUNDS, |r| r.parse().expect("rounds"));
        let (name, run) = LIBS
            .iter()
            .find(|(name, _)| name.ends_with(lib.as_str()))
            .expect("cas, updt, nospin or crossbeam");
        let (mut waits, sched) = run(cap, rounds, Duration::MAX);
        println!("{HEADER}");
        report(name, cap, &mut waits, sched, f64::NAN);
        return;
    }
    println!(
        "load average before: {} ({} cores)",
        load_average(),
        thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("{HEADER}");
    for cap in [0, 1] {
        let mut waits: Vec<Vec<u64>> = vec![Vec::new(); LIBS.len()];
        let mut sched = [Sched::default(); LIBS.len()];
        for _ in 0..CHUNKS {
            for (k, (_, run)) in LIBS.iter().enumerate() {
                let (w, s) = run(cap, ROUNDS, CHUNK_BUDGET);
                waits[k].extend(w);
                sched[k].add(s);
            }
        }
        let crossbeam = &mut waits[LIBS.len() - 1];
        crossbeam.sort_unstable();
        let crossbeam_median = quantile(crossbeam, 0.5);
        for (k, (name, _)) in LIBS.iter().enumerate() {
            report(name, cap, &mut waits[k], sched[k], crossbeam_median);
        }
    }
    println!("load average after: {}", load_average());
}

/// The table's heading: quantiles and mean of the waits in microseconds;
/// the mean split into on a core, on a run queue and asleep; voluntary and
/// involuntary context switches per round; the median over crossbeam's.
const HEADER: &str = "library    cap  rnds   median      p90      p99      max     mean  on-cpu    runq  asleep   vcs  ivcs med/cb";
