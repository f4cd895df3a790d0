//! The bridge: the one agent per rank that makes MPI calls. It runs on a
//! thread of its own ([`World::init`](crate::World::init)), or as a
//! coroutine on an executor of the application's runtime
//! ([`World::init_on`](crate::World::init_on)), where the executor's thread
//! carries both the coroutines and MPI, so a round trip needs no hand-off
//! between threads. The code is the same: it waits only through swco
//! (`swco::yield_now`, a channel's `recv_timeout`), which suspends a
//! coroutine and parks or yields a thread. MPI is initialised and
//! finalised by the bridge, so on one thread either way (a coroutine never
//! moves).
//!
//! Endpoints hand it work through swco channels (commands, per-route
//! queues) and atomics, and ring its bell; it never blocks on an MPI call
//! (every send is `MPI_Isend`; control frames and typed data arrive into
//! receives it keeps posted, `posted.rs`, and byte messages are found with
//! `MPI_Improbe` on their routes' tags only), so it keeps receiving while
//! its own sends are pending.
//!
//! Hosted by a coroutine, the bridge's state is shared with the other
//! coroutines of its executor, and they do part of its work themselves:
//!
//! * one that waits for a remote message polls MPI instead of suspending
//!   ([`Helper`]): a whole bridge iteration first, then tests of its own
//!   route's posted receive, a whole iteration again every 16 polls; a
//!   message it finds goes straight to it, not through its channel;
//! * the first send after such a wait (taken for the answer) goes out with
//!   its own `MPI_Isend` ([`send_now`]), once per route per poll, so a
//!   stream is still batched by the bridge's iterations.
//!
//! Every iteration or poll, whoever runs it, holds the state's `RefCell`
//! borrow throughout, so they never interleave; the bridge's own
//! iterations alone run raw jobs and finalise.
//!
//! # Protocol (per channel = receiver rank R, user tag t, capacity C)
//!
//! * **Credit.** R's route starts with `free = C`. A sender on rank S that
//!   finds no credit marks its route hungry; S's bridge sends DEMAND(t) (at
//!   most one outstanding). R keeps a list of demanding ranks and hands all
//!   its free credit out among them (`max(1, free / demanders)` each) as
//!   GRANT(t, n); S's bridge banks grants and hands its bank out as one
//!   amount in the route's token channel; a sender keeps what it needs (one
//!   per message) and leaves the rest in the route's `spare` for the
//!   others (endpoint.rs states how no credit is lost or waited past).
//!   Credit comes back to `free` as R's consumer takes messages. Invariant
//!   on R: `free + Σ outstanding[S] + buffered = C`, so the local buffer (a
//!   swco channel of capacity C, holding runs of at least one message)
//!   never overflows and the bridge never blocks on it.
//! * **Refill.** A receiver with a single source rank S grants its free
//!   credit to S unasked once `free >= max(1, C / 2)`, if S has demanded
//!   before (so S's route is open and banks the grant) and has not closed:
//!   a stream or a ping-pong then does not stop for a DEMAND/GRANT round
//!   trip every C messages. With one source nothing is shared or recalled;
//!   a grant that reaches a route already closed is dropped there and
//!   counted back in with S's outstanding credit when S's CLOSE completes.
//! * **Recall.** Credit held idle on one rank must not starve another: when
//!   a rank demands and `free == 0`, R sends RECALL(t) to every other rank
//!   holding credit; it answers RETURN(t, n) with its unused credit (its
//!   bank, the grants in the token channel and `spare`).
//! * **Data.** Each bridge iteration, S drains each route's queue (every
//!   message in it holds a credit) into one batch: one `MPI_Isend` on tag
//!   `1 + t`, or several of at most 4 096 messages for a typed payload (the
//!   receiver's posted buffer). A direct send (`send_now`) is a batch of
//!   one, made only while the sender has nothing queued. Per-sender order
//!   holds: a sender's messages enter its route's queue (or go out
//!   directly, the queue empty) in order, and MPI keeps order per (source,
//!   tag).
//! * **Close.** When the last sender of route (R, t) on S is dropped, or S
//!   finalises, S sends its last batch and CLOSE(t, batches sent). R treats
//!   S as closed once it has received that many batches (data and control
//!   travel on different tags and may overtake each other), and reclaims
//!   S's unused credit. When every source rank of the receiver is closed,
//!   R drops the local channel's sender: the consumer drains, then gets
//!   `RecvError`. A route that closed stays closed: a later sender for it
//!   is born disconnected.
//! * **Gone.** When R's receiver is dropped, R sends GONE(t) to every source
//!   not yet closed and answers later DEMANDs with GONE; S then disconnects
//!   the route (blocked senders wake and get their value back). R keeps
//!   receiving and discarding until every source has closed.
//! * **Fin.** Finalising, a rank force-closes all its routes (CLOSE each),
//!   then sends FIN to every other rank: every route it never opened counts
//!   as closed with 0 batches. It waits until its receivers' routes are
//!   complete and FIN came from every other rank, then enters a barrier and
//!   finalises MPI. Control frames from one rank arrive in order, so a FIN
//!   never overtakes that rank's CLOSEs. A closing route is drained until
//!   no sender is mid-push (`OutSource::quiet`), so a send that returned
//!   `Ok` is never left in a queue nobody reads.

