//! The typed endpoints, generic over mode and protocol. Each mode module
//! (`spsc`, `spmc`, `mpsc`, `mpmc`) names them with its mode filled in.

use std::fmt;
use std::marker::PhantomData;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::time::{Duration, Instant};

use crate::chan::{Chan, Unsent};
use crate::error::{
    RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};
use crate::sync::Arc;
use crate::{Cas, ManyConsumers, ManyProducers, Mode, Protocol};

/// The sending side of a channel of mode `M` and protocol `P`.
///
/// Usually named through a mode module, e.g. [`mpmc::Sender<T>`](crate::mpmc::Sender).
/// It is `Clone` (and `Sync`) only in the modes with many producers.
pub struct Sender<T, M: Mode, P: Protocol = Cas> {
    pub(crate) chan: Arc<Chan<T, M, P>>,
    _share: PhantomData<M::TxShare>,
}

/// The receiving side of a channel of mode `M` and protocol `P`.
///
/// Usually named through a mode module, e.g. [`mpmc::Receiver<T>`](crate::mpmc::Receiver).
/// It is `Clone` (and `Sync`) only in the modes with many consumers.
pub struct Receiver<T, M: Mode, P: Protocol = Cas> {
    pub(crate) chan: Arc<Chan<T, M, P>>,
    _share: PhantomData<M::RxShare>,
}

/// Creates a channel of mode `M` and protocol `P` holding up to `capacity`
/// messages.
///
/// A `capacity` of 0 makes a rendezvous channel, with Go's unbuffered
/// semantics: a send completes only when a receiver takes the message
/// (`try_send` only if a receiver is already waiting), and `len()` is
/// always 0.
///
/// # Panics
///
/// If `capacity` exceeds `usize::MAX / 4` (ring positions could no longer
/// tell laps apart).
#[must_use]
#[track_caller]
pub fn bounded_in<T, M: Mode, P: Protocol>(
    capacity: usize,
) -> (Sender<T, M, P>, Receiver<T, M, P>) {
    let chan = Arc::new(Chan::new(capacity));
    (
        Sender {
            chan: chan.clone(),
            _share: PhantomData,
        },
        Receiver {
            chan,
            _share: PhantomData,
        },
    )
}

pub(crate) fn deadline_after(timeout: Duration) -> Option<Instant> {
    // A timeout too large to represent waits for ever.
    Instant::now().checked_add(timeout)
}

// ---- settling a send ---------------------------------------------------
//
// The endpoints pass their message down by pointer (`Chan::send_from`) and
// keep it where it is, in their by-value parameter, until the send is
// settled. Then it is moved exactly once more, by one of the `Settle`
// functions: forgotten (the ring holds it now) or moved into the error that
// gives it back.
//
// In an unoptimised build every by-value use of a `T` is a `T`-sized slot in
// the frame that makes it, used or not, and the endpoint's frame is the one
// live while a sender is parked. So there the endpoint makes a single call,
// through a function pointer chosen by the outcome: one slot in its frame,
// one more, briefly, in the function called. An optimised build drops those
// slots but would keep the indirect call, so there each outcome calls its
// function directly.

/// Disposes of a settled send's message and makes the endpoint's result.
#[cfg(debug_assertions)]
type Settle<T, M, P, E> = fn(&Chan<T, M, P>, Result<(), Unsent>, T) -> Result<(), E>;

/// The `Settle` of a send that succeeded: the ring holds the message.
fn delivered<T, M: Mode, P: Protocol, E>(
    chan: &Chan<T, M, P>,
    _: Result<(), Unsent>,
    msg: T,
) -> Result<(), E> {
    // Forget this copy before waking anyone: a waker may panic (wakers are
    // user code), and this copy must not be dropped as that unwinds.
    std::mem::forget(msg);
    chan.wake_receiver();
    Ok(())
}

/// The error a failed send gives its message back in.
trait GiveBack<T>: Sized {
    /// The `Settle` of a send that failed: the message goes into the error.
    ///
    /// Does not unwind in an optimised build (its checks are debug
    /// assertions): there `give_back_from` calls it on a bitwise copy of a
    /// message whose original the caller still holds.
    fn give_back<M: Mode, P: Protocol>(
        chan: &Chan<T, M, P>,
        outcome: Result<(), Unsent>,
        msg: T,
    ) -> Result<(), Self>;

