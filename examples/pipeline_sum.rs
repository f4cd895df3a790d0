//! A pipeline of stages over bounded channels: one coroutine generates the
//! numbers, several coroutines square them (fan-out through an MPMC
//! channel, each message taken by exactly one worker), and one coroutine
//! reduces (fan-in through an MPSC channel). Bounded channels give back
//! pressure: a full channel suspends only the coroutine that sends, so the
//! generator never runs ahead of the workers by more than a channel's
//! capacity. The end of the stream travels down the pipeline by
//! disconnection: each stage stops when every sender before it is gone.
//!
//! The program checks the exact sum of squares and exits nonzero if it is
//! wrong.
//!
//! ```text
//! cargo run --release --example pipeline_sum [-- COUNT [WORKERS]]
//! ```

use swco::channel::{mpmc, mpsc};
use swco::Runtime;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let count: u64 = args.next().map_or(Ok(100_000), |a| a.parse())?;
    let workers: usize = args.next().map_or(Ok(4), |a| a.parse())?;

    let rt = Runtime::builder().executors(4).build()?;
    let (numbers_tx, numbers_rx) = mpmc::bounded::<u64>(64);
    let (squares_tx, squares_rx) = mpsc::bounded::<u64>(64);

    let generate = rt.spawn(move || {
        for n in 1..=count {
            numbers_tx.send(n).expect("every worker is gone");
        }
        // Dropping `numbers_tx` here ends the workers' streams.
    });
    let transform: Vec<_> = (0..workers)
        .map(|_| {
            let rx = numbers_rx.clone();
            let tx = squares_tx.clone();
            rt.spawn(move || {
                let mut handled = 0u64;
                for n in rx.iter() {
                    tx.send(n * n).expect("the reducer is gone");
                    handled += 1;
                }
                handled
            })
        })
        .collect();
    // Only the workers hold these now: the reducer's stream ends when the
    // last worker finishes.
    drop((numbers_rx, squares_tx));
    let reduce = rt.spawn(move || {
        squares_rx
            .iter()
            .fold((0u64, 0u64), |(n, sum), sq| (n + 1, sum + sq))
    });

    generate.join()?;
    let mut handled = Vec::with_capacity(workers);
    for w in transform {
        handled.push(w.join()?);
    }
    let (received, sum) = reduce.join()?;
    rt.shutdown();

    let expected = count * (count + 1) * (2 * count + 1) / 6;
    println!(
        "{count} numbers through {workers} workers (each took {handled:?}): sum of squares {sum}"
    );
    assert_eq!(received, count, "every number reaches the reducer once");
    assert_eq!(
        handled.iter().sum::<u64>(),
        count,
        "every number is squared once"
    );
    assert_eq!(sum, expected, "sum of squares of 1..={count}");
    Ok(())
}