use std::any::{Any, TypeId};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mpi::point_to_point::{Message, Status};
use mpi::request::{Request, StaticScope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use swco::channel::{mpmc, mpsc, spsc};

use crate::endpoint::{InShared, OutShared, Run};
use crate::posted::{data_cap, Posted, CTRL_CAP, DATA_CAP};
use crate::wire::{data_tag, Kind, Payload, CTRL_TAG, FRAME};

/// Adds `n` to a counter that only the bridge's thread writes: a plain load
/// and store, not a locked read-modify-write. Readers elsewhere see a
/// figure, not a hand-off (Relaxed).
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

/// Raises a high-water mark that only the bridge's thread writes to `v`.
fn raise(mark: &AtomicUsize, v: usize) {
    if v > mark.load(Ordering::Relaxed) {
        mark.store(v, Ordering::Relaxed);
    }
}

/// Hashes the small integer keys of the route maps (a user tag, or a rank
/// and a tag) with one multiply, instead of SipHash: the bridge looks a
/// route up on every direct send and every poll of a waiter, and its keys
/// come from the program, not from an adversary.
type RouteHash = std::hash::BuildHasherDefault<RouteHasher>;

#[derive(Default)]
struct RouteHasher(u64);

impl std::hash::Hasher for RouteHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u16(&mut self, v: u16) {
        self.write_u64(u64::from(v));
    }
    fn write_i32(&mut self, v: i32) {
        self.write_u64(u64::from(v as u32));
    }
    fn write_u64(&mut self, v: u64) {
        // Fibonacci hashing: mixes the key into the high bits, which the
        // table uses (hashbrown takes its control bits from the top).
        self.0 = (self.0.rotate_left(16) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Work a thread or coroutine hands to the bridge.
pub(crate) enum Cmd {
    OpenSender {
        dest: i32,
        tag: u16,
        type_id: TypeId,
        any: Arc<dyn Any + Send + Sync>,
        src: Box<dyn OutSource>,
        reply: spsc::Sender<Result<Arc<dyn Any + Send + Sync>, String>>,
    },
    OpenReceiver {
        tag: u16,
        sources: Vec<i32>,
        shared: Arc<InShared>,
        sink: Box<dyn Sink>,
        reply: spsc::Sender<Result<(), String>>,
    },
    Raw {
        job: Box<dyn FnOnce(&SimpleCommunicator) + Send>,
        reply: spsc::Sender<()>,
    },
    Shutdown {
        reply: spsc::Sender<()>,
    },
}

// --- typed halves of routes ------------------------------------------------

/// An `MPI_Isend` in flight, owning its buffer.
pub(crate) trait Pending {
    /// Tests for completion; true (and the buffer freed) once complete.
    fn done(&mut self) -> bool;
}

struct PendingSend<E: Equivalence + 'static> {
    req: Option<Request<'static, [E]>>,
    /// The buffer MPI reads, as a `Vec`'s raw parts (pointer, length,
    /// capacity): not a live `Vec`, which nothing may touch while MPI reads
    /// it; it becomes one again once the request has completed.
    buf: (*mut E, usize, usize),
}

impl<E: Equivalence + 'static> PendingSend<E> {
    /// Starts the send and queues it on `pending`, unless it completed at
    /// once (a small message goes out eagerly): then nothing is allocated
    /// or tested again, and the buffer comes back for reuse.
    #[must_use]
    fn start(
        comm: &SimpleCommunicator,
        dest: i32,
        tag: i32,
        data: Vec<E>,
        pending: &mut Vec<Box<dyn Pending>>,
    ) -> Option<Vec<E>> {
        let mut data = std::mem::ManuallyDrop::new(data);
        let buf = (data.as_mut_ptr(), data.len(), data.capacity());
        // SAFETY: the slice is the `Vec`'s initialised elements, valid and
        // aligned; the `Vec` is not used again (it is `ManuallyDrop`) until
        // `reclaim` rebuilds it, after the request that reads the slice has
        // completed, and nothing writes to it meanwhile.
        let view: &'static [E] = unsafe { std::slice::from_raw_parts(buf.0, buf.1) };
        let req = comm
            .process_at_rank(dest)
            .immediate_send_with_tag(StaticScope, view, tag);
        match req.test() {
            // SAFETY: completed, so MPI no longer reads the buffer; `buf`
            // holds the raw parts of the `Vec` given up above, rebuilt once.
            Ok(_) => Some(unsafe { Self::reclaim(buf) }),
            Err(req) => {
                pending.push(Box::new(PendingSend {
                    req: Some(req),
                    buf,
                }));
                None
            }
        }
    }

    /// Starts `data` as one send, or as several of at most `cap` elements
    /// in order when it is longer (the receiver's posted buffer holds
    /// `cap`). Returns how many sends it made and, if the last completed
    /// at once, its buffer (see [`start`](PendingSend::start)).
    fn start_cut(
        comm: &SimpleCommunicator,
        dest: i32,
        tag: i32,
        mut data: Vec<E>,
        cap: usize,
        pending: &mut Vec<Box<dyn Pending>>,
    ) -> (u64, Option<Vec<E>>) {
        let mut sent = 1;
        while data.len() > cap {
            let head: Vec<E> = data.drain(..cap).collect();
            let _ = Self::start(comm, dest, tag, head, pending);
            sent += 1;
        }
        (sent, Self::start(comm, dest, tag, data, pending))
    }

    /// The `Vec` whose raw parts are `buf`.
    ///
    /// # Safety
    ///
    /// `buf` is the raw parts of a `Vec<E>` given up with `ManuallyDrop`,
    /// no request reads it any more, and it is rebuilt only once.
    unsafe fn reclaim(buf: (*mut E, usize, usize)) -> Vec<E> {
        // SAFETY: as the caller promises.
        unsafe { Vec::from_raw_parts(buf.0, buf.1, buf.2) }
    }
}

impl<E: Equivalence + 'static> Pending for PendingSend<E> {
    fn done(&mut self) -> bool {
        match self.req.take() {
            None => true,
            Some(req) => match req.test() {
                Ok(_) => {
                    // SAFETY: the request completed; `req` is `None` from
                    // now on, so neither `done` nor `drop` rebuilds it again.
                    drop(unsafe { Self::reclaim(self.buf) });
                    true
                }
                Err(req) => {
                    self.req = Some(req);
                    false
                }
            },
        }
    }
}

impl<E: Equivalence + 'static> Drop for PendingSend<E> {
    fn drop(&mut self) {
        if let Some(req) = self.req.take() {
            req.wait();
            // SAFETY: the request completed; `req` was the last one left.
            drop(unsafe { Self::reclaim(self.buf) });
        }
    }
}

/// The typed half of an outgoing route, held by the bridge.
pub(crate) trait OutSource: Send {
    fn try_add_handle(&self) -> bool;
    fn handles(&self) -> usize;
    /// True if a sender wanted credit since the last call, or one is
    /// waiting and no token is left.
    fn take_hungry(&self) -> bool;
    /// Fails the route's senders: sets the flag, takes back idle credit,
    /// drops the token sender (waking blocked senders).
    fn disconnect(&mut self);
    /// After [`disconnect`](OutSource::disconnect): no sender is still
    /// between its look at the flag and the end of its queue push, so a
    /// flush after this sees every message a `send` returned `Ok` for.
    fn quiet(&self) -> bool;
    /// Hands `bank` out as one grant in the token channel (with `spare`,
    /// when a sender waits on an empty channel).
    fn push_tokens(&mut self, bank: &mut usize);
    /// Takes idle credit back: the grants in the token channel and `spare`.
    fn take_tokens(&mut self) -> usize;
    /// The typed route itself, for a direct send (`send_now`).
    fn as_any_mut(&mut self) -> &mut dyn Any;
    /// Sends what is queued, as one batch or (a long posted one) several
    /// in order, or discards it. `None` if nothing was queued, else the
    /// number of MPI messages sent (0 when discarding).
    fn flush(
        &mut self,
        comm: &SimpleCommunicator,
        dest: i32,
        tag: u16,
        discard: bool,
        pending: &mut Vec<Box<dyn Pending>>,
    ) -> Option<u64>;
}

