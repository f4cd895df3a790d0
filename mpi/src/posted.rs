//! Receives kept posted: how the bridge finds incoming batches of a
//! bounded size.
//!
//! A batch whose size has a known bound (control frames; data of a
//! [`Typed`](crate::Typed) payload, cut by its sender to [`data_cap`]
//! messages) arrives into a buffer the bridge posted for its MPI tag
//! beforehand (`MPI_Irecv` from any source), and the bridge finds it with
//! `MPI_Test`. Before, every batch was found with `MPI_Improbe` and then
//! received with `MPI_Mrecv`: a poll of `MPI_Improbe` costs several times
//! an `MPI_Test`, and a found batch costs a probe, a matched receive and an
//! allocation where a posted one is already in place.
//!
//! # Invariants
//!
//! * One receive is posted per tag at a time, and the bridge never probes
//!   a tag it posts for: `MPI_Improbe` asks only for the tags of routes
//!   whose batches are probed (byte messages). A tag's batches are thus
//!   matched by its receives alone, in MPI's order per (source, tag), and
//!   each is delivered before the receive is posted again; a batch that
//!   arrives in between waits in MPI's unexpected queue, which the next
//!   receive matches first. Reposting before an any-tag probe is not
//!   enough: it keeps the probe from the batch after the last one
//!   delivered, which the new receive matches, but once that receive has
//!   it (complete, not yet delivered) the probe would take the batch after
//!   it and deliver it first.
//! * Nothing reads or writes the buffer while the receive is posted; the
//!   first `count` elements are read, once, after a completion and before
//!   it is posted again.
//! * A [`Posted`] lives and dies on the bridge's thread, before
//!   `MPI_Finalize`.

use std::mem::MaybeUninit;
use std::os::raw::c_void;

use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;

/// The most messages in one data batch of a posted payload; a sender cuts
/// longer batches.
pub(crate) const DATA_CAP: usize = 4096;

/// The most messages of `E` in one posted data batch: [`DATA_CAP`], or
/// fewer for a large `E`, so that a route's posted buffer stays within
/// about 64 KiB (but holds at least 16 messages). Sender and receiver
/// compute it from the same type.
pub(crate) fn data_cap<E>() -> usize {
    (64 * 1024 / std::mem::size_of::<E>().max(1)).clamp(16, DATA_CAP)
}

/// The most words in one control batch (a whole number of frames); the
/// bridge cuts longer ones.
pub(crate) const CTRL_CAP: usize = crate::wire::FRAME * 512;

/// A receive posted on one MPI tag, from any source, into a buffer of
/// `cap` elements of `E`.
pub(crate) struct Posted<E: Equivalence> {
    buf: Box<[MaybeUninit<E>]>,
    req: ffi::MPI_Request,
    /// Completed and read, not posted again yet (see [`Posted::repost`]).
    idle: bool,
    comm: ffi::MPI_Comm,
    tag: i32,
}

// SAFETY: a `Posted` is made, used and dropped on the bridge's thread only
// (it is created by the bridge after the route that holds it was handed
// over), so the raw MPI handles it holds never cross threads while live.
unsafe impl<E: Equivalence> Send for Posted<E> {}

impl<E: Equivalence> Posted<E> {
    /// Posts a receive of up to `cap` elements on `tag` of `comm`.
    pub(crate) fn new(comm: &SimpleCommunicator, tag: i32, cap: usize) -> Self {
        let mut buf = Vec::with_capacity(cap);
        buf.resize_with(cap, MaybeUninit::uninit);
        let mut posted = Posted {
            buf: buf.into_boxed_slice(),
            // SAFETY: reading a constant the MPI library initialised.
            req: unsafe { ffi::RSMPI_REQUEST_NULL },
            idle: false,
            comm: comm.as_raw(),
            tag,
        };
        posted.post();
        posted
    }

    fn post(&mut self) {
        let count = i32::try_from(self.buf.len()).expect("a posted buffer fits an MPI count");
        // SAFETY: the buffer holds `count` elements of `E`, laid out as
        // `E`'s MPI datatype describes; nothing touches it until the
        // request completes (`test`) or is cancelled (`drop`), and the
        // request handle is written here and read only by those two.
        unsafe {
            ffi::MPI_Irecv(
                self.buf.as_mut_ptr().cast::<c_void>(),
                count,
                E::equivalent_datatype().as_raw(),
                ffi::RSMPI_ANY_SOURCE,
                self.tag,
                self.comm,
                &mut self.req,
            );
        }
    }