    /// [`give_back`](GiveBack::give_back) of a bitwise copy of `*msg`,
    /// cold and out of line, so that neither the copy nor the error takes
    /// room in a hot frame.
    ///
    /// # Safety
    /// The caller must forget `*msg` afterwards: the copy owns the message.
    #[cfg(not(debug_assertions))]
    #[cold]
    #[inline(never)]
    unsafe fn give_back_from<M: Mode, P: Protocol>(
        chan: &Chan<T, M, P>,
        outcome: Result<(), Unsent>,
        msg: &T,
    ) -> Result<(), Self> {
        // SAFETY: our caller forgets the original, and `give_back` does not
        // unwind here, so the copy is the only one ever dropped.
        Self::give_back(chan, outcome, unsafe { std::ptr::read(msg) })
    }
}

impl<T> GiveBack<T> for SendError<T> {
    #[inline]
    fn give_back<M: Mode, P: Protocol>(
        _: &Chan<T, M, P>,
        outcome: Result<(), Unsent>,
        msg: T,
    ) -> Result<(), Self> {
        // Without a deadline the only failure is disconnection.
        debug_assert_eq!(outcome, Err(Unsent::Disconnected));
        Err(SendError(msg))
    }
}

impl<T> GiveBack<T> for TrySendError<T> {
    #[inline]
    fn give_back<M: Mode, P: Protocol>(
        _: &Chan<T, M, P>,
        outcome: Result<(), Unsent>,
        msg: T,
    ) -> Result<(), Self> {
        debug_assert!(matches!(outcome, Err(Unsent::Full | Unsent::Disconnected)));
        if outcome == Err(Unsent::Full) {
            Err(TrySendError::Full(msg))
        } else {
            Err(TrySendError::Disconnected(msg))
        }
    }
}

impl<T> GiveBack<T> for SendTimeoutError<T> {
    #[inline]
    fn give_back<M: Mode, P: Protocol>(
        _: &Chan<T, M, P>,
        outcome: Result<(), Unsent>,
        msg: T,
    ) -> Result<(), Self> {
        // A blocking send waits out a full channel.
        debug_assert!(matches!(
            outcome,
            Err(Unsent::Timeout | Unsent::Disconnected)
        ));
        if outcome == Err(Unsent::Disconnected) {
            Err(SendTimeoutError::Disconnected(msg))
        } else {
            Err(SendTimeoutError::Timeout(msg))
        }
    }
}

/// Ends a send that `send_from` or `try_send_from` reported as `$outcome`:
/// the one by-value move of `$msg` in the endpoint (see above).
#[cfg(debug_assertions)]
macro_rules! settle {
    ($chan:expr, $outcome:expr, $msg:ident) => {{
        let outcome: Result<(), Unsent> = $outcome;
        let settle: Settle<T, M, P, _> = match outcome {
            Ok(()) => delivered,
            Err(_) => GiveBack::give_back,
        };
        settle($chan, outcome, $msg)
    }};
}

/// Ends a send that `send_from` or `try_send_from` reported as `$outcome`:
/// `$msg` is forgotten, after being copied into the error if it failed.
#[cfg(not(debug_assertions))]
macro_rules! settle {
    ($chan:expr, $outcome:expr, $msg:ident) => {{
        let outcome: Result<(), Unsent> = $outcome;
        match outcome {
            Ok(()) => delivered($chan, outcome, $msg),
            Err(_) => {
                // SAFETY: `$msg` is forgotten just below.
                let result = unsafe { GiveBack::give_back_from($chan, outcome, &$msg) };
                std::mem::forget($msg);
                result
            }
        }
    }};
}

