//! Remote endpoints: what coroutines and threads hold.
//!
//! Invariants:
//! * A [`RemoteSender`] sends a message only while holding one *credit*.
//!   Credit the receiver granted reaches senders as *grants*: amounts in
//!   the route's token channel, which only the bridge fills. A sender
//!   takes credit from the route's `spare` first, else one grant, keeps
//!   what it needs (one for `send`, a whole run for `send_batch`) and
//!   deposits the rest in `spare`. So every credit on the rank is in
//!   exactly one place — the bridge's bank, a grant in the channel,
//!   `spare`, or a message a sender is queueing — and moves between them
//!   by one atomic step (a channel operation, a `spare` update or swap).
//!   Waiting for a grant is a blocking `recv` on a swco channel, so it
//!   suspends just the calling coroutine (or parks a plain thread);
//!   nothing here spins or takes a std lock.
//! * A sender that finds no credit sets `hungry` (edge: "someone wanted
//!   credit") and, if it is going to wait, counts itself in `waiting`
//!   (level: "someone is waiting now"), looks at `spare` once more, then
//!   rings the bridge's bell *before* it blocks on the token channel; the
//!   bridge asks the receiver for credit while either holds and it has none
//!   to hand out, so no waiter is forgotten when a grant covers only some
//!   of them.
//! * No sender waits while `spare` holds credit unseen: a deposit adds to
//!   `spare` and then looks at `waiting`; a sender about to wait adds to
//!   `waiting` and then looks at `spare` (all `SeqCst`). Either the sender
//!   sees the deposit and takes it, or the depositor sees the waiter and
//!   rings the bridge, which moves `spare` into the token channel while
//!   someone waits and the channel is empty.
//! * `handles` counts the live `RemoteSender`s of a route; it never goes
//!   from 0 back to 1 (clones come from a live handle; the bridge hands out
//!   a new handle only by a compare-and-swap from a non-zero count). When it
//!   reaches 0 the route is closed for good.
//! * A message a sender queued while the route was open goes out, even
//!   when the world finalises at that moment: a sender counts itself in
//!   `enqueuing` before it checks `disconnected` and out after its message
//!   is in the queue, and the bridge, once it has raised `disconnected`,
//!   keeps draining the queue until `enqueuing` reads 0 (a Dekker pair,
//!   `SeqCst` on both sides). So a `send` that returned `Ok` is never in a
//!   queue the bridge has stopped reading.
//! * A [`RemoteReceiver`] reads from a local swco channel of the receiver's
//!   capacity, which only the bridge fills; every message it takes is added
//!   to `consumed`, which the bridge turns back into credit.
//! * Both queues carry [`Run`]s: a message, or a run of them moved as one
//!   element. Every message in a run holds its own credit, so a channel of
//!   runs never holds more runs than its capacity in messages. A receiver
//!   keeps the rest of a run it took part of (`pending`) and hands it out
//!   before anything newer, so order is kept.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::helper::{self, Helped, Helper};
use crate::shared::{InShared, OutShared, Run};
use crate::wire::Payload;
use swco::channel::{
    mpsc, RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};

/// Most bridge iterations a waiting receive on the bridge's thread runs
/// itself before it suspends (each polls MPI once; 64 cover a round trip
/// several times over). A longer wait is left to the bridge coroutine,
/// whose idle policy gives the core to other threads: a helper that polled
/// on for hundreds of microseconds kept it from them (see the README).
const HELP_POLLS: u32 = 64;
/// A receive polling on the bridge's thread yields to the executor's other
/// coroutines after this many of its polls.
const HELP_YIELD_EVERY: u32 = 16;
/// A receive polling on the bridge's thread runs a whole bridge iteration
/// (every route, control frames, pending sends, local work) once in this
/// many polls, and tests only its own receive in the others.
const HELP_FULL_EVERY: u32 = 16;

/// How long a sender waits for credit (a batch's deadline covers the
/// whole batch).
#[derive(Clone, Copy)]
enum Wait {
    Now,
    Until(Instant),
    Forever,
}

