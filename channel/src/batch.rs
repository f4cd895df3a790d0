//! Batch operations: many messages per claim, as the Sunway DMA engine
//! moves blocks rather than words.
//!
//! Invariants:
//!
//! 1. **One claim covers a run.** A batch claims the longest run of ready
//!    slots it can use (`Cursor::claim_run`), up to what it holds, and
//!    copies the whole run before anything else happens: no user code (an
//!    iterator's `next`, a `Drop`, a waker) runs between a claim and the
//!    publish of its last slot, so a batch never leaves a claimed slot
//!    unpublished (the channel's invariant 2).
//! 2. **Order.** A sender's messages enter the ring in iterator order, and a
//!    receiver's `Vec` gets them in ring order: per-producer order holds
//!    within a batch and across batches.
//! 3. **Nothing is lost or doubled.** Messages pulled from the iterator wait
//!    in a [`Chunk`], which owns exactly those not yet in the ring: its
//!    start moves past a run before anyone is woken (wakers are user code
//!    and may panic), and whatever it still holds goes back to the caller in
//!    the error, or is dropped if the sender unwinds.
//! 4. **Same semantics as one message.** Blocking, timeouts and
//!    disconnection follow `send`/`recv`: a batch blocks only while the ring
//!    is full (empty), and fails only when the other side is gone (or the
//!    deadline passes, or, for the `try_` forms, the ring is full or empty).

use std::mem::{self, MaybeUninit};
use std::time::{Duration, Instant};

use crate::chan::{Chan, Unsent};
use crate::endpoint::{deadline_after, Receiver, Sender};
use crate::error::{
    RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};
use crate::{Mode, Protocol};

/// Messages pulled from a batch's iterator that are not in the ring yet:
/// `buf[start..end]` is initialised and owned by the chunk.
struct Chunk<T, const N: usize> {
    buf: [MaybeUninit<T>; N],
    start: usize,
    end: usize,
}

impl<T, const N: usize> Chunk<T, N> {
    fn new() -> Self {
        Chunk {
            // SAFETY: an array of `MaybeUninit` needs no initialisation.
            buf: unsafe { MaybeUninit::uninit().assume_init() },
            start: 0,
            end: 0,
        }
    }

    fn len(&self) -> usize {
        self.end - self.start
    }

    /// Pulls up to `N` messages from `values` into the (empty) chunk. The
    /// iterator may panic; the chunk then still owns what it pulled.
    fn refill(&mut self, values: &mut impl Iterator<Item = T>) {
        debug_assert_eq!(self.len(), 0);
        self.start = 0;
        self.end = 0;
        while self.end < N {
            let Some(msg) = values.next() else { break };
            self.buf[self.end].write(msg);
            self.end += 1;
        }
    }

    fn as_ptr(&self) -> *const T {
        self.buf[self.start..].as_ptr().cast()
    }

    /// The first `k` held messages went into the ring: the chunk no longer
    /// owns them.
    fn forget_front(&mut self, k: usize) {
        debug_assert!(k <= self.len());
        self.start += k;
    }

    /// What the chunk holds, then the rest of `values`: what a failed batch
    /// gives back.
    fn give_back(mut self, values: impl Iterator<Item = T>) -> Vec<T> {
        let mut rest = Vec::with_capacity(self.len() + values.size_hint().0);
        while self.start < self.end {
            // SAFETY: `buf[start..end]` is initialised and ours; moving
            // `start` past the slot first hands it to `rest` alone.
            let msg = unsafe { self.buf[self.start].assume_init_read() };
            self.start += 1;
            rest.push(msg);
        }
        rest.extend(values);
        rest
    }
}

impl<T, const N: usize> Drop for Chunk<T, N> {
    fn drop(&mut self) {
        while self.start < self.end {
            let i = self.start;
            // Moved first, so that no slot is dropped twice; if a drop
            // panics, the messages after it leak (safely).
            self.start += 1;
            // SAFETY: `buf[i]` was initialised and owned by the chunk.
            unsafe { self.buf[i].assume_init_drop() };
        }
    }
}

/// How a batch waits for room.
#[derive(Clone, Copy)]
enum Wait {
    /// Not at all: stop at a full ring.
    Never,
    /// While the ring is full, until the deadline if there is one.
    Until(Option<Instant>),
}

