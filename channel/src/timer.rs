//! Receivers of time: [`after`], [`at`], [`tick`] and [`never`](fn@never), with
//! crossbeam-channel's semantics.
//!
//! # How they wait
//!
//! Nobody sends on these channels: a message is made on demand from the
//! clock, when it is due. So a timer receiver registers no waker anywhere.
//! A blocking `recv` parks through the [`hook`] with the due
//! time as its deadline; in a swco coroutine that is the executor's timer
//! heap (only the coroutine waits), on a plain thread a timed park. A
//! blocked [`select!`](crate::select!) or [`Select`](crate::Select) with a
//! timer operation parks with the earliest of its own deadline and its
//! timers' due times, then finds the timer ready on its way out. No thread
//! is started for any timer.
//!
//! # Semantics (crossbeam's)
//!
//! * [`after`]`(d)` / [`at`]`(t)`: one message, the due instant itself,
//!   delivered once (to one of the clones); afterwards the channel is empty
//!   for ever and never disconnected, so a `recv` then blocks for ever
//!   (`recv_timeout` times out), and a select arm on it is never ready
//!   again.
//! * [`tick`]`(d)`: a message every `d`, the first `d` after the call. The
//!   message is the instant the tick was due (which may be in the past).
//!   Missed ticks are dropped: a tick taken late schedules the next one a
//!   whole period after it was taken, not at the next multiple of the
//!   period. A blocking `recv` claims the next tick before it waits for it,
//!   so a loop of `recv`s does not drift.
//! * [`never`](fn@never)`()`: never delivers, never disconnects.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{RecvError, RecvTimeoutError, TryRecvError};
use crate::hook::{self, Describe, Op as OpKind, Park, WaitingOn};
use crate::rendezvous::Token;
use crate::select::{Op, OpRef};

/// A receiver of [`Instant`]s made by the clock rather than sent: what
/// [`after`], [`at`], [`tick`] and [`never`](fn@never) return.
///
/// It is one type for all four, so that code can choose among them at run
/// time (`if let Some(d) = limit { after(d) } else { never() }`) and hand
/// the result to one `select!` arm, as with crossbeam's
/// `Receiver<Instant>`. It works with [`recv`](TimerReceiver::recv),
/// [`try_recv`](TimerReceiver::try_recv),
/// [`recv_timeout`](TimerReceiver::recv_timeout), in
/// [`select!`](crate::select!) `recv` arms and with
/// [`Select::recv`](crate::Select::recv). Clones share the timer: an
/// `after`'s one message goes to one of them, a `tick`'s ticks are shared
/// out among them.
///
/// Nothing ever sends on it, so it is never disconnected: a receive that
/// would block for ever (a `recv` on [`never`](fn@never), or on an [`after`] whose
/// message was taken) does so, as in crossbeam.
///
/// ```
/// use std::time::Duration;
/// use swco_channel::{after, never, select, spsc};
///
/// let (_tx, rx) = spsc::bounded::<u32>(1);
/// let limit = Some(Duration::from_millis(5));
/// let timeout = match limit {
///     Some(d) => after(d),
///     None => never(),
/// };
/// let timed_out = select! {
///     recv(rx) -> _ => false,
///     recv(timeout) -> _ => true,
/// };
/// assert!(timed_out);
/// ```
#[derive(Clone)]
pub struct TimerReceiver {
    timer: Arc<Timer>,
}

/// The state the clones of a [`TimerReceiver`] share.
pub(crate) struct Timer {
    /// Where every time below is counted from, in nanoseconds.
    base: Instant,
    kind: Kind,
}

/// What a timer delivers.
enum Kind {
    /// One message, at `base`.
    At {
        /// Whether it was taken.
        taken: AtomicBool,
    },
    /// A message every `period`; the next is due `next` nanoseconds after
    /// `base` ([`NEVER`]: none is).
    Tick { next: AtomicU64, period: u64 },
    /// Nothing, ever.
    Never,
}

/// A due time that never comes: past what an [`Instant`] can represent.
const NEVER: u64 = u64::MAX;

