//! The bridge's progress loop: MPI's initialisation and finalisation
//! around [`run`], and the loop that runs the bridge's iterations and
//! decides, when they find nothing to do, whether to spin, yield or park.
//! A bridge hosted by a coroutine is also registered here ([`hosted`]), for
//! the coroutines of its thread to run iterations themselves (`helper.rs`).

use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::time::Duration;

use mpi::traits::*;
use swco::channel::{mpmc, mpsc, spsc};

use crate::bridge::{Bridge, Cmd, Ready, Step};
use crate::error::InitError;

/// The bridge thread's body: initialises MPI, reports, serves until shutdown.
pub(crate) fn run(cmds: mpmc::Receiver<Cmd>, bell: mpsc::Receiver<()>, ready: spsc::Sender<Ready>) {
    let (universe, level) = match mpi::initialize_with_threading(mpi::Threading::Multiple) {
        Some(x) => x,
        None => {
            let _ = ready.send(Err(InitError::AlreadyInitialized));
            return;
        }
    };
    if level != mpi::Threading::Multiple {
        let _ = ready.send(Err(InitError::ThreadLevel(format!("{level:?}"))));
        drop(universe);
        return;
    }
    let b = Bridge::new(universe.world(), cmds, bell, swco::current_cpe().is_some());
    if ready.send(Ok((b.rank, b.size))).is_err() {
        return;
    }
    let hosted = b.hosted;
    let cell = Rc::new(RefCell::new(b));
    if hosted {
        HOSTED.with(|h| *h.borrow_mut() = Rc::downgrade(&cell));
    }
    let reply = serve(&cell);
    if hosted {
        HOSTED.with(|h| *h.borrow_mut() = Weak::new());
    }
    let b = Rc::into_inner(cell)
        .expect("a helper holds the bridge only inside help()")
        .into_inner();
    // Every rank is done: no channel traffic is left anywhere. The barrier
    // is polled, not waited on, so a bridge hosted by a coroutine does not
    // hold its executor's thread while the slowest rank catches up.
    let mut barrier = b.comm.immediate_barrier();
    while let Err(pending) = barrier.test() {
        barrier = pending;
        swco::yield_now();
    }
    drop(b);
    drop(universe);
    let _ = reply.send(());
}

/// Idle iterations that spin before the bridge starts yielding its core.
const SPIN: u32 = 4;
/// Idle iterations of a hosted bridge that yield only to its executor's
/// coroutines (long enough to cover a round trip), before its idle
/// iterations also yield the thread's core.
const SPIN_HOSTED: u32 = 64;
/// Idle iterations that yield before it starts parking.
const YIELD: u32 = 4096;
/// How long an idle bridge parks between polls of MPI.
const PARK: Duration = Duration::from_micros(500);

thread_local! {
    /// The bridge hosted by a coroutine of this thread's executor, for
    /// endpoints on the same thread to run its iterations themselves
    /// (`helper.rs`). Empty on every other thread.
    static HOSTED: RefCell<Weak<RefCell<Bridge>>> = const { RefCell::new(Weak::new()) };
}

fn serve(cell: &RefCell<Bridge>) -> spsc::Sender<()> {
    // Hosted by a coroutine, the bridge shares its thread with the
    // coroutines it serves: it yields after every iteration, so one it just
    // woke (a delivery, a credit) runs at once instead of after the
    // bridge's spin. A thread of its own spins first instead.
    let hosted = cell.borrow().hosted;
    let trace = std::env::var_os("SWCO_MPI_TRACE").is_some();
    let mut last_trace = std::time::Instant::now();
    loop {
        // A helper suspended inside its iteration (a yield while a closing
        // route drains) holds the bridge: let it finish first.
        let Ok(mut b) = cell.try_borrow_mut() else {
            swco::yield_now();
            continue;
        };
        if trace && last_trace.elapsed() > Duration::from_secs(1) {
            last_trace = std::time::Instant::now();
            b.dump();
        }
        match b.iterate(true) {
            Step::Done(reply) => return reply,
            Step::Busy { .. } => {
                drop(b);
                if hosted {
                    swco::yield_now();
                }
            }
            Step::Idle => {
                // A runtime shutting down waits for its live coroutines,
                // this bridge among them: finalise as a `World` drop would
                // (nobody waits for the reply), rather than keep it waiting.
                if hosted && b.shutdown.is_none() && swco::shutdown_requested() {
                    b.shutdown = Some(spsc::bounded(1).0);
                    b.look_next = true;
                    continue;
                }
                b.idle = b.idle.saturating_add(1);
                let idle = b.idle;
                if idle < SPIN && !hosted {
                    drop(b);
                    std::hint::spin_loop();
                } else if idle < SPIN + YIELD {
                    drop(b);
                    swco::yield_now();
                    if hosted && idle > SPIN_HOSTED {
                        // Yielding to the executor alone keeps the core:
                        // a thread this rank waits for (a consumer on a
                        // plain thread, another executor) may need it.
                        std::thread::yield_now();
                    }
                } else {
                    // Parked with the bridge borrowed: a helper meanwhile
                    // finds it busy and waits as it would anyway; the bell
                    // its endpoint rings ends the park.
                    let _ = b.bell.recv_timeout(PARK);
                    b.idle = SPIN; // after a park, yield a while again
                    b.look_next = true;
                }
            }
        }
    }
}

/// The bridge hosted by a coroutine of this thread's executor, if there is
/// one and it has not finalised.
pub(crate) fn hosted() -> Option<Rc<RefCell<Bridge>>> {
    HOSTED.with(|h| h.borrow().upgrade())
}

/// Whether a hosted bridge lives on this thread.
pub(crate) fn hosted_here() -> bool {
    HOSTED.with(|h| h.borrow().strong_count() > 0)
}