impl<T, M: Mode, P: Protocol> Sender<T, M, P> {
    /// Sends `msg`, blocking while the channel is full. In a coroutine only
    /// the coroutine blocks; on a plain thread, the thread parks.
    ///
    /// Fails, giving the message back, once every receiver is gone.
    ///
    /// ```
    /// let (tx, rx) = swco_channel::mpmc::bounded(1);
    /// tx.send(1).unwrap();
    /// drop(rx);
    /// assert_eq!(tx.send(2).unwrap_err().into_inner(), 2);
    /// ```
    ///
    /// # Errors
    ///
    /// [`SendError`], holding `msg`, if every receiver is gone: already when
    /// the call starts (even if the channel has room), or while it waits for
    /// room (the last receiver's drop wakes it). The message is then not in
    /// the channel. A send that succeeded is not undone if the receivers go
    /// later: the message is dropped with the channel's other buffered ones.
    ///
    /// # Large messages: box them
    ///
    /// The message is moved in by value, so it is on the sender's stack
    /// until the send copies it into the channel: in the caller's frame,
    /// next to the `Result` that could give it back. The send path itself
    /// adds no copy in an optimised build, and in a debug build one while it
    /// waits (one more, briefly, as it finishes). Still, a coroutine's stack
    /// is small (64 KiB by default in the swco executor), and the caller's
    /// copies alone can fill it: send anything larger than a few hundred
    /// bytes as a `Box<T>` (or a `Vec<T>`), so that only a pointer moves.
    pub fn send(&self, msg: T) -> Result<(), SendError<T>> {
        // SAFETY: `msg` is ours and stays put until `settle` moves it. On
        // `Ok` the ring holds a copy, and `settle` forgets ours; on `Err`,
        // and if the send unwinds out of a park, the message is still ours.
        let outcome = unsafe { self.chan.send_from(&msg, None) };
        settle!(&self.chan, outcome, msg)
    }

    /// Sends `msg` if there is room now.
    ///
    /// ```
    /// use swco_channel::{spsc, TrySendError};
    /// let (tx, _rx) = spsc::bounded(1);
    /// assert_eq!(tx.try_send(1), Ok(()));
    /// assert_eq!(tx.try_send(2), Err(TrySendError::Full(2)));
    /// ```
    ///
    /// # Errors
    ///
    /// Never blocks; each error holds `msg`, which is not in the channel.
    ///
    /// * [`TrySendError::Disconnected`] if every receiver is gone. This is
    ///   checked first: it is reported even when the channel is also full.
    /// * [`TrySendError::Full`] if the channel holds `capacity()` messages
    ///   now (a receiver in the middle of taking one is waited for briefly,
    ///   by spinning, not reported as `Full`). On a zero-capacity channel:
    ///   if no receiver is waiting (in a blocking receive, a future or a
    ///   select) to take the message at this moment.
    pub fn try_send(&self, msg: T) -> Result<(), TrySendError<T>> {
        // SAFETY: as in `send`.
        let outcome = unsafe { self.chan.try_send_from(&msg) };
        settle!(&self.chan, outcome, msg)
    }

    /// Sends `msg`, blocking at most `timeout` while the channel is full.
    ///
    /// See [`send`](Sender::send) on large messages.
    ///
    /// # Errors
    ///
    /// Each error holds `msg`, which is not in the channel.
    ///
    /// * [`SendTimeoutError::Disconnected`] if every receiver is gone,
    ///   before or during the wait.
    /// * [`SendTimeoutError::Timeout`] if the channel was still full when
    ///   `timeout` had passed. The send is tried at least once before the
    ///   deadline is checked, so a zero `timeout` still succeeds if there is
    ///   room now; a `timeout` too large to represent as an [`Instant`]
    ///   never expires.
    pub fn send_timeout(&self, msg: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        // Not through `send_deadline`: passing `msg` on by value would put
        // one more copy of it on the stack in a debug build.
        let deadline = deadline_after(timeout);
        // SAFETY: as in `send`.
        let outcome = unsafe { self.chan.send_from(&msg, deadline) };
        settle!(&self.chan, outcome, msg)
    }

    /// Sends `msg`, blocking at most until `deadline` while the channel is full.
    ///
    /// See [`send`](Sender::send) on large messages.
    ///
    /// # Errors
    ///
    /// As for [`send_timeout`](Sender::send_timeout): `Disconnected` if
    /// every receiver is gone, `Timeout` if the channel was still full at
    /// `deadline`. A `deadline` already past still tries the send once.
    pub fn send_deadline(&self, msg: T, deadline: Instant) -> Result<(), SendTimeoutError<T>> {
        // SAFETY: as in `send`.
        let outcome = unsafe { self.chan.send_from(&msg, Some(deadline)) };
        settle!(&self.chan, outcome, msg)
    }

    /// Number of messages in the channel.
    #[must_use]
    pub fn len(&self) -> usize {
        self.chan.len()
    }

    /// Whether the channel holds no message.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.chan.len() == 0
    }

    /// Whether the channel is at capacity.
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.chan.len() == self.chan.capacity()
    }

    /// The channel's capacity: exactly what it was created with.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.chan.capacity()
    }

    /// Whether every receiver (or every sender) is gone.
    #[must_use]
    pub fn is_disconnected(&self) -> bool {
        self.chan.is_disconnected()
    }

    /// Whether `other` is an endpoint of the same channel (crossbeam's
    /// `same_channel`).
    #[must_use]
    pub fn same_channel(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.chan, &other.chan)
    }
}

