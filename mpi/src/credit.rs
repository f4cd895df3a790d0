//! A receiver's credit, on its own rank: the bridge's state of one
//! incoming route ([`InRoute`]) and of each of its source ranks
//! ([`SrcState`]), and the rules that hand credit out (GRANT), refill a
//! single source unasked, recall idle credit (RECALL) and take a closed
//! source's credit back. The protocol is described in `bridge.rs`; this
//! module keeps its invariant `free + Σ outstanding + buffered = capacity`.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::inbound::Sink;
use crate::shared::{bump, raise, InShared};
use crate::wire::Kind;

/// A control frame to send: destination rank, kind, user tag, value.
pub(crate) type Frame = (i32, Kind, u16, u64);

/// What the bridge knows of one source rank of an incoming route.
#[derive(Default)]
pub(crate) struct SrcState {
    /// Credit granted to it and not yet used or returned.
    pub(crate) outstanding: usize,
    /// It asked for credit (DEMAND) and has not been granted any since.
    pub(crate) demanding: bool,
    /// Has demanded at least once: its route is open on its rank, so a
    /// grant it did not ask for is banked, not dropped.
    pub(crate) asked: bool,
    /// A RECALL is out to it and its RETURN has not come back.
    pub(crate) recalled: bool,
    /// Its CLOSE came, saying how many data batches it sent in all.
    pub(crate) close_batches: Option<u64>,
    /// Data batches received from it.
    pub(crate) batches: u64,
    /// Closed: every batch it sent has arrived.
    pub(crate) finished: bool,
}

/// The bridge's state of one local receiver's route (this rank, tag).
pub(crate) struct InRoute {
    pub(crate) shared: Arc<InShared>,
    pub(crate) sink: Box<dyn Sink>,
    /// Its batches are found by probing its tag (byte messages), not by a
    /// posted receive.
    pub(crate) probed: bool,
    /// Credit not handed out.
    pub(crate) free: usize,
    pub(crate) sources: BTreeMap<i32, SrcState>,
    /// The receiver was dropped: batches are discarded, no credit goes out.
    pub(crate) dead: bool,
    pub(crate) delivered: u64,
    pub(crate) consumed: u64,
}

/// What [`InRoute::service`] did.
pub(crate) struct Serviced {
    /// It changed something (credit, a frame, the route's state).
    pub(crate) any: bool,
    /// Every source has closed: the route is done and can be retired.
    pub(crate) done: bool,
}

impl InRoute {
    /// Counts in a data batch of `n` messages from `src`.
    pub(crate) fn arrived(&mut self, src: i32, n: usize) {
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

    /// Takes back what the consumer took and what closed sources left
    /// unused, notices the receiver's drop (GONE to every open source), and
    /// hands free credit out: GRANTs to demanding sources, a refill to a
    /// single source, RECALLs when demand finds nothing free. Frames to
    /// send go to `frames`.
    pub(crate) fn service(&mut self, tag: u16, frames: &mut Vec<Frame>) -> Serviced {
        let mut any = false;
        // A load first: most looks find nothing taken, and a swap is a
        // locked instruction. Relaxed: a zero only skips the swap; the
        // swap's AcqRel takes the count with the receiver's takes before it.
        let c = match self.shared.consumed.load(Ordering::Relaxed) {
            0 => 0,
            _ => self.shared.consumed.swap(0, Ordering::AcqRel),
        };
        if c > 0 {
            any = true;
            self.consumed += c as u64;
            if !self.dead {
                self.free += c;
            }
        }
        // Acquire: pairs with the receiver's Release store in its drop, so
        // its last `consumed` counts are seen with it.
        if !self.dead && self.shared.dropped.load(Ordering::Acquire) {
            any = true;
            self.dead = true;
            self.sink.close();
            for (&s, st) in self.sources.iter_mut() {
                st.demanding = false;
                if !st.finished {
                    frames.push((s, Kind::Gone, tag, 0));
                }
            }
        }
        // Sources whose every batch has arrived are closed; their unused
        // credit comes back.
        for st in self.sources.values_mut() {
            if !st.finished && st.close_batches == Some(st.batches) {
                st.finished = true;
                st.demanding = false;
                self.free += std::mem::take(&mut st.outstanding);
            }
        }
        if !self.dead {
            any |= self.hand_out(tag, frames);
        }
        let done = self.sources.values().all(|st| st.finished);
        if done {
            self.sink.close();
            any = true;
        }
        Serviced { any, done }
    }

    /// Hands free credit out (GRANT, refill) or recalls it (RECALL); true
    /// if it sent a grant.
    fn hand_out(&mut self, tag: u16, frames: &mut Vec<Frame>) -> bool {
        let mut any = false;
        // Hand free credit out among the demanding ranks.
        let demanders: Vec<i32> = self
            .sources
            .iter()
            .filter(|(_, st)| st.demanding)
            .map(|(&s, _)| s)
            .collect();
        if !demanders.is_empty() && self.free > 0 {
            let share = (self.free / demanders.len()).max(1);
            for s in demanders {
                let g = share.min(self.free);
                if g == 0 {
                    break;
                }
                self.free -= g;
                let st = self.sources.get_mut(&s).expect("listed");
                st.outstanding += g;
                st.demanding = false;
                frames.push((s, Kind::Grant, tag, g as u64));
                bump(&self.shared.stats.grants, 1);
                any = true;
            }
        }
        // Refill: a receiver fed by one rank hands its free credit back
        // before the sender runs dry, once half the capacity is free, so a
        // steady stream or a ping-pong does not stop for a DEMAND/GRANT
        // round trip every `capacity` messages. With one source there is
        // nobody to share with or recall from; a grant that meets a route
        // closing on its way is reclaimed with the source's other
        // outstanding credit.
        if self.sources.len() == 1 && self.free >= (self.shared.capacity / 2).max(1) {
            if let Some((&s, st)) = self.sources.iter_mut().next() {
                if st.asked && !st.finished && !st.demanding {
                    let g = std::mem::take(&mut self.free);
                    st.outstanding += g;
                    frames.push((s, Kind::Grant, tag, g as u64));
                    bump(&self.shared.stats.grants, 1);
                    any = true;
                }
            }
        }
        if self.free == 0 && self.sources.values().any(|st| st.demanding) {
            for (&s, st) in self.sources.iter_mut() {
                if !st.demanding && !st.recalled && !st.finished && st.outstanding > 0 {
                    st.recalled = true;
                    frames.push((s, Kind::Recall, tag, 0));
                }
            }
        }
        let in_flight = self.shared.capacity - self.free;
        raise(&self.shared.stats.max_in_flight, in_flight);
        any
    }
}