pub(crate) struct TypedOut<T> {
    pub(crate) shared: Arc<OutShared<T>>,
    pub(crate) queue: mpsc::Receiver<Run<T>>,
    pub(crate) tokens: Option<mpmc::Sender<usize>>,
    /// An empty buffer for the next batch (see `flush`).
    pub(crate) scratch: Vec<T>,
}

/// Most messages gathered into one batch (then cut to `DATA_CAP` per MPI
/// message for a posted payload).
const MAX_BATCH: usize = DATA_CAP;
/// The largest buffer (in messages) a route keeps for its next batch: a
/// big run's buffer is let go rather than held for ever.
const MAX_SCRATCH: usize = 1024;

impl<T: Payload> OutSource for TypedOut<T> {
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn try_add_handle(&self) -> bool {
        self.shared.try_add_handle()
    }
    fn handles(&self) -> usize {
        self.shared.handles.load(Ordering::Acquire)
    }
    fn take_hungry(&self) -> bool {
        let s = &self.shared;
        let edge = s.hungry.load(Ordering::Relaxed) && s.hungry.swap(false, Ordering::AcqRel);
        edge || (s.waiting.load(Ordering::Acquire) > 0 && s.tokens.is_empty())
    }
    fn disconnect(&mut self) {
        // SeqCst: the bridge's half of the Dekker pair with a sender's
        // `enqueuing` count-in (see endpoint.rs); `quiet` loads the count.
        self.shared.disconnected.store(true, Ordering::SeqCst);
        self.take_tokens();
        self.tokens = None;
    }
    fn quiet(&self) -> bool {
        // SeqCst: as in `disconnect`; it also acquires the pushes of the
        // senders that counted themselves out.
        self.shared.enqueuing.load(Ordering::SeqCst) == 0
    }
    fn push_tokens(&mut self, bank: &mut usize) {
        let Some(tx) = &self.tokens else { return };
        let s = &self.shared;
        // A sender waits while `spare` holds credit only if a deposit raced
        // its second look, and the depositor rang us: hand `spare` out
        // again as a grant (see endpoint.rs). SeqCst: as in `deposit`.
        if s.waiting.load(Ordering::SeqCst) > 0 && s.tokens.is_empty() {
            *bank += s.spare.swap(0, Ordering::SeqCst);
        }
        // The whole bank as one grant: the first sender keeps what it needs
        // and leaves the rest in `spare` for the others.
        if *bank > 0 && tx.try_send(*bank).is_ok() {
            *bank = 0;
        }
    }
    fn take_tokens(&mut self) -> usize {
        let mut grants = Vec::new();
        let _ = self.shared.tokens.try_recv_batch(&mut grants, usize::MAX);
        // SeqCst: as in `deposit`.
        grants.iter().sum::<usize>() + self.shared.spare.swap(0, Ordering::SeqCst)
    }
    fn flush(
        &mut self,
        comm: &SimpleCommunicator,
        dest: i32,
        tag: u16,
        discard: bool,
        pending: &mut Vec<Box<dyn Pending>>,
    ) -> Option<u64> {
        let first = self.queue.try_recv().ok()?;
        // Whole runs, until the batch holds MAX_BATCH messages or the queue
        // is empty, in the buffer the last send that completed at once gave
        // back.
        let mut batch = std::mem::take(&mut self.scratch);
        first.append_to(&mut batch);
        while batch.len() < MAX_BATCH {
            match self.queue.try_recv() {
                Ok(run) => run.append_to(&mut batch),
                Err(_) => break,
            }
        }
        if discard {
            batch.clear();
            self.keep_scratch(batch);
            return Some(0);
        }
        Some(self.send(comm, dest, tag, batch, pending))
    }
}

impl<T: Payload> TypedOut<T> {
    /// Sends `batch` (non-empty, every message holding a credit) on the
    /// route's data tag: one `MPI_Isend`, or several in order when a
    /// posted payload's batch is longer than the receiver's posted buffer.
    /// Keeps the buffer of a send that completed at once for the next
    /// batch. Returns the number of MPI messages sent.
    fn send(
        &mut self,
        comm: &SimpleCommunicator,
        dest: i32,
        tag: u16,
        batch: Vec<T>,
        pending: &mut Vec<Box<dyn Pending>>,
    ) -> u64 {
        // A posted payload is one wire element per message, so cutting the
        // wire cuts the batch at `data_cap` messages.
        let cap = if T::POSTED {
            data_cap::<T::Wire>()
        } else {
            usize::MAX
        };
        let wire = T::encode(batch);
        let (sent, back) = PendingSend::start_cut(comm, dest, data_tag(tag), wire, cap, pending);
        if let Some(back) = back {
            self.keep_scratch(T::recycle(back));
        }
        sent
    }

    /// Keeps `buf` (empty) as the buffer for the next batch, unless it is
    /// too big to hold on to.
    fn keep_scratch(&mut self, buf: Vec<T>) {
        if buf.capacity() <= MAX_SCRATCH {
            self.scratch = buf;
        }
    }
}

/// The typed half of an incoming route, held by the bridge.
pub(crate) trait Sink: Send {
    /// Posts the route's receive on `mpi_tag` if its payload is posted
    /// (typed, see `posted.rs`); false if its batches are probed instead
    /// (byte messages).
    fn post(&mut self, comm: &SimpleCommunicator, mpi_tag: i32) -> bool;
    /// Tests the posted receive: if a batch arrived, delivers (or
    /// discards) its messages and returns its source and how many it held.
    /// Delivered into `waiter` (an `Option<Run<T>>` of the route's type,
    /// held by the receiver polling for it) if given, else into the
    /// receiver's channel.
    fn poll(&mut self, waiter: Option<&mut dyn Any>) -> Option<(i32, usize)>;
    /// Receives a probed data batch, delivering (or discarding) each
    /// message; returns how many it held.
    fn receive(&mut self, msg: Message, status: Status) -> usize;
    /// Drops the local channel's sender: the consumer drains, then sees
    /// disconnection.
    fn close(&mut self);
}

pub(crate) struct TypedIn<T: Payload> {
    pub(crate) tx: Option<mpsc::Sender<Run<T>>>,
    pub(crate) shared: Arc<InShared>,
    pub(crate) posted: Option<Posted<T::Wire>>,
}

