//! The seed paper's send protocols exactly as printed — Figure 5 (CAS, the
//! MPE) and Figure 6 (`updt`, the CPE) — with the obvious matching receive
//! side, and the counterexamples loom finds in them. These are why swco's
//! protocols differ from the paper's (see `channel/src/claim/`): each test
//! here is `#[should_panic]`, and passes only while loom keeps finding the
//! bug.
//!
//! # How the printed code is modelled
//!
//! * The channel is Figure 4's: `buffer`, `capacity`, `read`, `write`,
//!   `to_read`, `to_write`. Slot of a position: `buffer[pos % capacity]`.
//!   `full(chan)` is `write - read == capacity`, `empty(chan)` is
//!   `write == read` (the paper names these checks without printing them).
//! * Every shared word is read with `fetch_add(0)` and written with
//!   `SeqCst` read-modify-writes: loom lets a plain load (even a `SeqCst`
//!   one) return an older value, but a read-modify-write always reads the
//!   latest. So the model is sequentially consistent, the most charitable
//!   reading of the C code, and the failures below are not weak-memory
//!   artefacts: each trace is an interleaving of the printed lines.
//! * `co_swap_out()` suspends the coroutine until a peer wakes it. No model
//!   here has a peer that would, so a suspended operation simply ends
//!   (`Err(Suspended)`). That only *removes* behaviours — in the real
//!   program the coroutine would sleep while the others carry on exactly as
//!   here — so every failure loom finds is one the printed code has.
//! * The retry paths (`continue`, a failed CAS) yield to loom, which is what
//!   a spin loop must do under a model checker; it adds no synchronisation.
//! * "copy data here" is a write to the slot through loom's `UnsafeCell`,
//!   which reports any read or write not ordered after the previous write.
//!
//! The counterexample tests record what each thread does, and print the
//! failing execution's steps in order when loom stops at it.
#![cfg(loom)]

mod common;

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;

