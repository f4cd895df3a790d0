//! The per-rank handle: MPI initialisation, the bridge (a thread, or a
//! coroutine on an executor), endpoint creation, finalisation.
//!
//! Invariants:
//! * MPI is initialised, used and finalised by the bridge only; a
//!   [`World`] talks to it through a swco command channel and its bell, so
//!   `World` is `Send + Sync` and may be shared with coroutines.
//! * Finalising (explicit or on drop) happens once: it asks the bridge to
//!   shut down, waits for its reply (after every rank's in-flight messages
//!   are delivered, see `bridge.rs`), then joins the bridge.

use std::any::{Any, TypeId};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::Arc;

use mpi::topology::SimpleCommunicator;
use swco::channel::{mpmc, mpsc, spsc};

use crate::bridge::{Cmd, Ready};
use crate::endpoint::{RemoteReceiver, RemoteSender};
use crate::error::InitError;
use crate::inbound::TypedIn;
use crate::outbound::TypedOut;
use crate::progress;
use crate::shared::{Bell, InShared, InStats, OutShared, Run, QUEUE_CAP, TOKEN_CAP};
use crate::wire::{Payload, MAX_TAG};

/// Which ranks feed a [`RemoteReceiver`]. The receiver disconnects once
/// every rank of the set has closed (dropped all its senders for the
/// channel, or finalised); a rank of the set with nothing to send should
/// still make and drop a sender, or it counts as open until it finalises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// One rank.
    Rank(i32),
    /// These ranks.
    Ranks(Vec<i32>),
    /// Every rank, this one included.
    All,
    /// Every rank but this one.
    Others,
}

impl From<i32> for Source {
    fn from(r: i32) -> Source {
        Source::Rank(r)
    }
}

/// This rank's view of the MPI world: make remote endpoints here.
///
/// Dropping it (or [`World::finalize`]) closes this rank's senders,
/// waits until every rank's in-flight messages are delivered and every
/// rank has finalised, and finalises MPI.
pub struct World {
    rank: i32,
    size: i32,
    cmds: mpmc::Sender<Cmd>,
    bell: Bell,
    host: Option<Host>,
}

/// Where the bridge runs.
enum Host {
    Thread(std::thread::JoinHandle<()>),
    Coroutine(swco::JoinHandle<()>),
}

impl Host {
    fn join(self) {
        match self {
            Host::Thread(t) => {
                let _ = t.join();
            }
            Host::Coroutine(c) => {
                let _ = c.join();
            }
        }
    }
}

/// The stack a bridge coroutine needs at least: `MPI_Init` runs on it.
pub const MIN_BRIDGE_STACK: usize = 256 * 1024;

impl fmt::Debug for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("World")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

impl World {
    /// Initialises MPI with thread level `Multiple` on a new bridge thread.
    /// An error (not a panic) if MPI is initialised already or grants a
    /// lower level.
    ///
    /// # Errors
    /// [`InitError::AlreadyInitialized`] if MPI was initialised already,
    /// [`InitError::ThreadLevel`] if it grants less than `Multiple`,
    /// [`InitError::Bridge`] if the bridge thread could not start.
    pub fn init() -> Result<World, InitError> {
        World::start(|cmd_rx, bell_rx, ready_tx| {
            std::thread::Builder::new()
                .name("swco-mpi-bridge".into())
                .spawn(move || progress::run(cmd_rx, bell_rx, ready_tx))
                .map(Host::Thread)
                .map_err(|e| InitError::Bridge(e.to_string()))
        })
    }

