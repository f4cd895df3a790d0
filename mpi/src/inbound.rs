//! The typed half of an incoming route, held by the bridge: receives a
//! route's data batches (from its posted receive, `posted.rs`, or a probed
//! message) and delivers them to the receiver's local channel, or straight
//! to a receiver polling for them.

use std::any::Any;
use std::sync::Arc;

use mpi::point_to_point::{Message, Status};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use swco::channel::mpsc;

use crate::posted::{data_cap, Posted};
use crate::shared::{bump, InShared, Run};
use crate::wire::Payload;

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
