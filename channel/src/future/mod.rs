//! Async endpoints: [`Sender::send_async`] and [`Receiver::recv_async`],
//! and their forms that borrow the endpoint exclusively,
//! [`Sender::send_async_mut`] and [`Receiver::recv_async_mut`]. Both forms
//! share their state and logic (`Sending`, `Receiving`) and differ only in
//! a marker: a future holding `&Sender` of a side with one endpoint (not
//! `Sync`) is not `Send`, while one holding `&mut Sender` is, since nothing
//! else can use the endpoint while it lives.
//!
//! A future waits exactly as a blocking operation does (invariant 3 of
//! `chan/mod.rs`), except that "park" is "return `Pending`, keeping the ticket":
//!
//! * **poll**: if the previous poll left a ticket, [`leave`] it first: the
//!   attempt that follows uses any wake it was chosen for. (Unless the
//!   registration [`stands`]: a lone side's slot is armed until its waiter
//!   leaves, so the future retries while registered, and stays registered
//!   if still blocked. If the slot holds another waker (the task moved, or
//!   `Waker::will_wake` fails to recognise a clone, as it does for tokio's
//!   `block_on` waker in release builds), the registration is renewed in
//!   place with the register / fence / re-check steps. Leaving would wake
//!   the waiters queued behind it for nothing, and one of those may be a
//!   future of this same task: it would wake the task again, for ever.)
//!   Then try the operation. If it would block, register the task's waker
//!   on the side's waiters (through [`TaskPark`], so [`Waiters::register`]
//!   and the peer's wake path are the blocking ones, unchanged),
//!   `fence(SeqCst)`, re-check; still blocked: keep the ticket and return
//!   `Pending`; else leave and try again.
//! * **drop** with a ticket held: [`abandon`] it. No registration is left
//!   behind to swallow a later wake-one, and a wake this future was chosen
//!   for is handed on to the next waiter, so dropping a pending future (a
//!   lost `select!` branch, a timeout) loses neither a wake-up nor a
//!   message: a receive future returns every message it takes out of the
//!   ring, at once, and a send future puts its message in only when it
//!   returns `Ready(Ok)`.
//!
//! Each poll registers the waker of *that* poll, so a task that moves, or a
//! future polled under different wakers, is always woken through the current
//! one.
//!
//! On a zero-capacity (rendezvous) channel a pending future waits with a
//! packet queued in the rendezvous instead (a send future's holds its
//! message), so two futures, or a future and a select, on the two ends
//! meet. A dropped send future takes its packet (and message) back unless a
//! receiver took it; a dropped receive future that was already handed a
//! message passes it on to the next receiver (`Rendezvous::reoffer`): the
//! sender was told it was delivered, and it is never lost. That part is
//! `rendezvous/future.rs`, with the rest of capacity 0.
//!
//! [`leave`]: Waiters::leave
//! [`stands`]: Waiters::stands
//! [`abandon`]: Waiters::abandon

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::chan::{Chan, Unsent};
use crate::error::{RecvError, SendError, TryRecvError};
use crate::rendezvous::future as zero;
use crate::rendezvous::Packet;
use crate::sync::Arc;
use crate::wait_list::Waiters;
use crate::{Cas, Mode, Protocol, Receiver, Sender};
use swco_wait::protocol::TaskPark;

/// What a pending send future holds: its registration among blocked senders.
type TxTicket<M, P> = <<M as Mode>::TxWait<P> as Waiters>::Ticket;
/// What a pending receive future holds: its registration among blocked
/// receivers.
type RxTicket<M, P> = <<M as Mode>::RxWait<P> as Waiters>::Ticket;

/// Registers the task on `waiters`, fences, and re-checks (invariant 3),
/// through the blocking layer's one implementation
/// ([`swco_wait::protocol::register`]). Returns the ticket if the operation
/// is still blocked (the caller keeps it and returns `Pending`), or `None`
/// after leaving if the peer made progress (or disconnected) in between
/// (the caller retries).
#[inline]
fn register<W: Waiters>(
    waiters: &W,
    waker: &Waker,
    still_blocked: impl FnOnce() -> bool,
) -> Option<W::Ticket> {
    swco_wait::protocol::register(waiters, &TaskPark(waker), still_blocked)
}

