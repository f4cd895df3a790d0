//! Try, timeout and disconnect semantics, drop accounting, odd message
//! types; every test runs for every mode × protocol.

mod common;

use std::thread;
use std::time::Duration;

use common::{Census, Counted};
use swco_channel::{
    mpmc, mpsc, spmc, spsc, Cas, RecvError, RecvTimeoutError, SendTimeoutError, TryRecvError,
    TrySendError, Updt,
};

/// Long enough that a thread blocks for real before the peer acts.
const SETTLE: Duration = Duration::from_millis(50);

macro_rules! for_every_channel {
    ($($name:ident: $module:ident, $proto:ty;)*) => {$(
        mod $name {
            use super::*;
            fn make<T>(capacity: usize) -> ($module::Sender<T, $proto>, $module::Receiver<T, $proto>) {
                $module::bounded_with::<T, $proto>(capacity)
            }

            #[test]
            fn capacity_is_exact_and_every_slot_usable() {
                for capacity in [1, 2, 3, 5, 7, 8, 100] {
                    let (tx, rx) = make(capacity);
                    assert_eq!(tx.capacity(), capacity);
                    assert!(tx.is_empty() && !tx.is_full());
                    for i in 0..capacity {
                        assert_eq!(tx.len(), i);
                        tx.try_send(i).unwrap();
                    }
                    assert!(tx.is_full() && rx.is_full());
                    assert_eq!(rx.len(), capacity);
                    assert_eq!(tx.try_send(capacity), Err(TrySendError::Full(capacity)));
                    // Wrap around the ring several times.
                    for i in capacity..capacity * 4 {
                        assert_eq!(rx.try_recv(), Ok(i - capacity));
                        tx.try_send(i).unwrap();
                    }
                    assert_eq!(rx.try_iter().count(), capacity);
                    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
                }
            }

            #[test]
            fn zero_capacity_is_a_rendezvous() {
                let (tx, rx) = make::<u8>(0);
                assert_eq!(tx.capacity(), 0);
                assert_eq!(rx.len(), 0);
                // Nobody waits on the other side.
                assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)));
                assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
            }

            #[test]
            fn try_ops_and_timeouts() {
                let (tx, rx) = make(1);
                assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
                assert_eq!(rx.recv_timeout(Duration::from_millis(5)), Err(RecvTimeoutError::Timeout));
                tx.send(1u32).unwrap();
                assert_eq!(tx.send_timeout(2, Duration::from_millis(5)), Err(SendTimeoutError::Timeout(2)));
                assert_eq!(rx.recv_timeout(Duration::from_millis(5)), Ok(1));
                assert_eq!(tx.send_timeout(3, Duration::from_secs(5)), Ok(()));
                assert_eq!(rx.recv(), Ok(3));
                // A huge timeout does not overflow: it waits for the peer.
                let t = thread::spawn(move || {
                    thread::sleep(SETTLE);
                    tx.send(4).unwrap();
                });
                assert_eq!(rx.recv_timeout(Duration::MAX), Ok(4));
                t.join().unwrap();
            }

            #[test]
            fn send_fails_once_receivers_are_gone_and_gives_the_value_back() {
                let (tx, rx) = make(2);
                drop(rx);
                assert!(tx.is_disconnected());
                assert_eq!(tx.send(String::from("x")).unwrap_err().into_inner(), "x");
                assert_eq!(tx.try_send(String::from("y")), Err(TrySendError::Disconnected("y".into())));
                assert_eq!(
                    tx.send_timeout(String::from("z"), SETTLE),
                    Err(SendTimeoutError::Disconnected("z".into()))
                );
            }

            #[test]
            fn receivers_drain_then_fail_once_senders_are_gone() {
                let (tx, rx) = make(4);
                tx.send(1).unwrap();
                tx.send(2).unwrap();
                drop(tx);
                assert_eq!(rx.recv(), Ok(1));
                assert_eq!(rx.try_recv(), Ok(2));
                assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
                assert_eq!(rx.recv(), Err(RecvError));
                assert_eq!(rx.recv_timeout(SETTLE), Err(RecvTimeoutError::Disconnected));
            }

            #[test]
            fn blocked_receiver_is_woken_by_last_sender_drop() {
                let (tx, rx) = make::<u8>(1);
                let t = thread::spawn(move || rx.recv());
                thread::sleep(SETTLE);
                drop(tx);
                assert_eq!(t.join().unwrap(), Err(RecvError));
            }

            #[test]
            fn blocked_sender_is_woken_by_last_receiver_drop() {
                let (tx, rx) = make(1);
                tx.send(1u8).unwrap();
                let t = thread::spawn(move || tx.send(2));
                thread::sleep(SETTLE);
                drop(rx);
                assert_eq!(t.join().unwrap().unwrap_err().into_inner(), 2);
            }

            #[test]
            fn blocked_receiver_is_woken_by_send() {
                let (tx, rx) = make(1);
                let t = thread::spawn(move || rx.recv());
                thread::sleep(SETTLE);
                tx.send(7u8).unwrap();
                assert_eq!(t.join().unwrap(), Ok(7));
            }

            #[test]
            fn blocked_sender_is_woken_by_recv() {
                let (tx, rx) = make(1);
                tx.send(1u8).unwrap();
                let t = thread::spawn(move || tx.send(2));
                thread::sleep(SETTLE);
                assert_eq!(rx.recv(), Ok(1));
                t.join().unwrap().unwrap();
                assert_eq!(rx.recv(), Ok(2));
            }

            #[test]
            fn buffered_messages_are_dropped_exactly_once() {
                for capacity in [1, 3, 8] {
                    // Last endpoint is the sender.
                    let census = Census::new();
                    let (tx, rx) = make(capacity);
                    for i in 0..capacity {
                        tx.send(Counted::new(i, &census)).unwrap_or_else(|_| panic!());
                    }
                    drop(rx.recv().unwrap());
                    drop(rx);
                    assert_eq!(census.dropped(), capacity, "receiver drop drains the buffer");
                    // Sends after that give the value back, to be dropped by the caller.
                    let back = tx.send(Counted::new(99, &census)).unwrap_err().into_inner();
                    assert_eq!(back.value, 99);
                    drop(back);
                    drop(tx);
                    assert_eq!(census.made(), capacity + 1);
                    assert_eq!(census.dropped(), capacity + 1);

                    // Last endpoint is the receiver, with the ring wrapped.
                    let census = Census::new();
                    let (tx, rx) = make(capacity);
                    for i in 0..capacity + 1 {
                        tx.send(Counted::new(i, &census)).unwrap_or_else(|_| panic!());
                        if i == 0 {
                            drop(rx.recv().unwrap());
                        }
                    }
                    drop(tx);
                    assert_eq!(census.dropped(), 1);
                    drop(rx);
                    assert_eq!(census.made(), capacity + 1);
                    assert_eq!(census.dropped(), capacity + 1);
                }
            }

            #[test]
            fn zero_sized_messages() {
                let (tx, rx) = make(3);
                let t = thread::spawn(move || for _ in 0..1000 { tx.send(()).unwrap() });
                assert_eq!(rx.iter().count(), 1000);
                t.join().unwrap();
            }

            #[test]
            fn four_kib_messages() {
                let (tx, rx) = make::<[u8; 4096]>(2);
                let t = thread::spawn(move || {
                    for i in 0..200u32 {
                        tx.send([i as u8; 4096]).unwrap();
                    }
                });
                for (i, page) in rx.into_iter().enumerate() {
                    assert!(page.iter().all(|&b| b == i as u8), "page {i} torn");
                }
                t.join().unwrap();
            }

            #[test]
            fn strings_and_iterators() {
                let (tx, rx) = make(2);
                let t = thread::spawn(move || {
                    for i in 0..50 {
                        tx.send(format!("m{i}")).unwrap();
                    }
                });
                let mut n = 0;
                for s in &rx {
                    assert_eq!(s, format!("m{n}"));
                    n += 1;
                }
                assert_eq!(n, 50);
                t.join().unwrap();
            }
        }
    )*};
}