impl Wait {
    /// Waiting at most `timeout`; one too far for `Instant` is for ever.
    fn after(timeout: Duration) -> Wait {
        match Instant::now().checked_add(timeout) {
            Some(d) => Wait::Until(d),
            None => Wait::Forever,
        }
    }
}

enum NoCredit {
    Full,
    Timeout,
    Disconnected,
}

/// The sending end of a remote channel to (`dest` rank, `tag`).
///
/// `Send + Sync + Clone`: clone it into as many coroutines as you like;
/// each clone's messages arrive in the order it sent them. The channel is
/// closed from this rank when the last clone is dropped (or the [`World`]
/// finalises); after that, a new `world.sender` for the same route is born
/// disconnected.
///
/// [`World`]: crate::World
pub struct RemoteSender<T> {
    pub(crate) shared: Arc<OutShared<T>>,
}

impl<T: Payload> RemoteSender<T> {
    /// Takes credit for between 1 and `need` messages: first from the
    /// route's `spare`, then a grant from the token channel (waiting for one
    /// as `wait` says), whose unused part goes to `spare` for the route's
    /// other senders. Returns how many credits it took.
    fn credits(&self, need: usize, wait: Wait) -> Result<usize, NoCredit> {
        let s = &self.shared;
        debug_assert!(need >= 1);
        // Acquire: pairs with the bridge's store in `disconnect`. A quick
        // exit only; whether a message goes out is decided by the SeqCst
        // pair in `push_run`.
        if s.disconnected.load(Ordering::Acquire) {
            return Err(NoCredit::Disconnected);
        }
        let got = match s.take_spare(need) {
            0 => match s.tokens.try_recv() {
                Ok(grant) => self.keep(grant, need),
                Err(TryRecvError::Disconnected) => return Err(NoCredit::Disconnected),
                Err(TryRecvError::Empty) => {
                    // Release: the bridge's AcqRel swap in `take_hungry`
                    // reads it; the flag is a hint, and the bell rung
                    // before any wait is what makes the bridge look.
                    s.hungry.store(true, Ordering::Release);
                    if let Wait::Now = wait {
                        s.bell.ring();
                        return Err(NoCredit::Full);
                    }
                    // SeqCst: counted in before the second look at `spare`,
                    // the Dekker pair with `deposit` (see the invariants).
                    s.waiting.fetch_add(1, Ordering::SeqCst);
                    let got = match s.take_spare(need) {
                        0 => {
                            s.bell.ring();
                            let grant = match wait {
                                Wait::Until(d) => s.tokens.recv_deadline(d).map_err(|e| match e {
                                    RecvTimeoutError::Timeout => NoCredit::Timeout,
                                    RecvTimeoutError::Disconnected => NoCredit::Disconnected,
                                }),
                                _ => s.tokens.recv().map_err(|_| NoCredit::Disconnected),
                            };
                            grant.map(|g| self.keep(g, need))
                        }
                        k => Ok(k),
                    };
                    // AcqRel: a count-out needs no Dekker pair; a depositor
                    // that still reads the waiter only rings the bridge once
                    // more, and the bridge finds no one to hand `spare` to.
                    s.waiting.fetch_sub(1, Ordering::AcqRel);
                    got?
                }
            },
            k => k,
        };
        // Acquire: as at the top; credit taken from a closed route is
        // given up with the error (the bridge no longer counts it).
        if s.disconnected.load(Ordering::Acquire) {
            return Err(NoCredit::Disconnected);
        }
        Ok(got)
    }

    /// Of a `grant` taken from the token channel, keeps what `need` asks
    /// for and deposits the rest in `spare`; returns what it kept.
    fn keep(&self, grant: usize, need: usize) -> usize {
        let kept = grant.min(need);
        if grant > kept {
            self.shared.deposit(grant - kept);
        }
        kept
    }

