//! `swco::sync` against the locks its users would otherwise reach for:
//!
//! - `uncontended`: one lock + unlock on one OS thread, against
//!   `parking_lot::Mutex` and `std::sync::Mutex`;
//! - `mutex-64`: 64 coroutines on two executors (two may workers) contending
//!   for one mutex, each doing [`K`] read / `yield_now` / write increments
//!   with the guard held across the yield, against `may::sync::Mutex`; the
//!   counter must come out at 64·`K`;
//! - `barrier-64`: [`R`] rounds of a 64-party barrier, 64 coroutines on two
//!   executors against 64 OS threads on `std::sync::Barrier`; the round
//!   leaders must number `R`. Only the rounds are timed: the parties meet
//!   once, untimed, before them, so thread and coroutine spawning stay out.

use std::hint::black_box;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use swco::Runtime;
use swco_bench::contended::{self, all_parties, PARTIES};

/// Lock iterations per coroutine in `mutex-64`.
const K: usize = 100;

/// Barrier rounds in `barrier-64`.
const R: usize = 100;

/// may's worker count is process-global and read once: set it once, to two
/// workers (one per executor of the swco runtime it is measured against).
fn may_two_workers() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        may::config().set_workers(2);
    });
}

/// What the parties of one barrier run share: when the timed rounds began
/// and ended (set by the leaders of the untimed first round and of the
/// last round) and how many leaders the timed rounds had.
#[derive(Default)]
struct Rounds {
    start: std::sync::Mutex<Option<Instant>>,
    end: std::sync::Mutex<Option<Instant>>,
    leaders: std::sync::atomic::AtomicUsize,
}

impl Rounds {
    /// One party's part: an untimed meeting, then `R` timed rounds, with
    /// `wait` returning whether this party led the round.
    fn run(&self, wait: impl Fn() -> bool) {
        if wait() {
            *self.start.lock().expect("not poisoned") = Some(Instant::now());
        }
        for r in 0..R {
            if wait() {
                self.leaders
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if r == R - 1 {
                    *self.end.lock().expect("not poisoned") = Some(Instant::now());
                }
            }
        }
    }

    /// The timed rounds' span, once every party has finished; checks that
    /// each round had one leader.
    fn elapsed(&self, what: &str) -> Duration {
        assert_eq!(
            self.leaders.load(std::sync::atomic::Ordering::Relaxed),
            R,
            "{what}: one leader per round"
        );
        let start = self.start.lock().expect("not poisoned").expect("a start");
        let end = self.end.lock().expect("not poisoned").expect("an end");
        end - start
    }
}

/// `R` rounds of a `PARTIES`-party `swco::sync::Barrier`, one coroutine per
/// party.
fn swco_barrier(rt: &Runtime) -> Duration {
    let b = Arc::new(swco::sync::Barrier::new(PARTIES));
    let rounds = Arc::new(Rounds::default());
    all_parties(
        |i| {
            let (b, rounds) = (Arc::clone(&b), Arc::clone(&rounds));
            rt.spawn_on(i % 2, move || rounds.run(|| b.wait().is_leader()))
                .expect("executor in range")
        },
        |h| h.join().expect("a party finished"),
    );
    rounds.elapsed("swco::sync::Barrier")
}

/// The same with `std::sync::Barrier`, one OS thread per party.
fn std_barrier() -> Duration {
    let b = Arc::new(std::sync::Barrier::new(PARTIES));
    let rounds = Arc::new(Rounds::default());
    all_parties(
        |_| {
            let (b, rounds) = (Arc::clone(&b), Arc::clone(&rounds));
            std::thread::spawn(move || rounds.run(|| b.wait().is_leader()))
        },
        |h| h.join().expect("a party finished"),
    );
    rounds.elapsed("std::sync::Barrier")
}

fn bench(c: &mut Criterion) {
    may_two_workers();
    let rounds = |iters: u64, f: &dyn Fn() -> Duration| (0..iters).map(|_| f()).sum::<Duration>();

    let mut g = c.benchmark_group("sync/uncontended");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    let swco_m = swco::sync::Mutex::new(0u64);
    let pl_m = parking_lot::Mutex::new(0u64);
    let std_m = std::sync::Mutex::new(0u64);
    g.bench_function("swco", |b| b.iter(|| *black_box(&swco_m).lock() += 1));
    g.bench_function("parking_lot", |b| b.iter(|| *black_box(&pl_m).lock() += 1));
    g.bench_function("std", |b| {
        b.iter(|| *black_box(&std_m).lock().expect("not poisoned") += 1)
    });
    g.finish();

    // One executor per core, as a deployment on this machine would have.
    let rt = Runtime::builder().executors(2).build().expect("a runtime");

    let mut g = c.benchmark_group("sync/mutex-64");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("swco", |b| {
        b.iter_custom(|i| rounds(i, &|| contended::swco_mutex(&rt, K)))
    });
    g.bench_function("may", |b| {
        b.iter_custom(|i| rounds(i, &|| contended::may_mutex(K)))
    });
    g.finish();

    let mut g = c.benchmark_group("sync/barrier-64");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("swco", |b| {
        b.iter_custom(|i| rounds(i, &|| swco_barrier(&rt)))
    });
    g.bench_function("std-threads", |b| {
        b.iter_custom(|i| rounds(i, &std_barrier))
    });
    g.finish();
    rt.shutdown();
}

criterion_group! {
    name = benches;
    config = swco_bench::criterion_config();
    targets = bench
}
criterion_main!(benches);