std::thread_local! {
    /// The steps of the execution loom is running. Loom runs all modelled
    /// threads on the test's own thread, so one buffer per test thread sees
    /// them all, in the order they ran.
    static TRACE: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

fn note(who: &str, what: String) {
    TRACE.with(|t| t.borrow_mut().push(format!("{who}: {what}")));
}

/// A `co_swap_out()` that nobody in the model will resume.
#[derive(Debug)]
struct Suspended;

/// Figure 4's channel, as far as Figures 5 and 6 use it.
struct PaperChannel {
    buffer: Box<[UnsafeCell<u32>]>,
    capacity: usize,
    read: AtomicUsize,
    write: AtomicUsize,
    to_read: AtomicUsize,
    to_write: AtomicUsize,
}

// SAFETY: the paper's protocols are what is supposed to make sharing the
// buffer sound. They do not, and that is what these tests show: loom's
// `UnsafeCell` reports the unsound accesses instead of letting them happen.
unsafe impl Sync for PaperChannel {}

/// The CPE's `updt(n, addr)`: add, return nothing.
fn updt(word: &AtomicUsize, n: isize) {
    word.fetch_add(n as usize, SeqCst);
}

/// A read of a shared word that always sees the latest value (see the
/// module docs): what a sequentially consistent machine would read.
fn ld(word: &AtomicUsize) -> usize {
    word.fetch_add(0, SeqCst)
}

impl PaperChannel {
    fn new(capacity: usize) -> Self {
        PaperChannel {
            buffer: (0..capacity).map(|_| UnsafeCell::new(0)).collect(),
            capacity,
            read: AtomicUsize::new(0),
            write: AtomicUsize::new(0),
            to_read: AtomicUsize::new(0),
            to_write: AtomicUsize::new(0),
        }
    }

    fn full(&self, who: &str) -> bool {
        let (write, read) = (ld(&self.write), ld(&self.read));
        let full = write.wrapping_sub(read) >= self.capacity;
        note(
            who,
            format!("full(chan)? write={write} read={read}: {full}"),
        );
        full
    }

    fn empty(&self, who: &str) -> bool {
        let (write, read) = (ld(&self.write), ld(&self.read));
        let empty = write == read;
        note(
            who,
            format!("empty(chan)? write={write} read={read}: {empty}"),
        );
        empty
    }

    /// Not part of the protocol: the checker's view, right after a producer
    /// has won position `temp` and before it copies. The slot is free only
    /// if the producer is less than a lap ahead of the consumers.
    fn assert_room(&self, who: &str, temp: usize) {
        let read = ld(&self.read);
        note(who, format!("won write position {temp} (read={read})"));
        assert!(
            temp.wrapping_sub(read) < self.capacity,
            "ring overfilled: {who} won write position {temp} while read is {read}, \
             capacity {}: slot {} still holds an unread message",
            self.capacity,
            temp % self.capacity
        );
    }

    fn copy_in(&self, who: &str, temp: usize, v: u32) {
        let slot = temp % self.capacity;
        note(who, format!("copies {v} into buffer[{slot}]"));
        // SAFETY: not guaranteed, which is the point: loom's cell panics on
        // an access that races with another, before it takes effect.
        self.buffer[slot].with_mut(|p| unsafe { *p = v });
    }

    fn copy_out(&self, who: &str, temp: usize) -> u32 {
        let slot = temp % self.capacity;
        note(who, format!("copies out of buffer[{slot}]"));
        // SAFETY: as in `copy_in`.
        self.buffer[slot].with(|p| unsafe { *p })
    }

    /// Figure 5, as printed:
    ///
    /// ```c
    /// 1.    do {
    /// 2.        if (full(chan)){
    /// 3.            co_swap_out();
    /// 4.        }
    /// 5.        temp = chan->write;
    /// 6.        next = temp + 1;
    /// 7.        ok = CAS(&chan->write, temp, next);
    /// 8.    } while (!ok);
    /// 9.    //copy data here
    /// ```
    fn fig5_send(&self, who: &str, v: u32) -> Result<(), Suspended> {
        let temp = loop {
            if self.full(who) {
                note(who, "co_swap_out()".into());
                return Err(Suspended);
            }
            let temp = ld(&self.write);
            let next = temp + 1;
            let ok = self
                .write
                .compare_exchange(temp, next, SeqCst, SeqCst)
                .is_ok();
            note(who, format!("CAS(&write, {temp}, {next}): {ok}"));
            if ok {
                break temp;
            }
            thread::yield_now();
        };
        self.assert_room(who, temp);
        self.copy_in(who, temp, v);
        Ok(())
    }

    /// Figure 5's receive side, the mirror image: `empty` for `full`, `read`
    /// for `write`, copy out after the CAS.
    fn fig5_recv(&self, who: &str) -> Result<u32, Suspended> {
        let temp = loop {
            if self.empty(who) {
                note(who, "co_swap_out()".into());
                return Err(Suspended);
            }
            let temp = ld(&self.read);
            let next = temp + 1;
            let ok = self
                .read
                .compare_exchange(temp, next, SeqCst, SeqCst)
                .is_ok();
            note(who, format!("CAS(&read, {temp}, {next}): {ok}"));
            if ok {
                break temp;
            }
            thread::yield_now();
        };
        Ok(self.copy_out(who, temp))
    }

    /// Figure 6, as printed:
    ///
    /// ```c
    /// 1.   while (1){
    /// 2.       if (full (chan)){
    /// 3.           co_swap_out();
    /// 4.       }
    /// 5.       temp = chan->write;
    /// 6.       if (temp == chan->to_write){
    /// 7.           updt_addw(1,&(chan->write));
    /// 8.       } else {
    /// 9.           continue;
    /// 10.      }
    /// 11.      if (chan->write == temp + 1){
    /// 12.          //copy data here
    /// 13.          updt_addw (1,&chan->to_write);
    /// 14.          return 0;
    /// 15.      } else {
    /// 16.          updt_addw (-1,&chan->write);
    /// 17.          continue;
    /// 18.      }
    /// 19.  }
    /// ```
    fn fig6_send(&self, who: &str, v: u32) -> Result<(), Suspended> {
        loop {
            if self.full(who) {
                note(who, "co_swap_out()".into());
                return Err(Suspended);
            }
            let temp = ld(&self.write);
            let to_write = ld(&self.to_write);
            if temp == to_write {
                updt(&self.write, 1);
                note(who, format!("temp={temp} == to_write: updt(1, &write)"));
            } else {
                note(who, format!("temp={temp} != to_write={to_write}: retry"));
                thread::yield_now();
                continue;
            }
            let write = ld(&self.write);
            if write == temp + 1 {
                self.assert_room(who, temp);
                self.copy_in(who, temp, v);
                updt(&self.to_write, 1);
                note(who, "updt(1, &to_write)".into());
                return Ok(());
            } else {
                updt(&self.write, -1);
                note(
                    who,
                    format!("write={write} != temp+1: updt(-1, &write), retry"),
                );
                thread::yield_now();
                continue;
            }
        }
    }

    /// Figure 6's receive side, the mirror image: `empty` for `full`,
    /// `read`/`to_read` for `write`/`to_write`, copy out inside the claim.
    fn fig6_recv(&self, who: &str) -> Result<u32, Suspended> {
        loop {
            if self.empty(who) {
                note(who, "co_swap_out()".into());
                return Err(Suspended);
            }
            let temp = ld(&self.read);
            let to_read = ld(&self.to_read);
            if temp == to_read {
                updt(&self.read, 1);
                note(who, format!("temp={temp} == to_read: updt(1, &read)"));
            } else {
                note(who, format!("temp={temp} != to_read={to_read}: retry"));
                thread::yield_now();
                continue;
            }
            let read = ld(&self.read);
            if read == temp + 1 {
                let v = self.copy_out(who, temp);
                updt(&self.to_read, 1);
                note(who, "updt(1, &to_read)".into());
                return Ok(v);
            } else {
                updt(&self.read, -1);
                note(
                    who,
                    format!("read={read} != temp+1: updt(-1, &read), retry"),
                );
                thread::yield_now();
                continue;
            }
        }
    }
}

/// Preemption bound of the counterexample searches. One preemption is
/// enough for every bug here; two leaves a margin.
const BOUND: usize = 2;

/// Runs `f` under loom, expecting it to fail; prints the failing execution's
/// steps, then lets the failure through to `#[should_panic]`.
fn expect_counterexample<F>(name: &str, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        common::check(name, BOUND, move || {
            TRACE.with(|t| t.borrow_mut().clear());
            f();
        });
    }));
    match outcome {
        Ok(()) => panic!("{name}: loom found no counterexample"),
        Err(payload) => {
            let steps = TRACE.with(|t| t.borrow().join("\n  "));
            eprintln!("{name}: loom's counterexample, step by step:\n  {steps}");
            panic::resume_unwind(payload)
        }
    }
}

