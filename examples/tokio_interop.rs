//! swco and tokio in one program. A tokio task sends work to swco
//! coroutines with `send_async` and collects their results with
//! `recv_async`; the coroutines use the blocking `recv`/`send` of the same
//! channels, and each blocks only itself. A future is woken by a coroutine's
//! progress (from an executor thread) and a coroutine by a future's (from
//! the tokio thread). Finally the tokio task awaits a coroutine's
//! `JoinHandle` directly.
//!
//! The program checks that every job comes back once with the right result
//! and exits nonzero otherwise.
//!
//! ```text
//! cargo run --release --example tokio_interop [-- JOBS]
//! ```

use swco::channel::mpmc;
use swco::Runtime;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let jobs: u64 = std::env::args().nth(1).map_or(Ok(2_000), |a| a.parse())?;

    let rt = Runtime::builder().executors(2).build()?;
    // Small capacities, so that both sides really block and wake each other.
    let (work_tx, work_rx) = mpmc::bounded::<u64>(4);
    let (done_tx, done_rx) = mpmc::bounded::<(u64, u64)>(4);

    let workers: Vec<_> = (0..3)
        .map(|_| {
            let work = work_rx.clone();
            let done = done_tx.clone();
            rt.spawn(move || {
                for n in work.iter() {
                    done.send((n, n * n + 1)).expect("the tokio side is gone");
                }
            })
        })
        .collect();
    drop((work_rx, done_tx));
    // A coroutine whose handle the tokio task awaits.
    let answer = rt.spawn(|| 6 * 7);

    let tokio_rt = tokio::runtime::Builder::new_current_thread().build()?;
    let (seen, answer) = tokio_rt.block_on(async move {
        // The feeder and the collector run as two tasks on one thread:
        // while one waits on a full or empty channel, the other runs.
        let feeder = tokio::spawn(async move {
            for n in 0..jobs {
                work_tx.send_async(n).await.expect("every worker is gone");
            }
            // Dropping `work_tx` ends the workers' loops.
        });
        let mut seen = vec![false; usize::try_from(jobs).expect("JOBS fits in memory")];
        while let Ok((n, result)) = done_rx.recv_async().await {
            assert_eq!(result, n * n + 1, "result of job {n}");
            let slot = &mut seen[usize::try_from(n).expect("a job we sent")];
            assert!(!*slot, "job {n} came back twice");
            *slot = true;
        }
        feeder.await.expect("the feeder task panicked");
        (seen, answer.await)
    });
    for w in workers {
        w.join()?;
    }
    rt.shutdown();

    let answer = answer?;
    let returned = seen.iter().filter(|&&s| s).count();
    println!(
        "{returned} of {jobs} jobs done by coroutines for a tokio task; the answer is {answer}"
    );
    assert_eq!(returned as u64, jobs, "every job came back");
    assert_eq!(answer, 42);
    Ok(())
}
