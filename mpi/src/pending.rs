//! Sends in flight: every `MPI_Isend` the bridge starts, owning its buffer
//! until MPI has read it.

use mpi::request::{Request, StaticScope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

/// An `MPI_Isend` in flight, owning its buffer.
pub(crate) trait Pending {
    /// Tests for completion; true (and the buffer freed) once complete.
    fn done(&mut self) -> bool;
}

pub(crate) struct PendingSend<E: Equivalence + 'static> {
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
    pub(crate) fn start(
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
    pub(crate) fn start_cut(
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
