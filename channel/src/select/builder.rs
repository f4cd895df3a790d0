//! The run-time builder [`Select`], the [`SelectedOperation`] it hands
//! out, and its errors.

use std::fmt;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use crate::error::{RecvError, SendError};
use crate::rendezvous::Packet;
use crate::sync::Arc;
use crate::{Mode, Protocol, Sender};

use super::arms::{channel_of, SelectRecv, SendReady};
use super::engine::{act_on_look, drive_after_look, look, pick_ready, Look, Wait};
use super::op::{Kind, Op, Probe, Removed};
use super::random::seed;
use crate::rendezvous::select as zero;

/// A set of channel operations to wait on, built at run time; crossbeam's
/// `Select`. Operations may be on channels of any mode and protocol, mixed.
///
/// Add operations with [`recv`](Select::recv) and [`send`](Select::send),
/// each returning the operation's index, then call
/// [`select`](Select::select) (or [`try_select`](Select::try_select),
/// [`select_timeout`](Select::select_timeout)) to wait until one is
/// selected, and complete it on the [`SelectedOperation`]. If several are
/// ready, one of them is selected uniformly at random, wherever it was
/// added ([`new_biased`](Select::new_biased): the first added). An
/// operation on a disconnected channel is ready (it fails).
///
/// In a swco coroutine, waiting suspends only the coroutine.
///
/// ```
/// use swco_channel::{mpmc, spsc, Select, Updt};
///
/// let (tx1, rx1) = spsc::bounded_with::<u32, Updt>(1);
/// let (tx2, rx2) = mpmc::bounded::<&str>(1);
/// std::thread::spawn(move || tx2.send("hello").unwrap());
///
/// let mut sel = Select::new();
/// let a = sel.recv(&rx1);
/// let b = sel.recv(&rx2);
/// let oper = sel.select();
/// match oper.index() {
///     i if i == a => println!("{:?}", oper.recv(&rx1)),
///     i if i == b => assert_eq!(oper.recv(&rx2), Ok("hello")),
///     _ => unreachable!(),
/// }
/// # drop(tx1);
/// ```
pub struct Select<'a> {
    /// Removed operations are [`Removed`] stand-ins.
    ops: Vec<Box<dyn Op + 'a>>,
    /// For each operation, its channel and the way it goes, for the first
    /// look at readiness ([`Select::look`]); [`Removed`] for a removed one.
    probes: Vec<(&'a (dyn Probe + 'a), Kind)>,
    /// For each operation, the channel it was added for and which way it
    /// goes: what [`SelectedOperation`] checks its caller's endpoint
    /// against, kept here rather than asked of the operation.
    ends: Vec<(*const (), Kind)>,
    live: usize,
    biased: bool,
    /// This select's own xorshift state for its random start: no
    /// thread-local access per select.
    rng: u32,
}

/// A selected operation of a [`Select`], to be completed with
/// [`recv`](SelectedOperation::recv) or [`send`](SelectedOperation::send)
/// on the endpoint it was added for (or a clone of it).
///
/// A selected receive has already taken its message (or found the channel
/// disconnected): [`recv`](SelectedOperation::recv) hands it over.
///
/// # Dropped without completing
///
/// Like crossbeam's, that is a bug: in a debug build the drop panics (only
/// there: crossbeam panics in every build). The
/// message a selected receive took cannot go back into the channel (not in
/// its FIFO place), so it is dropped, never leaked, and in a release build
/// that is all that happens; a selected send on a rendezvous channel lets
/// the receiver it held go, still waiting.
#[must_use = "a selected operation must be completed with `recv` or `send`"]
pub struct SelectedOperation<'s> {
    op: &'s mut (dyn Op + 's),
    /// The endpoint the operation was added for, and which way it goes.
    end: (*const (), Kind),
    index: usize,
    done: bool,
}

/// [`Select::try_select`] found no operation ready.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct TrySelectError;

/// [`Select::select_timeout`] found no operation ready before the deadline.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct SelectTimeoutError;

/// [`Select::try_ready`] found no operation ready.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct TryReadyError;

/// [`Select::ready_timeout`] found no operation ready before the deadline.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct ReadyTimeoutError;

