//! A ring across all ranks: a token makes `LAPS` laps, each rank adding one,
//! while `PRODUCERS` coroutines per rank stream numbers to the next rank,
//! where a consumer coroutine checks the exact sum. Exits non-zero if wrong.
//!
//! `mpirun -n 4 target/release/examples/ring`

use std::sync::Arc;
use swco_mpi::World;

const TOKEN: u16 = 1;
const DATA: u16 = 2;
const LAPS: u64 = 50;
const PRODUCERS: u64 = 4;
const PER_PRODUCER: u64 = 5_000;

fn main() {
    let world = Arc::new(World::init().expect("MPI init"));
    let (rank, size) = (world.rank(), world.size());
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;
    let rt = swco::Runtime::builder()
        .executors(2)
        .build()
        .expect("runtime");

    // Data: PRODUCERS coroutines send to `next`; one consumer sums from `prev`.
    let data_rx = world.receiver::<u64>(prev, DATA, 64);
    let data_tx = world.sender::<u64>(next, DATA);
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let tx = data_tx.clone();
            rt.spawn(move || {
                for i in 0..PER_PRODUCER {
                    tx.send(rank as u64 * 1_000_000_000 + p * PER_PRODUCER + i)
                        .expect("send");
                }
            })
        })
        .collect();
    drop(data_tx);
    let consumer = rt.spawn(move || {
        let mut sum = 0u64;
        let mut count = 0u64;
        for v in data_rx.iter() {
            sum += v;
            count += 1;
        }
        (count, sum)
    });

    // Token: rank 0 injects it and checks it after LAPS laps.
    let token_rx = world.receiver::<u64>(prev, TOKEN, 1);
    let token_tx = world.sender::<u64>(next, TOKEN);
    let token = rt.spawn(move || {
        if rank == 0 {
            let mut t = 0u64;
            for _ in 0..LAPS {
                token_tx.send(t + 1).expect("token send");
                t = token_rx.recv().expect("token recv");
            }
            Some(t)
        } else {
            for _ in 0..LAPS {
                let t = token_rx.recv().expect("token recv");
                token_tx.send(t + 1).expect("token send");
            }
            None
        }
    });

    for p in producers {
        p.join().expect("producer");
    }
    let (count, sum) = consumer.join().expect("consumer");
    let n = PRODUCERS * PER_PRODUCER;
    let expect = prev as u64 * 1_000_000_000 * n + n * (n - 1) / 2;
    let ok_data = count == n && sum == expect;
    println!("rank {rank}: received {count} from rank {prev}, sum {sum} (expected {expect})");
    let t = token.join().expect("token");
    let mut ok = ok_data;
    if let Some(t) = t {
        let want = LAPS * size as u64;
        println!("rank 0: token {t} after {LAPS} laps of {size} ranks (expected {want})");
        ok &= t == want;
    }
    rt.shutdown();
    drop(world);
    if !ok {
        eprintln!("rank {rank}: WRONG");
        std::process::exit(1);
    }
}