/// `d` in nanoseconds, saturating at [`NEVER`].
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(NEVER)
}

/// A receiver that delivers one message, the instant it is due, after
/// `duration`; crossbeam's `after`.
///
/// The message goes to one receiver (of the clones), once; then the channel
/// stays empty for ever and is never disconnected. A `duration` too large
/// to represent as an [`Instant`] never fires.
///
/// ```
/// use std::time::{Duration, Instant};
/// use swco_channel::{after, TryRecvError};
///
/// let start = Instant::now();
/// let timer = after(Duration::from_millis(2));
/// let due = timer.recv().unwrap();
/// assert!(due >= start + Duration::from_millis(2));
/// assert_eq!(timer.try_recv(), Err(TryRecvError::Empty)); // once only
/// ```
#[must_use]
pub fn after(duration: Duration) -> TimerReceiver {
    match Instant::now().checked_add(duration) {
        Some(due) => at(due),
        None => never(),
    }
}

/// A receiver that delivers one message, `when` itself, once `when` has
/// come; crossbeam's `at`. As [`after`] otherwise.
///
/// ```
/// use std::time::{Duration, Instant};
/// use swco_channel::at;
///
/// let when = Instant::now() + Duration::from_millis(1);
/// assert_eq!(at(when).recv(), Ok(when));
/// ```
#[must_use]
pub fn at(when: Instant) -> TimerReceiver {
    TimerReceiver::new(
        when,
        Kind::At {
            taken: AtomicBool::new(false),
        },
    )
}

/// A receiver that delivers a message every `duration`, the first one
/// `duration` from now; crossbeam's `tick`.
///
/// Each message is the instant its tick was due. Ticks nobody takes are
/// not queued: a tick taken late schedules the next one `duration` after
/// it was taken, so after a long pause one tick is ready at once and the
/// next comes a whole period later. A `duration` too large to represent
/// never ticks.
///
/// ```
/// use std::time::Duration;
/// use swco_channel::tick;
///
/// let ticker = tick(Duration::from_millis(1));
/// let first = ticker.recv().unwrap();
/// let second = ticker.recv().unwrap();
/// assert!(second >= first + Duration::from_millis(1));
/// ```
#[must_use]
pub fn tick(duration: Duration) -> TimerReceiver {
    let base = Instant::now();
    let first = match base.checked_add(duration) {
        Some(_) => nanos(duration),
        None => NEVER,
    };
    TimerReceiver::new(
        base,
        Kind::Tick {
            next: AtomicU64::new(first),
            period: nanos(duration),
        },
    )
}

/// A receiver that never delivers a message and is never disconnected;
/// crossbeam's `never`. In a `select!` its arm is never chosen, which makes
/// it the neutral choice for an optional timeout or channel.
///
/// ```
/// use std::time::Duration;
/// use swco_channel::{never, select, RecvTimeoutError};
///
/// let nothing = never();
/// assert_eq!(nothing.recv_timeout(Duration::from_millis(1)), Err(RecvTimeoutError::Timeout));
/// let waited = select! {
///     recv(nothing) -> _ => false,
///     default(Duration::from_millis(1)) => true,
/// };
/// assert!(waited);
/// ```
#[must_use]
pub fn never() -> TimerReceiver {
    TimerReceiver::new(Instant::now(), Kind::Never)
}

impl Timer {
    /// `nanos` after `base`, if that is an instant.
    fn instant(&self, nanos: u64) -> Option<Instant> {
        if nanos == NEVER {
            return None;
        }
        self.base.checked_add(Duration::from_nanos(nanos))
    }

    /// Now, in nanoseconds after `base`.
    fn now(&self) -> u64 {
        nanos(self.base.elapsed())
    }

    /// When the next message is due, if one ever is (a hint: the message
    /// may be taken by a clone meanwhile).
    pub(crate) fn due(&self) -> Option<Instant> {
        match &self.kind {
            Kind::At { taken } if !taken.load(Ordering::Relaxed) => Some(self.base),
            Kind::Tick { next, .. } => self.instant(next.load(Ordering::Relaxed)),
            Kind::At { .. } | Kind::Never => None,
        }
    }