impl<T: Payload> TypedIn<T> {
    /// Hands a batch of `n` messages to the consumer (or drops it if the
    /// receiver is gone): into `waiter`, the slot of the receiver polling
    /// for it, if given, else into its channel.
    fn deliver(&self, run: Run<T>, n: usize, waiter: Option<&mut Option<Run<T>>>) {
        let Some(tx) = &self.tx else {
            return;
        };
        // Counted before the hand-over, so `len()` never reads below what
        // the receiver took. Relaxed: a figure, not a hand-off.
        bump(&self.shared.delivered, n as u64);
        match waiter {
            // Straight to the receiver polling for it, whose channel is
            // empty (it looked before polling, and only the bridge, on this
            // thread, pushes into it): no push, no pop.
            Some(slot) => *slot = Some(run),
            None => {
                // Credit guarantees room (a run holds at least one message,
                // each with credit). The whole MPI batch is one element.
                let r = tx.try_send(run);
                debug_assert!(!matches!(r, Err(ref e) if e.is_full()), "credit overrun");
            }
        }
    }
}

impl<T: Payload> Sink for TypedIn<T> {
    fn post(&mut self, comm: &SimpleCommunicator, mpi_tag: i32) -> bool {
        if T::POSTED {
            self.posted = Some(Posted::new(comm, mpi_tag, data_cap::<T::Wire>()));
        }
        T::POSTED
    }
    fn poll(&mut self, waiter: Option<&mut dyn Any>) -> Option<(i32, usize)> {
        let posted = self.posted.as_mut()?;
        let (src, run, n) = posted.test(|src, mut arrived| {
            let n = arrived.len();
            let run = match n {
                0 => None,
                1 => arrived.next().map(|m| Run::One(T::decode_one(m))),
                _ => Some(Run::Many(T::decode(arrived.into_vec()))),
            };
            (src, run, n)
        })?;
        if let Some(run) = run {
            let slot = waiter.and_then(|w| w.downcast_mut::<Option<Run<T>>>());
            self.deliver(run, n, slot);
        }
        Some((src, n))
    }
    fn receive(&mut self, msg: Message, status: Status) -> usize {
        let (wire, _) = (msg, status).matched_receive_vec::<T::Wire>();
        let batch = T::decode(wire);
        let n = batch.len();
        if n > 0 {
            self.deliver(Run::of(batch), n, None);
        }
        n
    }
    fn close(&mut self) {
        self.tx = None;
    }
}

// --- bridge-side route state -------------------------------------------------

struct OutRoute {
    src: Box<dyn OutSource>,
    /// The bridge iteration (`Bridge::iterations`) in which a sender last
    /// sent on this route directly (`send_now`).
    sent_direct: u64,
    any: Arc<dyn Any + Send + Sync>,
    type_id: TypeId,
    bank: usize,
    demanding: bool,
    gone: bool,
    batches: u64,
}

#[derive(Default)]
struct SrcState {
    outstanding: usize,
    demanding: bool,
    /// Has demanded at least once: its route is open on its rank, so a
    /// grant it did not ask for is banked, not dropped.
    asked: bool,
    recalled: bool,
    close_batches: Option<u64>,
    batches: u64,
    finished: bool,
}

struct InRoute {
    shared: Arc<InShared>,
    sink: Box<dyn Sink>,
    /// Its batches are found by probing its tag (byte messages), not by a
    /// posted receive.
    probed: bool,
    free: usize,
    sources: BTreeMap<i32, SrcState>,
    dead: bool,
    delivered: u64,
    consumed: u64,
}

impl InRoute {
    /// Counts in a data batch of `n` messages from `src`.
    fn arrived(&mut self, src: i32, n: usize) {
        let st = self.sources.entry(src).or_default();
        st.batches += 1;
        st.outstanding = st.outstanding.saturating_sub(n);
        let stats = &self.shared.stats;
        bump(&stats.received, n as u64);
        bump(&stats.batches, 1);
        if !self.dead {
            self.delivered += n as u64;
            let buffered = (self.delivered - self.consumed) as usize;
            raise(&stats.max_buffered, buffered);
        }
    }
}

#[derive(Default)]
struct Pre {
    demanders: HashSet<i32>,
    closes: HashMap<i32, u64>,
}

struct Bridge {
    comm: SimpleCommunicator,
    raw: SimpleCommunicator,
    rank: i32,
    size: i32,
    cmds: mpmc::Receiver<Cmd>,
    bell: mpsc::Receiver<()>,
    outs: HashMap<(i32, u16), OutRoute, RouteHash>,
    closed_outs: HashSet<(i32, u16)>,
    ins: HashMap<u16, InRoute, RouteHash>,
    /// Run by a coroutine (`World::init_on`), sharing its thread with the
    /// coroutines it serves.
    hosted: bool,
    /// Tags of receivers whose every source closed: out of `ins`, so the
    /// bridge's loop does not walk them, and kept so a tag is not reused.
    retired: HashSet<u16>,
    pre: HashMap<u16, Pre>,
    fins: Vec<bool>,
    ctrl: Vec<Vec<u64>>,
    pending: Vec<Box<dyn Pending>>,
    shutdown: Option<spsc::Sender<()>>,
    fin_sent: bool,
    raw_jobs: Vec<RawJob>,
    /// The last iteration did work (or is the first): the next one looks
    /// at all local work, bell or not.
    look_next: bool,
    /// Idle iterations in a row, the bridge's own or its helpers'.
    idle: u32,
    /// The receive posted for control batches.
    ctrl_in: Posted<u64>,
    /// Iterations run, by the bridge or its helpers, and helpers' polls of
    /// a single route.
    iterations: u64,
    /// How many routes of `ins` are probed rather than posted: while there
    /// are none, nothing calls `MPI_Improbe`. Each probe asks for one such
    /// route's tag, never for a posted one (see `incoming`).
    probed: usize,
}

type RawJob = (
    Box<dyn FnOnce(&SimpleCommunicator) + Send>,
    spsc::Sender<()>,
);

/// What `World::init` learns from the bridge.
pub(crate) type Ready = Result<(i32, i32), crate::InitError>;