    /// Initialises MPI as [`World::init`] does, but runs the bridge as a
    /// coroutine on executor `cpe` of `rt` instead of a thread of its own.
    ///
    /// That executor's thread then carries MPI and the coroutines placed
    /// there: a coroutine on `cpe` that sends and waits for an answer hands
    /// the bridge its message without waking another thread, and is woken
    /// by it the same way, which is what a cross-rank round trip costs
    /// most. Use it when a rank has few cores (one rank per core); put the
    /// coroutines that talk across ranks on `cpe` (`rt.spawn_on(cpe, ..)`).
    ///
    /// While it waits for MPI traffic the bridge yields to the executor's
    /// other coroutines, then sleeps on the executor's timer, so the
    /// executor keeps running them and parks when all is idle. Nothing on
    /// `cpe` may block its thread outside swco (a `std::thread::sleep`,
    /// a blocking `std::sync` call): the bridge would stop with it.
    /// [`World::run_raw`] jobs run on that thread too.
    ///
    /// Drop (or [`finalize`](World::finalize)) the `World` before shutting
    /// `rt` down. A shutdown that comes first finalises MPI as the drop
    /// would (the bridge sees [`swco::shutdown_requested`]), and the
    /// `World`'s endpoints stop working.
    ///
    /// # Errors
    /// As [`World::init`]; [`InitError::Bridge`] if `cpe` is not an
    /// executor of `rt`, `rt` is shut down, or its stacks are smaller than
    /// [`MIN_BRIDGE_STACK`].
    ///
    /// ```no_run
    /// let rt = swco::Runtime::builder().executors(1).stack_size(swco_mpi::MIN_BRIDGE_STACK).build()?;
    /// let world = swco_mpi::World::init_on(&rt, 0)?;
    /// let peer = 1 - world.rank();
    /// let (tx, rx) = (world.sender::<u64>(peer, 1), world.receiver::<u64>(peer, 1, 16));
    /// let rank = world.rank();
    /// rt.spawn_on(0, move || {
    ///     if rank == 0 {
    ///         tx.send(41).unwrap();
    ///         assert_eq!(rx.recv(), Ok(42));
    ///     } else {
    ///         let v = rx.recv().unwrap();
    ///         tx.send(v + 1).unwrap();
    ///     }
    /// })?
    /// .join()
    /// .unwrap();
    /// drop(world); // before rt shuts down
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn init_on(rt: &swco::Runtime, cpe: usize) -> Result<World, InitError> {
        if rt.stack_size() < MIN_BRIDGE_STACK {
            return Err(InitError::Bridge(format!(
                "the runtime's stacks are {} bytes; a bridge coroutine needs {MIN_BRIDGE_STACK}",
                rt.stack_size()
            )));
        }
        World::start(|cmd_rx, bell_rx, ready_tx| {
            rt.spawn_on(cpe, move || progress::run(cmd_rx, bell_rx, ready_tx))
                .map(Host::Coroutine)
                .map_err(|e| InitError::Bridge(e.to_string()))
        })
    }

    /// Starts a bridge with `launch` and waits for it to report.
    fn start(
        launch: impl FnOnce(
            mpmc::Receiver<Cmd>,
            mpsc::Receiver<()>,
            spsc::Sender<Ready>,
        ) -> Result<Host, InitError>,
    ) -> Result<World, InitError> {
        let (bell_tx, bell_rx) = mpsc::bounded::<()>(1);
        let (cmd_tx, cmd_rx) = mpmc::bounded::<Cmd>(64);
        let (ready_tx, ready_rx) = spsc::bounded::<Ready>(1);
        let host = launch(cmd_rx, bell_rx, ready_tx)?;
        match ready_rx.recv() {
            Ok(Ok((rank, size))) => Ok(World {
                rank,
                size,
                cmds: cmd_tx,
                bell: Bell(bell_tx),
                host: Some(host),
            }),
            Ok(Err(e)) => {
                host.join();
                Err(e)
            }
            Err(_) => {
                host.join();
                Err(InitError::Bridge("exited before reporting".into()))
            }
        }
    }

    /// This rank.
    #[must_use]
    pub fn rank(&self) -> i32 {
        self.rank
    }

    /// The number of ranks.
    #[must_use]
    pub fn size(&self) -> i32 {
        self.size
    }

    fn command(&self, cmd: Cmd) {
        self.cmds
            .send(cmd)
            .unwrap_or_else(|_| panic!("the swco-mpi bridge is gone"));
        self.bell.ring();
    }

    /// A sender to the receiver of `tag` on rank `dest` (may be this rank).
    /// All senders of one route on this rank share its credit; clone it
    /// freely.
    ///
    /// # Panics
    /// If `dest` is not a rank, `tag > MAX_TAG`, or this rank already has
    /// a route to (`dest`, `tag`) carrying another type.
    #[must_use]
    pub fn sender<T: Payload>(&self, dest: i32, tag: u16) -> RemoteSender<T> {
        assert!(
            (0..self.size).contains(&dest),
            "rank {dest} is not in the world"
        );
        assert!(tag <= MAX_TAG, "tag {tag} above MAX_TAG");
        let (tok_tx, tok_rx) = mpmc::bounded::<usize>(TOKEN_CAP);
        let (q_tx, q_rx) = mpsc::bounded::<Run<T>>(QUEUE_CAP);
        let shared = Arc::new(OutShared {
            tokens: tok_rx,
            spare: AtomicUsize::new(0),
            queue: q_tx,
            handles: AtomicUsize::new(1),
            hungry: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
            disconnected: AtomicBool::new(false),
            enqueuing: AtomicUsize::new(0),
            bell: self.bell.clone(),
            dest,
            tag,
        });
        let src = Box::new(TypedOut {
            shared: shared.clone(),
            queue: q_rx,
            tokens: Some(tok_tx),
            scratch: Vec::new(),
        });
        let (reply_tx, reply_rx) = spsc::bounded(1);
        self.command(Cmd::OpenSender {
            dest,
            tag,
            type_id: TypeId::of::<T>(),
            any: shared.clone() as Arc<dyn Any + Send + Sync>,
            src,
            reply: reply_tx,
        });
        match reply_rx.recv() {
            Ok(Ok(any)) => RemoteSender {
                shared: any
                    .downcast::<OutShared<T>>()
                    .expect("type checked by the bridge"),
            },
            Ok(Err(e)) => panic!("{e}"),
            Err(_) => panic!("the swco-mpi bridge is gone"),
        }
    }

