//! The typed endpoints, generic over mode and protocol. Each mode module
//! (`spsc`, `spmc`, `mpsc`, `mpmc`) names them with its mode filled in.

use std::fmt;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use crate::chan::Chan;
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
    chan: Arc<Chan<T, M, P>>,
    _share: PhantomData<M::TxShare>,
}

/// The receiving side of a channel of mode `M` and protocol `P`.
///
/// Usually named through a mode module, e.g. [`mpmc::Receiver<T>`](crate::mpmc::Receiver).
/// It is `Clone` (and `Sync`) only in the modes with many consumers.
pub struct Receiver<T, M: Mode, P: Protocol = Cas> {
    chan: Arc<Chan<T, M, P>>,
    _share: PhantomData<M::RxShare>,
}

/// Creates a channel of mode `M` and protocol `P` holding up to `capacity`
/// messages.
///
/// # Panics
/// If `capacity` is 0: channels are bounded ring buffers and need at least
/// one slot.
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

fn deadline_after(timeout: Duration) -> Option<Instant> {
    // A timeout too large to represent waits for ever.
    Instant::now().checked_add(timeout)
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
    pub fn send(&self, msg: T) -> Result<(), SendError<T>> {
        self.chan
            .send(msg, None)
            .map_err(|e| SendError(e.into_inner()))
    }

    /// Sends `msg` if there is room now.
    ///
    /// ```
    /// use swco_channel::{spsc, TrySendError};
    /// let (tx, _rx) = spsc::bounded(1);
    /// assert_eq!(tx.try_send(1), Ok(()));
    /// assert_eq!(tx.try_send(2), Err(TrySendError::Full(2)));
    /// ```
    pub fn try_send(&self, msg: T) -> Result<(), TrySendError<T>> {
        self.chan.try_send(msg)
    }

    /// Sends `msg`, blocking at most `timeout` while the channel is full.
    pub fn send_timeout(&self, msg: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        self.chan.send(msg, deadline_after(timeout))
    }

    /// Sends `msg`, blocking at most until `deadline` while the channel is full.
    pub fn send_deadline(&self, msg: T, deadline: Instant) -> Result<(), SendTimeoutError<T>> {
        self.chan.send(msg, Some(deadline))
    }

    /// Number of messages in the channel.
    pub fn len(&self) -> usize {
        self.chan.len()
    }

    /// Whether the channel holds no message.
    pub fn is_empty(&self) -> bool {
        self.chan.len() == 0
    }

    /// Whether the channel is at capacity.
    pub fn is_full(&self) -> bool {
        self.chan.len() == self.chan.capacity()
    }

    /// The channel's capacity: exactly what it was created with.
    pub fn capacity(&self) -> usize {
        self.chan.capacity()
    }

    /// Whether every receiver (or every sender) is gone.
    pub fn is_disconnected(&self) -> bool {
        self.chan.is_disconnected()
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
    pub fn recv(&self) -> Result<T, RecvError> {
        self.chan.recv(None).map_err(|_| RecvError)
    }

    /// Receives a message if one is there now.
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
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.chan.recv(deadline_after(timeout))
    }

    /// Receives a message, blocking at most until `deadline`.
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.chan.recv(Some(deadline))
    }

    /// A blocking iterator: yields messages until the channel is empty and
    /// every sender is gone.
    pub fn iter(&self) -> Iter<'_, T, M, P> {
        Iter { rx: self }
    }

    /// A non-blocking iterator: yields the messages there are now.
    pub fn try_iter(&self) -> TryIter<'_, T, M, P> {
        TryIter { rx: self }
    }

    /// Number of messages in the channel.
    pub fn len(&self) -> usize {
        self.chan.len()
    }

    /// Whether the channel holds no message.
    pub fn is_empty(&self) -> bool {
        self.chan.len() == 0
    }

    /// Whether the channel is at capacity.
    pub fn is_full(&self) -> bool {
        self.chan.len() == self.chan.capacity()
    }

    /// The channel's capacity: exactly what it was created with.
    pub fn capacity(&self) -> usize {
        self.chan.capacity()
    }

    /// Whether every sender (or every receiver) is gone.
    pub fn is_disconnected(&self) -> bool {
        self.chan.is_disconnected()
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