impl fmt::Display for TrySelectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("all operations in select would block")
    }
}

impl fmt::Display for SelectTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("timed out waiting on select")
    }
}

impl fmt::Display for TryReadyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("all operations in select would block")
    }
}

impl fmt::Display for ReadyTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("timed out waiting on select")
    }
}

impl std::error::Error for TrySelectError {}
impl std::error::Error for SelectTimeoutError {}
impl std::error::Error for TryReadyError {}
impl std::error::Error for ReadyTimeoutError {}

impl<'a> Select<'a> {
    /// An empty set; when several operations are ready, one of them is
    /// selected uniformly at random.
    #[must_use]
    pub fn new() -> Self {
        Select {
            ops: Vec::new(),
            probes: Vec::new(),
            ends: Vec::new(),
            live: 0,
            biased: false,
            // Seeded from the thread's sequence; never 0 (xorshift's fixed
            // point).
            rng: seed() | 1,
        }
    }

    /// An empty set that, when several operations are ready, selects the
    /// one added first.
    #[must_use]
    pub fn new_biased() -> Self {
        Select {
            biased: true,
            ..Select::new()
        }
    }

    fn add(
        &mut self,
        op: Box<dyn Op + 'a>,
        probe: &'a (dyn Probe + 'a),
        end: (*const (), Kind),
    ) -> usize {
        self.ops.push(op);
        self.probes.push((probe, end.1));
        self.ends.push(end);
        self.live += 1;
        self.ops.len() - 1
    }

    /// Adds a receive on `rx`; returns its index. The same receiver may be
    /// added more than once. `rx` is a channel's [`Receiver`](crate::Receiver) of any mode
    /// and protocol, a [`TimerReceiver`](crate::TimerReceiver) (ready when
    /// its message is due) or a
    /// [`oneshot::Receiver`](crate::oneshot::Receiver).
    ///
    /// Allocates once, here: the operation's slot for the message it takes
    /// when selected. On a zero-capacity (rendezvous) channel it is ready
    /// when a sender waits, and a blocked select waits there too, so any
    /// sender (a thread, coroutine, future or another select) can meet it.
    pub fn recv<R: SelectRecv + ?Sized>(&mut self, rx: &'a R) -> usize {
        let end = (rx.end(), Kind::Recv);
        let parts = rx.parts();
        self.add(parts.arm, parts.probe, end)
    }

    /// Adds a send on `tx`; returns its index. It is selected when the
    /// channel has room (or every receiver is gone); on a zero-capacity
    /// (rendezvous) channel, when a receiver waits, which it then holds for
    /// [`SelectedOperation::send`]. A blocked select waits in the
    /// rendezvous for it too, so any receiver (a `try_recv` included) can
    /// meet it.
    pub fn send<T, M: Mode, P: Protocol>(&mut self, tx: &'a Sender<T, M, P>) -> usize {
        let end = (channel_of(&tx.chan), Kind::Send);
        let op = SendReady::new(tx);
        self.add(Box::new(op), &*tx.chan, end)
    }

    /// Removes the operation at `index` (indices of the others stay).
    ///
    /// # Panics
    /// If there is no operation at `index`, or it was removed already.
    pub fn remove(&mut self, index: usize) {
        assert!(
            self.ops.get(index).is_some_and(|op| !op.removed()),
            "no operation has the specified index"
        );
        self.ops[index] = Box::new(Removed);
        self.probes[index].0 = &Removed;
        self.live -= 1;
    }

    fn selected(&mut self, index: usize) -> SelectedOperation<'_> {
        let op = &mut *self.ops[index];
        debug_assert!(!op.removed(), "the driver selects a live operation");
        SelectedOperation {
            op,
            end: self.ends[index],
            index,
            done: false,
        }
    }

    /// The next number of this select's own xorshift sequence.
    #[inline]
    fn next_random(&mut self) -> u32 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        x
    }

    /// Where this select's scan starts: the first operation if biased,
    /// else a random one, as the engine's `first_op` picks but from `self.rng`.
    #[inline]
    fn first_op(&mut self) -> usize {
        let n = self.ops.len();
        if self.biased || n <= 1 || cfg!(loom) {
            return 0;
        }
        // Multiply-shift, as in `random_below`.
        ((u64::from(self.next_random()) * n as u64) >> 32) as usize
    }

    /// The first look at readiness ([`look`]'s, made from the flat list of
    /// probes): a ready operation chosen uniformly, drawing no random
    /// number when only one is ready.
    #[inline]
    fn look(&mut self) -> Look {
        let n = self.probes.len();
        if self.biased || cfg!(loom) || n < 2 {
            return Look::Skipped;
        }
        if n > 64 {
            return look(&mut self.ops[..]);
        }
        let ready = self
            .probes
            .iter()
            .enumerate()
            .fold(0u64, |bits, (i, (probe, kind))| {
                bits | u64::from(probe.ready(*kind)) << i
            });
        pick_ready(ready, || self.next_random())
    }

    #[inline(always)]
    fn run(&mut self, wait: Wait, consume: bool) -> Option<usize> {
        let look = self.look();
        if let ControlFlow::Break(answer) = act_on_look(&mut self.ops[..], look, wait, consume) {
            return answer;
        }
        let start = self.first_op();
        let biased = self.biased;
        drive_after_look(&mut self.ops[..], wait, consume, biased, start)
    }

    /// Selects an operation that is ready now, if there is one.
    ///
    /// ```
    /// use swco_channel::{mpsc, Select, TrySelectError};
    /// let (tx, rx) = mpsc::bounded::<i32>(1);
    /// let mut sel = Select::new();
    /// sel.recv(&rx);
    /// assert_eq!(sel.try_select().err(), Some(TrySelectError));
    /// tx.send(7).unwrap();
    /// assert_eq!(sel.try_select().unwrap().recv(&rx), Ok(7));
    /// ```
    ///
    /// # Errors
    ///
    /// [`TrySelectError`] if no operation completes now: every receive
    /// finds its channel empty (on a zero-capacity channel, no sender
    /// waiting) and every send finds its channel full (no receiver
    /// waiting), or the set has no operations. Every operation is tried
    /// once; nothing blocks.
    /// An operation on a disconnected channel counts as ready and is
    /// selected: its failure is reported by [`SelectedOperation::recv`] or
    /// [`SelectedOperation::send`], not here.
    pub fn try_select(&mut self) -> Result<SelectedOperation<'_>, TrySelectError> {
        match self.run(Wait::Now, true) {
            Some(i) => Ok(self.selected(i)),
            None => Err(TrySelectError),
        }
    }

    /// Waits until an operation is selected. With no operations, waits for
    /// ever.
    // The `expect` states an internal invariant; callers cannot reach it.
    #[allow(clippy::missing_panics_doc)]
    pub fn select(&mut self) -> SelectedOperation<'_> {
        let i = self
            .run(Wait::Forever, true)
            .expect("a select without deadline returns selected");
        self.selected(i)
    }

    /// Waits at most `timeout` for an operation to be selected.
    ///
    /// ```
    /// use std::time::Duration;
    /// use swco_channel::{spsc, Select, SelectTimeoutError};
    /// let (tx, rx) = spsc::bounded::<i32>(1);
    /// let mut sel = Select::new();
    /// sel.recv(&rx);
    /// let r = sel.select_timeout(Duration::from_millis(1));
    /// assert_eq!(r.err(), Some(SelectTimeoutError));
    /// # drop(tx);
    /// ```
    ///
    /// # Errors
    ///
    /// [`SelectTimeoutError`] if no operation was selected when `timeout`
    /// had passed (always so, once it passes, for a set with no
    /// operations). Every operation is tried at least once before the
    /// deadline is checked, so a zero `timeout` acts as
    /// [`try_select`](Select::try_select); a `timeout` too large to
    /// represent as an [`Instant`] never expires.
    /// An operation on a disconnected channel counts as ready and is
    /// selected: its failure is reported by [`SelectedOperation::recv`] or
    /// [`SelectedOperation::send`], not here.
    pub fn select_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<SelectedOperation<'_>, SelectTimeoutError> {
        match self.run(Wait::timeout(timeout), true) {
            Some(i) => Ok(self.selected(i)),
            None => Err(SelectTimeoutError),
        }
    }

    /// Waits until `deadline` at most for an operation to be selected.
    ///
    /// # Errors
    ///
    /// [`SelectTimeoutError`] if no operation was selected by `deadline`,
    /// as for [`select_timeout`](Select::select_timeout); a `deadline`
    /// already past still tries every operation once.
    /// An operation on a disconnected channel counts as ready and is
    /// selected: its failure is reported by [`SelectedOperation::recv`] or
    /// [`SelectedOperation::send`], not here.
    pub fn select_deadline(
        &mut self,
        deadline: Instant,
    ) -> Result<SelectedOperation<'_>, SelectTimeoutError> {
        match self.run(Wait::Until(deadline), true) {
            Some(i) => Ok(self.selected(i)),
            None => Err(SelectTimeoutError),
        }
    }

    /// The index of an operation that is ready now, without performing it.
    /// (By the time the caller performs it, it may no longer be ready.)
    ///
    /// # Errors
    ///
    /// [`TryReadyError`] if no operation is ready now (every receive's
    /// channel empty, every send's channel full, none of them
    /// disconnected), or the set has no operations. Nothing blocks.
    pub fn try_ready(&mut self) -> Result<usize, TryReadyError> {
        self.run(Wait::Now, false).ok_or(TryReadyError)
    }

    /// Waits until an operation is ready and returns its index, without
    /// performing it. (By the time the caller performs it, it may no longer
    /// be ready.)
    // The `expect` states an internal invariant; callers cannot reach it.
    #[allow(clippy::missing_panics_doc)]
    pub fn ready(&mut self) -> usize {
        self.run(Wait::Forever, false)
            .expect("a wait without deadline returns ready")
    }

    /// Waits at most `timeout` until an operation is ready; returns its
    /// index without performing it.
    ///
    /// # Errors
    ///
    /// [`ReadyTimeoutError`] if no operation was ready when `timeout` had
    /// passed (an operation on a disconnected channel counts as ready).
    /// Readiness is checked at least once before the deadline is; a
    /// `timeout` too large to represent as an [`Instant`] never expires.
    pub fn ready_timeout(&mut self, timeout: Duration) -> Result<usize, ReadyTimeoutError> {
        self.run(Wait::timeout(timeout), false)
            .ok_or(ReadyTimeoutError)
    }

    /// Waits until `deadline` at most until an operation is ready; returns
    /// its index without performing it.
    ///
    /// # Errors
    ///
    /// [`ReadyTimeoutError`] if no operation was ready by `deadline`, as for
    /// [`ready_timeout`](Select::ready_timeout); a `deadline` already past
    /// still checks once.
    pub fn ready_deadline(&mut self, deadline: Instant) -> Result<usize, ReadyTimeoutError> {
        self.run(Wait::Until(deadline), false)
            .ok_or(ReadyTimeoutError)
    }
}

