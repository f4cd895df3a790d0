//! What a select costs next to a plain `recv`, on the same workload: one
//! producer thread sends `N` messages over a bounded channel; the consumer
//! receives them with `recv`, with `select!` over that channel and an idle
//! second one, and with a reused `Select` over the same two. A second
//! workload does the same on one thread without blocking (fill the ring,
//! drain it), which shows the per-operation overhead alone.
//!
//! ```sh
//! cargo run -p swco-channel --release --example select_cost
//! # instructions of one one-thread run, for callgrind:
//! valgrind --tool=callgrind target/release/examples/select_cost one-thread macro
//! ```

use std::hint::black_box;
use std::thread;
use std::time::{Duration, Instant};

use swco_channel::{mpmc, select, spsc, Protocol, Select, Updt};

const N: u64 = 2_000_000;
const CAP: usize = 1024;

#[derive(Clone, Copy)]
enum How {
    Recv,
    Macro,
    Struct,
}

/// Receives `N` messages sent by another thread; returns the time taken.
fn cross_thread<P: Protocol>(how: How) -> Duration {
    let (tx, rx) = mpmc::bounded_with::<u64, P>(CAP);
    let (_idle_tx, idle_rx) = spsc::bounded_with::<u64, P>(1);
    let producer = thread::spawn(move || {
        for i in 0..N {
            tx.send(i).unwrap();
        }
    });
    let start = Instant::now();
    let mut sum = 0u64;
    match how {
        How::Recv => {
            for _ in 0..N {
                sum += rx.recv().unwrap();
            }
        }
        How::Macro => {
            for _ in 0..N {
                select! {
                    recv(rx) -> m => sum += m.unwrap(),
                    recv(idle_rx) -> _ => unreachable!(),
                }
            }
        }
        How::Struct => {
            let mut sel = Select::new();
            let i = sel.recv(&rx);
            sel.recv(&idle_rx);
            for _ in 0..N {
                let oper = sel.select();
                assert_eq!(oper.index(), i);
                sum += oper.recv(&rx).unwrap();
            }
        }
    }
    let elapsed = start.elapsed();
    producer.join().unwrap();
    assert_eq!(sum, N * (N - 1) / 2);
    elapsed
}

/// Fills the ring and drains it, on one thread, until `N` messages went
/// through; returns the time the receives took in all.
fn one_thread<P: Protocol>(how: How) -> Duration {
    let (tx, rx) = mpmc::bounded_with::<u64, P>(CAP);
    let (_idle_tx, idle_rx) = spsc::bounded_with::<u64, P>(1);
    let mut sel = Select::new();
    sel.recv(&rx);
    sel.recv(&idle_rx);
    let mut total = Duration::ZERO;
    let mut sum = 0u64;
    for _ in 0..N / CAP as u64 {
        for i in 0..CAP as u64 {
            tx.send(i).unwrap();
        }
        let start = Instant::now();
        for _ in 0..CAP {
            sum += match how {
                How::Recv => rx.recv().unwrap(),
                How::Macro => select! {
                    recv(rx) -> m => m.unwrap(),
                    recv(idle_rx) -> _ => unreachable!(),
                },
                How::Struct => sel.select().recv(&rx).unwrap(),
            };
        }
        total += start.elapsed();
    }
    // Every round sends 0..CAP: a lost or doubled message fails the run
    // rather than passing for a fast one.
    let cap = CAP as u64;
    assert_eq!(black_box(sum), N / cap * (cap * (cap - 1) / 2));
    total
}

fn report(what: &str, run: impl Fn(How) -> Duration) {
    // Best of five, the three forms interleaved round by round, so that a
    // slow stretch of the host (this one's speed wanders by 2x within a
    // minute) falls on all three rather than on one.
    let mut best = [Duration::MAX; 3];
    for _ in 0..5 {
        for (k, how) in [How::Recv, How::Macro, How::Struct].into_iter().enumerate() {
            best[k] = best[k].min(run(how));
        }
    }
    let [recv, macro_, strukt] = best;
    let ns = |d: Duration| d.as_nanos() as f64 / N as f64;
    println!(
        "{what:<28} recv {:6.1} ns/msg | select! {:6.1} ns/msg (x{:.2}) | Select {:6.1} ns/msg (x{:.2})",
        ns(recv),
        ns(macro_),
        ns(macro_) / ns(recv),
        ns(strukt),
        ns(strukt) / ns(recv),
    );
}

fn main() {
    // `select_cost one-thread recv|macro|struct`: one run of the one-thread
    // workload (`cas`) and nothing else, for callgrind's instruction count.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("one-thread") {
        let how = match args.get(1).map(String::as_str) {
            Some("macro") => How::Macro,
            Some("struct") => How::Struct,
            _ => How::Recv,
        };
        one_thread::<swco_channel::Cas>(how);
        return;
    }
    report("cross-thread, cas", cross_thread::<swco_channel::Cas>);
    report("cross-thread, updt", cross_thread::<Updt>);
    report("one thread, cas", one_thread::<swco_channel::Cas>);
    report("one thread, updt", one_thread::<Updt>);
}