impl<T, M: Mode, P: Protocol> Receiver<T, M, P> {
    /// Receives a message, blocking while the channel is empty. In a
    /// coroutine only the coroutine blocks; on a plain thread, the thread
    /// parks.
    ///
    /// Once every sender is gone, buffered messages are still delivered, then
    /// `recv` fails.
    ///
    /// ```
    /// let (tx, rx) = swco_channel::mpsc::bounded(4);
    /// tx.send("a").unwrap();
    /// drop(tx);
    /// assert_eq!(rx.recv(), Ok("a"));
    /// assert!(rx.recv().is_err());
    /// ```
    ///
    /// # Errors
    ///
    /// [`RecvError`] if the channel is empty and every sender is gone, when
    /// the call starts or while it waits (the last sender's drop wakes it).
    /// Messages sent before that are still received first.
    ///
    /// # Panics
    ///
    /// Never from a sender's waker. A receive that frees a slot wakes a
    /// sender waiting for it, and an async sender's waker is user code,
    /// which may panic; but the message has left the channel by then, and
    /// unwinding through the receive would lose it. The receive returns the
    /// message instead, and the waker's panic goes on at this thread's next
    /// blocking channel operation (in a swco coroutine, at its next
    /// suspension). Every receive (`try_recv`, the timeouts, the batches,
    /// the iterators, `recv_async`, a select's) does the same, as a receive
    /// on a zero-capacity channel always has.
    pub fn recv(&self) -> Result<T, RecvError> {
        self.chan.recv(None).map_err(|_| RecvError)
    }

    /// Receives a message if one is there now.
    ///
    /// # Errors
    ///
    /// Never blocks waiting for a sender. On a zero-capacity channel, a
    /// sender found waiting in a select whose message is made only once
    /// chosen (a `Select` send, or a `select!` send) is met, as in crossbeam
    /// and Go: this then waits (parks; in a coroutine, suspends) while that
    /// select makes its message and hands it over.
    ///
    /// * [`TryRecvError::Empty`] if there is no message now and some sender
    ///   remains (a sender that has claimed a slot but not yet written it is
    ///   waited for briefly, by spinning, not reported as `Empty`). On a
    ///   zero-capacity channel: if no sender is waiting to hand a message
    ///   over at this moment (or the select met let it go unsent).
    /// * [`TryRecvError::Disconnected`] if the channel is empty and every
    ///   sender is gone. Messages sent before that are still received first.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.chan.try_recv()
    }

    /// Receives a message, blocking at most `timeout` while the channel is
    /// empty.
    ///
    /// ```
    /// use std::time::Duration;
    /// use swco_channel::{spmc, RecvTimeoutError};
    /// let (_tx, rx) = spmc::bounded::<u8>(1);
    /// assert_eq!(rx.recv_timeout(Duration::from_millis(1)), Err(RecvTimeoutError::Timeout));
    /// ```
    ///
    /// # Errors
    ///
    /// * [`RecvTimeoutError::Disconnected`] if the channel is empty and
    ///   every sender is gone, before or during the wait. Messages sent
    ///   before that are still received first.
    /// * [`RecvTimeoutError::Timeout`] if the channel was still empty when
    ///   `timeout` had passed. The receive is tried at least once before the
    ///   deadline is checked, so a zero `timeout` still succeeds if a message
    ///   is there now; a `timeout` too large to represent as an [`Instant`]
    ///   never expires.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.chan.recv(deadline_after(timeout))
    }

    /// Receives a message, blocking at most until `deadline`.
    ///
    /// # Errors
    ///
    /// As for [`recv_timeout`](Receiver::recv_timeout): `Disconnected` if
    /// the channel is empty and every sender is gone, `Timeout` if it was
    /// still empty at `deadline`. A `deadline` already past still tries the
    /// receive once.
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.chan.recv(Some(deadline))
    }

    /// A blocking iterator: yields messages until the channel is empty and
    /// every sender is gone.
    #[must_use]
    pub fn iter(&self) -> Iter<'_, T, M, P> {
        Iter { rx: self }
    }

    /// A non-blocking iterator: yields the messages there are now.
    #[must_use]
    pub fn try_iter(&self) -> TryIter<'_, T, M, P> {
        TryIter { rx: self }
    }

    /// Number of messages in the channel.
    #[must_use]
    pub fn len(&self) -> usize {
        self.chan.len()
    }

    /// Whether the channel holds no message.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.chan.len() == 0
    }

    /// Whether the channel is at capacity.
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.chan.len() == self.chan.capacity()
    }

    /// The channel's capacity: exactly what it was created with.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.chan.capacity()
    }

    /// Whether every sender (or every receiver) is gone.
    #[must_use]
    pub fn is_disconnected(&self) -> bool {
        self.chan.is_disconnected()
    }

    /// Whether `other` is an endpoint of the same channel (crossbeam's
    /// `same_channel`).
    #[must_use]
    pub fn same_channel(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.chan, &other.chan)
    }
}

