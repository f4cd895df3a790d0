//! What goes over MPI: message payloads, control frames and tags.
//!
//! Invariants:
//! * Every bridge-to-bridge MPI message is either a *data batch* or a
//!   *control batch*, told apart by its MPI tag alone: [`CTRL_TAG`] (0) for
//!   control, `1 + user tag` for data of the channel with that user tag.
//! * A data batch holds at least one message of one channel, encoded by the
//!   channel's [`Payload`]; it is never empty, so its element count is its
//!   size (an empty batch is never sent).
//! * A control batch is a non-empty `[u64]` whose length is a multiple of
//!   [`FRAME`]; each frame is `[kind, user tag, value]`.
//! * MPI keeps the order of messages with the same (source, tag, comm), so
//!   control frames from one rank arrive in order, and so do the data
//!   batches of one channel from one rank; data and control may overtake
//!   each other, which is why CLOSE carries a batch count (see `bridge.rs`).

use mpi::traits::Equivalence;

/// The MPI tag of control batches.
pub(crate) const CTRL_TAG: i32 = 0;
/// The largest user tag a channel may have (MPI guarantees tags up to 32767;
/// data uses `1 + tag`).
pub const MAX_TAG: u16 = 32_000;
/// Words per control frame.
pub(crate) const FRAME: usize = 3;

/// The MPI tag that carries data of the channel with user tag `tag`.
pub(crate) fn data_tag(tag: u16) -> i32 {
    1 + i32::from(tag)
}

/// Kinds of control frame; see the protocol in `bridge.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub(crate) enum Kind {
    /// sender rank → receiver rank: "a sender of mine waits for credit".
    Demand = 1,
    /// receiver rank → sender rank: "you may send `value` more messages".
    Grant = 2,
    /// receiver rank → sender rank: "give back the credit you are not using".
    Recall = 3,
    /// sender rank → receiver rank: "`value` unused credits come back" (answers Recall).
    Return = 4,
    /// sender rank → receiver rank: "my senders are all gone; I sent `value` data batches".
    Close = 5,
    /// receiver rank → sender rank: "the receiver is gone; fail your senders".
    Gone = 6,
    /// any rank → every other rank: "I am finalising: every channel I did not
    /// CLOSE explicitly is closed with 0 batches". Tag and value unused.
    Fin = 7,
}

impl Kind {
    pub(crate) fn from_u64(k: u64) -> Option<Kind> {
        Some(match k {
            1 => Kind::Demand,
            2 => Kind::Grant,
            3 => Kind::Recall,
            4 => Kind::Return,
            5 => Kind::Close,
            6 => Kind::Gone,
            7 => Kind::Fin,
            _ => return None,
        })
    }
}

/// A type that can travel through a remote channel.
///
/// Implemented for every [`Typed`] type (sent as typed MPI data, a batch of
/// them as one MPI array) and for `Vec<u8>` (byte messages: a batch is one
/// byte array of length-prefixed messages). The methods are the bridge's
/// business.
pub trait Payload: Send + Sized + 'static {
    /// The MPI element type a batch is sent as.
    #[doc(hidden)]
    type Wire: Equivalence + Send + 'static;
    /// Encodes a non-empty batch; the result is non-empty.
    #[doc(hidden)]
    fn encode(batch: Vec<Self>) -> Vec<Self::Wire>;
    /// Decodes a batch into its messages, in order.
    #[doc(hidden)]
    fn decode(wire: Vec<Self::Wire>) -> Vec<Self>;
    /// Whether every message is one wire element, so that a batch of
    /// bounded length has a bounded size and the receiving bridge can keep
    /// a receive posted for it (`posted.rs`); byte messages are probed.
    #[doc(hidden)]
    const POSTED: bool = false;
    /// Decodes a batch of one wire element (posted payloads).
    #[doc(hidden)]
    fn decode_one(wire: Self::Wire) -> Self {
        Self::decode(vec![wire]).pop().expect("one message")
    }
    /// An empty batch buffer made from a sent batch's `wire`, when the
    /// encoding lets it be reused (the default lets it go).
    #[doc(hidden)]
    #[must_use]
    fn recycle(wire: Vec<Self::Wire>) -> Vec<Self> {
        drop(wire);
        Vec::new()
    }
}

/// A plain type sent as its own MPI datatype: every primitive with an
/// rsmpi [`Equivalence`], and your own `#[derive(Equivalence)]` structs
/// after a one-line `impl swco_mpi::Typed for MyStruct {}`.
///
/// (A marker trait rather than a blanket impl over `Equivalence`, because
/// Rust's coherence rules forbid a blanket impl next to `Vec<u8>`'s.)
pub trait Typed: Equivalence + Send + 'static {}

macro_rules! typed {
    ($($t:ty),*) => { $(impl Typed for $t {})* };
}
typed!(bool, f32, f64, i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl<T: Typed> Payload for T {
    type Wire = T;
    const POSTED: bool = true;
    fn decode_one(wire: T) -> T {
        wire
    }
    fn encode(batch: Vec<T>) -> Vec<T> {
        batch
    }
    fn decode(wire: Vec<T>) -> Vec<T> {
        wire
    }
    fn recycle(mut wire: Vec<T>) -> Vec<T> {
        wire.clear();
        wire
    }
}

impl Payload for Vec<u8> {
    type Wire = u8;
    fn encode(batch: Vec<Vec<u8>>) -> Vec<u8> {
        let total: usize = batch.iter().map(|m| 4 + m.len()).sum();
        let mut out = Vec::with_capacity(total);
        for m in batch {
            let len = u32::try_from(m.len()).expect("byte message longer than 4 GiB");
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&m);
        }
        out
    }
    fn decode(wire: Vec<u8>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut rest = &wire[..];
        while rest.len() >= 4 {
            let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            out.push(rest[4..4 + len].to_vec());
            rest = &rest[4 + len..];
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip() {
        let batch = vec![vec![], vec![1u8, 2, 3], vec![9; 300]];
        let wire = <Vec<u8> as Payload>::encode(batch.clone());
        let out = <Vec<u8> as Payload>::decode(wire);
        assert_eq!(out, batch);
    }

    #[test]
    fn tags_apart() {
        // No data tag is the control tag, and every one is a tag MPI
        // guarantees.
        assert!(data_tag(0) > CTRL_TAG);
        assert!(data_tag(MAX_TAG) <= 32_767);
    }
}