impl<T, M: Mode, P: Protocol> Sender<T, M, P> {
    /// Sends `msg` asynchronously: the returned future completes once the
    /// message is in the channel, waiting (as `Pending`, not by blocking the
    /// thread) while the channel is full.
    ///
    /// Fails, giving the message back in the [`SendError`], once every
    /// receiver is gone.
    ///
    /// The future works with any executor, and alongside blocking users of
    /// the same channel (threads, swco coroutines) on either side.
    ///
    /// **Cancel safety.** Dropping the future before it completes drops the
    /// message, which was never in the channel; it does not lose a wake-up
    /// (a free slot it was woken for is handed on to another waiting
    /// sender). To keep the message when giving up, use
    /// [`try_send`](Sender::try_send) instead.
    ///
    /// Leaking a pending future (`std::mem::forget`) is memory-safe but
    /// leaves its registration behind: it can swallow a wake-up meant for
    /// another sender, and on a side with one endpoint, later waits of that
    /// endpoint queue behind it and are not woken by the peer.
    ///
    /// ```
    /// # use std::future::Future;
    /// # use std::sync::Arc;
    /// # use std::task::{Context, Poll, Wake, Waker};
    /// # use std::thread::{self, Thread};
    /// # struct Unpark(Thread);
    /// # impl Wake for Unpark {
    /// #     fn wake(self: Arc<Self>) { self.0.unpark() }
    /// # }
    /// # /// A minimal executor: polls on this thread, parks it while pending.
    /// # fn block_on<F: Future>(fut: F) -> F::Output {
    /// #     let mut fut = std::pin::pin!(fut);
    /// #     let waker = Waker::from(Arc::new(Unpark(thread::current())));
    /// #     let mut cx = Context::from_waker(&waker);
    /// #     loop {
    /// #         if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) { return out; }
    /// #         thread::park();
    /// #     }
    /// # }
    /// let (tx, rx) = swco_channel::mpsc::bounded(1);
    /// // A blocking consumer on a plain thread.
    /// let consumer = std::thread::spawn(move || rx.iter().sum::<u32>());
    /// block_on(async {
    ///     for i in 0..10 {
    ///         tx.send_async(i).await.unwrap();
    ///     }
    /// });
    /// drop(tx);
    /// assert_eq!(consumer.join().unwrap(), 45);
    /// ```
    ///
    /// # Errors
    ///
    /// The future resolves to [`SendError`], holding `msg`, if every
    /// receiver is gone: already at its first poll (even if the channel has
    /// room), or while it is pending (the last receiver's drop wakes it).
    /// The message is then not in the channel. There is no timeout: to give
    /// up after a while, drop the future (which drops the message) or use
    /// [`send_timeout`](Sender::send_timeout) on a thread or coroutine.
    pub fn send_async(&self, msg: T) -> SendFuture<'_, T, M, P> {
        SendFuture {
            inner: Sending::new(&self.chan, msg),
            _tx: PhantomData,
        }
    }

    /// [`send_async`](Sender::send_async), borrowing the sender exclusively:
    /// the same future, but `Send` whenever the sender and the message are,
    /// so that a task owning the sender of an `spsc` or `spmc` channel can
    /// be spawned on a multi-threaded executor.
    ///
    /// Those senders are `Send` but not `Sync` (one endpoint, used by one
    /// thread at a time), so the future of `send_async`, which holds
    /// `&Sender`, is not `Send`: a task awaiting it cannot move to another
    /// worker thread. The exclusive borrow guarantees that nothing else
    /// uses the sender while the future lives, wherever it is polled.
    /// Waiting, cancellation and errors are those of `send_async`.
    ///
    /// ```
    /// use swco_channel::spsc;
    ///
    /// let rt = tokio::runtime::Builder::new_multi_thread()
    ///     .worker_threads(2)
    ///     .build()
    ///     .unwrap();
    /// let (mut tx, mut rx) = spsc::bounded::<u32>(1);
    /// // `tokio::spawn` wants a `Send` future: the task owns the endpoint
    /// // and awaits the `_mut` form.
    /// let producer = rt.spawn(async move {
    ///     for i in 0..10 {
    ///         tx.send_async_mut(i).await.unwrap();
    ///     }
    /// });
    /// let consumer = rt.spawn(async move {
    ///     let mut sum = 0;
    ///     while let Ok(i) = rx.recv_async_mut().await {
    ///         sum += i;
    ///     }
    ///     sum
    /// });
    /// rt.block_on(producer).unwrap();
    /// assert_eq!(rt.block_on(consumer).unwrap(), 45);
    /// ```
    ///
    /// # Errors
    ///
    /// As for [`send_async`](Sender::send_async): the future resolves to
    /// [`SendError`], holding `msg`, if every receiver is gone.
    pub fn send_async_mut(&mut self, msg: T) -> SendFutureMut<'_, T, M, P> {
        SendFutureMut {
            inner: Sending::new(&self.chan, msg),
            _tx: PhantomData,
        }
    }
}