    /// Pushes `run` (each message holding a credit) to the bridge's queue
    /// and rings it; gives the run back if the route is closed.
    fn push_run(&self, run: Run<T>) -> Result<(), Run<T>> {
        let s = &self.shared;
        // SeqCst, both: the sender's half of the Dekker pair with the
        // bridge's `disconnected` store and `enqueuing` load: either the
        // bridge sees us counted in (and drains until we are out), or we
        // see the route closed and keep the messages.
        s.enqueuing.fetch_add(1, Ordering::SeqCst);
        let queued = if s.disconnected.load(Ordering::SeqCst) {
            Err(run)
        } else {
            s.queue.send(run).map_err(|e| e.0)
        };
        // Release: the push comes before, for the bridge's Acquire load of 0.
        s.enqueuing.fetch_sub(1, Ordering::Release);
        queued?;
        s.bell.ring();
        Ok(())
    }

    /// Sends one message that holds a credit: at once, with an
    /// `MPI_Isend` of its own, on the thread of a hosted bridge that no
    /// iteration holds (`helper::send_now`); else through the bridge's queue.
    fn enqueue(&self, msg: T) -> Result<(), SendError<T>> {
        let s = &self.shared;
        // Whatever this sender queued before (while the bridge was taken)
        // must go first: then this one queues behind it.
        let msg = match helper::send_now(s.dest, s.tag, msg, !s.queue.is_empty()) {
            Ok(()) => return Ok(()),
            Err(msg) => msg,
        };
        self.push_run(Run::One(msg)).map_err(|run| match run {
            Run::One(m) => SendError(m),
            Run::Many(_) => unreachable!("sent one"),
        })
    }

    /// Sends `msg`, waiting for credit if the receiver has none to spare:
    /// inside a coroutine only the coroutine waits. Fails, giving `msg`
    /// back, once the receiver is gone.
    ///
    /// # Errors
    /// [`SendError`] with `msg` when the route is disconnected: the
    /// receiver is gone, or this rank's world finalised.
    pub fn send(&self, msg: T) -> Result<(), SendError<T>> {
        match self.credits(1, Wait::Forever) {
            Ok(_) => self.enqueue(msg),
            Err(_) => Err(SendError(msg)),
        }
    }

    /// Sends `msg` if credit is at hand now. A `Full` answer still asks
    /// the receiver for credit, so a later try may succeed.
    ///
    /// # Errors
    /// [`TrySendError::Full`] with `msg` when no credit is at hand,
    /// [`TrySendError::Disconnected`] when the route is disconnected.
    pub fn try_send(&self, msg: T) -> Result<(), TrySendError<T>> {
        match self.credits(1, Wait::Now) {
            Ok(_) => self
                .enqueue(msg)
                .map_err(|SendError(m)| TrySendError::Disconnected(m)),
            Err(NoCredit::Disconnected) => Err(TrySendError::Disconnected(msg)),
            Err(_) => Err(TrySendError::Full(msg)),
        }
    }

    /// Sends `msg`, waiting at most `timeout` for credit. A credit granted
    /// after the timeout stays on this rank for the route's next send.
    ///
    /// # Errors
    /// [`SendTimeoutError::Timeout`] with `msg` when no credit came in
    /// time, [`SendTimeoutError::Disconnected`] when the route is
    /// disconnected.
    pub fn send_timeout(&self, msg: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        let wait = Wait::after(timeout);
        match self.credits(1, wait) {
            Ok(_) => self
                .enqueue(msg)
                .map_err(|SendError(m)| SendTimeoutError::Disconnected(m)),
            Err(NoCredit::Timeout | NoCredit::Full) => Err(SendTimeoutError::Timeout(msg)),
            Err(NoCredit::Disconnected) => Err(SendTimeoutError::Disconnected(msg)),
        }
    }

    /// Queues a run of messages, each holding a credit: one element in the
    /// bridge's queue, one bell.
    fn enqueue_run(&self, run: Vec<T>) -> Result<(), Vec<T>> {
        self.push_run(Run::of(run)).map_err(|e| {
            let mut back = Vec::new();
            e.append_to(&mut back);
            back
        })
    }

