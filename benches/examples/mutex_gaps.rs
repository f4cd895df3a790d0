//! Where a contended `swco::sync::Mutex` on two executors spends its
//! time: the scenario of the `sync` bench's `mutex-64` group (64
//! coroutines, each doing `k` read / `yield_now` / write increments with the
//! guard held across the yield), with the time of every acquisition
//! recorded, in four placements alternated round by round in one process,
//! and the same on may for comparison:
//!
//! - **split**: party `i` on executor `i` mod 2, as the bench places them;
//! - **one**: every party on executor 0 (executor 1 idle, parked);
//! - **one, on 1**: every party on executor 1 (whose thread may sit on
//!   a faster or slower virtual CPU than executor 0's);
//! - **one + spinner**: every party on executor 0, with a coroutine on
//!   executor 1 that spins (`spin_loop`) until the round ends, as an idle
//!   executor does in its grace period;
//! - **may**: `may::sync::Mutex` with may coroutines, party `i` queued on
//!   may worker `i` mod 2 (two workers), as the bench places them.
//!
//! For each it prints the median round's mean time between consecutive
//! acquisitions and the mean run: acquisitions in a row on one executor
//! (or may worker) before the lock crosses to the other. For swco it adds
//! the context switches, direct hand-offs, blocks and parks per
//! acquisition (from `Runtime::stats`), and for *split* that time by
//! position in a run (0: the first after the lock crossed).
//!
//! may's runs are hundreds to thousands of acquisitions long where swco's
//! split runs are tens: may schedules a woken coroutine on the waker's
//! worker, so the contenders gather on one worker, while a swco coroutine
//! never leaves its executor and the lock has to go to the waiters of the
//! other. *split* slower than *one* at every position, not only at 0 (in
//! many runs), says the crossing is not the whole cost; the spinner's
//! placement as fast as *one* says the idle executor's spinning is not it
//! either (see `docs/DESIGN.md`, "A contended lock's hand-off").
//! Every round checks its count.
//!
//! ```sh
//! cargo run --release -p swco-bench --example mutex_gaps -- 100 60
//! ```
//!
//! Arguments: `k` (default 100) and the rounds of each placement (default
//! 30). The clock read at each acquisition adds its own cost (the same in
//! every placement).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use swco::sync::Mutex;
use swco::Runtime;
use swco_bench::contended::PARTIES;
use swco_bench::{median, May};

/// Where the parties run.
#[derive(Clone, Copy, PartialEq)]
enum Placement {
    Split,
    One,
    OneOnSecond,
    OneWithSpinner,
    May,
}

/// Run positions reported one by one; later ones are pooled.
const POSITIONS: usize = 4;

/// Acquisition `v` (the counter's value then): its time in nanoseconds
/// since the round began, shifted left by one, with the executor (or may
/// worker) in the low bit.
type Stamps = Arc<Vec<AtomicU64>>;

/// What one round's stamps say.
struct Round {
    /// Mean nanoseconds between acquisitions.
    mean: f64,
    /// Times the lock crossed to the other executor.
    crossings: u64,
    /// For each run position (the last pooling the rest), the sum and
    /// count of the gaps that ended there.
    by_position: [(u64, u64); POSITIONS + 1],
}

fn stamps(k: usize) -> Stamps {
    Arc::new((0..PARTIES * k).map(|_| AtomicU64::new(0)).collect())
}

/// One round on swco.
fn round(rt: &Runtime, k: usize, placement: Placement) -> Round {
    let m = Arc::new(Mutex::new(0usize));
    let t0 = Instant::now();
    let stamps = stamps(k);
    let stop = Arc::new(AtomicBool::new(false));
    let spinner = (placement == Placement::OneWithSpinner).then(|| {
        let stop = Arc::clone(&stop);
        rt.spawn_on(1, move || {
            while !stop.load(Relaxed) {
                std::hint::spin_loop();
            }
        })
        .expect("executor 1")
    });
    let parties: Vec<_> = (0..PARTIES)
        .map(|i| {
            let (m, stamps) = (Arc::clone(&m), Arc::clone(&stamps));
            let on = match placement {
                Placement::Split => i % 2,
                Placement::OneOnSecond => 1,
                Placement::One | Placement::OneWithSpinner => 0,
                Placement::May => unreachable!("may rounds are may_round's"),
            };
            rt.spawn_on(on, move || {
                for _ in 0..k {
                    let mut g = m.lock();
                    let v = *g;
                    let ns = t0.elapsed().as_nanos() as u64;
                    stamps[v].store(ns << 1 | on as u64, Relaxed);
                    swco::yield_now();
                    *g = v + 1;
                }
            })
            .expect("executor in range")
        })
        .collect();
    for p in parties {
        p.join().expect("a party finished");
    }
    stop.store(true, Relaxed);
    if let Some(s) = spinner {
        s.join().expect("the spinner finished");
    }
    assert_eq!(*m.lock(), PARTIES * k, "an increment was lost");
    analyse(&stamps)
}

