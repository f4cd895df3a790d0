//! The athread / swYAKL model: the same sum three ways, each checked
//! against the closed form.
//!
//! 1. `spawn_all`: an athread launch, one coroutine pinned to every
//!    executor (a CPE), each summing its own contiguous block; the results
//!    come back in CPE order and the caller adds them.
//! 2. `parallel_for`: one worker per executor taking chunks of indices
//!    from a shared counter, each adding its chunk into an atomic.
//! 3. `parallel_reduce`: the same loop, folded without shared state; also
//!    called from inside a coroutine, where it suspends only the caller.
//!
//! The program exits nonzero if any of the sums is wrong.
//!
//! ```text
//! cargo run --release --example athread_sum [-- N [EXECUTORS]]
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use swco::Runtime;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(Ok(1_000_000), |a| a.parse())?;
    let executors: usize = args.next().map_or(Ok(4), |a| a.parse())?;

    let rt = Runtime::builder().executors(executors).build()?;
    let data: Arc<Vec<u64>> = Arc::new((1..=n as u64).collect());
    let expected = (n as u64) * (n as u64 + 1) / 2;

    // 1. athread launch: CPE `cpe` sums block `cpe` of `executors`.
    let blocks = {
        let data = Arc::clone(&data);
        rt.spawn_all(move |cpe| {
            let per = data.len().div_ceil(executors);
            let lo = (cpe * per).min(data.len());
            let hi = (lo + per).min(data.len());
            data[lo..hi].iter().sum::<u64>()
        })
    }
    .join()?;
    assert_eq!(blocks.len(), executors, "one result per CPE");
    let launched: u64 = blocks.iter().sum();

    // 2. parallel_for, grain 0: the runtime chooses the chunk size.
    let total = AtomicU64::new(0);
    rt.parallel_for(0..data.len(), 0, |chunk| {
        total.fetch_add(data[chunk].iter().sum::<u64>(), Ordering::Relaxed);
    });
    let looped = total.into_inner();

    // 3. parallel_reduce, from the main thread and from a coroutine.
    let reduced = rt.parallel_reduce(
        0..data.len(),
        4096,
        0,
        |r| data[r].iter().sum::<u64>(),
        |a, b| a + b,
    );
    let inside = {
        let data = Arc::clone(&data);
        rt.spawn(move || {
            swco::parallel_reduce(
                0..data.len(),
                0,
                0,
                |r| data[r].iter().sum::<u64>(),
                |a, b| a + b,
            )
        })
    }
    .join()?;
    rt.shutdown();

    println!(
        "sum of 1..={n} on {executors} executors: spawn_all {launched} (blocks {blocks:?}), \
         parallel_for {looped}, parallel_reduce {reduced}, inside a coroutine {inside}"
    );
    assert_eq!(launched, expected, "spawn_all");
    assert_eq!(looped, expected, "parallel_for");
    assert_eq!(reduced, expected, "parallel_reduce");
    assert_eq!(inside, expected, "parallel_reduce in a coroutine");
    Ok(())
}