    /// Posts the receive again if a completion left it unposted.
    fn repost(&mut self) {
        if self.idle {
            self.idle = false;
            self.post();
        }
    }

    /// If a batch has arrived: hands `f` its source and its elements (an
    /// iterator that reads each out of the buffer once) and returns what
    /// `f` returned. Elements `f` leaves unread are forgotten, not dropped.
    ///
    /// After a batch of one message, the receive is posted again at the
    /// next `test`, not here: reposting costs about as much as the test,
    /// and done later it is off the path from the message to its consumer
    /// (who, in a ping-pong, has replied before the next test). A batch that arrives meanwhile waits in MPI's unexpected
    /// queue, which the new receive matches first. After a longer batch
    /// (a stream) it is posted at once, for the next batch to land in.
    pub(crate) fn test<R>(&mut self, f: impl FnOnce(i32, Arrived<'_, E>) -> R) -> Option<R> {
        self.repost();
        let mut flag = 0;
        let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
        // SAFETY: `req` is a live request this struct posted; `flag` and
        // `status` are out-parameters MPI writes.
        unsafe { ffi::MPI_Test(&mut self.req, &mut flag, status.as_mut_ptr()) };
        if flag == 0 {
            return None;
        }
        // SAFETY: the request completed, so MPI filled in the status.
        let status = unsafe { status.assume_init() };
        let mut count = 0;
        // SAFETY: a completed receive's status, and the datatype it used.
        unsafe { ffi::MPI_Get_count(&status, E::equivalent_datatype().as_raw(), &mut count) };
        let n = usize::try_from(count).unwrap_or(0).min(self.buf.len());
        let r = f(
            status.MPI_SOURCE,
            Arrived {
                slots: self.buf[..n].iter(),
            },
        );
        if n > 1 {
            // A batch of several: the sender is streaming, and the next
            // batch may be on its way; a receive posted for it saves MPI a
            // copy through its unexpected queue.
            self.post();
        } else {
            self.idle = true;
        }
        Some(r)
    }
}

/// The elements of a completed receive, each read out of the buffer once.
pub(crate) struct Arrived<'a, E> {
    slots: std::slice::Iter<'a, MaybeUninit<E>>,
}

impl<E> Iterator for Arrived<'_, E> {
    type Item = E;
    fn next(&mut self) -> Option<E> {
        // SAFETY: `Arrived` covers only the elements MPI wrote into a
        // completed receive (copies of the sender's valid values, by `E`'s
        // datatype), the buffer is not posted again until it is gone, and
        // the slice iterator hands out each slot once.
        self.slots
            .next()
            .map(|slot| unsafe { slot.assume_init_read() })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.slots.size_hint()
    }
}

impl<E> ExactSizeIterator for Arrived<'_, E> {}

impl<E> Arrived<'_, E> {
    /// The elements not read yet, moved into a `Vec` with one copy.
    pub(crate) fn into_vec(self) -> Vec<E> {
        let rest = self.slots.as_slice();
        let mut v = Vec::with_capacity(rest.len());
        // SAFETY: as in `next`, every slot of `rest` holds a valid `E` not
        // read yet; the copy moves them into `v`'s spare capacity (which
        // holds at least `rest.len()`), after which `set_len` makes them
        // `v`'s, and `self` (consumed) reads none of them again.
        unsafe {
            std::ptr::copy_nonoverlapping(rest.as_ptr().cast::<E>(), v.as_mut_ptr(), rest.len());
            v.set_len(rest.len());
        }
        v
    }
}

impl<E: Equivalence> Drop for Posted<E> {
    fn drop(&mut self) {
        // SAFETY: `req` is this struct's posted request (or null once
        // complete). Cancelling and waiting leaves MPI holding nothing of
        // the buffer before it is freed; a batch that completed it anyway
        // is dropped with it (the protocol sends none to a route at this
        // point: every source has closed).
        unsafe {
            if self.req != ffi::RSMPI_REQUEST_NULL {
                ffi::MPI_Cancel(&mut self.req);
                ffi::MPI_Wait(&mut self.req, ffi::RSMPI_STATUS_IGNORE);
            }
        }
    }
}