    /// Whether a message is there now (a hint).
    pub(crate) fn ready(&self) -> bool {
        self.due().is_some_and(|due| Instant::now() >= due)
    }

    /// Takes the message that is due, if any.
    pub(crate) fn try_recv(&self) -> Result<Instant, TryRecvError> {
        match &self.kind {
            Kind::At { taken } => {
                if taken.load(Ordering::Relaxed) || Instant::now() < self.base {
                    return Err(TryRecvError::Empty);
                }
                if taken.swap(true, Ordering::AcqRel) {
                    Err(TryRecvError::Empty)
                } else {
                    Ok(self.base)
                }
            }
            Kind::Tick { next, period } => {
                let mut due = next.load(Ordering::Acquire);
                loop {
                    let now = self.now();
                    if due == NEVER || now < due {
                        return Err(TryRecvError::Empty);
                    }
                    // Taken now (at or after its time): the next one is a
                    // whole period from now, whatever was missed.
                    let following = now.saturating_add(*period);
                    match next.compare_exchange(due, following, Ordering::AcqRel, Ordering::Acquire)
                    {
                        Ok(_) => return Ok(self.instant(due).expect("a due tick is an instant")),
                        Err(current) => due = current,
                    }
                }
            }
            Kind::Never => Err(TryRecvError::Empty),
        }
    }

    /// Receives, waiting until `deadline` at most (`None`: for ever).
    fn recv(&self, deadline: Option<Instant>) -> Result<Instant, RecvTimeoutError> {
        match &self.kind {
            Kind::Tick { next, period } => {
                // Claim the next tick first, then wait for its time
                // (crossbeam's order): the tick after it is due a period
                // after this one, not after this receive woke up.
                let mut due = next.load(Ordering::Acquire);
                let claimed = loop {
                    let Some(when) = self.instant(due) else {
                        break None;
                    };
                    if deadline.is_some_and(|d| d < when) {
                        break None;
                    }
                    let following = due.max(self.now()).saturating_add(*period);
                    match next.compare_exchange(due, following, Ordering::AcqRel, Ordering::Acquire)
                    {
                        Ok(_) => break Some(when),
                        Err(current) => due = current,
                    }
                };
                match claimed {
                    Some(when) => {
                        self.wait_until(Some(when));
                        Ok(when)
                    }
                    None => {
                        self.wait_until(deadline);
                        Err(RecvTimeoutError::Timeout)
                    }
                }
            }
            Kind::At { .. } | Kind::Never => loop {
                match self.try_recv() {
                    Ok(when) => return Ok(when),
                    Err(_) if deadline.is_some_and(|d| Instant::now() >= d) => {
                        return Err(RecvTimeoutError::Timeout)
                    }
                    Err(_) => {}
                }
                let wake = match (self.due(), deadline) {
                    (Some(due), Some(d)) => Some(due.min(d)),
                    (due, d) => due.or(d),
                };
                self.park(wake);
            },
        }
    }

    /// Parks (a coroutine suspends) until `deadline` has passed; for ever
    /// if `None`.
    fn wait_until(&self, deadline: Option<Instant>) {
        while !deadline.is_some_and(|d| Instant::now() >= d) {
            self.park(deadline);
        }
    }

    /// One park until `deadline`, saying what it waits on. Nobody holds a
    /// waker for it: the deadline (or a spurious wake) ends it.
    fn park(&self, deadline: Option<Instant>) {
        hook::with_current(|park| park.park_on(deadline, WaitingOn::on(self)));
    }
}

impl Describe for Timer {
    fn op(&self) -> OpKind {
        OpKind::Recv
    }

    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::At { .. } => f.write_str("recv on an `after` timer"),
            Kind::Tick { period, .. } => write!(
                f,
                "recv on a `tick` timer (every {:?})",
                Duration::from_nanos(*period)
            ),
            Kind::Never => f.write_str("recv on `never`"),
        }
    }
}