impl<T, M: Mode, P: Protocol> Receiver<T, M, P> {
    /// Receives a message asynchronously: the returned future completes with
    /// the next message, waiting (as `Pending`, not by blocking the thread)
    /// while the channel is empty.
    ///
    /// Once every sender is gone, buffered messages are still delivered, then
    /// the future completes with [`RecvError`].
    ///
    /// The future works with any executor, and alongside blocking users of
    /// the same channel (threads, swco coroutines) on either side.
    ///
    /// **Cancel safety.** Dropping the future before it completes loses no
    /// message: it takes a message out of the channel only in the poll that
    /// returns it. Nor does it lose a wake-up: a message it was woken for is
    /// left in the channel, and the wake handed on to another waiting
    /// receiver. So `recv_async` can be used in a `select!` loop.
    ///
    /// Leaking a pending future (`std::mem::forget`) is memory-safe but
    /// leaves its registration behind: it can swallow a wake-up meant for
    /// another receiver, and on a side with one endpoint, later waits of that
    /// endpoint queue behind it and are not woken by the peer.
    ///
    /// ```
    /// # use std::future::Future;
    /// # use std::sync::Arc;
    /// # use std::task::{Context, Poll, Wake, Waker};
    /// # use std::thread::{self, Thread};
    /// # struct Unpark(Thread);
    /// # impl Wake for Unpark {
    /// #     fn wake(self: Arc<Self>) { self.0.unpark() }
    /// # }
    /// # /// A minimal executor: polls on this thread, parks it while pending.
    /// # fn block_on<F: Future>(fut: F) -> F::Output {
    /// #     let mut fut = std::pin::pin!(fut);
    /// #     let waker = Waker::from(Arc::new(Unpark(thread::current())));
    /// #     let mut cx = Context::from_waker(&waker);
    /// #     loop {
    /// #         if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) { return out; }
    /// #         thread::park();
    /// #     }
    /// # }
    /// use swco_channel::{spmc, RecvError, Updt};
    ///
    /// let (tx, rx) = spmc::bounded_with::<u32, Updt>(1);
    /// // A blocking producer on a plain thread.
    /// std::thread::spawn(move || for i in 0..10 { tx.send(i).unwrap() });
    /// let sum = block_on(async {
    ///     let mut sum = 0;
    ///     while let Ok(i) = rx.recv_async().await {
    ///         sum += i;
    ///     }
    ///     sum
    /// });
    /// assert_eq!(sum, 45);
    /// assert_eq!(block_on(rx.recv_async()), Err(RecvError));
    /// ```
    ///
    /// # Errors
    ///
    /// The future resolves to [`RecvError`] if the channel is empty and
    /// every sender is gone, at a poll or while it is pending (the last
    /// sender's drop wakes it). Messages sent before that are still
    /// received first, one per future.
    pub fn recv_async(&self) -> RecvFuture<'_, T, M, P> {
        RecvFuture {
            inner: Receiving::new(&self.chan),
            _rx: PhantomData,
        }
    }

    /// [`recv_async`](Receiver::recv_async), borrowing the receiver
    /// exclusively: the same future, but `Send` whenever the receiver is,
    /// so that a task owning the receiver of an `spsc` or `mpsc` channel
    /// can be spawned on a multi-threaded executor (see
    /// [`Sender::send_async_mut`], whose example uses both).
    ///
    /// ```
    /// use swco_channel::mpsc;
    ///
    /// let rt = tokio::runtime::Builder::new_multi_thread()
    ///     .worker_threads(2)
    ///     .build()
    ///     .unwrap();
    /// let (tx, mut rx) = mpsc::bounded::<u32>(4);
    /// let consumer = rt.spawn(async move {
    ///     let mut got = Vec::new();
    ///     while let Ok(i) = rx.recv_async_mut().await {
    ///         got.push(i);
    ///     }
    ///     got
    /// });
    /// for i in 0..3 {
    ///     tx.send(i).unwrap();
    /// }
    /// drop(tx);
    /// assert_eq!(rt.block_on(consumer).unwrap(), [0, 1, 2]);
    /// ```
    ///
    /// # Errors
    ///
    /// As for [`recv_async`](Receiver::recv_async): the future resolves to
    /// [`RecvError`] once the channel is empty and every sender is gone.
    pub fn recv_async_mut(&mut self) -> RecvFutureMut<'_, T, M, P> {
        RecvFutureMut {
            inner: Receiving::new(&self.chan),
            _rx: PhantomData,
        }
    }
}