impl<T, M: ManyProducers, P: Protocol> Clone for Sender<T, M, P> {
    fn clone(&self) -> Self {
        self.chan.attach_sender();
        Sender {
            chan: self.chan.clone(),
            _share: PhantomData,
        }
    }
}

impl<T, M: ManyConsumers, P: Protocol> Clone for Receiver<T, M, P> {
    fn clone(&self) -> Self {
        self.chan.attach_receiver();
        Receiver {
            chan: self.chan.clone(),
            _share: PhantomData,
        }
    }
}

impl<T, M: Mode, P: Protocol> Drop for Sender<T, M, P> {
    fn drop(&mut self) {
        self.chan.detach_sender();
    }
}

impl<T, M: Mode, P: Protocol> Drop for Receiver<T, M, P> {
    fn drop(&mut self) {
        self.chan.detach_receiver();
    }
}

// As in crossbeam: a channel has no state half-changed by a panic that a
// user could see through an endpoint afterwards. Every operation that can
// unwind part-way (a panicking waker, park context or message `Drop`)
// either completes its change to the shared words first or has a guard
// that undoes it (a registration left, a packet withdrawn, a claimed slot
// published), so the interior mutability inside (the waiter lists' cells,
// the ring's slots) never shows a broken invariant.
impl<T, M: Mode, P: Protocol> UnwindSafe for Sender<T, M, P> {}
impl<T, M: Mode, P: Protocol> RefUnwindSafe for Sender<T, M, P> {}
impl<T, M: Mode, P: Protocol> UnwindSafe for Receiver<T, M, P> {}
impl<T, M: Mode, P: Protocol> RefUnwindSafe for Receiver<T, M, P> {}

impl<T, M: Mode, P: Protocol> fmt::Debug for Sender<T, M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sender<{}, {}> {{ .. }}", M::NAME, P::NAME)
    }
}

impl<T, M: Mode, P: Protocol> fmt::Debug for Receiver<T, M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Receiver<{}, {}> {{ .. }}", M::NAME, P::NAME)
    }
}

/// Blocking iterator over a receiver's messages; see [`Receiver::iter`].
pub struct Iter<'a, T, M: Mode, P: Protocol> {
    rx: &'a Receiver<T, M, P>,
}

/// Non-blocking iterator over a receiver's messages; see [`Receiver::try_iter`].
pub struct TryIter<'a, T, M: Mode, P: Protocol> {
    rx: &'a Receiver<T, M, P>,
}

/// Owning blocking iterator over a receiver's messages.
pub struct IntoIter<T, M: Mode, P: Protocol> {
    rx: Receiver<T, M, P>,
}

impl<T, M: Mode, P: Protocol> Iterator for Iter<'_, T, M, P> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<T, M: Mode, P: Protocol> Iterator for TryIter<'_, T, M, P> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

impl<T, M: Mode, P: Protocol> Iterator for IntoIter<T, M, P> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<'a, T, M: Mode, P: Protocol> IntoIterator for &'a Receiver<T, M, P> {
    type Item = T;
    type IntoIter = Iter<'a, T, M, P>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T, M: Mode, P: Protocol> IntoIterator for Receiver<T, M, P> {
    type Item = T;
    type IntoIter = IntoIter<T, M, P>;
    fn into_iter(self) -> Self::IntoIter {
        IntoIter { rx: self }
    }
}

impl<T, M: Mode, P: Protocol> fmt::Debug for Iter<'_, T, M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Iter { .. }")
    }
}

impl<T, M: Mode, P: Protocol> fmt::Debug for TryIter<'_, T, M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TryIter { .. }")
    }
}

impl<T, M: Mode, P: Protocol> fmt::Debug for IntoIter<T, M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IntoIter { .. }")
    }
}