/// Sends every message of `values`, `N` at a time; returns how many went.
#[inline(never)]
fn send_chunked<T, M: Mode, P: Protocol, const N: usize>(
    chan: &Chan<T, M, P>,
    mut values: impl Iterator<Item = T>,
    wait: Wait,
) -> Result<usize, (Unsent, Vec<T>)> {
    let mut chunk = Chunk::<T, N>::new();
    let mut sent = 0;
    loop {
        if chunk.len() == 0 {
            chunk.refill(&mut values);
            if chunk.len() == 0 {
                return Ok(sent);
            }
        }
        // SAFETY: the chunk owns `len()` contiguous messages from
        // `as_ptr()`; on `Ok(k)` it forgets the first `k` before anything
        // else runs, and on `Err` (or unwinding) it still owns them all.
        let outcome = unsafe {
            match wait {
                Wait::Never => chan.try_send_run_from(chunk.as_ptr(), chunk.len()),
                Wait::Until(deadline) => chan.send_run_from(chunk.as_ptr(), chunk.len(), deadline),
            }
        };
        match outcome {
            Ok(k) => {
                chunk.forget_front(k);
                sent += k;
                chan.wake_receivers(k);
            }
            Err(why) => return Err((why, chunk.give_back(values))),
        }
    }
}

/// Sends `values` in chunks sized so that a chunk stays small on a
/// coroutine's stack.
fn send_all<T, M: Mode, P: Protocol>(
    chan: &Chan<T, M, P>,
    values: impl IntoIterator<Item = T>,
    wait: Wait,
) -> Result<usize, (Unsent, Vec<T>)> {
    let values = values.into_iter();
    // At most 1 KiB of messages on the stack; a large message goes alone.
    if mem::size_of::<T>() <= 32 {
        send_chunked::<T, M, P, 32>(chan, values, wait)
    } else if mem::size_of::<T>() <= 128 {
        send_chunked::<T, M, P, 8>(chan, values, wait)
    } else {
        send_chunked::<T, M, P, 1>(chan, values, wait)
    }
}

impl<T, M: Mode, P: Protocol> Sender<T, M, P> {
    /// Sends every message of `values`, in order, blocking while the
    /// channel is full; returns how many were sent. Each claim on the ring
    /// covers as many messages as there is room for (up to 32 small ones),
    /// so a batch pays for its synchronisation once per run, not once per
    /// message.
    ///
    /// Fails once every receiver is gone, giving back the messages not
    /// sent: the error holds the rest of `values` too, so pass a finite
    /// iterator (or a `Vec`).
    ///
    /// ```
    /// let (tx, rx) = swco_channel::mpmc::bounded(4);
    /// assert_eq!(tx.send_batch(0..3), Ok(3));
    /// let mut got = Vec::new();
    /// assert_eq!(rx.recv_batch(&mut got, 10), Ok(3));
    /// assert_eq!(got, [0, 1, 2]);
    /// drop(rx);
    /// assert_eq!(tx.send_batch(vec![7, 8]).unwrap_err().into_inner(), [7, 8]);
    /// ```
    ///
    /// # Errors
    ///
    /// [`SendError`] if every receiver is gone when a run of messages is
    /// about to go in: at the start, or part-way (before any run, or while
    /// waiting for room). It holds every message not sent, in order: those
    /// already pulled from `values` and the rest of `values`. Messages sent
    /// before the failure stay in the channel (and are dropped with it);
    /// how many there were is not reported. An empty `values` returns
    /// `Ok(0)` without looking at the channel, so it never fails.
    pub fn send_batch<I: IntoIterator<Item = T>>(
        &self,
        values: I,
    ) -> Result<usize, SendError<Vec<T>>> {
        send_all(&self.chan, values, Wait::Until(None)).map_err(|(_, rest)| SendError(rest))
    }