/// The future of [`Sender::send_async`]: sends one message, waiting while
/// the channel is full.
///
/// Resolves to `Ok(())` once the message is in the channel, or to
/// `Err(SendError(msg))`, giving the message back, if every receiver is
/// gone. Dropping it before then drops the message (it was never sent) and
/// loses no wake-up. It borrows the sender, holds the message inline, and is
/// `Unpin`.
///
/// It is `Send` where `&Sender` is: for the senders of `mpsc` and `mpmc`
/// (which are `Sync`), not for those of `spsc` and `spmc`, which one thread
/// at a time may use (a future moved to another thread while the sender is
/// still borrowed here could race its other users). For a task that owns
/// such a sender and must be `Send`, use [`Sender::send_async_mut`]
/// ([`SendFutureMut`]).
///
/// ```
/// # use std::future::Future;
/// # use std::sync::Arc;
/// # use std::task::{Context, Poll, Wake, Waker};
/// # use std::thread::{self, Thread};
/// # struct Unpark(Thread);
/// # impl Wake for Unpark {
/// #     fn wake(self: Arc<Self>) { self.0.unpark() }
/// # }
/// # fn block_on<F: Future>(fut: F) -> F::Output {
/// #     let mut fut = std::pin::pin!(fut);
/// #     let waker = Waker::from(Arc::new(Unpark(thread::current())));
/// #     let mut cx = Context::from_waker(&waker);
/// #     loop {
/// #         if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) { return out; }
/// #         thread::park();
/// #     }
/// # }
/// use swco_channel::{mpmc, SendFuture, Mpmc, Cas};
///
/// let (tx, rx) = mpmc::bounded::<String>(1);
/// let fut: SendFuture<'_, String, Mpmc, Cas> = tx.send_async("hi".to_string());
/// block_on(fut).unwrap();
/// drop(rx);
/// // No receiver left: the message comes back.
/// let err = block_on(tx.send_async("bye".to_string())).unwrap_err();
/// assert_eq!(err.into_inner(), "bye");
/// ```
///
/// # Panics
///
/// Polling it again after it has returned `Poll::Ready` panics.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct SendFuture<'a, T, M: Mode, P: Protocol = Cas> {
    inner: Sending<'a, T, M, P>,
    /// A shared borrow of the sender, for the auto traits: the future is
    /// `Send` only where `&Sender` is.
    _tx: PhantomData<&'a Sender<T, M, P>>,
}

/// The future of [`Sender::send_async_mut`]: [`SendFuture`], holding its
/// sender by exclusive borrow, and so `Send` wherever the sender and the
/// message are (the sender of every mode, `spsc` and `spmc` included).
///
/// See [`Sender::send_async_mut`] for an example.
///
/// # Panics
///
/// Polling it again after it has returned `Poll::Ready` panics.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct SendFutureMut<'a, T, M: Mode, P: Protocol = Cas> {
    inner: Sending<'a, T, M, P>,
    /// An exclusive borrow of the sender: while the future lives, no other
    /// code can use the sender, on this thread or another, so the future
    /// may move between threads as the sender itself may.
    _tx: PhantomData<&'a mut Sender<T, M, P>>,
}

