//! Latency and throughput of swco-mpi against raw rsmpi, in the same run:
//!
//! * ping-pong: a coroutine on rank 0 sends a `u64` to a coroutine on
//!   rank 1, which sends it back; versus a raw rsmpi `send`/`receive`
//!   ping-pong between the same two ranks (on the bridge thread, through
//!   `World::run_raw`, with the channel traffic stopped);
//! * streaming: a coroutine on rank 0 streams 8-byte messages to a
//!   coroutine on rank 1, through the batch API (`send_batch` /
//!   `recv_batch`, `BATCH` per call) and one message per call; versus raw
//!   rsmpi sending the same `u64`s in batches of `BATCH` per `MPI_Send`,
//!   and (for context) one per send. The receiver's capacity is
//!   `CAPACITY` for both swco cells.
//!
//! Cells alternate, `REPS` times each; medians. Exact sums are checked.
//!
//! `cargo build --release --example pingpong_mpi && mpirun -n 2 target/release/examples/pingpong_mpi [executor|thread]`

mod common;

use std::time::{Duration, Instant};

use swco_mpi::mpi::traits::*;
use swco_mpi::{RemoteReceiver, RemoteSender, World};

const ROUND_TRIPS: u64 = 20_000;
const STREAM: u64 = 2_000_000;
const RAW_SINGLE: u64 = 200_000;
const BATCH: usize = 1024;
const CAPACITY: usize = 16_384;
const REPS: usize = 5;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[v.len() / 2]
}

/// One swco ping-pong cell: the average round trip in µs (on rank 0).
fn swco_pingpong(world: &World, rt: &swco::Runtime, tag: u16) -> f64 {
    let peer = 1 - world.rank();
    let tx = world.sender::<u64>(peer, tag);
    let rx = world.receiver::<u64>(peer, tag, 16);
    world.barrier();
    let rank = world.rank();
    let h = rt.spawn(move || {
        let t0 = Instant::now();
        for i in 0..ROUND_TRIPS {
            if rank == 0 {
                tx.send(i).expect("ping");
                assert_eq!(rx.recv(), Ok(i + 1));
            } else {
                let v = rx.recv().expect("ping");
                tx.send(v + 1).expect("pong");
            }
        }
        t0.elapsed()
    });
    let dt = h.join().expect("pingpong");
    world.barrier();
    dt.as_secs_f64() * 1e6 / ROUND_TRIPS as f64
}

/// One raw rsmpi ping-pong cell, µs per round trip.
fn raw_pingpong(world: &World) -> f64 {
    let dt = world.run_raw(|c| {
        let rank = c.rank();
        let peer = c.process_at_rank(1 - rank);
        c.barrier();
        let t0 = Instant::now();
        for i in 0..ROUND_TRIPS {
            if rank == 0 {
                peer.send_with_tag(&i, 1);
                let (v, _) = peer.receive_with_tag::<u64>(2);
                assert_eq!(v, i + 1);
            } else {
                let (v, _) = peer.receive_with_tag::<u64>(1);
                peer.send_with_tag(&(v + 1), 2);
            }
        }
        let dt = t0.elapsed();
        c.barrier();
        dt
    });
    dt.as_secs_f64() * 1e6 / ROUND_TRIPS as f64
}

/// One swco streaming cell: `produce` sends `0..STREAM` from a coroutine on
/// rank 0, `consume` returns (count, sum) of what a coroutine on rank 1
/// took; both checked. Messages per second, measured on rank 1.
fn stream_cell(
    world: &World,
    rt: &swco::Runtime,
    tag: u16,
    produce: impl FnOnce(RemoteSender<u64>) + Send + 'static,
    consume: impl FnOnce(RemoteReceiver<u64>) -> (u64, u64) + Send + 'static,
) -> f64 {
    let dt = if world.rank() == 0 {
        let tx = world.sender::<u64>(1, tag);
        world.barrier();
        rt.spawn(move || produce(tx)).join().expect("producer");
        Duration::ZERO
    } else {
        let rx = world.receiver::<u64>(0, tag, CAPACITY);
        world.barrier();
        rt.spawn(move || {
            let t0 = Instant::now();
            let (count, sum) = consume(rx);
            let dt = t0.elapsed();
            assert_eq!(count, STREAM, "stream count");
            assert_eq!(sum, STREAM * (STREAM - 1) / 2, "stream sum");
            dt
        })
        .join()
        .expect("consumer")
    };
    world.barrier();
    STREAM as f64 / dt.as_secs_f64().max(1e-12)
}

/// Streaming one message per `send` / `recv`.
fn swco_stream(world: &World, rt: &swco::Runtime, tag: u16) -> f64 {
    stream_cell(
        world,
        rt,
        tag,
        |tx| {
            for i in 0..STREAM {
                tx.send(i).expect("send");
            }
        },
        |rx| rx.iter().fold((0, 0), |(n, s), v| (n + 1, s + v)),
    )
}