    /// Sends the messages of `values`, in order, while there is room now.
    ///
    /// `Ok(n)`: all `n` were sent (`Ok(0)` for an empty `values`, whatever
    /// the channel's state).
    ///
    /// ```
    /// use swco_channel::{spsc, TrySendError};
    /// let (tx, rx) = spsc::bounded(2);
    /// assert_eq!(tx.try_send_batch([1, 2, 3]), Err(TrySendError::Full(vec![3])));
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), [1, 2]);
    /// ```
    ///
    /// # Errors
    ///
    /// Never blocks. Each error holds `rest`: the messages not sent, in
    /// order, the rest of `values` included. Messages sent before the
    /// failure stay in the channel; how many there were is not reported.
    ///
    /// * [`TrySendError::Disconnected`] if every receiver is gone when a
    ///   run is about to go in (checked before `Full`).
    /// * [`TrySendError::Full`] if the channel has no free slot for the next
    ///   message, perhaps after some were sent; on a zero-capacity channel,
    ///   if no receiver is waiting to take the next message.
    pub fn try_send_batch<I: IntoIterator<Item = T>>(
        &self,
        values: I,
    ) -> Result<usize, TrySendError<Vec<T>>> {
        send_all(&self.chan, values, Wait::Never).map_err(|(why, rest)| match why {
            Unsent::Disconnected => TrySendError::Disconnected(rest),
            _ => TrySendError::Full(rest),
        })
    }

    /// [`send_batch`](Sender::send_batch), blocking at most `timeout` in
    /// all; on a timeout the error holds the messages not sent.
    ///
    /// # Errors
    ///
    /// Each error holds the messages not sent, in order, the rest of
    /// `values` included; messages sent before the failure stay in the
    /// channel, and how many there were is not reported.
    ///
    /// * [`SendTimeoutError::Disconnected`] if every receiver is gone when
    ///   a run is about to go in, or while waiting for room.
    /// * [`SendTimeoutError::Timeout`] if the channel was still full when
    ///   `timeout` (counted from the call, for the whole batch) had passed
    ///   and messages were left. Each run is tried at least once before the
    ///   deadline is checked; a `timeout` too large to represent as an
    ///   [`Instant`] never expires.
    pub fn send_batch_timeout<I: IntoIterator<Item = T>>(
        &self,
        values: I,
        timeout: Duration,
    ) -> Result<usize, SendTimeoutError<Vec<T>>> {
        self.send_batch_until(values, deadline_after(timeout))
    }

    /// [`send_batch`](Sender::send_batch), blocking at most until
    /// `deadline`; on a timeout the error holds the messages not sent.
    ///
    /// # Errors
    ///
    /// As for [`send_batch_timeout`](Sender::send_batch_timeout), with the
    /// whole batch bounded by `deadline`: `Disconnected` if every receiver
    /// is gone, `Timeout` if the channel was still full at `deadline` with
    /// messages left; each holds the messages not sent.
    pub fn send_batch_deadline<I: IntoIterator<Item = T>>(
        &self,
        values: I,
        deadline: Instant,
    ) -> Result<usize, SendTimeoutError<Vec<T>>> {
        self.send_batch_until(values, Some(deadline))
    }

    fn send_batch_until<I: IntoIterator<Item = T>>(
        &self,
        values: I,
        deadline: Option<Instant>,
    ) -> Result<usize, SendTimeoutError<Vec<T>>> {
        send_all(&self.chan, values, Wait::Until(deadline)).map_err(|(why, rest)| match why {
            Unsent::Disconnected => SendTimeoutError::Disconnected(rest),
            _ => SendTimeoutError::Timeout(rest),
        })
    }
}

/// Appends to `out` what `take` moves straight into its spare capacity:
/// `take` gets the destination and a cap (`max`, capped by what one claim
/// can take) and returns how many messages it moved. The room is reserved
/// before `take` runs, so nothing reallocates (or unwinds) inside a claim.
/// `max == 0` appends nothing and succeeds.
///
/// # Safety
/// `take` writes exactly as many messages as it returns `Ok` with, at most
/// its cap, contiguously from the destination; on `Err` (or unwinding) it
/// writes none.
unsafe fn append<T, M: Mode, P: Protocol, E>(
    chan: &Chan<T, M, P>,
    out: &mut Vec<T>,
    max: usize,
    take: impl FnOnce(*mut T, usize) -> Result<usize, E>,
) -> Result<usize, E> {
    if max == 0 {
        return Ok(0);
    }
    let max = max.min(chan.capacity().max(1));
    out.reserve(max);
    // SAFETY: the room for `max` more after `len` was just reserved and lies
    // outside the channel; the caller vouches that `take` initialises
    // exactly the `k` that `set_len` covers.
    unsafe {
        let k = take(out.as_mut_ptr().add(out.len()), max)?;
        out.set_len(out.len() + k);
        Ok(k)
    }
}

