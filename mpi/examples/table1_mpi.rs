//! The seed paper's Table 1 shape across two ranks: `n` producer
//! coroutines on rank 0, `n` consumer coroutines on rank 1, producer `i`
//! feeding consumer `i` through its own remote channel, for n = 1, 2, 4, 8.
//! Prints the time per message (wall time on rank 1 over all messages) and
//! checks every consumer's exact sum.
//!
//! `cargo build --release --example table1_mpi && mpirun -n 2 target/release/examples/table1_mpi [thread|executor]`

mod common;

use std::time::Instant;

use swco_mpi::World;

const TOTAL: u64 = 400_000;
const CAPACITY: usize = 1024;
const REPS: usize = 3;

fn cell(world: &World, rt: &swco::Runtime, n: u64, tag0: u16) -> Option<f64> {
    let per = TOTAL / n;
    if world.rank() == 0 {
        let txs: Vec<_> = (0..n)
            .map(|i| world.sender::<u64>(1, tag0 + i as u16))
            .collect();
        world.barrier();
        let hs: Vec<_> = txs
            .into_iter()
            .enumerate()
            .map(|(i, tx)| {
                rt.spawn(move || {
                    for k in 0..per {
                        tx.send(i as u64 * per + k).expect("send");
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().expect("producer");
        }
        world.barrier();
        None
    } else {
        let rxs: Vec<_> = (0..n)
            .map(|i| world.receiver::<u64>(0, tag0 + i as u16, CAPACITY))
            .collect();
        world.barrier();
        let t0 = Instant::now();
        let hs: Vec<_> = rxs
            .into_iter()
            .map(|rx| rt.spawn(move || rx.iter().fold((0u64, 0u64), |(c, s), v| (c + 1, s + v))))
            .collect();
        for (i, h) in hs.into_iter().enumerate() {
            let (count, sum) = h.join().expect("consumer");
            let first = i as u64 * per;
            let want = per * first + per * (per - 1) / 2;
            assert_eq!((count, sum), (per, want), "consumer {i} of {n}");
        }
        let ns = t0.elapsed().as_secs_f64() * 1e9 / (per * n) as f64;
        world.barrier();
        Some(ns)
    }
}

fn main() {
    // `thread` (default): the bridge on a thread of its own; `executor`:
    // a coroutine on executor 0, beside the producers or consumers.
    let (world, rt, host) = common::two_ranks(2, "thread");
    let mut rows = Vec::new();
    let mut tag = 100u16;
    for n in [1u64, 2, 4, 8] {
        let mut cells = Vec::new();
        for _ in 0..REPS {
            cells.extend(cell(&world, &rt, n, tag));
            tag += n as u16;
        }
        cells.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
        rows.push((n, cells.get(cells.len() / 2).copied()));
    }
    if world.rank() == 1 {
        println!("n producers on rank 0 -> n consumers on rank 1 (bridge on {host}), {TOTAL} u64 messages, capacity {CAPACITY}, median of {REPS}; sums checked");
        println!("| n | ns per message | M msg/s |");
        println!("|---|---|---|");
        for (n, ns) in rows {
            let ns = ns.expect("rank 1 measures");
            println!("| {n} | {ns:.1} | {:.2} |", 1e3 / ns);
        }
    }
    drop(world);
    rt.shutdown();
}