impl Default for Select<'_> {
    fn default() -> Self {
        Select::new()
    }
}

impl fmt::Debug for Select<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Select")
            .field("operations", &self.live)
            .field("biased", &self.biased)
            .finish()
    }
}

impl SelectedOperation<'_> {
    /// The index [`Select::recv`] or [`Select::send`] returned for this
    /// operation.
    #[must_use]
    pub fn index(&self) -> usize {
        self.index
    }

    /// Completes a selected receive: the message it took, or `RecvError` if
    /// the channel was empty and disconnected.
    ///
    /// # Errors
    ///
    /// [`RecvError`] if the receive was selected because its channel was
    /// empty and every sender was gone (a disconnected channel counts as
    /// ready). The outcome was fixed when the operation was selected: a
    /// message it took then is returned even if the senders have gone
    /// since.
    ///
    /// # Panics
    /// If `rx` is not a receiver of the channel this operation was added
    /// for (the receiver added, or a clone of it, as crossbeam accepts).
    pub fn recv<R: SelectRecv + ?Sized>(mut self, rx: &R) -> Result<R::Msg, RecvError> {
        let (channel, kind) = self.end;
        assert!(
            kind == Kind::Recv && channel == rx.end(),
            "passed a receiver that wasn't selected"
        );
        // The arm's address, which is its result's (`RecvArm` and
        // `TimerArm` are `repr(C)` with `result` first).
        let stash = (self.op as *mut (dyn Op + '_)).cast::<Option<Result<R::Msg, RecvError>>>();
        // SAFETY: the operation is a receive (`Kind::Recv`), so `Select::recv`
        // made it (`RecvOp::arm`) for a receiver whose `end` is `channel`:
        // a `RecvArm` if that is the address of a channel, a `TimerArm` if
        // it is that of a timer. The select borrows that receiver (so the
        // channel or timer) for its whole life, and the arm's first field
        // (at `stash`) is its `Option<Result<M', RecvError>>` slot, `M'`
        // being the message type of that channel (of a timer, `Instant`).
        // `rx`'s end is a live channel or timer at the same address; two
        // live channels or timers cannot share an address (none is
        // zero-sized nor contains another), so it is that same one, and
        // `R::Msg` is `M'`. `self.op` is borrowed mutably, so nothing else
        // touches the slot.
        let outcome = unsafe { (*stash).take() };
        self.done = true;
        outcome.expect("a selected receive holds its outcome")
    }

    /// Completes a selected send: sends `msg` on `tx`, or gives it back if
    /// every receiver is gone.
    ///
    /// On a zero-capacity (rendezvous) channel the send was selected
    /// holding the receiver that made it ready (reserved: no other sender
    /// can serve it meanwhile), and `msg` goes to that receiver, as in
    /// crossbeam and Go; it does not block. If that receiver gave up in
    /// between (a `recv_timeout` whose deadline passed, a dropped receive
    /// future), this sends as [`Sender::send`] does. Dropping the
    /// `SelectedOperation` instead lets the receiver go, still waiting.
    ///
    /// On a channel with capacity, the send was selected because the
    /// channel had room. On a side with
    /// one sender (`spsc`, `spmc`) that room cannot vanish before this call,
    /// and it does not block. On a side with several senders (`mpsc`,
    /// `mpmc`) another sender may take the room in between; then this waits
    /// for room as [`Sender::send`] does. (Holding the room by claiming the
    /// slot at selection time is not an option: a claimed slot must be
    /// published without suspending, since receivers wait for it by
    /// spinning.)
    ///
    /// # Errors
    ///
    /// [`SendError`], holding `msg`, if every receiver is gone: when this
    /// is called (a send selected because its channel was disconnected
    /// always fails here), or while it waits for room on a side with
    /// several senders. The message is then not in the channel.
    ///
    /// # Panics
    /// If `tx` is not a sender of the channel this operation was added for
    /// (the sender added, or a clone of it).
    pub fn send<T, M: Mode, P: Protocol>(
        mut self,
        tx: &Sender<T, M, P>,
        msg: T,
    ) -> Result<(), SendError<T>> {
        let (channel, kind) = self.end;
        assert!(
            kind == Kind::Send && channel == channel_of(&tx.chan),
            "passed a sender that wasn't selected"
        );
        // The operation's address, which is its partner's (`SendReady` is
        // `repr(C)` with `partner` first).
        let slot = (self.op as *mut (dyn Op + '_)).cast::<Option<Arc<Packet<T>>>>();
        // SAFETY: the operation is a send (`Kind::Send`), so `Select::send`
        // made it as a `SendReady` for a sender of the channel at
        // `channel`, which the select borrows for its whole life, and whose
        // first field (at `slot`) is its `Option<Arc<Packet<T'>>>`, `T'`
        // being that channel's message type. `tx`'s channel is a live
        // channel at the same address, so it is that channel and `T` is
        // `T'` (as in `recv`). `self.op` is borrowed mutably, so nothing
        // else touches the slot.
        let partner = unsafe { (*slot).take() };
        self.done = true;
        match partner {
            Some(partner) => zero::send_to_partner(tx, &partner, msg),
            None => tx.send(msg),
        }
    }
}

impl Drop for SelectedOperation<'_> {
    fn drop(&mut self) {
        if !self.done {
            // Whatever a selected receive took is dropped, not leaked, and
            // the slot is clean for the next select.
            self.op.discard();
            if cfg!(debug_assertions) && !std::thread::panicking() {
                panic!("dropped a `SelectedOperation` without completing the operation");
            }
        }
    }
}

impl fmt::Debug for SelectedOperation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelectedOperation")
            .field("index", &self.index)
            .finish()
    }
}
