//! A blocking `send` must not keep many copies of the message on the stack:
//! a parked sender (a coroutine with a small stack, typically) holds the
//! message in its caller's frame and not again in every frame of the send
//! path. `examples/send_stack.rs` measures the figure; this test pins it.
//!
//! The send runs in a child process (this test binary, re-executed), so
//! that an overflow, which aborts the process, fails only this test.

mod common;

use std::rc::Rc;
use std::thread;

use common::{Panic, TestPark};
use swco_channel::{hook, spsc};
use swco_test_support::in_child_process;

const MSG: usize = 256 * 1024;
/// The sender's whole stack. The caller's own frame holds two copies of the
/// message (the argument, and the `Result` that could give it back); the
/// send path adds one while parked and one more briefly as it finishes, in
/// a debug build (none in a release build). So four copies, plus the
/// thread's own few KiB. Before the send path kept the message in place, a
/// debug build needed about 29 copies (and a release build 7).
const SENDER_STACK: usize = 5 * MSG;
/// For the threads that are not being measured.
const ROOMY: usize = 64 * 1024 * 1024;

/// Fills a capacity-1 channel, then sends one more `MSG`-byte message from
/// a thread with `SENDER_STACK` bytes of stack; the send parks until a
/// receiver makes room.
fn blocking_send_on_a_small_stack() {
    let (tx, rx) = spsc::bounded::<[u8; MSG]>(1);
    let tx = thread::Builder::new()
        .stack_size(ROOMY)
        .spawn(move || {
            tx.try_send([0; MSG]).unwrap();
            tx
        })
        .unwrap()
        .join()
        .unwrap();
    let (park, probe) = TestPark::new(Panic::Never);
    let sender = thread::Builder::new()
        .stack_size(SENDER_STACK)
        .spawn(move || {
            hook::set_current(Some(Rc::new(park)));
            // `is_ok` rather than `unwrap`, which would move the `Result`
            // (one more copy) in a debug build.
            assert!(tx.send([1; MSG]).is_ok());
        })
        .unwrap();
    let receiver = thread::Builder::new()
        .stack_size(ROOMY)
        .spawn(move || {
            // Make room only once the sender is parked.
            probe.wait_parked();
            assert!(rx.recv().unwrap().iter().all(|&b| b == 0));
            assert!(rx.recv().unwrap().iter().all(|&b| b == 1));
        })
        .unwrap();
    sender.join().unwrap();
    receiver.join().unwrap();
}

#[test]
fn blocking_send_of_a_large_message_fits_in_five_times_its_size() {
    in_child_process(
        "blocking_send_of_a_large_message_fits_in_five_times_its_size",
        blocking_send_on_a_small_stack,
    );
}