impl TimerReceiver {
    fn new(base: Instant, kind: Kind) -> Self {
        TimerReceiver {
            timer: Arc::new(Timer { base, kind }),
        }
    }

    /// Waits for the next message: an [`after`]'s (or [`at`]'s) instant
    /// once it is due, a [`tick`]'s next tick. In a coroutine only the
    /// coroutine waits (on its executor's timer heap); on a plain thread,
    /// the thread parks until then.
    ///
    /// ```
    /// use std::time::Duration;
    /// let due = swco_channel::after(Duration::from_millis(1)).recv().unwrap();
    /// # let _ = due;
    /// ```
    ///
    /// # Errors
    ///
    /// Never: the result is a `Result` for the shape of a channel's
    /// `recv`. On [`never`](fn@never), or on an [`after`] whose message was taken,
    /// this blocks for ever, as crossbeam's does.
    pub fn recv(&self) -> Result<Instant, RecvError> {
        self.timer.recv(None).map_err(|_| RecvError)
    }

    /// Takes the message if it is due now.
    ///
    /// ```
    /// use swco_channel::{never, TryRecvError};
    /// assert_eq!(never().try_recv(), Err(TryRecvError::Empty));
    /// ```
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if no message is due now (not yet, or, for
    /// [`after`], not any more). Never `Disconnected`.
    pub fn try_recv(&self) -> Result<Instant, TryRecvError> {
        self.timer.try_recv()
    }

    /// Waits at most `timeout` for the next message.
    ///
    /// ```
    /// use std::time::Duration;
    /// use swco_channel::{after, RecvTimeoutError};
    /// let late = after(Duration::from_secs(3600));
    /// assert_eq!(late.recv_timeout(Duration::from_millis(1)), Err(RecvTimeoutError::Timeout));
    /// ```
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] if no message was due before `timeout`
    /// had passed (a `tick` whose next tick is due after the deadline
    /// waits the timeout out, as crossbeam's does). Never `Disconnected`.
    /// A `timeout` too large to represent waits as long as it takes.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Instant, RecvTimeoutError> {
        self.timer.recv(Instant::now().checked_add(timeout))
    }

    /// Waits until `deadline` at most for the next message.
    ///
    /// # Errors
    ///
    /// As for [`recv_timeout`](TimerReceiver::recv_timeout).
    pub fn recv_deadline(&self, deadline: Instant) -> Result<Instant, RecvTimeoutError> {
        self.timer.recv(Some(deadline))
    }

    /// A blocking iterator over the messages (for a `tick`, its ticks;
    /// it never ends on its own).
    ///
    /// ```
    /// use std::time::Duration;
    /// let ticks: Vec<_> = swco_channel::tick(Duration::from_millis(1)).iter().take(3).collect();
    /// assert!(ticks.windows(2).all(|w| w[0] < w[1]));
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = Instant> + '_ {
        std::iter::from_fn(move || self.recv().ok())
    }

    /// A non-blocking iterator over the messages due now (at most one).
    pub fn try_iter(&self) -> impl Iterator<Item = Instant> + '_ {
        std::iter::from_fn(move || self.try_recv().ok())
    }

    /// 1 if a message is due now, else 0.
    #[must_use]
    pub fn len(&self) -> usize {
        usize::from(self.timer.ready())
    }

    /// Whether no message is due now.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        !self.timer.ready()
    }

    /// Whether a message is due now (the capacity is 1), or, for
    /// [`never`](fn@never) (capacity 0), always: crossbeam's answers.
    #[must_use]
    pub fn is_full(&self) -> bool {
        matches!(self.timer.kind, Kind::Never) || self.timer.ready()
    }

    /// 1 for [`after`], [`at`] and [`tick`] (at most one message is ever
    /// due), 0 for [`never`](fn@never), as crossbeam reports them.
    #[must_use]
    pub fn capacity(&self) -> usize {
        usize::from(!matches!(self.timer.kind, Kind::Never))
    }

    /// Always `false`: nothing sends on a timer, so nothing can leave.
    #[must_use]
    pub fn is_disconnected(&self) -> bool {
        false
    }

    /// Whether `other` is a clone of this receiver (shares its timer).
    #[must_use]
    pub fn same_channel(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.timer, &other.timer)
    }

    /// For the [`select!`](crate::select!) macro: this receiver's arm.
    #[doc(hidden)]
    #[inline]
    #[must_use]
    pub fn __select_recv_arm(&self) -> TimerArm<'_> {
        TimerArm::new(self)
    }
}