    /// Sends `values` in runs, each covered by the credit at hand (waiting
    /// for the first credit of a run as `wait` says). On failure, gives back
    /// every message not sent, in order.
    fn send_runs(
        &self,
        values: impl IntoIterator<Item = T>,
        wait: Wait,
    ) -> Result<usize, (NoCredit, Vec<T>)> {
        // Collected first, so a run never takes more credit than it has
        // messages for (credit taken and not used would be lost to the
        // route). A `Vec` is taken as it is (no copy), and so is the whole
        // rest when the credit covers it; a shorter run is copied out.
        let mut rest: VecDeque<T> = values.into_iter().collect::<Vec<T>>().into();
        let mut sent = 0;
        while !rest.is_empty() {
            let k = match self.credits(rest.len(), wait) {
                Ok(k) => k,
                Err(why) => return Err((why, rest.into())),
            };
            let run: Vec<T> = if k >= rest.len() {
                std::mem::take(&mut rest).into()
            } else {
                rest.drain(..k).collect()
            };
            let n = run.len();
            if let Err(mut unsent) = self.enqueue_run(run) {
                unsent.extend(rest);
                return Err((NoCredit::Disconnected, unsent));
            }
            sent += n;
        }
        Ok(sent)
    }

    /// Sends every message of `values`, in order, waiting for credit while
    /// the receiver has none to spare (inside a coroutine only the
    /// coroutine waits); returns how many were sent. Each run takes all the
    /// credit at hand at once and goes to the bridge in one push, so a batch
    /// pays the per-message costs of [`send`](RemoteSender::send) once per
    /// run. Messages of one sender arrive in the order sent, batch or not.
    ///
    /// # Errors
    ///
    /// [`SendError`] once the receiver is gone, holding every message not
    /// sent, in order (the rest of `values` included, so pass a finite
    /// iterator or a `Vec`). Messages sent before that stay sent. An empty
    /// `values` returns `Ok(0)`.
    pub fn send_batch<I: IntoIterator<Item = T>>(
        &self,
        values: I,
    ) -> Result<usize, SendError<Vec<T>>> {
        self.send_runs(values, Wait::Forever)
            .map_err(|(_, rest)| SendError(rest))
    }

    /// Sends the messages of `values`, in order, as far as the credit at
    /// hand goes; never waits. A `Full` answer still asks the receiver for
    /// credit, so a later try may go further.
    ///
    /// # Errors
    ///
    /// Each error holds the messages not sent, in order, the rest of
    /// `values` included; messages sent before it stay sent.
    /// [`TrySendError::Disconnected`] once the receiver is gone;
    /// [`TrySendError::Full`] when credit ran out first.
    pub fn try_send_batch<I: IntoIterator<Item = T>>(
        &self,
        values: I,
    ) -> Result<usize, TrySendError<Vec<T>>> {
        self.send_runs(values, Wait::Now)
            .map_err(|(why, rest)| match why {
                NoCredit::Disconnected => TrySendError::Disconnected(rest),
                NoCredit::Full | NoCredit::Timeout => TrySendError::Full(rest),
            })
    }

    /// [`send_batch`](RemoteSender::send_batch), waiting at most `timeout`
    /// (for the whole batch) for credit.
    ///
    /// # Errors
    ///
    /// Each error holds the messages not sent, in order, the rest of
    /// `values` included; messages sent before it stay sent.
    /// [`SendTimeoutError::Disconnected`] once the receiver is gone;
    /// [`SendTimeoutError::Timeout`] if credit for the rest did not come in
    /// time.
    pub fn send_batch_timeout<I: IntoIterator<Item = T>>(
        &self,
        values: I,
        timeout: Duration,
    ) -> Result<usize, SendTimeoutError<Vec<T>>> {
        let wait = Wait::after(timeout);
        self.send_runs(values, wait)
            .map_err(|(why, rest)| match why {
                NoCredit::Disconnected => SendTimeoutError::Disconnected(rest),
                NoCredit::Full | NoCredit::Timeout => SendTimeoutError::Timeout(rest),
            })
    }