/// The bridge thread's body: initialises MPI, reports, serves until shutdown.
pub(crate) fn run(cmds: mpmc::Receiver<Cmd>, bell: mpsc::Receiver<()>, ready: spsc::Sender<Ready>) {
    let (universe, level) = match mpi::initialize_with_threading(mpi::Threading::Multiple) {
        Some(x) => x,
        None => {
            let _ = ready.send(Err(crate::InitError::AlreadyInitialized));
            return;
        }
    };
    if level != mpi::Threading::Multiple {
        let _ = ready.send(Err(crate::InitError::ThreadLevel(format!("{level:?}"))));
        drop(universe);
        return;
    }
    let comm = universe.world();
    let raw = comm.duplicate();
    let (rank, size) = (comm.rank(), comm.size());
    let ctrl_in = Posted::new(&comm, CTRL_TAG, CTRL_CAP);
    let mut b = Bridge {
        comm,
        raw,
        rank,
        size,
        cmds,
        bell,
        outs: HashMap::default(),
        closed_outs: HashSet::new(),
        ins: HashMap::default(),
        hosted: swco::current_cpe().is_some(),
        retired: HashSet::new(),
        pre: HashMap::new(),
        fins: vec![false; size as usize],
        ctrl: vec![Vec::new(); size as usize],
        pending: Vec::new(),
        shutdown: None,
        fin_sent: false,
        raw_jobs: Vec::new(),
        look_next: true,
        idle: 0,
        ctrl_in,
        iterations: 0,
        probed: 0,
    };
    b.fins[rank as usize] = true;
    if ready.send(Ok((rank, size))).is_err() {
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
/// coroutines (about 25 µs, longer than a round trip), before its idle
/// iterations also yield the thread's core.
const SPIN_HOSTED: u32 = 64;
/// Idle iterations that yield before it starts parking.
const YIELD: u32 = 4096;
/// How long an idle bridge parks between polls of MPI.
const PARK: Duration = Duration::from_micros(500);

/// What one bridge iteration found.
enum Step {
    /// It did work, or MPI brought something (`incoming`: a delivery or a
    /// frame, which may have woken a coroutine): look at everything next
    /// time.
    Busy { incoming: bool },
    /// Nothing to do.
    Idle,
    /// Finalised: the reply to the `Shutdown` command.
    Done(spsc::Sender<()>),
}

thread_local! {
    /// The bridge hosted by a coroutine of this thread's executor, for
    /// endpoints on the same thread to run its iterations themselves
    /// ([`help`]). Empty on every other thread.
    static HOSTED: RefCell<Weak<RefCell<Bridge>>> = const { RefCell::new(Weak::new()) };
}

/// What a helper's iteration did.
pub(crate) enum Helped {
    /// Nothing.
    Idle,
    /// Local work only (a queued send went out, credit went back).
    Worked,
    /// MPI brought something: a delivery or a frame, which may have woken
    /// a coroutine of this executor.
    Incoming,
}

/// On the thread of a hosted bridge, runs one iteration of the bridge here,
/// in the calling coroutine, and says what it did; `None` (having done
/// nothing) on any other thread, or while an iteration is already under
/// way (the bridge's own, suspended in a yield, or another helper's).
///
/// This is how a coroutine that waits on a remote endpoint waits when it
/// shares the bridge's thread: it polls MPI itself, as a raw `MPI_Recv`
/// would, instead of suspending and leaving the poll to the bridge
/// coroutine. A message that arrives is then delivered by the coroutine
/// that wants it, with no wake and no switch, and what it queued before
/// waiting (a ping-pong's reply) went out at its first poll.
fn help() -> Option<Helped> {
    with_hosted(|bridge| match bridge.iterate(false) {
        Step::Busy { incoming: true } => Helped::Incoming,
        Step::Busy { incoming: false } => Helped::Worked,
        Step::Idle => Helped::Idle,
        Step::Done(_) => unreachable!("only the bridge's own iteration finalises"),
    })
}

/// Runs `f` on the bridge hosted on this thread, if there is one and no
/// iteration or poll holds it (the bridge's own, suspended in a yield or
/// parked on its bell, or a helper's); `None` otherwise, `f` not run.
fn with_hosted<R>(f: impl FnOnce(&mut Bridge) -> R) -> Option<R> {
    let cell = HOSTED.with(|h| h.borrow().upgrade())?;
    let mut bridge = cell.try_borrow_mut().ok()?;
    Some(f(&mut bridge))
}

/// On the thread of a hosted bridge that no iteration holds: sends `msg`
/// (which holds a credit) on the open route to (`dest`, `tag`) with an
/// `MPI_Isend` of its own, as the bridge's next iteration would have, and
/// counts the batch. A coroutine beside the bridge so puts its message on
/// the wire in its own call: no queue, no bell, no look over every route.
///
/// Gives `msg` back (to be queued) on any other thread, while the bridge
/// is taken, when the route is not open, is closing or lost its receiver,
/// at shutdown, or when `queued` says the sender's earlier messages wait in
/// the route's queue (they go first, so this one queues behind them).
pub(crate) fn send_now<T: Payload>(dest: i32, tag: u16, msg: T, queued: bool) -> Result<(), T> {
    // Only an answer goes out at once: the first send after this
    // coroutine's receive found its message by polling. A sender that is
    // not waiting for anything (a stream) has its messages batched.
    if !REPLY_DUE.with(|r| r.replace(false)) || queued {
        return Err(msg);
    }
    let Some(cell) = HOSTED.with(|h| h.borrow().upgrade()) else {
        return Err(msg);
    };
    let Ok(mut bridge) = cell.try_borrow_mut() else {
        return Err(msg);
    };
    let b = &mut *bridge;
    if b.shutdown.is_some() {
        return Err(msg);
    }
    let Some(route) = b.outs.get_mut(&(dest, tag)) else {
        return Err(msg);
    };
    // One direct send per route per bridge iteration (or helper's poll):
    // a sender that sends faster than the bridge iterates has its messages
    // batched, one MPI message per iteration, as without direct sends.
    if route.gone || route.src.handles() == 0 || route.sent_direct == b.iterations {
        return Err(msg);
    }
    let Some(out) = route.src.as_any_mut().downcast_mut::<TypedOut<T>>() else {
        return Err(msg);
    };
    route.sent_direct = b.iterations;
    // In the route's spare buffer, which a send that completes at once
    // gives back: no allocation.
    let mut batch = std::mem::take(&mut out.scratch);
    batch.push(msg);
    route.batches += out.send(&b.comm, dest, tag, batch, &mut b.pending);
    Ok(())
}

thread_local! {
    /// Whether a coroutine of this thread is polling as a [`Helper`].
    static HELPING: Cell<bool> = const { Cell::new(false) };
    /// A helper found its own message by polling, and no send on this
    /// thread has come since: the next one is taken for an answer
    /// (`send_now`). A heuristic only: if another coroutine of the thread
    /// sends first, that send goes out directly instead, which is as
    /// correct, just unbatched.
    static REPLY_DUE: Cell<bool> = const { Cell::new(false) };
}

/// A waiting coroutine's turn to poll MPI on the bridge's thread (see
/// [`help`]). One waiter at a time: a second would only poll the same
/// queues again between the first one's polls, and hold up the coroutines
/// their deliveries wake; it waits as it would on any other thread.
pub(crate) struct Helper(());

impl Helper {
    /// The turn, on a hosted bridge's thread when no other coroutine has it.
    pub(crate) fn enlist() -> Option<Helper> {
        let hosted = HOSTED.with(|h| h.borrow().strong_count() > 0);
        if !hosted || HELPING.with(|h| h.replace(true)) {
            return None;
        }
        Some(Helper(()))
    }

    /// Marks the coroutine's next send as the answer to the message this
    /// helper just found (see `send_now`).
    pub(crate) fn reply_due(&self) {
        REPLY_DUE.with(|r| r.set(true));
    }

    /// Runs one bridge iteration (see [`help`]); `None` if the bridge is
    /// taken (an iteration is under way) or gone.
    pub(crate) fn poll(&self) -> Option<Helped> {
        help()
    }

    /// Tests only the posted receive of the route with user tag `tag` (the
    /// waiter's own). A waiter alternates these with whole iterations
    /// (`poll`), so its own batch is found within a test of its arrival,
    /// while the rest of the bridge (local work flagged by `look_next`
    /// included) is served at the next whole iteration, its own or the
    /// bridge coroutine's. Escalating to a whole iteration whenever
    /// `look_next` was set made every wait run two of them (about 500
    /// cycles each), and a reply that arrived during one waited for it.
    ///
    /// A batch for the route goes straight into `waiter` (the polling
    /// receiver's, of the route's type), not through its channel.
    pub(crate) fn poll_route(&self, tag: u16, waiter: &mut dyn Any) -> Option<Helped> {
        with_hosted(|bridge| {
            // A poll, for `send_now`'s one direct send per route per poll.
            bridge.iterations += 1;
            let Some(route) = bridge.ins.get_mut(&tag) else {
                return Helped::Idle;
            };
            let Some((src, n)) = route.sink.poll(Some(waiter)) else {
                return Helped::Idle;
            };
            route.arrived(src, n);
            // As after a whole iteration that brought something.
            bridge.look_next = true;
            bridge.idle = 0;
            Helped::Incoming
        })
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        HELPING.with(|h| h.set(false));
    }
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

impl Bridge {
    /// One pass: local work (when there can be some), pending sends, then
    /// MPI's incoming messages. `own` is the bridge's own iteration, which
    /// also runs raw jobs and may finalise; a helper's ([`help`]) does
    /// neither, as it runs inside an endpoint call.
    fn iterate(&mut self, own: bool) -> Step {
        self.iterations += 1;
        // Local work (commands, queued messages, consumed credit, dropped
        // endpoints) is looked at only when there can be some: every
        // endpoint rings the bell after it changes what the bridge serves,
        // and the bell is emptied before the look, so a change is either
        // seen now or rings again. Incoming MPI and the last iteration's
        // own work (a grant banked, a frame due) also call for a look, and
        // so does shutting down.
        let mut rang = false;
        while self.bell.try_recv().is_ok() {
            rang = true;
        }
        let look = rang || self.look_next || self.shutdown.is_some();
        let mut busy = rang;
        if look {
            busy |= self.commands();
            // What coroutines queued since the last iteration goes out
            // first: a reply is on the wire before this iteration probes.
            busy |= self.service_outs();
            busy |= self.service_ins();
        }
        self.flush_ctrl();
        self.pending.retain_mut(|p| !p.done());
        if own {
            // Raw jobs run after this iteration's data and control went
            // out, so a peer waiting for them is not held up by the job.
            for (job, reply) in std::mem::take(&mut self.raw_jobs) {
                job(&self.raw);
                let _ = reply.send(());
                busy = true;
            }
        }
        // Probing comes last: a delivery wakes its coroutine, and the
        // yield that follows lets it run at once. What the probe brings
        // (frames, credit) makes the next iteration look at everything.
        let incoming = self.incoming();
        busy |= incoming;
        if own && self.shutdown.is_some() && self.finished() {
            return Step::Done(self.shutdown.take().expect("checked"));
        }
        self.look_next = busy;
        if busy {
            // Work done, by the bridge or a helper, ends an idle spell (the
            // bridge's loop counts idle iterations to decide when to yield
            // its core and park).
            self.idle = 0;
            Step::Busy { incoming }
        } else {
            Step::Idle
        }
    }

    /// Prints the bridge's state to stderr (`SWCO_MPI_TRACE=1`, once a second).
    fn dump(&self) {
        for ((dest, tag), r) in &self.outs {
            eprintln!(
                "[{}] out to {dest} tag {tag}: bank {} demanding {} gone {} batches {} handles {}",
                self.rank,
                r.bank,
                r.demanding,
                r.gone,
                r.batches,
                r.src.handles()
            );
        }
        for (tag, r) in &self.ins {
            let srcs: Vec<String> = r
                .sources
                .iter()
                .map(|(s, st)| {
                    format!(
                        "{s}:out{} dem{} rec{} close{:?} b{} fin{}",
                        st.outstanding,
                        st.demanding,
                        st.recalled,
                        st.close_batches,
                        st.batches,
                        st.finished
                    )
                })
                .collect();
            eprintln!(
                "[{}] in tag {tag}: free {} dead {} delivered {} consumed {} [{}]",
                self.rank,
                r.free,
                r.dead,
                r.delivered,
                r.consumed,
                srcs.join(", ")
            );
        }
        eprintln!(
            "[{}] pending sends {} fins {:?}",
            self.rank,
            self.pending.len(),
            self.fins
        );
    }

    fn finished(&self) -> bool {
        self.fin_sent
            && self.outs.is_empty()
            && self.fins.iter().all(|&f| f)
            && self.ins.is_empty()
            && self.pending.is_empty()
            && self.ctrl.iter().all(Vec::is_empty)
    }

    fn frame(&mut self, to: i32, kind: Kind, tag: u16, value: u64) {
        self.ctrl[to as usize].extend_from_slice(&[kind as u64, u64::from(tag), value]);
    }

    fn flush_ctrl(&mut self) {
        for to in 0..self.size {
            if !self.ctrl[to as usize].is_empty() {
                let words = std::mem::take(&mut self.ctrl[to as usize]);
                // The receiving bridge's posted buffer holds CTRL_CAP words
                // (whole frames): longer runs of frames go out as several
                // batches, in order.
                let (_, back) = PendingSend::start_cut(
                    &self.comm,
                    to,
                    CTRL_TAG,
                    words,
                    CTRL_CAP,
                    &mut self.pending,
                );
                // The buffer back, for the next frames to this rank.
                if let Some(mut words) = back {
                    words.clear();
                    self.ctrl[to as usize] = words;
                }
            }
        }
    }

    // --- commands ---

    fn commands(&mut self) -> bool {
        let mut any = false;
        while let Ok(cmd) = self.cmds.try_recv() {
            any = true;
            match cmd {
                Cmd::OpenSender {
                    dest,
                    tag,
                    type_id,
                    any,
                    mut src,
                    reply,
                } => {
                    let key = (dest, tag);
                    let answer = if let Some(r) = self.outs.get(&key) {
                        if r.type_id != type_id {
                            Err(format!(
                                "route to rank {dest} tag {tag} already carries another type"
                            ))
                        } else if r.src.try_add_handle() {
                            Ok(r.any.clone())
                        } else {
                            src.disconnect();
                            Ok(any)
                        }
                    } else if self.shutdown.is_some() || self.closed_outs.contains(&key) {
                        src.disconnect();
                        Ok(any)
                    } else {
                        self.outs.insert(
                            key,
                            OutRoute {
                                src,
                                any: any.clone(),
                                type_id,
                                sent_direct: u64::MAX,
                                bank: 0,
                                demanding: false,
                                gone: false,
                                batches: 0,
                            },
                        );
                        Ok(any)
                    };
                    let _ = reply.send(answer);
                }
                Cmd::OpenReceiver {
                    tag,
                    sources,
                    shared,
                    sink,
                    reply,
                } => {
                    let _ = reply.send(self.open_receiver(tag, sources, shared, sink));
                }
                Cmd::Raw { job, reply } => self.raw_jobs.push((job, reply)),
                Cmd::Shutdown { reply } => self.shutdown = Some(reply),
            }
        }
        any
    }

    fn open_receiver(
        &mut self,
        tag: u16,
        sources: Vec<i32>,
        shared: Arc<InShared>,
        sink: Box<dyn Sink>,
    ) -> Result<(), String> {
        if self.ins.contains_key(&tag) || self.retired.contains(&tag) {
            return Err(format!(
                "rank {} already made a receiver for tag {tag}",
                self.rank
            ));
        }
        let mut route = InRoute {
            free: shared.capacity,
            shared,
            sink,
            probed: false,
            sources: sources.iter().map(|&s| (s, SrcState::default())).collect(),
            dead: false,
            delivered: 0,
            consumed: 0,
        };
        let pre = self.pre.remove(&tag).unwrap_or_default();
        for s in pre.demanders {
            match route.sources.get_mut(&s) {
                Some(st) => {
                    st.demanding = true;
                    st.asked = true;
                }
                None => self.frame(s, Kind::Gone, tag, 0),
            }
        }
        for (s, st) in route.sources.iter_mut() {
            st.close_batches = pre.closes.get(s).copied();
            if st.close_batches.is_none() && self.fins[*s as usize] && *s != self.rank {
                st.close_batches = Some(0);
            }
        }
        // A posted route's tag is never probed (see `incoming`): its
        // batches are matched by this receive and its successors alone.
        route.probed = !route.sink.post(&self.comm, data_tag(tag));
        self.probed += usize::from(route.probed);
        self.ins.insert(tag, route);
        Ok(())
    }

    // --- incoming MPI ---

    fn incoming(&mut self) -> bool {
        let mut any = false;
        // Data into posted receives, one batch per route: the one its
        // receive holds, delivered before the receive is posted again
        // (`posted.rs`).
        for route in self.ins.values_mut() {
            let Some((src, n)) = route.sink.poll(None) else {
                continue;
            };
            any = true;
            route.arrived(src, n);
            if self.hosted {
                // The consumer this may have woken shares the thread: it
                // runs at the yield after this iteration, before another
                // poll holds it up.
                break;
            }
        }
        // Control batches, in order from each rank.
        for _ in 0..256 {
            let Some((src, words)) = self.ctrl_in.test(|src, words| (src, words.into_vec())) else {
                break;
            };
            any = true;
            self.frames_from(src, &words);
        }
        // Byte messages are probed, on the tags of their routes only. A tag
        // with a receive posted for it (control, typed data) is never
        // probed, so its batches are matched by that receive alone, one at
        // a time and in MPI's order per (source, tag), each delivered
        // before the receive is posted again. An any-tag probe would break
        // that: it could take a posted tag's next batch while the receive
        // holds the one before, complete but not yet delivered (a long
        // batch crosses as several MPI messages on one tag), and deliver
        // the later one first. Nothing comes on a tag with no route (data
        // needs a receiver's credit), so no probe looks there.
        if self.probed == 0 {
            return any;
        }
        for (&tag, route) in self.ins.iter_mut() {
            if !route.probed {
                continue;
            }
            for _ in 0..256 {
                let Some((msg, status)) = self
                    .comm
                    .any_process()
                    .immediate_matched_probe_with_tag(data_tag(tag))
                else {
                    break;
                };
                any = true;
                let n = route.sink.receive(msg, status);
                route.arrived(status.source_rank(), n);
                if self.hosted {
                    // As for a posted route's delivery above.
                    return any;
                }
            }
        }
        any
    }

    /// Acts on a control batch from `src`.
    fn frames_from(&mut self, src: i32, words: &[u64]) {
        for f in words.chunks_exact(FRAME) {
            if let Some(kind) = Kind::from_u64(f[0]) {
                self.control(src, kind, f[1] as u16, f[2]);
            }
        }
    }

    fn control(&mut self, src: i32, kind: Kind, tag: u16, value: u64) {
        match kind {
            Kind::Demand => match self.ins.get_mut(&tag) {
                Some(r) => match r.sources.get_mut(&src) {
                    Some(st) if !r.dead => {
                        st.demanding = true;
                        st.asked = true;
                    }
                    _ => self.frame(src, Kind::Gone, tag, 0),
                },
                None if self.shutdown.is_some() || self.retired.contains(&tag) => {
                    self.frame(src, Kind::Gone, tag, 0)
                }
                None => {
                    self.pre.entry(tag).or_default().demanders.insert(src);
                }
            },
            Kind::Grant => {
                if let Some(r) = self.outs.get_mut(&(src, tag)) {
                    r.bank += value as usize;
                    r.demanding = false;
                }
            }
            Kind::Recall => {
                if let Some(r) = self.outs.get_mut(&(src, tag)) {
                    let n = r.bank + r.src.take_tokens();
                    r.bank = 0;
                    self.frame(src, Kind::Return, tag, n as u64);
                }
            }
            Kind::Return => {
                if let Some(st) = self.ins.get_mut(&tag).and_then(|r| {
                    let st = r.sources.get_mut(&src)?;
                    st.outstanding = st.outstanding.saturating_sub(value as usize);
                    st.recalled = false;
                    Some(r)
                }) {
                    st.free += value as usize;
                }
            }
            Kind::Close => match self.ins.get_mut(&tag) {
                Some(r) => {
                    if let Some(st) = r.sources.get_mut(&src) {
                        st.close_batches = Some(value);
                    }
                }
                None if self.retired.contains(&tag) => {}
                None => {
                    self.pre.entry(tag).or_default().closes.insert(src, value);
                }
            },
            Kind::Gone => {
                if let Some(r) = self.outs.get_mut(&(src, tag)) {
                    r.gone = true;
                    r.demanding = false;
                    r.bank = 0;
                    r.src.disconnect();
                }
            }
            Kind::Fin => {
                self.fins[src as usize] = true;
                for r in self.ins.values_mut() {
                    if let Some(st) = r.sources.get_mut(&src) {
                        st.close_batches.get_or_insert(0);
                    }
                }
            }
        }
    }

    // --- local receivers ---

    fn service_ins(&mut self) -> bool {
        let mut any = false;
        let mut retire = Vec::new();
        let mut frames = Vec::new();
        for (&tag, r) in self.ins.iter_mut() {
            // A load first: most looks find nothing taken, and a swap is a
            // locked instruction.
            let c = match r.shared.consumed.load(Ordering::Relaxed) {
                0 => 0,
                _ => r.shared.consumed.swap(0, Ordering::AcqRel),
            };
            if c > 0 {
                any = true;
                r.consumed += c as u64;
                if !r.dead {
                    r.free += c;
                }
            }
            if !r.dead && r.shared.dropped.load(Ordering::Acquire) {
                any = true;
                r.dead = true;
                r.sink.close();
                for (&s, st) in r.sources.iter_mut() {
                    st.demanding = false;
                    if !st.finished {
                        frames.push((s, Kind::Gone, tag, 0));
                    }
                }
            }
            // Sources whose every batch has arrived are closed; their
            // unused credit comes back.
            for st in r.sources.values_mut() {
                if !st.finished && st.close_batches == Some(st.batches) {
                    st.finished = true;
                    st.demanding = false;
                    r.free += std::mem::take(&mut st.outstanding);
                }
            }
            if !r.dead {
                // Hand free credit out among the demanding ranks.
                let demanders: Vec<i32> = r
                    .sources
                    .iter()
                    .filter(|(_, st)| st.demanding)
                    .map(|(&s, _)| s)
                    .collect();
                if !demanders.is_empty() && r.free > 0 {
                    let share = (r.free / demanders.len()).max(1);
                    for s in demanders {
                        let g = share.min(r.free);
                        if g == 0 {
                            break;
                        }
                        r.free -= g;
                        let st = r.sources.get_mut(&s).expect("listed");
                        st.outstanding += g;
                        st.demanding = false;
                        frames.push((s, Kind::Grant, tag, g as u64));
                        bump(&r.shared.stats.grants, 1);
                        any = true;
                    }
                }
                // Refill: a receiver fed by one rank hands its free credit
                // back before the sender runs dry, once half the capacity
                // is free, so a steady stream or a ping-pong does not stop
                // for a DEMAND/GRANT round trip every `capacity` messages.
                // With one source there is nobody to share with or recall
                // from; a grant that meets a route closing on its way is
                // reclaimed with the source's other outstanding credit.
                if r.sources.len() == 1 && r.free >= (r.shared.capacity / 2).max(1) {
                    if let Some((&s, st)) = r.sources.iter_mut().next() {
                        if st.asked && !st.finished && !st.demanding {
                            let g = std::mem::take(&mut r.free);
                            st.outstanding += g;
                            frames.push((s, Kind::Grant, tag, g as u64));
                            bump(&r.shared.stats.grants, 1);
                            any = true;
                        }
                    }
                }
                if r.free == 0 && r.sources.values().any(|st| st.demanding) {
                    for (&s, st) in r.sources.iter_mut() {
                        if !st.demanding && !st.recalled && !st.finished && st.outstanding > 0 {
                            st.recalled = true;
                            frames.push((s, Kind::Recall, tag, 0));
                        }
                    }
                }
                let in_flight = r.shared.capacity - r.free;
                raise(&r.shared.stats.max_in_flight, in_flight);
            }
            if r.sources.values().all(|st| st.finished) {
                r.sink.close();
                retire.push(tag);
                any = true;
            }
        }
        for tag in retire {
            // Dropping the route cancels its posted receive: every source
            // has closed, so no batch can still come.
            if let Some(route) = self.ins.remove(&tag) {
                self.probed -= usize::from(route.probed);
            }
            self.retired.insert(tag);
        }
        for (to, kind, tag, v) in frames {
            self.frame(to, kind, tag, v);
        }
        any
    }

    // --- local senders ---

    fn service_outs(&mut self) -> bool {
        let mut any = false;
        let mut frames = Vec::new();
        let mut closed = Vec::new();
        let shutting = self.shutdown.is_some();
        for (&(dest, tag), r) in self.outs.iter_mut() {
            let closing = shutting || r.src.handles() == 0;
            if closing && !r.gone {
                // No new sends: fail live senders (at shutdown); what is
                // already queued holds credit and still goes out.
                r.gone = true;
                r.src.disconnect();
            }
            // After GONE, what is queued is discarded (the receiver is
            // gone); when closing, it still goes out: it holds credit.
            let discard = r.gone && !closing;
            if let Some(sent) = r
                .src
                .flush(&self.comm, dest, tag, discard, &mut self.pending)
            {
                any = true;
                r.batches += sent;
            }
            if closing {
                // A sender that saw the route open may still be pushing:
                // drain until none is (its push cannot wait long, as this
                // loop empties the queue), then once more.
                loop {
                    let quiet = r.src.quiet();
                    while let Some(sent) =
                        r.src.flush(&self.comm, dest, tag, false, &mut self.pending)
                    {
                        r.batches += sent;
                    }
                    if quiet {
                        break;
                    }
                    swco::yield_now();
                }
                frames.push((dest, Kind::Close, tag, r.batches));
                closed.push((dest, tag));
                any = true;
                continue;
            }
            if !r.gone {
                r.src.push_tokens(&mut r.bank);
                if !r.demanding && r.bank == 0 && r.src.take_hungry() {
                    r.demanding = true;
                    frames.push((dest, Kind::Demand, tag, 0));
                    any = true;
                }
            }
        }
        for key in closed {
            self.outs.remove(&key);
            self.closed_outs.insert(key);
        }
        for (to, kind, tag, v) in frames {
            self.frame(to, kind, tag, v);
        }
        if shutting && !self.fin_sent && self.outs.is_empty() {
            self.fin_sent = true;
            for to in 0..self.size {
                if to != self.rank {
                    self.frame(to, Kind::Fin, 0, 0);
                }
            }
            any = true;
        }
        any
    }
}
