//! A single-use channel: one value, from one [`Sender`] to one
//! [`Receiver`]; made by [`oneshot()`](fn@crate::oneshot).
//!
//! It is a capacity-1 [`spsc`](crate::spsc) channel behind endpoints that
//! allow one use: [`Sender::send`] takes the sender by value, so at most
//! one value is ever sent and the send never finds the channel full, and
//! [`Receiver::recv`] takes the receiver by value. Everything else comes
//! with the ring: a value sent before the sender was dropped stays
//! receivable; a receiver dropped with the value still in it drops the
//! value; the receiver works in [`select!`](crate::select!) `recv` arms
//! and with [`Select::recv`](crate::Select::recv) (by reference), with
//! [`try_recv`](Receiver::try_recv), the timeouts, and
//! [`recv_async`](Receiver::recv_async); and in a swco coroutine a
//! blocked `recv` suspends only the coroutine.

use std::fmt;
use std::time::{Duration, Instant};

use crate::error::{RecvError, RecvTimeoutError, TryRecvError, TrySendError};
use crate::future::RecvFuture;
use crate::select::RecvArm;
use crate::{Cas, Spsc};

/// The sending half of a [`oneshot`](fn@crate::oneshot) channel: sends one
/// value, by value.
pub struct Sender<T> {
    inner: crate::spsc::Sender<T>,
}

/// The receiving half of a [`oneshot`](fn@crate::oneshot) channel.
pub struct Receiver<T> {
    inner: crate::spsc::Receiver<T>,
}

/// The pair, on a fresh capacity-1 ring.
#[track_caller]
pub(crate) fn new<T>() -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = crate::spsc::bounded(1);
    (Sender { inner: tx }, Receiver { inner: rx })
}

impl<T> Sender<T> {
    /// Sends `value`, without blocking, and gives up the sender. The value
    /// stays receivable after the sender is gone.
    ///
    /// ```
    /// let (tx, rx) = swco_channel::oneshot::<u32>();
    /// drop(rx);
    /// assert_eq!(tx.send(7), Err(7));
    /// ```
    ///
    /// # Errors
    ///
    /// `Err(value)`, the value given back, if the receiver is gone.
    pub fn send(self, value: T) -> Result<(), T> {
        // The ring has room for the one value that is ever sent: only
        // the receiver's absence can refuse it.
        self.inner.try_send(value).map_err(TrySendError::into_inner)
    }

    /// Whether the receiver is gone (a send would fail).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.inner.is_disconnected()
    }
}

impl<T> Receiver<T> {
    /// Waits for the value and gives up the receiver. In a coroutine only
    /// the coroutine waits.
    ///
    /// ```
    /// let (tx, rx) = swco_channel::oneshot();
    /// std::thread::spawn(move || tx.send("done").unwrap());
    /// assert_eq!(rx.recv(), Ok("done"));
    /// ```
    ///
    /// # Errors
    ///
    /// [`RecvError`] if the sender was dropped without sending (or the
    /// value was already taken by [`try_recv`](Receiver::try_recv) or a
    /// select).
    pub fn recv(self) -> Result<T, RecvError> {
        self.inner.recv()
    }

    /// Takes the value if it is there now.
    ///
    /// ```
    /// use swco_channel::TryRecvError;
    /// let (tx, rx) = swco_channel::oneshot();
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    /// tx.send(1).unwrap();
    /// assert_eq!(rx.try_recv(), Ok(1));
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    /// ```
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if the sender has not sent yet;
    /// [`TryRecvError::Disconnected`] if it was dropped without sending,
    /// or the value was taken already.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.inner.try_recv()
    }

    /// Waits at most `timeout` for the value.
    ///
    /// ```
    /// use std::time::Duration;
    /// use swco_channel::RecvTimeoutError;
    /// let (_tx, rx) = swco_channel::oneshot::<u8>();
    /// assert_eq!(rx.recv_timeout(Duration::from_millis(1)), Err(RecvTimeoutError::Timeout));
    /// ```
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] if the value had not come when
    /// `timeout` passed; [`RecvTimeoutError::Disconnected`] as for
    /// [`try_recv`](Receiver::try_recv).
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.inner.recv_timeout(timeout)
    }

    /// Waits until `deadline` at most for the value.
    ///
    /// # Errors
    ///
    /// As for [`recv_timeout`](Receiver::recv_timeout).
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.inner.recv_deadline(deadline)
    }

    /// A future of the value, for async code (the spsc receiver's
    /// [`recv_async`](crate::Receiver::recv_async), with its cancel
    /// safety).
    ///
    /// # Errors
    ///
    /// The future resolves to [`RecvError`] as [`recv`](Receiver::recv)
    /// fails.
    pub fn recv_async(&self) -> RecvFuture<'_, T, Spsc, Cas> {
        self.inner.recv_async()
    }

    /// Whether the value is not there (yet, or any more).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Whether the sender is gone.
    #[must_use]
    pub fn is_disconnected(&self) -> bool {
        self.inner.is_disconnected()
    }

    /// For the [`select!`](crate::select!) macro: a `recv` arm on this
    /// receiver.
    #[doc(hidden)]
    #[inline]
    #[must_use]
    pub fn __select_recv_arm(&self) -> RecvArm<'_, T, Spsc, Cas> {
        RecvArm::new(&self.inner)
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("oneshot::Sender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("oneshot::Receiver").finish_non_exhaustive()
    }
}

impl<T> crate::select::SelectRecv for Receiver<T> {
    type Msg = T;
}

impl<T> crate::select::recv_op::RecvOp for Receiver<T> {
    fn parts(&self) -> crate::select::recv_op::Parts<'_> {
        self.inner.parts()
    }
    fn end(&self) -> *const () {
        self.inner.end()
    }
}