impl<T, M: Mode, P: Protocol> Receiver<T, M, P> {
    /// Receives at least one message and at most `max`, appending them to
    /// `out` in order; blocks while the channel is empty, and then takes
    /// what is there, under one claim. Returns how many were appended (0
    /// only when `max` is 0).
    ///
    /// Once every sender is gone, buffered messages are still delivered,
    /// then it fails, as [`recv`](Receiver::recv) does.
    ///
    /// ```
    /// let (tx, rx) = swco_channel::spmc::bounded(8);
    /// tx.send_batch(1..=5).unwrap();
    /// let mut got = vec![0];
    /// assert_eq!(rx.recv_batch(&mut got, 3), Ok(3));
    /// assert_eq!(got, [0, 1, 2, 3]);
    /// ```
    ///
    /// # Errors
    ///
    /// [`RecvError`] if the channel is empty and every sender is gone, when
    /// the call starts or while it waits; `out` is then unchanged (it may
    /// have grown its capacity). Messages sent before that are still
    /// received first. With `max == 0` it returns `Ok(0)` at once and never
    /// fails.
    pub fn recv_batch(&self, out: &mut Vec<T>, max: usize) -> Result<usize, RecvError> {
        self.recv_batch_until(out, max, None).map_err(|_| RecvError)
    }

    /// Receives up to `max` messages that are in the channel now, appending
    /// them to `out` in order; returns how many were appended.
    ///
    /// # Errors
    ///
    /// Never blocks; on an error `out` is unchanged (it may have grown its
    /// capacity). With `max == 0` it returns `Ok(0)` at once and never
    /// fails.
    ///
    /// * [`TryRecvError::Empty`] if there is no message now and some sender
    ///   remains; on a zero-capacity channel, if no sender is waiting to
    ///   hand a message over.
    /// * [`TryRecvError::Disconnected`] if the channel is empty and every
    ///   sender is gone. Messages sent before that are still received first.
    pub fn try_recv_batch(&self, out: &mut Vec<T>, max: usize) -> Result<usize, TryRecvError> {
        // SAFETY: `try_recv_into` moves `k <= max` messages to `dst` and
        // returns `Ok(k)`, or moves none and fails.
        unsafe {
            append(&self.chan, out, max, |dst, max| {
                self.chan.try_recv_into(dst, max)
            })
        }
    }

    /// [`recv_batch`](Receiver::recv_batch), blocking at most `timeout`
    /// while the channel is empty.
    ///
    /// # Errors
    ///
    /// On an error `out` is unchanged (it may have grown its capacity). With
    /// `max == 0` it returns `Ok(0)` at once and never fails.
    ///
    /// * [`RecvTimeoutError::Disconnected`] if the channel is empty and
    ///   every sender is gone, before or during the wait. Messages sent
    ///   before that are still received first.
    /// * [`RecvTimeoutError::Timeout`] if the channel was still empty when
    ///   `timeout` had passed. The receive is tried at least once before the
    ///   deadline is checked; a `timeout` too large to represent as an
    ///   [`Instant`] never expires.
    pub fn recv_batch_timeout(
        &self,
        out: &mut Vec<T>,
        max: usize,
        timeout: Duration,
    ) -> Result<usize, RecvTimeoutError> {
        self.recv_batch_until(out, max, deadline_after(timeout))
    }

    /// [`recv_batch`](Receiver::recv_batch), blocking at most until
    /// `deadline` while the channel is empty.
    ///
    /// # Errors
    ///
    /// As for [`recv_batch_timeout`](Receiver::recv_batch_timeout):
    /// `Disconnected` if the channel is empty and every sender is gone,
    /// `Timeout` if it was still empty at `deadline` (a `deadline` already
    /// past still tries once). `out` is unchanged on an error, and
    /// `max == 0` returns `Ok(0)` at once.
    pub fn recv_batch_deadline(
        &self,
        out: &mut Vec<T>,
        max: usize,
        deadline: Instant,
    ) -> Result<usize, RecvTimeoutError> {
        self.recv_batch_until(out, max, Some(deadline))
    }

    fn recv_batch_until(
        &self,
        out: &mut Vec<T>,
        max: usize,
        deadline: Option<Instant>,
    ) -> Result<usize, RecvTimeoutError> {
        // SAFETY: as in `try_recv_batch`, for `recv_into`. If a blocked
        // receiver unwinds out of its park, nothing was moved in.
        unsafe {
            append(&self.chan, out, max, |dst, max| {
                self.chan.recv_into(dst, max, deadline)
            })
        }
    }
}