    /// The receiver of `tag` on this rank, holding up to `capacity`
    /// messages in flight (credit granted plus delivered and not yet
    /// taken), fed by the senders of `src`: a rank (`1`), or a [`Source`]
    /// such as `Source::Others` for MPSC across ranks.
    ///
    /// # Panics
    /// If `capacity` is 0, `tag > MAX_TAG`, a source is not a rank, or
    /// this rank already made a receiver for `tag` (one per tag per world).
    pub fn receiver<T: Payload>(
        &self,
        src: impl Into<Source>,
        tag: u16,
        capacity: usize,
    ) -> RemoteReceiver<T> {
        assert!(capacity > 0, "a remote receiver needs capacity >= 1");
        assert!(tag <= MAX_TAG, "tag {tag} above MAX_TAG");
        let sources: Vec<i32> = match src.into() {
            Source::Rank(r) => vec![r],
            Source::Ranks(rs) => rs,
            Source::All => (0..self.size).collect(),
            Source::Others => (0..self.size).filter(|&r| r != self.rank).collect(),
        };
        for &r in &sources {
            assert!((0..self.size).contains(&r), "rank {r} is not in the world");
        }
        let (tx, rx) = mpsc::bounded::<Run<T>>(capacity);
        let shared = Arc::new(InShared {
            consumed: AtomicUsize::new(0),
            delivered: AtomicU64::new(0),
            dropped: AtomicBool::new(false),
            bell: self.bell.clone(),
            stats: InStats::default(),
            capacity,
            tag,
        });
        let (reply_tx, reply_rx) = spsc::bounded(1);
        self.command(Cmd::OpenReceiver {
            tag,
            sources,
            shared: shared.clone(),
            sink: Box::new(TypedIn {
                tx: Some(tx),
                shared: shared.clone(),
                posted: None,
            }),
            reply: reply_tx,
        });
        match reply_rx.recv() {
            Ok(Ok(())) => RemoteReceiver {
                rx,
                shared,
                pending: RefCell::new(Vec::new().into_iter()),
                taken: Cell::new(0),
            },
            Ok(Err(e)) => panic!("{e}"),
            Err(_) => panic!("the swco-mpi bridge is gone"),
        }
    }

    /// Shorthand for `receiver(Source::All, tag, capacity)`: fed by every
    /// rank, this one included.
    #[must_use]
    pub fn receiver_any<T: Payload>(&self, tag: u16, capacity: usize) -> RemoteReceiver<T> {
        self.receiver(Source::All, tag, capacity)
    }

    /// Runs `job` on the bridge (its thread, or its executor's) with a
    /// duplicate of the world communicator, for raw rsmpi work (baselines,
    /// barriers). The bridge serves nothing else meanwhile, so call it
    /// where no channel traffic is under way, collectively if `job` is
    /// collective.
    ///
    /// # Panics
    /// If `job` panics (on the bridge), or the bridge is gone.
    pub fn run_raw<R: Send + 'static>(
        &self,
        job: impl FnOnce(&SimpleCommunicator) -> R + Send + 'static,
    ) -> R {
        let (out_tx, out_rx) = spsc::bounded::<R>(1);
        let (reply_tx, reply_rx) = spsc::bounded(1);
        self.command(Cmd::Raw {
            job: Box::new(move |comm| {
                let _ = out_tx.send(job(comm));
            }),
            reply: reply_tx,
        });
        let _ = reply_rx.recv();
        out_rx.recv().expect("the raw job panicked")
    }

    /// A barrier across all ranks, through [`World::run_raw`].
    pub fn barrier(&self) {
        self.run_raw(mpi::collective::CommunicatorCollectives::barrier);
    }

    /// Closes this rank's senders, waits until every rank's in-flight
    /// messages are delivered and every rank finalises, then finalises MPI.
    /// Dropping the `World` does the same.
    pub fn finalize(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let Some(host) = self.host.take() else {
            return;
        };
        let (reply_tx, reply_rx) = spsc::bounded(1);
        if self.cmds.send(Cmd::Shutdown { reply: reply_tx }).is_ok() {
            self.bell.ring();
            let _ = reply_rx.recv();
        }
        host.join();
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown();
    }
}