    /// The destination rank.
    #[must_use]
    pub fn dest(&self) -> i32 {
        self.shared.dest
    }

    /// The channel's tag.
    #[must_use]
    pub fn tag(&self) -> u16 {
        self.shared.tag
    }

    /// True once the receiver is known to be gone (or the world finalised).
    #[must_use]
    pub fn is_disconnected(&self) -> bool {
        // Acquire: pairs with the bridge's store in `disconnect`, so what
        // the bridge did before it (the token channel dropped) is seen.
        self.shared.disconnected.load(Ordering::Acquire)
    }
}

impl<T> Clone for RemoteSender<T> {
    fn clone(&self) -> Self {
        // AcqRel: the count is non-zero while `self` lives, so this never
        // revives a closed route; ordered with the bridge's reads of it.
        self.shared.handles.fetch_add(1, Ordering::AcqRel);
        RemoteSender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for RemoteSender<T> {
    fn drop(&mut self) {
        // AcqRel: the last handle's Release publishes its pushes to the
        // bridge's Acquire load of 0 (the route then closes and drains).
        if self.shared.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.bell.ring();
        }
    }
}

impl<T> std::fmt::Debug for RemoteSender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSender")
            .field("dest", &self.shared.dest)
            .field("tag", &self.shared.tag)
            .finish()
    }
}

/// A snapshot of a [`RemoteReceiver`]'s counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverStats {
    /// The receiver's capacity: the credit it hands out.
    pub capacity: usize,
    /// Messages the bridge has delivered to this receiver.
    pub received: u64,
    /// High-water mark of messages in flight: credit granted and not yet
    /// returned, plus messages delivered and not yet taken. Never above
    /// `capacity`.
    pub max_in_flight: usize,
    /// High-water mark of messages delivered and not yet taken.
    pub max_buffered: usize,
    /// GRANT frames sent.
    pub grants: u64,
    /// Data batches (MPI messages) received.
    pub batches: u64,
}

/// The receiving end of a remote channel (this rank, `tag`), fed by the
/// senders of its source ranks.
///
/// Disconnected (`recv` gives [`RecvError`] once the buffer is drained)
/// when every source rank has closed: dropped all its senders for this
/// route, or finalised its [`World`](crate::World).
pub struct RemoteReceiver<T> {
    pub(crate) rx: mpsc::Receiver<Run<T>>,
    pub(crate) shared: Arc<InShared>,
    /// The rest of a run taken from `rx` and not handed out yet: always
    /// handed out before anything newer from `rx`.
    pub(crate) pending: RefCell<std::vec::IntoIter<T>>,
    /// Messages handed out so far (only this receiver counts them).
    pub(crate) taken: Cell<u64>,
}

