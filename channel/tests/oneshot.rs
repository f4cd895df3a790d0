//! `oneshot`: one value, by value, from one sender to one receiver. A value
//! sent stays receivable after the sender is gone; a sender dropped unsent
//! fails the receive; a send to a dropped receiver gives the value back;
//! nothing is leaked or dropped twice (drop-counted values, exact counts).
//! The tests that wait run in a child process, killed if they hang.

mod common;

use std::future::Future;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use common::{Census, Counted};
use swco_channel::{
    after, never, oneshot, select, RecvError, RecvTimeoutError, Select, TryRecvError,
};

use swco_test_support::child_test;

#[test]
fn value_sent_then_sender_gone_is_received() {
    let census = Census::new();
    let (tx, rx) = oneshot();
    assert!(rx.is_empty());
    assert!(tx.send(Counted::new(7, &census)).is_ok());
    // `send` took the sender: it is gone, and the value is still there.
    assert!(rx.is_disconnected());
    assert!(!rx.is_empty());
    assert_eq!(rx.recv().unwrap().value, 7);
    assert_eq!((census.made(), census.dropped()), (1, 1));
}

#[test]
fn sender_dropped_unsent_fails_the_receive() {
    let (tx, rx) = oneshot::<u32>();
    drop(tx);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(1)),
        Err(RecvTimeoutError::Disconnected)
    );
    assert_eq!(rx.recv(), Err(RecvError));
}

#[test]
fn receiver_dropped_gives_the_value_back() {
    let census = Census::new();
    let (tx, rx) = oneshot();
    assert!(!tx.is_closed());
    drop(rx);
    assert!(tx.is_closed());
    let Err(back) = tx.send(Counted::new(3, &census)) else {
        panic!("sent to a dropped receiver")
    };
    assert_eq!(back.value, 3);
    // Given back, not dropped: the caller owns it.
    assert_eq!((census.made(), census.dropped()), (1, 0));
    drop(back);
    assert_eq!((census.made(), census.dropped()), (1, 1));
}

#[test]
fn value_never_received_is_dropped_once() {
    let census = Census::new();
    let (tx, rx) = oneshot();
    assert!(tx.send(Counted::new(1, &census)).is_ok());
    assert_eq!(census.dropped(), 0);
    drop(rx);
    assert_eq!((census.made(), census.dropped()), (1, 1));
    // And in the other order of drops.
    let (tx, rx) = oneshot();
    assert!(tx.send(Counted::new(2, &census)).is_ok());
    drop(rx);
    assert_eq!((census.made(), census.dropped()), (2, 2));
}

#[test]
fn try_recv_then_nothing_more() {
    let (tx, rx) = oneshot();
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(1)),
        Err(RecvTimeoutError::Timeout)
    );
    tx.send("x").unwrap();
    assert_eq!(rx.try_recv(), Ok("x"));
    // Taken: the sender is gone, so nothing more will come.
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(rx.recv(), Err(RecvError));
}

child_test! {
    recv_waits_for_a_send_from_another_thread {
        let (tx, rx) = oneshot::<String>();
        let sender = thread::spawn(move || {
            thread::sleep(Duration::from_millis(5));
            tx.send("late".to_string()).unwrap();
        });
        assert_eq!(rx.recv().unwrap(), "late");
        sender.join().unwrap();
    }

    recv_wakes_when_the_sender_drops_unsent {
        let (tx, rx) = oneshot::<u8>();
        let dropper = thread::spawn(move || {
            thread::sleep(Duration::from_millis(5));
            drop(tx);
        });
        assert_eq!(rx.recv(), Err(RecvError));
        dropper.join().unwrap();
    }

    many_oneshots_across_threads_exact_counts {
        let census = Census::new();
        let n = 2000;
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| oneshot()).unzip();
        // Odd receivers are dropped before their send, from another thread
        // than the sender's: their sends give the value back.
        let (keep, gone): (Vec<_>, Vec<_>) =
            rxs.into_iter().enumerate().partition(|(i, _)| i % 2 == 0);
        drop(gone);
        let c = census.clone();
        let sender = thread::spawn(move || {
            let mut back = 0;
            for (i, tx) in txs.into_iter().enumerate() {
                if let Err(v) = tx.send(Counted::new(i, &c)) {
                    assert_eq!(v.value % 2, 1);
                    back += 1;
                }
            }
            back
        });
        let mut sum = 0;
        for (i, rx) in keep {
            let v = rx.recv().unwrap();
            assert_eq!(v.value, i);
            sum += 1;
        }
        assert_eq!(sender.join().unwrap(), n / 2);
        assert_eq!(sum, n / 2);
        assert_eq!((census.made(), census.dropped()), (n, n));
    }

    in_select_by_reference {
        let (tx, rx) = oneshot::<u32>();
        let (tx2, rx2) = oneshot::<u32>();
        let sender = thread::spawn(move || {
            thread::sleep(Duration::from_millis(5));
            tx2.send(2).unwrap();
        });
        // Neither ready at first: the select blocks until the thread's send.
        let got = select! {
            recv(rx) -> v => (1, v),
            recv(rx2) -> v => (2, v),
            recv(never()) -> _ => unreachable!(),
        };
        assert_eq!(got, (2, Ok(2)));
        sender.join().unwrap();
        // Taken by the select: that receiver now reports the sender gone.
        assert_eq!(rx2.try_recv(), Err(TryRecvError::Disconnected));
        // A sender dropped unsent makes its arm ready, failing.
        drop(tx);
        let got = select! {
            recv(rx) -> v => v,
            recv(after(Duration::from_secs(3600))) -> _ => unreachable!(),
        };
        assert_eq!(got, Err(RecvError));
        // And `Select`.
        let (tx3, rx3) = oneshot::<&str>();
        tx3.send("s").unwrap();
        let mut sel = Select::new();
        let i = sel.recv(&rx3);
        let oper = sel.select();
        assert_eq!(oper.index(), i);
        assert_eq!(oper.recv(&rx3), Ok("s"));
    }

    recv_async_resolves {
        let (tx, rx) = oneshot::<u64>();
        let sender = thread::spawn(move || {
            thread::sleep(Duration::from_millis(5));
            tx.send(11).unwrap();
        });
        assert_eq!(block_on(rx.recv_async()), Ok(11));
        sender.join().unwrap();
        let (tx, rx) = oneshot::<u64>();
        drop(tx);
        assert_eq!(block_on(rx.recv_async()), Err(RecvError));
    }
}

struct Unpark(Thread);
impl Wake for Unpark {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// A minimal executor: polls on this thread, parks it while pending.
fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let waker = Waker::from(std::sync::Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        thread::park();
    }
}