/// A send in progress, for either future. It reaches the channel directly
/// (a `Chan` of a `Send` message is `Sync`): how the future holds its
/// sender, and so whether it may move to another thread, is the wrapper's
/// marker.
struct Sending<'a, T, M: Mode, P: Protocol> {
    chan: &'a Chan<T, M, P>,
    /// The message, until it is in the channel or handed back.
    msg: Option<T>,
    /// Held between a `Pending` and the next poll (or the drop).
    ticket: Option<TxTicket<M, P>>,
    /// On a zero-capacity channel: the packet (holding the message) queued
    /// in the rendezvous, between a `Pending` and the next poll.
    packet: Option<Arc<Packet<T>>>,
}

// The message is never pinned: it is only read (copied into the ring) and
// moved out, through `&mut Self`, so moving the future moves nothing that is
// pinned (as for `std::future::Ready<T>`). The wrappers are `Unpin` through
// it.
impl<T, M: Mode, P: Protocol> Unpin for Sending<'_, T, M, P> {}

impl<'a, T, M: Mode, P: Protocol> Sending<'a, T, M, P> {
    fn new(chan: &'a Chan<T, M, P>, msg: T) -> Self {
        Sending {
            chan,
            msg: Some(msg),
            ticket: None,
            packet: None,
        }
    }
}

impl<T, M: Mode, P: Protocol> Sending<'_, T, M, P> {
    /// One attempt to put the message in the ring. On `Ok` the ring owns
    /// it, and `self.msg` is empty.
    fn try_send(&mut self) -> Result<(), Unsent> {
        let msg: *const T = self
            .msg
            .as_ref()
            .expect("SendFuture polled after completion");
        // SAFETY: `msg` points to the message in `self.msg`, which is ours
        // and does not move during the call. On `Ok` the ring holds a
        // bitwise copy and we forget ours at once, before anything else can
        // observe it; on `Err`, and if this unwinds, it is still ours (and
        // still in `self.msg`, dropped with the future).
        let outcome = unsafe { self.chan.try_send_from(msg) };
        if outcome.is_ok() {
            // The ring owns the message now: take ours out without dropping
            // it, before anyone is woken (a waker may panic, and this copy
            // must not be dropped as that unwinds).
            std::mem::forget(self.msg.take());
        }
        outcome
    }

    /// Ends the send after an attempt that did not find the ring full.
    fn finish(&mut self, outcome: Result<(), Unsent>) -> Poll<Result<(), SendError<T>>> {
        match outcome {
            Ok(()) => {
                self.chan.wake_receiver();
                Poll::Ready(Ok(()))
            }
            Err(Unsent::Disconnected) => {
                let msg = self.msg.take().expect("still ours");
                Poll::Ready(Err(SendError(msg)))
            }
            Err(Unsent::Full | Unsent::Timeout) => unreachable!("not an end: {outcome:?}"),
        }
    }
}

impl<T, M: Mode, P: Protocol> Future for SendFuture<'_, T, M, P> {
    type Output = Result<(), SendError<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().inner.poll(cx)
    }
}

impl<T, M: Mode, P: Protocol> Future for SendFutureMut<'_, T, M, P> {
    type Output = Result<(), SendError<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().inner.poll(cx)
    }
}

impl<T, M: Mode, P: Protocol> Sending<'_, T, M, P> {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), SendError<T>>> {
        let this = self;
        let chan = this.chan;
        if chan.zero().is_some() {
            return zero::poll_send(chan, &mut this.msg, &mut this.packet, cx);
        }
        let senders = &*chan.senders;
        if let Some(ticket) = this.ticket.take() {
            if senders.stands(ticket, &TaskPark(cx.waker()), &|| chan.still_full()) {
                // Still registered through this task's waker (a lone
                // sender's slot): try again without leaving, and stay
                // registered if the ring is still full.
                match this.try_send() {
                    Err(Unsent::Full) => {
                        this.ticket = Some(ticket);
                        return Poll::Pending;
                    }
                    outcome => {
                        senders.leave(ticket);
                        return this.finish(outcome);
                    }
                }
            }
            // The attempt below uses any free slot we were woken for.
            senders.leave(ticket);
        }
        loop {
            match this.try_send() {
                Err(Unsent::Full) => {}
                outcome => return this.finish(outcome),
            }
            if let Some(ticket) = register(senders, cx.waker(), || chan.still_full()) {
                this.ticket = Some(ticket);
                return Poll::Pending;
            }
            // A receiver freed a slot (or left) in between: try again.
        }
    }
}

