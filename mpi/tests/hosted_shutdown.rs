//! A bridge hosted by a coroutine (`World::init_on`), and the runtime
//! shut down while it still hosts it: the bridge finalises MPI as a
//! `World` drop would, so the shutdown returns instead of waiting for it
//! for ever. Run by `ci.sh` under `mpirun -n 2` and `-n 4`. A hang is
//! caught twice: `shutdown_timeout` cancels and reports it (the assertion
//! fails), and `ci.sh` runs mpirun under `timeout`.

use std::time::Duration;

use swco_mpi::{InitError, Source, World, MIN_BRIDGE_STACK};

fn main() {
    // Bad input first (MPI is not initialised by a refused init).
    let small = swco::Runtime::builder()
        .executors(1)
        .build()
        .expect("runtime");
    assert!(
        matches!(World::init_on(&small, 0), Err(InitError::Bridge(_))),
        "stacks below MIN_BRIDGE_STACK are refused"
    );
    small.shutdown();
    let rt = swco::Runtime::builder()
        .executors(2)
        .stack_size(MIN_BRIDGE_STACK)
        .build()
        .expect("runtime");
    assert!(
        matches!(World::init_on(&rt, 2), Err(InitError::Bridge(_))),
        "an executor out of range is refused"
    );

    let world = World::init_on(&rt, 0).expect("MPI init");
    let (rank, size) = (world.rank(), world.size());
    // Every rank sends its rank, 100 times, from a coroutine beside the
    // bridge; rank 0 sums what arrives.
    const PER: u64 = 100;
    let consumer = (rank == 0).then(|| {
        let rx = world.receiver::<u64>(Source::All, 5, 8);
        rt.spawn_on(0, move || rx.iter().sum::<u64>())
            .expect("spawn")
    });
    let tx = world.sender::<u64>(0, 5);
    rt.spawn_on(0, move || {
        for _ in 0..PER {
            tx.send(rank as u64).expect("send");
        }
    })
    .expect("spawn")
    .join()
    .expect("sender");
    if let Some(consumer) = consumer {
        let n = size as u64;
        let sum = consumer.join().expect("receiver");
        assert_eq!(sum, PER * n * (n - 1) / 2, "every message exactly once");
    }
    // Shut the runtime down with the World alive: the bridge notices and
    // finalises; nothing is left to cancel.
    let res = rt.shutdown_timeout(Duration::from_secs(120));
    assert!(
        res.is_ok(),
        "the hosted bridge kept the shutdown waiting: {res:?}"
    );
    // The bridge is gone: dropping the World returns at once.
    drop(world);
    println!("hosted_shutdown: rank {rank}: shutdown finalised the hosted bridge");
}