for_every_channel! {
    cas_spsc: spsc, Cas;
    updt_spsc: spsc, Updt;
    cas_spmc: spmc, Cas;
    updt_spmc: spmc, Updt;
    cas_mpsc: mpsc, Cas;
    updt_mpsc: mpsc, Updt;
    cas_mpmc: mpmc, Cas;
    updt_mpmc: mpmc, Updt;
}

#[test]
fn disconnect_wakes_every_blocked_receiver_and_sender() {
    let (tx, rx) = mpmc::bounded_with::<u8, Updt>(1);
    let receivers: Vec<_> = (0..4)
        .map(|_| {
            let rx = rx.clone();
            thread::spawn(move || rx.recv())
        })
        .collect();
    thread::sleep(SETTLE);
    drop(tx);
    for r in receivers {
        assert_eq!(r.join().unwrap(), Err(RecvError));
    }

    let (tx, rx) = mpmc::bounded::<u8>(1);
    tx.send(0).unwrap();
    let senders: Vec<_> = (0..4)
        .map(|i| {
            let tx = tx.clone();
            thread::spawn(move || tx.send(i))
        })
        .collect();
    thread::sleep(SETTLE);
    drop(rx);
    let mut back: Vec<u8> = senders
        .into_iter()
        .map(|s| s.join().unwrap().unwrap_err().into_inner())
        .collect();
    back.sort();
    assert_eq!(back, [0, 1, 2, 3]);
}

#[test]
fn error_types_display_and_compare() {
    use swco_channel::SendError;
    assert_eq!(
        SendError(1).to_string(),
        "sending on a disconnected channel"
    );
    assert_eq!(
        TrySendError::Full(1).to_string(),
        "sending on a full channel"
    );
    assert_eq!(
        RecvError.to_string(),
        "receiving on an empty and disconnected channel"
    );
    assert_eq!(
        TryRecvError::Empty.to_string(),
        "receiving on an empty channel"
    );
    assert_eq!(
        RecvTimeoutError::Timeout.to_string(),
        "timed out waiting on receive operation"
    );
    assert_eq!(
        format!("{:?}", TrySendError::Disconnected(5)),
        "Disconnected(..)"
    );
    let e: Box<dyn std::error::Error> = Box::new(SendTimeoutError::Timeout(1));
    assert_eq!(e.to_string(), "timed out waiting on send operation");
}