impl<T, M: Mode, P: Protocol> Drop for Sending<'_, T, M, P> {
    fn drop(&mut self) {
        if let Some(packet) = self.packet.take() {
            zero::drop_send_packet(self.chan, &packet);
        }
        if let Some(ticket) = self.ticket.take() {
            // No retry follows: hand on a free slot we were woken for. The
            // unsent message (if any) is dropped with `self.msg`.
            self.chan.senders.abandon(ticket);
        }
    }
}

impl<T, M: Mode, P: Protocol> Sending<'_, T, M, P> {
    fn debug(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(name)
            .field(
                "tx",
                &format_args!("Sender<{}, {}> {{ .. }}", M::NAME, P::NAME),
            )
            .field(
                "sent_or_failed",
                &(self.msg.is_none() && self.packet.is_none()),
            )
            .field("waiting", &self.ticket.is_some())
            .finish()
    }
}

impl<T, M: Mode, P: Protocol> fmt::Debug for SendFuture<'_, T, M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.debug("SendFuture", f)
    }
}

impl<T, M: Mode, P: Protocol> fmt::Debug for SendFutureMut<'_, T, M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.debug("SendFutureMut", f)
    }
}

/// The future of [`Receiver::recv_async`]: receives one message, waiting
/// while the channel is empty.
///
/// Resolves to `Ok(msg)`, or to `Err(RecvError)` once the channel is empty
/// and every sender is gone. Dropping it before then loses no message and no
/// wake-up. It borrows the receiver and is `Unpin`.
///
/// It is `Send` where `&Receiver` is: for the receivers of `spmc` and
/// `mpmc`, not for those of `spsc` and `mpsc`; for a task that owns such a
/// receiver and must be `Send`, use [`Receiver::recv_async_mut`]
/// ([`RecvFutureMut`]).
///
/// ```
/// # use std::future::Future;
/// # use std::sync::Arc;
/// # use std::task::{Context, Poll, Wake, Waker};
/// # use std::thread::{self, Thread};
/// # struct Unpark(Thread);
/// # impl Wake for Unpark {
/// #     fn wake(self: Arc<Self>) { self.0.unpark() }
/// # }
/// # fn block_on<F: Future>(fut: F) -> F::Output {
/// #     let mut fut = std::pin::pin!(fut);
/// #     let waker = Waker::from(Arc::new(Unpark(thread::current())));
/// #     let mut cx = Context::from_waker(&waker);
/// #     loop {
/// #         if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) { return out; }
/// #         thread::park();
/// #     }
/// # }
/// use swco_channel::{spsc, RecvFuture, Spsc, Updt};
///
/// let (tx, rx) = spsc::bounded_with::<u8, Updt>(4);
/// tx.send(7).unwrap();
/// let fut: RecvFuture<'_, u8, Spsc, Updt> = rx.recv_async();
/// assert_eq!(block_on(fut), Ok(7));
/// ```
///
/// # Panics
///
/// Polling it again after it has returned `Poll::Ready` panics.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct RecvFuture<'a, T, M: Mode, P: Protocol = Cas> {
    inner: Receiving<'a, T, M, P>,
    /// A shared borrow of the receiver, for the auto traits: the future is
    /// `Send` only where `&Receiver` is.
    _rx: PhantomData<&'a Receiver<T, M, P>>,
}

/// The future of [`Receiver::recv_async_mut`]: [`RecvFuture`], holding its
/// receiver by exclusive borrow, and so `Send` wherever the receiver is
/// (the receiver of every mode, `spsc` and `mpsc` included).
///
/// See [`Receiver::recv_async_mut`] for an example.
///
/// # Panics
///
/// Polling it again after it has returned `Poll::Ready` panics.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct RecvFutureMut<'a, T, M: Mode, P: Protocol = Cas> {
    inner: Receiving<'a, T, M, P>,
    /// An exclusive borrow of the receiver, as in [`SendFutureMut`].
    _rx: PhantomData<&'a mut Receiver<T, M, P>>,
}

