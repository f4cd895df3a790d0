//! How much stack does a *blocking* `send` of a large message use?
//!
//! For each message size, the sender runs on a std thread created with a
//! given stack size, sends into a full channel (so the send parks until a
//! receiver on another thread makes room), and the smallest stack size that
//! survives is found by binary search. Each try runs in a child process
//! (this example, re-executed), since an overflow aborts the process.
//!
//! The stack a thread gets is not all usable (guard page, thread-local
//! storage, the thread's start-up frames), so the figure of interest is the
//! *slope*: extra stack needed per extra byte of message, i.e. how many
//! copies of the message are live at the deepest point.
//!
//! ```text
//! cargo run -p swco-channel --example send_stack            # debug
//! cargo run -p swco-channel --example send_stack --release
//! ```
//!
//! crossbeam-channel is measured the same way, for reference; its blocked
//! sender is given time to park by a sleep on the receiver's side, since it
//! offers no hook to observe parking (this is a measurement, not a test).

use std::process::{Command, Stdio};
use std::rc::Rc;
use std::sync::{mpsc as std_mpsc, Arc, Condvar, Mutex};
use std::task::{Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use swco_channel::hook::{self, Park};

const KIB: usize = 1024;
const SMALL: usize = 256 * KIB;
const LARGE: usize = 1024 * KIB;
const PAGE: usize = 4096;
/// Stack for the helper threads, which must never be the ones to overflow.
const ROOMY: usize = 256 * 1024 * KIB;

/// A token parker that tells the test each time it is about to park.
struct Token {
    set: Mutex<bool>,
    cond: Condvar,
}

impl Wake for Token {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        *self.set.lock().unwrap() = true;
        self.cond.notify_one();
    }
}

struct Signalling {
    token: Arc<Token>,
    parked: std_mpsc::Sender<()>,
}

impl Park for Signalling {
    fn waker(&self) -> Waker {
        Waker::from(self.token.clone())
    }
    fn park(&self, deadline: Option<Instant>) {
        let _ = self.parked.send(());
        let mut set = self.token.set.lock().unwrap();
        while !*set {
            set = match deadline {
                None => self.token.cond.wait(set).unwrap(),
                Some(d) => {
                    let Some(left) = d.checked_duration_since(Instant::now()) else {
                        return;
                    };
                    self.token.cond.wait_timeout(set, left).unwrap().0
                }
            };
        }
        *set = false;
    }
}

/// One blocking send of an `N`-byte message from a thread with `stack`
/// bytes of stack. Returns only if the sender survived.
fn swco_child<const N: usize>(stack: usize) {
    let (tx, rx) = swco_channel::spsc::bounded::<[u8; N]>(1);
    let (parked_tx, parked_rx) = std_mpsc::channel();
    // Fill the channel from a roomy thread, so the measured send blocks.
    let tx = thread::Builder::new()
        .stack_size(ROOMY)
        .spawn(move || {
            tx.try_send([0; N]).unwrap();
            tx
        })
        .unwrap()
        .join()
        .unwrap();
    let sender = thread::Builder::new()
        .stack_size(stack)
        .spawn(move || {
            hook::set_current(Some(Rc::new(Signalling {
                token: Arc::new(Token {
                    set: Mutex::new(false),
                    cond: Condvar::new(),
                }),
                parked: parked_tx,
            })));
            tx.send([1; N]).unwrap();
        })
        .unwrap();
    let receiver = thread::Builder::new()
        .stack_size(ROOMY)
        .spawn(move || {
            // Make room only once the sender is parked.
            parked_rx.recv().unwrap();
            assert_eq!(rx.recv().unwrap()[0], 0);
            assert_eq!(rx.recv().unwrap()[0], 1);
        })
        .unwrap();
    sender.join().unwrap();
    receiver.join().unwrap();
}

fn crossbeam_child<const N: usize>(stack: usize) {
    let (tx, rx) = crossbeam_channel::bounded::<[u8; N]>(1);
    let tx = thread::Builder::new()
        .stack_size(ROOMY)
        .spawn(move || {
            tx.try_send([0; N]).unwrap();
            tx
        })
        .unwrap()
        .join()
        .unwrap();
    let sender = thread::Builder::new()
        .stack_size(stack)
        .spawn(move || tx.send([1; N]).unwrap())
        .unwrap();
    let receiver = thread::Builder::new()
        .stack_size(ROOMY)
        .spawn(move || {
            thread::sleep(Duration::from_millis(50));
            assert_eq!(rx.recv().unwrap()[0], 0);
            assert_eq!(rx.recv().unwrap()[0], 1);
        })
        .unwrap();
    sender.join().unwrap();
    receiver.join().unwrap();
}

fn survives(lib: &str, size: usize, stack: usize) -> bool {
    Command::new(std::env::current_exe().unwrap())
        .args(["child", lib, &size.to_string(), &stack.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// The smallest stack size (to a page) on which a blocking send survives.
fn min_stack(lib: &str, size: usize) -> usize {
    let (mut lo, mut hi) = (0, 64 * size + 1024 * KIB);
    assert!(
        survives(lib, size, hi),
        "{lib} {size}: fails even with {hi}"
    );
    while hi - lo > PAGE {
        let mid = (lo + hi) / 2 / PAGE * PAGE;
        if survives(lib, size, mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        let size: usize = args[3].parse().unwrap();
        let stack: usize = args[4].parse().unwrap();
        match (args[2].as_str(), size) {
            ("swco", SMALL) => swco_child::<SMALL>(stack),
            ("swco", LARGE) => swco_child::<LARGE>(stack),
            ("crossbeam", SMALL) => crossbeam_child::<SMALL>(stack),
            ("crossbeam", LARGE) => crossbeam_child::<LARGE>(stack),
            other => panic!("unknown child {other:?}"),
        }
        return;
    }
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!("blocking send, {profile} build: smallest thread stack that survives");
    for lib in ["swco", "crossbeam"] {
        let small = min_stack(lib, SMALL);
        let large = min_stack(lib, LARGE);
        let per_byte = (large - small) as f64 / (LARGE - SMALL) as f64;
        println!(
            "{lib:>9}: {:>5} KiB for 256 KiB, {:>5} KiB for 1 MiB: {per_byte:.2} bytes of stack per message byte",
            small / KIB,
            large / KIB,
        );
    }
}
