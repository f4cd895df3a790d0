//! The outgoing half of a route, held by the bridge: its typed part
//! ([`TypedOut`], behind [`OutSource`]) drains the senders' queue into
//! batches and hands credit to them; [`OutRoute`] is the bridge's
//! bookkeeping for it (banked credit, DEMAND outstanding, batches sent).

use std::any::{Any, TypeId};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use mpi::topology::SimpleCommunicator;
use swco::channel::{mpmc, mpsc};

use crate::pending::{Pending, PendingSend};
use crate::posted::{data_cap, DATA_CAP};
use crate::shared::{OutShared, Run};
use crate::wire::{data_tag, Payload};

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
        // Acquire: pairs with the last handle's release in its drop, so a
        // count of 0 comes with that sender's pushes in the queue.
        self.shared.handles.load(Ordering::Acquire)
    }
    fn take_hungry(&self) -> bool {
        let s = &self.shared;
        // A load first (Relaxed: a false only skips the swap) spares the
        // locked swap when nobody was hungry; the swap takes the flag with
        // the sender's Release store. Acquire on `waiting`: a waiter's
        // count-in is seen; a stale zero costs only a later look, as the
        // waiter rings the bell after counting in.
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

/// The bridge's state of one outgoing route (destination rank, tag).
pub(crate) struct OutRoute {
    pub(crate) src: Box<dyn OutSource>,
    /// The bridge iteration (`Bridge::iterations`) in which a sender last
    /// sent on this route directly (`send_now`).
    pub(crate) sent_direct: u64,
    pub(crate) any: Arc<dyn Any + Send + Sync>,
    pub(crate) type_id: TypeId,
    pub(crate) bank: usize,
    pub(crate) demanding: bool,
    pub(crate) gone: bool,
    pub(crate) batches: u64,
}

impl OutRoute {
    /// Sends `msg` (which holds a credit) with an `MPI_Isend` of its own,
    /// as a batch of one, unless a direct send already went out on this
    /// route in bridge iteration `iteration` (a sender faster than the
    /// bridge then has its messages batched, one MPI message per
    /// iteration, as without direct sends), or the route is closing or
    /// lost its receiver: then `msg` comes back, to be queued.
    pub(crate) fn send_direct<T: Payload>(
        &mut self,
        comm: &SimpleCommunicator,
        dest: i32,
        tag: u16,
        msg: T,
        iteration: u64,
        pending: &mut Vec<Box<dyn Pending>>,
    ) -> Result<(), T> {
        if self.gone || self.src.handles() == 0 || self.sent_direct == iteration {
            return Err(msg);
        }
        let Some(out) = self.src.as_any_mut().downcast_mut::<TypedOut<T>>() else {
            return Err(msg);
        };
        self.sent_direct = iteration;
        // In the route's spare buffer, which a send that completes at once
        // gives back: no allocation.
        let mut batch = std::mem::take(&mut out.scratch);
        batch.push(msg);
        self.batches += out.send(comm, dest, tag, batch, pending);
        Ok(())
    }
}