/// A receive in progress, for either future; as [`Sending`].
struct Receiving<'a, T, M: Mode, P: Protocol> {
    chan: &'a Chan<T, M, P>,
    /// Held between a `Pending` and the next poll (or the drop).
    ticket: Option<RxTicket<M, P>>,
    /// Set once the future has resolved.
    done: bool,
    /// On a zero-capacity channel: the packet queued in the rendezvous,
    /// between a `Pending` and the next poll.
    packet: Option<Arc<Packet<T>>>,
}

// Nothing in it is ever pinned (a ticket is plain data, `Copy`).
impl<T, M: Mode, P: Protocol> Unpin for Receiving<'_, T, M, P> {}

impl<'a, T, M: Mode, P: Protocol> Receiving<'a, T, M, P> {
    fn new(chan: &'a Chan<T, M, P>) -> Self {
        Receiving {
            chan,
            ticket: None,
            done: false,
            packet: None,
        }
    }
}

impl<T, M: Mode, P: Protocol> Future for RecvFuture<'_, T, M, P> {
    type Output = Result<T, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().inner.poll(cx)
    }
}

impl<T, M: Mode, P: Protocol> Future for RecvFutureMut<'_, T, M, P> {
    type Output = Result<T, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().inner.poll(cx)
    }
}

impl<T, M: Mode, P: Protocol> Receiving<'_, T, M, P> {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<T, RecvError>> {
        let this = self;
        assert!(!this.done, "RecvFuture polled after completion");
        let chan = this.chan;
        if chan.zero().is_some() {
            let outcome = zero::poll_recv(chan, &mut this.packet, cx);
            this.done = outcome.is_ready();
            return outcome;
        }
        let receivers = &*chan.receivers;
        if let Some(ticket) = this.ticket.take() {
            if receivers.stands(ticket, &TaskPark(cx.waker()), &|| chan.still_empty()) {
                // Still registered through this task's waker (a lone
                // receiver's slot): try again without leaving, and stay
                // registered if the ring is still empty.
                let outcome = chan.try_recv();
                if let Err(TryRecvError::Empty) = outcome {
                    this.ticket = Some(ticket);
                    return Poll::Pending;
                }
                this.done = true;
                receivers.leave(ticket);
                return Poll::Ready(outcome.map_err(|_| RecvError));
            }
            // The attempt below uses any message we were woken for.
            receivers.leave(ticket);
        }
        loop {
            match chan.try_recv() {
                Ok(msg) => {
                    this.done = true;
                    return Poll::Ready(Ok(msg));
                }
                Err(TryRecvError::Disconnected) => {
                    this.done = true;
                    return Poll::Ready(Err(RecvError));
                }
                Err(TryRecvError::Empty) => {}
            }
            if let Some(ticket) = register(receivers, cx.waker(), || chan.still_empty()) {
                this.ticket = Some(ticket);
                return Poll::Pending;
            }
            // A sender published (or the senders left) in between: try again.
        }
    }
}

impl<T, M: Mode, P: Protocol> Drop for Receiving<'_, T, M, P> {
    fn drop(&mut self) {
        if let Some(packet) = self.packet.take() {
            zero::drop_recv_packet(self.chan, &packet);
        }
        if let Some(ticket) = self.ticket.take() {
            // No retry follows: hand on a message we were woken for (it is
            // still in the channel).
            self.chan.receivers.abandon(ticket);
        }
    }
}

impl<T, M: Mode, P: Protocol> Receiving<'_, T, M, P> {
    fn debug(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(name)
            .field(
                "rx",
                &format_args!("Receiver<{}, {}> {{ .. }}", M::NAME, P::NAME),
            )
            .field("done", &self.done)
            .field("waiting", &self.ticket.is_some())
            .finish()
    }
}

impl<T, M: Mode, P: Protocol> fmt::Debug for RecvFuture<'_, T, M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.debug("RecvFuture", f)
    }
}

impl<T, M: Mode, P: Protocol> fmt::Debug for RecvFutureMut<'_, T, M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.debug("RecvFutureMut", f)
    }
}
