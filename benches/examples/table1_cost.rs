//! Instructions per message of the Table 1 loop, for callgrind: one
//! producer coroutine sends `m` xorshift values into an MPMC channel that
//! holds them all, then one consumer receives them (the seed paper's
//! experiment at n = 1, on one executor, so the run is deterministic).
//! `table1_cell` checks every value.
//!
//! ```sh
//! cargo build --release -p swco-bench --example table1_cost
//! for m in 100000 200000; do
//!     valgrind --tool=callgrind --callgrind-out-file=/tmp/t1.$m \
//!         target/release/examples/table1_cost cas $m
//! done
//! ```
//!
//! The difference of the two totals over 100 000 is the cost of one
//! message, sent and received.
//!
//! Arguments: `cas` or `updt` (default `cas`), and the messages (default
//! 100 000).

use swco::channel::{Cas, Updt};
use swco::Runtime;
use swco_bench::{table1_cell, Place, Swco};

fn main() {
    let mut args = std::env::args().skip(1);
    let protocol = args.next().unwrap_or_else(|| "cas".into());
    let m: usize = args.next().map_or(100_000, |a| a.parse().expect("a count"));
    let rt = Runtime::builder().executors(1).build().expect("a runtime");
    let sample = match protocol.as_str() {
        "cas" => table1_cell(&Swco::<Cas>::new(&rt, Place::Packed), 1, m, 1),
        "updt" => table1_cell(&Swco::<Updt>::new(&rt, Place::Packed), 1, m, 1),
        other => panic!("cas or updt, not {other}"),
    };
    println!(
        "{m} messages: {:.1} ns per send, {:.1} ns per receive",
        sample.send_ns, sample.recv_ns
    );
}