/// Streaming through the batch API: runs of `BATCH` with `send_batch`, up
/// to `BATCH` at a time with `recv_batch`.
fn swco_stream_batch(world: &World, rt: &swco::Runtime, tag: u16) -> f64 {
    stream_cell(
        world,
        rt,
        tag,
        |tx| {
            let mut next = 0;
            while next < STREAM {
                let end = (next + BATCH as u64).min(STREAM);
                tx.send_batch(next..end).expect("send");
                next = end;
            }
        },
        |rx| {
            let (mut count, mut sum) = (0u64, 0u64);
            let mut buf = Vec::with_capacity(BATCH);
            while rx.recv_batch(&mut buf, BATCH).is_ok() {
                count += buf.len() as u64;
                sum += buf.drain(..).sum::<u64>();
            }
            (count, sum)
        },
    )
}

/// One raw rsmpi streaming cell, `batch` `u64`s per MPI message: messages per second.
fn raw_stream(world: &World, total: u64, batch: usize) -> f64 {
    let dt = world.run_raw(move |c| {
        let rank = c.rank();
        let peer = c.process_at_rank(1 - rank);
        let mut buf = vec![0u64; batch];
        c.barrier();
        let t0 = Instant::now();
        let mut sum = 0u64;
        let mut next = 0u64;
        while next < total {
            let n = batch.min((total - next) as usize);
            if rank == 0 {
                for (j, x) in buf[..n].iter_mut().enumerate() {
                    *x = next + j as u64;
                }
                peer.send_with_tag(&buf[..n], 3);
            } else {
                peer.receive_into_with_tag(&mut buf[..n], 3);
                sum += buf[..n].iter().sum::<u64>();
            }
            next += n as u64;
        }
        let dt = t0.elapsed();
        if rank == 1 {
            assert_eq!(sum, total * (total - 1) / 2, "raw stream sum");
        }
        c.barrier();
        dt
    });
    total as f64 / dt.as_secs_f64().max(1e-12)
}

fn main() {
    // `thread`: the bridge on a thread of its own (World::init); default
    // `executor`: the bridge as a coroutine on the runtime's one executor
    // (World::init_on), beside the coroutines it serves.
    let (world, rt, host) = common::two_ranks(1, "executor");
    let (mut pp_swco, mut pp_raw, mut st_swco, mut st_batch, mut st_raw, mut st_single) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    // Warm-up cell of each, not counted.
    swco_pingpong(&world, &rt, 1000);
    raw_pingpong(&world);
    for rep in 0..REPS {
        pp_swco.push(swco_pingpong(&world, &rt, 1001 + rep as u16));
        pp_raw.push(raw_pingpong(&world));
        st_swco.push(swco_stream(&world, &rt, 2000 + rep as u16));
        st_batch.push(swco_stream_batch(&world, &rt, 3000 + rep as u16));
        st_raw.push(raw_stream(&world, STREAM, BATCH));
        st_single.push(raw_stream(&world, RAW_SINGLE, 1));
    }
    let (pps, ppr) = (median(pp_swco), median(pp_raw));
    // Rank 1 measured the streams; send its medians to rank 0 for the table.
    let (ss, sb, sr, s1) = (
        median(st_swco),
        median(st_batch),
        median(st_raw),
        median(st_single),
    );
    let report = world.run_raw(move |c| {
        let mine = [ss, sb, sr, s1];
        if c.rank() == 1 {
            c.process_at_rank(0).send_with_tag(&mine[..], 9);
            None
        } else {
            let mut theirs = [0f64; 4];
            c.process_at_rank(1)
                .receive_into_with_tag(&mut theirs[..], 9);
            Some(theirs)
        }
    });
    if let Some([ss, sb, sr, s1]) = report {
        println!("swco-mpi (bridge on {host}) vs raw rsmpi, 2 ranks, medians of {REPS} interleaved cells");
        println!("| measurement | swco-mpi | raw rsmpi | ratio |");
        println!("|---|---|---|---|");
        println!(
            "| ping-pong round trip (u64, {ROUND_TRIPS} trips) | {pps:.2} µs | {ppr:.2} µs | {:.2}× the time (target ≤ 2×) |",
            pps / ppr
        );
        println!(
            "| streaming 8-byte messages ({STREAM}), send_batch / recv_batch ({BATCH} per call) vs raw batched ({BATCH}/MPI_Send) | {:.2} M msg/s | {:.2} M msg/s | {:.3}× the rate (target ≥ 0.5×) |",
            sb / 1e6,
            sr / 1e6,
            sb / sr
        );
        println!(
            "| streaming, one message per send / recv, vs raw batched | {:.2} M msg/s | {:.2} M msg/s | {:.3}× the rate |",
            ss / 1e6,
            sr / 1e6,
            ss / sr
        );
        println!(
            "| streaming, one message per send / recv, vs raw unbatched (1/MPI_Send, {RAW_SINGLE}) | {:.2} M msg/s | {:.2} M msg/s | {:.3}× the rate |",
            ss / 1e6,
            s1 / 1e6,
            ss / s1
        );
    }
    drop(world);
    rt.shutdown();
}
