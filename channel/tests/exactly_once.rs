//! Every mode × protocol: several producers and consumers over capacities
//! 0 (rendezvous), 1, 2 and 8, so blocking happens all the time. Checks
//! that every message arrives exactly once, in FIFO order per producer as seen by each consumer,
//! that `len() <= capacity()` whenever observed, and that nothing leaks.

mod common;

use std::sync::Arc;
use std::thread;

use common::{assert_each_received_once, Census, Counted, FifoPerProducer};
use swco_channel::{mpmc, mpsc, spmc, spsc, Cas, Mode, Protocol, Receiver, Sender, Updt};

type Msg = Counted<(usize, usize)>;

/// Runs `txs.len()` producers sending `per_producer` messages each and
/// `rxs.len()` consumers; both sides check `len() <= capacity()` as they go.
fn run<M: Mode, P: Protocol>(
    txs: Vec<Sender<Msg, M, P>>,
    rxs: Vec<Receiver<Msg, M, P>>,
    per_producer: usize,
    census: &Arc<Census>,
) {
    let producers = txs.len();
    let capacity = txs[0].capacity();
    thread::scope(|s| {
        for (p, tx) in txs.into_iter().enumerate() {
            let census = census.clone();
            s.spawn(move || {
                for seq in 0..per_producer {
                    assert!(tx.len() <= capacity);
                    tx.send(Counted::new((p, seq), &census))
                        .unwrap_or_else(|_| panic!("send failed"));
                }
            });
        }
        let handles: Vec<_> = rxs
            .into_iter()
            .map(|rx| {
                s.spawn(move || {
                    let mut seen = FifoPerProducer::new(producers);
                    for msg in rx.iter() {
                        let len = rx.len();
                        assert!(len <= capacity, "len {len} > capacity {capacity}");
                        seen.record(msg.value);
                    }
                    seen.got
                })
            })
            .collect();
        assert_each_received_once(
            handles.into_iter().map(|h| h.join().unwrap()),
            producers,
            per_producer,
        );
    });
    assert_eq!(census.made(), producers * per_producer);
    assert_eq!(census.dropped(), census.made(), "leaked or double-dropped");
}

const PER_PRODUCER: usize = 2500; // 120 000 messages over the eight tests

macro_rules! exactly_once_tests {
    ($($name:ident: $module:ident, $proto:ty, producers $np:literal, consumers $nc:literal, $clone_tx:ident, $clone_rx:ident;)*) => {$(
        #[test]
        fn $name() {
            for capacity in [0, 1, 2, 8] {
                let census = Census::new();
                let (tx, rx) = $module::bounded_with::<Msg, $proto>(capacity);
                let txs = swco_test_support::endpoints!($clone_tx, tx, $np);
                let rxs = swco_test_support::endpoints!($clone_rx, rx, $nc);
                run(txs, rxs, PER_PRODUCER, &census);
            }
        }
    )*};
}

exactly_once_tests! {
    cas_spsc_exactly_once: spsc, Cas, producers 1, consumers 1, single, single;
    updt_spsc_exactly_once: spsc, Updt, producers 1, consumers 1, single, single;
    cas_spmc_exactly_once: spmc, Cas, producers 1, consumers 3, single, clone;
    updt_spmc_exactly_once: spmc, Updt, producers 1, consumers 3, single, clone;
    cas_mpsc_exactly_once: mpsc, Cas, producers 3, consumers 1, clone, single;
    updt_mpsc_exactly_once: mpsc, Updt, producers 3, consumers 1, clone, single;
    cas_mpmc_exactly_once: mpmc, Cas, producers 3, consumers 3, clone, clone;
    updt_mpmc_exactly_once: mpmc, Updt, producers 3, consumers 3, clone, clone;
}

/// `Updt` sides combine contended claims through per-thread slots, 64 of
/// them: with more threads than that, the rest claim without combining,
/// and both kinds of claimant share the cursor.
#[test]
fn updt_mpmc_more_threads_than_combining_slots() {
    let census = Census::new();
    let (tx, rx) = mpmc::bounded_with::<Msg, Updt>(8);
    let txs: Vec<_> = (0..70).map(|_| tx.clone()).collect();
    let rxs: Vec<_> = (0..4).map(|_| rx.clone()).collect();
    drop((tx, rx));
    run(txs, rxs, 300, &census);
}

/// Waves of threads, each taking combining slots as it contends and giving
/// them back as it exits: every wave delivers exactly once. (That the slots
/// come back is checked in `claim/combine.rs`'s own tests.)
#[test]
fn updt_mpmc_combining_slots_are_recycled() {
    for _ in 0..4 {
        let census = Census::new();
        let (tx, rx) = mpmc::bounded_with::<Msg, Updt>(4);
        let txs: Vec<_> = (0..40).map(|_| tx.clone()).collect();
        let rxs: Vec<_> = (0..2).map(|_| rx.clone()).collect();
        drop((tx, rx));
        run(txs, rxs, 200, &census);
    }
}