impl fmt::Debug for TimerReceiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.timer.kind {
            Kind::At { .. } => "after",
            Kind::Tick { .. } => "tick",
            Kind::Never => "never",
        };
        f.debug_struct("TimerReceiver")
            .field("kind", &kind)
            .field("due", &self.timer.due())
            .finish()
    }
}

impl<'a> IntoIterator for &'a TimerReceiver {
    type Item = Instant;
    type IntoIter = Box<dyn Iterator<Item = Instant> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

/// A receive on a [`TimerReceiver`] in a select: ready when its message is
/// due, registered nowhere (nobody sends), and waking the select by its due
/// time ([`Op::deadline`]).
///
/// `repr(C)` with `result` first, as [`RecvArm`](crate::select::RecvArm):
/// [`SelectedOperation::recv`](crate::SelectedOperation::recv) reaches the
/// result at the operation's address.
#[doc(hidden)]
#[repr(C)]
pub struct TimerArm<'a> {
    result: Option<Result<Instant, RecvError>>,
    timer: &'a Timer,
}

impl<'a> TimerArm<'a> {
    /// A receive on `rx`.
    #[inline]
    #[must_use]
    pub fn new(rx: &'a TimerReceiver) -> Self {
        TimerArm {
            result: None,
            timer: &rx.timer,
        }
    }

    /// For the macro's driver.
    #[inline]
    pub fn as_op(&mut self) -> OpRef<'_> {
        OpRef(self)
    }

    /// The outcome, if this receive was selected.
    #[inline]
    pub fn take(&mut self) -> Option<Result<Instant, RecvError>> {
        self.result.take()
    }

    /// For the macro's first try: whether the message is due.
    #[inline]
    #[must_use]
    pub fn probe(&self) -> bool {
        self.timer.ready()
    }

    /// For the macro's first try: takes the message if it is due.
    #[inline]
    pub fn try_now(&mut self) -> bool {
        Op::attempt(self)
    }
}

impl Op for TimerArm<'_> {
    fn ready(&self) -> bool {
        self.timer.ready()
    }

    fn attempt(&mut self) -> bool {
        debug_assert!(self.result.is_none());
        match self.timer.try_recv() {
            Ok(when) => {
                self.result = Some(Ok(when));
                true
            }
            Err(_) => false,
        }
    }

    fn register(&mut self, _park: &dyn Park) {}

    fn still_blocked(&self, _own: Option<&crate::sync::Arc<Token>>) -> bool {
        !self.timer.ready()
    }

    fn unregister(&mut self, _retry: bool) {}

    fn waits_on(&self) -> Option<WaitingOn<'_>> {
        Some(WaitingOn::on(self.timer))
    }

    fn deadline(&self) -> Option<Instant> {
        self.timer.due()
    }

    fn discard(&mut self) {
        self.result = None;
    }
}

impl crate::select::Probe for Timer {
    fn ready(&self, _kind: crate::select::Kind) -> bool {
        Timer::ready(self)
    }
}

impl crate::select::SelectRecv for TimerReceiver {
    type Msg = Instant;
}

impl crate::select::recv_op::RecvOp for TimerReceiver {
    fn parts(&self) -> crate::select::recv_op::Parts<'_> {
        crate::select::recv_op::Parts {
            arm: Box::new(TimerArm::new(self)),
            probe: &*self.timer,
        }
    }
    fn end(&self) -> *const () {
        Arc::as_ptr(&self.timer).cast()
    }
}