impl<T: 'static> RemoteReceiver<T> {
    /// Returns the credit of `n` messages taken (one add, one bell).
    fn took_n(&self, n: usize) {
        if n > 0 {
            self.taken.set(self.taken.get() + n as u64);
            // AcqRel: pairs with the bridge's swap, which turns the count
            // into credit only after the messages were taken.
            self.shared.consumed.fetch_add(n, Ordering::AcqRel);
            self.shared.bell.ring();
        }
    }

    /// The next run from the bridge, waiting for it until `deadline`
    /// (none: for ever). On the thread of a hosted bridge the wait first
    /// polls MPI here ([`Helper`]); elsewhere, or if
    /// that brings nothing soon, it suspends the coroutine (or parks the
    /// thread) until the bridge delivers.
    fn wait_run(&self, deadline: Option<Instant>) -> Result<Run<T>, RecvTimeoutError> {
        let mut polls = 0;
        let mut direct: Option<Run<T>> = None;
        let helper = Helper::enlist();
        while let Some(helper) = &helper {
            match self.rx.try_recv() {
                Ok(run) => return Ok(run),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
            if polls == HELP_POLLS {
                break;
            }
            // A whole bridge iteration first (it sends what this coroutine
            // queued, and nothing it waits for can be back yet) and every
            // HELP_FULL_EVERY polls after; the others test only this
            // receiver's own posted receive, so the wait is mostly short
            // polls and an arrival is seen within one of them.
            let helped = if polls % HELP_FULL_EVERY == 0 {
                helper.poll()
            } else {
                helper.poll_route(self.shared.tag, &mut direct)
            };
            let Some(helped) = helped else {
                break;
            };
            polls += 1;
            let woke_others = match helped {
                Helped::Idle | Helped::Worked => false,
                // Ours first (handed over directly, or through the channel):
                // a delivery for this receiver needs no yield.
                Helped::Incoming => match direct.take().map_or_else(|| self.rx.try_recv(), Ok) {
                    Ok(run) => {
                        // Waited for and found by its own polling: what
                        // this coroutine sends next is likely the answer.
                        helper.reply_due();
                        return Ok(run);
                    }
                    Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                    Err(TryRecvError::Empty) => true,
                },
            };
            if woke_others || polls % HELP_YIELD_EVERY == 0 {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(RecvTimeoutError::Timeout);
                }
                // The executor's other coroutines run meanwhile (the
                // bridge's own loop among them), and at once when MPI
                // brought something for another, as the bridge itself
                // yields after such an iteration.
                swco::yield_now();
            }
        }
        drop(helper);
        match deadline {
            Some(d) => self.rx.recv_deadline(d),
            None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        }
    }

    /// Hands out up to `max` pending messages into `out`; how many.
    fn hand_out_pending(&self, out: &mut Vec<T>, max: usize) -> usize {
        let mut pending = self.pending.borrow_mut();
        let before = out.len();
        out.extend(pending.by_ref().take(max));
        out.len() - before
    }

    /// Hands out up to `max` messages of `run` into `out`, keeping the rest
    /// pending (it is empty: `run` is the newest thing taken).
    fn hand_out_run(&self, run: Run<T>, out: &mut Vec<T>, max: usize) -> usize {
        match run {
            Run::One(m) => {
                out.push(m);
                1
            }
            Run::Many(v) => {
                let mut it = v.into_iter();
                let before = out.len();
                out.extend(it.by_ref().take(max));
                *self.pending.borrow_mut() = it;
                out.len() - before
            }
        }
    }

    /// The pending messages first, then (if none) one run from `rx` as
    /// `take` gets it; up to `max` into `out`, the credit returned.
    fn take_batch<E>(
        &self,
        out: &mut Vec<T>,
        max: usize,
        take: impl FnOnce() -> Result<Run<T>, E>,
    ) -> Result<usize, E> {
        if max == 0 {
            return Ok(0);
        }
        let mut n = self.hand_out_pending(out, max);
        if n == 0 {
            n = self.hand_out_run(take()?, out, max);
        }
        self.took_n(n);
        Ok(n)
    }

    /// Takes one message: pending first, then from `rx` as `take` gets a run.
    fn take_one<E>(&self, take: impl FnOnce() -> Result<Run<T>, E>) -> Result<T, E> {
        let mut one = Vec::with_capacity(1);
        self.take_batch(&mut one, 1, take)?;
        Ok(one.pop().expect("took one"))
    }

    /// Waits for a message (suspending only the calling coroutine).
    ///
    /// # Errors
    /// [`RecvError`] once every source rank has closed and the buffer is
    /// drained.
    pub fn recv(&self) -> Result<T, RecvError> {
        if let Some(m) = self.pending.borrow_mut().next() {
            self.took_n(1);
            return Ok(m);
        }
        match self.wait_run(None).map_err(|_| RecvError)? {
            Run::One(m) => {
                self.took_n(1);
                Ok(m)
            }
            run => self.take_one(|| Ok(run)),
        }
    }

    /// Takes a message if one is here.
    ///
    /// # Errors
    /// [`TryRecvError::Empty`] when none is, [`TryRecvError::Disconnected`]
    /// once every source rank has closed and the buffer is drained.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.take_one(|| self.rx.try_recv())
    }

    /// Waits at most `timeout` for a message.
    ///
    /// # Errors
    /// [`RecvTimeoutError::Timeout`] when none came in time,
    /// [`RecvTimeoutError::Disconnected`] once every source rank has closed
    /// and the buffer is drained.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.take_one(|| self.wait_run(Instant::now().checked_add(timeout)))
    }

    /// Waits for at least one message, then appends up to `max` of those
    /// here to `out`, in order; returns how many. Their credit goes back to
    /// the senders at once, in one piece. Messages the bridge delivered in
    /// one batch come out of one channel element, so taking them costs a
    /// copy each, not a channel operation each.
    ///
    /// # Errors
    ///
    /// [`RecvError`] once every source has closed and nothing is left;
    /// `out` is then unchanged. `max == 0` returns `Ok(0)` at once.
    pub fn recv_batch(&self, out: &mut Vec<T>, max: usize) -> Result<usize, RecvError> {
        self.take_batch(out, max, || self.wait_run(None).map_err(|_| RecvError))
    }

    /// Appends up to `max` of the messages here now to `out`; never waits.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if none is here, [`TryRecvError::Disconnected`]
    /// if none is here and every source has closed.
    pub fn try_recv_batch(&self, out: &mut Vec<T>, max: usize) -> Result<usize, TryRecvError> {
        self.take_batch(out, max, || self.rx.try_recv())
    }

    /// [`recv_batch`](RemoteReceiver::recv_batch), waiting at most
    /// `timeout` for the first message.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] if none came in time,
    /// [`RecvTimeoutError::Disconnected`] once every source has closed and
    /// nothing is left.
    pub fn recv_batch_timeout(
        &self,
        out: &mut Vec<T>,
        max: usize,
        timeout: Duration,
    ) -> Result<usize, RecvTimeoutError> {
        self.take_batch(out, max, || {
            self.wait_run(Instant::now().checked_add(timeout))
        })
    }

    /// A blocking iterator over messages, ending at disconnection.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// Messages delivered and not yet taken.
    pub fn len(&self) -> usize {
        // Acquire: pairs with nothing in particular; `delivered` only grows
        // and is counted before each push, so it is never below `taken`.
        let delivered = self.shared.delivered.load(Ordering::Acquire);
        delivered.saturating_sub(self.taken.get()) as usize
    }

    /// True if no message is waiting here.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The capacity: how much credit this receiver hands out.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// The channel's tag.
    pub fn tag(&self) -> u16 {
        self.shared.tag
    }

    /// The receiver's counters.
    pub fn stats(&self) -> ReceiverStats {
        let s = &self.shared.stats;
        // Acquire, all: figures the bridge writes alone (`shared::bump`,
        // `raise`); each is read on its own, no snapshot across them.
        ReceiverStats {
            capacity: self.shared.capacity,
            received: s.received.load(Ordering::Acquire),
            max_in_flight: s.max_in_flight.load(Ordering::Acquire),
            max_buffered: s.max_buffered.load(Ordering::Acquire),
            grants: s.grants.load(Ordering::Acquire),
            batches: s.batches.load(Ordering::Acquire),
        }
    }
}

impl<T> Drop for RemoteReceiver<T> {
    fn drop(&mut self) {
        // Release: the takes counted in `consumed` before the drop are seen
        // by the bridge's Acquire load of `dropped`.
        self.shared.dropped.store(true, Ordering::Release);
        self.shared.bell.ring();
    }
}

impl<T> std::fmt::Debug for RemoteReceiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteReceiver")
            .field("tag", &self.shared.tag)
            .field("capacity", &self.shared.capacity)
            .finish()
    }
}

/// Blocking iterator of a [`RemoteReceiver`].
#[derive(Debug)]
pub struct Iter<'a, T> {
    rx: &'a RemoteReceiver<T>,
}

impl<T: 'static> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<'a, T: 'static> IntoIterator for &'a RemoteReceiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}
