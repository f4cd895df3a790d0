//! Batch operations in every mode × protocol: exactly once, per-producer
//! order, nothing leaked, runs that cross the ring's end, and the same
//! blocking, timeout and disconnection semantics as single messages.

mod common;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::{assert_each_received_once, Census, Counted, FifoPerProducer};
use swco_channel::{
    mpmc, mpsc, spmc, spsc, Cas, Mode, Protocol, Receiver, RecvTimeoutError, SendTimeoutError,
    Sender, TryRecvError, TrySendError, Updt,
};

type Msg = Counted<(usize, usize)>;

/// Producers send `per_producer` messages each in batches of 1 to 7 (some
/// through `try_send_batch`, retrying what comes back); consumers take
/// batches of up to 1 to 5. Every message must arrive exactly once, in
/// order per producer as each consumer sees it, and nothing may leak.
fn run<M: Mode, P: Protocol>(
    txs: Vec<Sender<Msg, M, P>>,
    rxs: Vec<Receiver<Msg, M, P>>,
    per_producer: usize,
    census: &Arc<Census>,
) {
    let producers = txs.len();
    thread::scope(|s| {
        for (p, tx) in txs.into_iter().enumerate() {
            let census = census.clone();
            s.spawn(move || {
                let mut seq = 0;
                let mut round = 0;
                while seq < per_producer {
                    let k = (1 + round % 7).min(per_producer - seq);
                    let batch: Vec<Msg> = (seq..seq + k)
                        .map(|i| Counted::new((p, i), &census))
                        .collect();
                    if round % 3 == 0 {
                        // The try form, until it all went: what comes back is
                        // the unsent tail, in order.
                        let mut rest = batch;
                        loop {
                            match tx.try_send_batch(rest) {
                                Ok(_) => break,
                                Err(TrySendError::Full(back)) => {
                                    rest = back;
                                    thread::yield_now();
                                }
                                Err(TrySendError::Disconnected(_)) => panic!("disconnected"),
                            }
                        }
                    } else {
                        assert_eq!(tx.send_batch(batch).ok(), Some(k));
                    }
                    seq += k;
                    round += 1;
                }
            });
        }
        let handles: Vec<_> = rxs
            .into_iter()
            .enumerate()
            .map(|(c, rx)| {
                s.spawn(move || {
                    let mut seen = FifoPerProducer::new(producers);
                    let mut batch = Vec::new();
                    let mut round = c;
                    loop {
                        let max = 1 + round % 5;
                        round += 1;
                        batch.clear();
                        match rx.recv_batch(&mut batch, max) {
                            Ok(n) => {
                                assert!((1..=max).contains(&n), "{n} of at most {max}");
                                assert_eq!(n, batch.len());
                            }
                            Err(_) => break,
                        }
                        for msg in batch.drain(..) {
                            seen.record(msg.value);
                        }
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

const PER_PRODUCER: usize = 2000;

macro_rules! per_mode {
    ($($module:ident: $cas:ident, $updt:ident, producers $np:literal, consumers $nc:literal, $clone_tx:ident, $clone_rx:ident;)*) => {$(
        #[test]
        fn $cas() {
            per_mode!(@run $module, Cas, $np, $nc, $clone_tx, $clone_rx);
        }

        #[test]
        fn $updt() {
            per_mode!(@run $module, Updt, $np, $nc, $clone_tx, $clone_rx);
        }
    )*};
    (@run $module:ident, $proto:ty, $np:literal, $nc:literal, $clone_tx:ident, $clone_rx:ident) => {
        for capacity in [0, 1, 3, 8] {
            let census = Census::new();
            let (tx, rx) = $module::bounded_with::<Msg, $proto>(capacity);
            let txs = swco_test_support::endpoints!($clone_tx, tx, $np);
            let rxs = swco_test_support::endpoints!($clone_rx, rx, $nc);
            run(txs, rxs, PER_PRODUCER, &census);
        }
    };
}

per_mode! {
    spsc: cas_spsc_batches, updt_spsc_batches, producers 1, consumers 1, single, single;
    spmc: cas_spmc_batches, updt_spmc_batches, producers 1, consumers 3, single, clone;
    mpsc: cas_mpsc_batches, updt_mpsc_batches, producers 3, consumers 1, clone, single;
    mpmc: cas_mpmc_batches, updt_mpmc_batches, producers 3, consumers 3, clone, clone;
}

#[test]
fn a_batch_wraps_around_the_ring_in_order() {
    for capacity in 1..=9 {
        let (tx, rx) = mpmc::bounded_with::<usize, Updt>(capacity);
        let mut next_out = 0;
        let mut next_in = 0;
        // Offsets the ring by a different amount each time, so that runs
        // start at every index and cross the end.
        for round in 0..3 * capacity {
            let k = 1 + round % capacity;
            assert_eq!(tx.try_send_batch(next_in..next_in + k), Ok(k));
            next_in += k;
            let mut got = Vec::new();
            assert_eq!(rx.try_recv_batch(&mut got, usize::MAX), Ok(k));
            assert_eq!(got, (next_out..next_out + k).collect::<Vec<_>>());
            next_out += k;
        }
    }
}

#[test]
fn try_send_batch_gives_back_the_unsent_tail_and_the_rest_of_the_iterator() {
    let census = Census::new();
    let (tx, rx) = spsc::bounded_with::<Counted<u32>, Cas>(3);
    let values = (0..10).map(|i| Counted::new(i, &census));
    match tx.try_send_batch(values) {
        Err(TrySendError::Full(rest)) => {
            assert_eq!(
                rest.iter().map(|m| m.value).collect::<Vec<_>>(),
                (3..10).collect::<Vec<_>>()
            );
        }
        other => panic!("expected Full, got {:?}", other.map_err(|e| e.is_full())),
    }
    // Nothing made is lost: 7 came back (dropped above), 3 are in the ring.
    assert_eq!(census.made(), 10);
    assert_eq!(census.dropped(), 7);
    assert_eq!(rx.len(), 3);
    drop((tx, rx));
    assert_eq!(census.dropped(), 10);
}

#[test]
fn a_full_channel_takes_nothing_from_a_try_batch() {
    let (tx, _rx) = mpsc::bounded_with::<u8, Updt>(1);
    tx.send(0).unwrap();
    assert_eq!(
        tx.try_send_batch([1, 2]),
        Err(TrySendError::Full(vec![1, 2]))
    );
    assert_eq!(tx.try_send_batch(Vec::new()), Ok(0));
}

#[test]
fn batches_fail_with_their_messages_once_the_other_side_is_gone() {
    let (tx, rx) = mpmc::bounded_with::<u8, Cas>(4);
    drop(rx);
    assert_eq!(
        tx.send_batch([1, 2, 3]).unwrap_err().into_inner(),
        [1, 2, 3]
    );
    assert_eq!(
        tx.try_send_batch([4]),
        Err(TrySendError::Disconnected(vec![4]))
    );
    assert_eq!(
        tx.send_batch_timeout([5], Duration::from_secs(5)),
        Err(SendTimeoutError::Disconnected(vec![5]))
    );

    let (tx, rx) = spmc::bounded_with::<u8, Updt>(4);
    tx.send_batch([1, 2, 3]).unwrap();
    drop(tx);
    let mut got = Vec::new();
    // Buffered messages are still delivered, then the batch fails.
    assert_eq!(rx.recv_batch(&mut got, 2), Ok(2));
    assert_eq!(rx.try_recv_batch(&mut got, 2), Ok(1));
    assert_eq!(got, [1, 2, 3]);
    assert!(rx.recv_batch(&mut got, 2).is_err());
    assert_eq!(
        rx.try_recv_batch(&mut got, 2),
        Err(TryRecvError::Disconnected)
    );
    assert_eq!(
        rx.recv_batch_timeout(&mut got, 2, Duration::from_secs(5)),
        Err(RecvTimeoutError::Disconnected)
    );
    assert_eq!(got.len(), 3);
}

#[test]
fn a_blocked_batch_sender_is_given_back_its_messages_when_the_receiver_goes() {
    let census = Census::new();
    let (tx, rx) = mpsc::bounded_with::<Counted<u32>, Updt>(2);
    let sender = {
        let census = census.clone();
        thread::spawn(move || {
            let values = (0..6).map(|i| Counted::new(i, &census));
            tx.send_batch(values).unwrap_err().into_inner().len()
        })
    };
    // Two fit; the sender blocks with four in hand until the receiver goes.
    while rx.len() < 2 {
        thread::yield_now();
    }
    thread::sleep(Duration::from_millis(20));
    drop(rx);
    assert_eq!(sender.join().unwrap(), 4);
    assert_eq!(census.made(), 6);
    assert_eq!(census.dropped(), 6);
}

#[test]
fn batch_timeouts_report_what_was_not_done() {
    let (tx, rx) = spsc::bounded_with::<u8, Cas>(2);
    assert_eq!(
        tx.send_batch_timeout([1, 2, 3, 4], Duration::from_millis(10)),
        Err(SendTimeoutError::Timeout(vec![3, 4]))
    );
    let mut got = Vec::new();
    assert_eq!(
        rx.recv_batch_timeout(&mut got, 8, Duration::from_millis(10)),
        Ok(2)
    );
    assert_eq!(
        rx.recv_batch_timeout(&mut got, 8, Duration::from_millis(10)),
        Err(RecvTimeoutError::Timeout)
    );
    assert_eq!(rx.try_recv_batch(&mut got, 8), Err(TryRecvError::Empty));
    assert_eq!(got, [1, 2]);
}

#[test]
fn zero_max_takes_nothing() {
    let (tx, rx) = mpmc::bounded::<u8>(2);
    tx.send(1).unwrap();
    let mut got = Vec::new();
    assert_eq!(rx.recv_batch(&mut got, 0), Ok(0));
    assert_eq!(rx.try_recv_batch(&mut got, 0), Ok(0));
    assert!(got.is_empty());
    assert_eq!(rx.len(), 1);
}

#[test]
fn a_batch_larger_than_the_ring_blocks_until_a_receiver_makes_room() {
    for capacity in [0, 1, 4] {
        let (tx, rx) = mpmc::bounded_with::<usize, Updt>(capacity);
        let receiver = thread::spawn(move || {
            let mut got = Vec::new();
            while rx.recv_batch(&mut got, 3).is_ok() {}
            got
        });
        assert_eq!(tx.send_batch(0..1000), Ok(1000));
        drop(tx);
        assert_eq!(receiver.join().unwrap(), (0..1000).collect::<Vec<_>>());
    }
}

#[test]
fn a_panicking_iterator_loses_nothing_and_leaves_the_channel_usable() {
    let census = Census::new();
    let (tx, rx) = mpsc::bounded_with::<Counted<u32>, Cas>(64);
    let values = (0..40).map(|i| {
        assert!(i != 37, "the iterator panics");
        Counted::new(i, &census)
    });
    let sent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tx.send_batch(values)));
    assert!(sent.is_err());
    // The first chunk (32 small messages) went in; the 5 pulled after it
    // were dropped by the unwinding chunk.
    assert_eq!(census.made(), 37);
    assert_eq!(census.dropped(), 5);
    let mut got = Vec::new();
    assert_eq!(rx.try_recv_batch(&mut got, 100), Ok(32));
    assert!(got.iter().map(|m| m.value).eq(0..32));
    tx.send(Counted::new(99, &census)).unwrap();
    assert_eq!(rx.recv().unwrap().value, 99);
    drop(got);
    assert_eq!(census.dropped(), 38);
}

#[test]
fn a_rendezvous_batch_meets_one_receiver_per_message() {
    let (tx, rx) = spsc::bounded_with::<u32, Updt>(0);
    assert_eq!(tx.try_send_batch([1]), Err(TrySendError::Full(vec![1])));
    let receiver = thread::spawn(move || {
        let mut got = Vec::new();
        while rx.recv_batch(&mut got, 4).is_ok() {}
        got
    });
    assert_eq!(tx.send_batch(0..50), Ok(50));
    drop(tx);
    assert_eq!(receiver.join().unwrap(), (0..50).collect::<Vec<_>>());
}
