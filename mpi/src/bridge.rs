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
//!   (`helper::Helper`): a whole bridge iteration first, then tests of its own
//!   route's posted receive, a whole iteration again every 16 polls; a
//!   message it finds goes straight to it, not through its channel;
//! * the first send after such a wait (taken for the answer) goes out with
//!   its own `MPI_Isend` (`helper::send_now`), once per route per poll, so a
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
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use swco::channel::{mpmc, mpsc, spsc};

use crate::credit::{InRoute, SrcState};
use crate::error::InitError;
use crate::inbound::Sink;
use crate::outbound::{OutRoute, OutSource};
use crate::pending::{Pending, PendingSend};
use crate::posted::{Posted, CTRL_CAP};
use crate::shared::InShared;
use crate::wire::{data_tag, Kind, Payload, CTRL_TAG, FRAME};

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

/// Frames for a tag that has no receiver yet (it comes later).
#[derive(Default)]
struct Pre {
    demanders: HashSet<i32>,
    closes: HashMap<i32, u64>,
}

/// One rank's bridge: every route, the control frames due, the sends in
/// flight.
pub(crate) struct Bridge {
    pub(crate) comm: SimpleCommunicator,
    raw: SimpleCommunicator,
    pub(crate) rank: i32,
    pub(crate) size: i32,
    cmds: mpmc::Receiver<Cmd>,
    pub(crate) bell: mpsc::Receiver<()>,
    outs: HashMap<(i32, u16), OutRoute, RouteHash>,
    closed_outs: HashSet<(i32, u16)>,
    ins: HashMap<u16, InRoute, RouteHash>,
    /// Run by a coroutine (`World::init_on`), sharing its thread with the
    /// coroutines it serves.
    pub(crate) hosted: bool,
    /// Tags of receivers whose every source closed: out of `ins`, so the
    /// bridge's loop does not walk them, and kept so a tag is not reused.
    retired: HashSet<u16>,
    pre: HashMap<u16, Pre>,
    fins: Vec<bool>,
    ctrl: Vec<Vec<u64>>,
    pending: Vec<Box<dyn Pending>>,
    pub(crate) shutdown: Option<spsc::Sender<()>>,
    fin_sent: bool,
    raw_jobs: Vec<RawJob>,
    /// The last iteration did work (or is the first): the next one looks
    /// at all local work, bell or not.
    pub(crate) look_next: bool,
    /// Idle iterations in a row, the bridge's own or its helpers'.
    pub(crate) idle: u32,
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
pub(crate) type Ready = Result<(i32, i32), InitError>;

/// What one bridge iteration found.
pub(crate) enum Step {
    /// It did work, or MPI brought something (`incoming`: a delivery or a
    /// frame, which may have woken a coroutine): look at everything next
    /// time.
    Busy { incoming: bool },
    /// Nothing to do.
    Idle,
    /// Finalised: the reply to the `Shutdown` command.
    Done(spsc::Sender<()>),
}

impl Bridge {
    /// The bridge of this rank, on the communicator `comm` (MPI
    /// initialised); `hosted` when a coroutine runs it.
    pub(crate) fn new(
        comm: SimpleCommunicator,
        cmds: mpmc::Receiver<Cmd>,
        bell: mpsc::Receiver<()>,
        hosted: bool,
    ) -> Bridge {
        let raw = comm.duplicate();
        let (rank, size) = (comm.rank(), comm.size());
        let ctrl_in = Posted::new(&comm, CTRL_TAG, CTRL_CAP);
        let mut fins = vec![false; size as usize];
        fins[rank as usize] = true;
        Bridge {
            comm,
            raw,
            rank,
            size,
            cmds,
            bell,
            outs: HashMap::default(),
            closed_outs: HashSet::new(),
            ins: HashMap::default(),
            hosted,
            retired: HashSet::new(),
            pre: HashMap::new(),
            fins,
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
        }
    }

    /// A direct send of `msg` on the open route to (`dest`, `tag`), for a
    /// coroutine beside a hosted bridge (`helper::send_now`); `msg` back
    /// (to be queued) at shutdown, when the route is not open, or when
    /// `OutRoute::send_direct` declines it.
    pub(crate) fn send_direct<T: Payload>(&mut self, dest: i32, tag: u16, msg: T) -> Result<(), T> {
        if self.shutdown.is_some() {
            return Err(msg);
        }
        let Some(route) = self.outs.get_mut(&(dest, tag)) else {
            return Err(msg);
        };
        route.send_direct(
            &self.comm,
            dest,
            tag,
            msg,
            self.iterations,
            &mut self.pending,
        )
    }

    /// Tests only the posted receive of the route with user tag `tag`,
    /// delivering a batch straight into `waiter` (see
    /// `Helper::poll_route`); true if one came.
    pub(crate) fn poll_route(&mut self, tag: u16, waiter: &mut dyn Any) -> bool {
        // A poll, for `send_direct`'s one direct send per route per poll.
        self.iterations += 1;
        let Some(route) = self.ins.get_mut(&tag) else {
            return false;
        };
        let Some((src, n)) = route.sink.poll(Some(waiter)) else {
            return false;
        };
        route.arrived(src, n);
        // As after a whole iteration that brought something.
        self.look_next = true;
        self.idle = 0;
        true
    }

    /// One pass: local work (when there can be some), pending sends, then
    /// MPI's incoming messages. `own` is the bridge's own iteration, which
    /// also runs raw jobs and may finalise; a helper's (`helper.rs`) does
    /// neither, as it runs inside an endpoint call.
    pub(crate) fn iterate(&mut self, own: bool) -> Step {
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
    pub(crate) fn dump(&self) {
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
            let done = r.service(tag, &mut frames);
            any |= done.any;
            if done.done {
                retire.push(tag);
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