/// One round on may, each acquisition stamped with the may worker it ran
/// on (numbered in the order they first stamp).
fn may_round(k: usize) -> Round {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local!(static WORKER: u64 = NEXT.fetch_add(1, Relaxed));
    let m = Arc::new(may::sync::Mutex::new(0usize));
    let t0 = Instant::now();
    let stamps = stamps(k);
    let parties: Vec<_> = (0..PARTIES)
        .map(|i| {
            let (m, stamps) = (Arc::clone(&m), Arc::clone(&stamps));
            May::spawn(i, move || {
                for _ in 0..k {
                    let mut g = m.lock().expect("not poisoned");
                    let v = *g;
                    let ns = t0.elapsed().as_nanos() as u64;
                    stamps[v].store(ns << 1 | WORKER.with(|w| *w) & 1, Relaxed);
                    may::coroutine::yield_now();
                    *g = v + 1;
                }
            })
        })
        .collect();
    for p in parties {
        p.join().expect("a party finished");
    }
    assert_eq!(
        *m.lock().expect("not poisoned"),
        PARTIES * k,
        "an increment was lost"
    );
    analyse(&stamps)
}

fn analyse(stamps: &Stamps) -> Round {
    let mut by_position = [(0u64, 0u64); POSITIONS + 1];
    let mut position = 0;
    let mut crossings = 0;
    let stamps: Vec<u64> = stamps.iter().map(|s| s.load(Relaxed)).collect();
    for pair in stamps.windows(2) {
        let gap = (pair[1] >> 1).saturating_sub(pair[0] >> 1);
        position = if (pair[0] ^ pair[1]) & 1 == 1 {
            crossings += 1;
            0
        } else {
            position + 1
        };
        let slot = &mut by_position[position.min(POSITIONS)];
        slot.0 += gap;
        slot.1 += 1;
    }
    let span = (stamps[stamps.len() - 1] >> 1).saturating_sub(stamps[0] >> 1);
    Round {
        mean: span as f64 / (stamps.len() - 1) as f64,
        crossings,
        by_position,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let k: usize = args
        .next()
        .map_or(100, |a| a.parse().expect("a count"))
        .max(1);
    let rounds: usize = args
        .next()
        .map_or(30, |a| a.parse().expect("a count"))
        .max(1);
    let rt = Runtime::builder().executors(2).build().expect("a runtime");
    may::config().set_workers(2);
    let placements = [
        (Placement::Split, "split"),
        (Placement::One, "one"),
        (Placement::OneOnSecond, "one, on 1"),
        (Placement::OneWithSpinner, "one + spinner"),
        (Placement::May, "may"),
    ];
    let mut means = vec![Vec::new(); placements.len()];
    let mut counts = vec![[0u64; 4]; placements.len()];
    let mut crossings = vec![0u64; placements.len()];
    let mut split_positions = [(0u64, 0u64); POSITIONS + 1];
    for _ in 0..rounds {
        for (i, &(placement, _)) in placements.iter().enumerate() {
            let before = rt.stats().total();
            let r = if placement == Placement::May {
                may_round(k)
            } else {
                round(&rt, k, placement)
            };
            let after = rt.stats().total();
            crossings[i] += r.crossings;
            for (c, (a, b)) in counts[i].iter_mut().zip([
                (after.context_switches, before.context_switches),
                (after.hand_offs, before.hand_offs),
                (after.blocks, before.blocks),
                (after.parks, before.parks),
            ]) {
                *c += a - b;
            }
            means[i].push(r.mean);
            if placement == Placement::Split {
                for (total, add) in split_positions.iter_mut().zip(r.by_position) {
                    total.0 += add.0;
                    total.1 += add.1;
                }
            }
        }
    }
    for (i, (_, name)) in placements.iter().enumerate() {
        let acquisitions = rounds * PARTIES * k;
        let per = |c: u64| c as f64 / acquisitions as f64;
        let run = acquisitions as f64 / (crossings[i] + rounds as u64) as f64;
        let mut line = format!(
            "{name:>14}: {:.0} ns between acquisitions (median of {} rounds), runs of {run:.0}",
            median(&mut means[i]),
            means[i].len(),
        );
        if placements[i].0 != Placement::May {
            let [sw, ho, bl, pk] = counts[i];
            line += &format!(
                "; per acquisition: {:.2} switches, {:.2} direct hand-offs, {:.2} blocks, {:.4} parks",
                per(sw),
                per(ho),
                per(bl),
                per(pk)
            );
        }
        println!("{line}");
    }
    let mut line = String::from("split by run position:");
    for (p, (sum, n)) in split_positions.iter().enumerate() {
        let label = if p == POSITIONS {
            format!("{p}+")
        } else {
            p.to_string()
        };
        line += &format!(
            " {label}: {:.0} ns ({n}),",
            *sum as f64 / (*n).max(1) as f64
        );
    }
    println!("{}", line.trim_end_matches(','));
}