/// Two producers, one free slot, no consumer: both send.
fn two_producers(send: fn(&PaperChannel, &str, u32) -> Result<(), Suspended>) {
    let chan = Arc::new(PaperChannel::new(1));
    let producers: Vec<_> = ["P1", "P2"]
        .into_iter()
        .zip([1, 2])
        .map(|(who, v)| {
            let chan = chan.clone();
            thread::spawn(move || {
                let _ = send(&chan, who, v);
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
}

/// One producer and one consumer on an empty ring of one slot.
fn producer_and_consumer(
    send: fn(&PaperChannel, &str, u32) -> Result<(), Suspended>,
    recv: fn(&PaperChannel, &str) -> Result<u32, Suspended>,
) {
    let chan = Arc::new(PaperChannel::new(1));
    let producer = {
        let chan = chan.clone();
        thread::spawn(move || {
            let _ = send(&chan, "P", 7);
        })
    };
    let consumer = {
        let chan = chan.clone();
        thread::spawn(move || {
            if let Ok(v) = recv(&chan, "C") {
                assert_eq!(v, 7, "C received a message nobody sent");
            }
        })
    };
    producer.join().unwrap();
    consumer.join().unwrap();
}

/// **Figure 5 overfills the ring.** Capacity 1, two producers, no consumer.
/// P1 checks `full(chan)`: write=0, read=0, not full. Before P1 claims, P2
/// checks too: still not full. P1 CASes `write` 0→1 and owns slot 0; P2
/// reads `write`=1 and CASes 1→2, which succeeds because nobody else moved
/// `write` — the CAS compares `write` with itself, not with `read`. P2 now
/// owns position 1, i.e. slot 0 again, which holds P1's unread message. The
/// `full` check was made before the claim and never again.
#[test]
#[should_panic(expected = "ring overfilled")]
fn paper_fig5_two_producers_overfill() {
    expect_counterexample("paper_fig5_two_producers_overfill", || {
        two_producers(PaperChannel::fig5_send)
    });
}

/// **Figure 6 overfills the ring.** Capacity 1, two producers, no consumer.
/// P1 and P2 both check `full(chan)` while the ring is empty. P1 then runs
/// its whole claim: `temp`=0 equals `to_write`=0, `updt(1, &write)`, reads
/// `write`=1 = `temp`+1, copies into slot 0, `updt(1, &to_write)`. P2 goes
/// on from its stale check: `temp`=1 equals `to_write`=1, `updt(1, &write)`,
/// reads `write`=2 = `temp`+1 and wins position 1 — slot 0 again, still
/// holding P1's unread message. The claim is a fine mutual exclusion; what
/// it protects is a decision taken before it was won.
#[test]
#[should_panic(expected = "ring overfilled")]
fn paper_fig6_two_producers_overfill() {
    expect_counterexample("paper_fig6_two_producers_overfill", || {
        two_producers(PaperChannel::fig6_send)
    });
}

/// **Figure 5 lets a consumer read a slot before it is written.** Capacity
/// 1, one producer, one consumer. P checks `full(chan)` (no) and CASes
/// `write` 0→1: position 0 is now counted as sent, but "copy data here"
/// comes after. C checks `empty(chan)`: `write`=1, `read`=0, not empty; it
/// CASes `read` 0→1 and copies slot 0 out — before (or while) P copies its
/// message in. Loom's `UnsafeCell` reports the read and the write as
/// concurrent: nothing orders P's copy before C's. The index is published
/// before the data.
#[test]
#[should_panic(expected = "Causality violation")]
fn paper_fig5_consumer_reads_unwritten_slot() {
    expect_counterexample("paper_fig5_consumer_reads_unwritten_slot", || {
        producer_and_consumer(PaperChannel::fig5_send, PaperChannel::fig5_recv)
    });
}

/// **Figure 6 has the same hole, given a consumer that tests `empty` on
/// `write`.** P checks `full(chan)` (no), sees `temp`=0 = `to_write` and
/// does `updt(1, &write)`: `write` is 1 while P is still inside its claim,
/// before line 12 copies the message. C checks `empty(chan)`: `write`=1,
/// `read`=0, not empty; it wins its own claim on `read` and copies slot 0
/// out, concurrently with P's copy in. (A consumer that compared `read` with
/// `to_write` instead would not fall into this one; the paper does not print
/// its consumer, and Figure 4 documents `write` as where the next message
/// goes, so `empty` on `write` is the reading its text gives. The overfill
/// above does not depend on this choice.)
#[test]
#[should_panic(expected = "Causality violation")]
fn paper_fig6_consumer_reads_unwritten_slot() {
    expect_counterexample("paper_fig6_consumer_reads_unwritten_slot", || {
        producer_and_consumer(PaperChannel::fig6_send, PaperChannel::fig6_recv)
    });
}
