//! The driver: looks at the operations, tries them, and blocks on all of
//! them at once (register, fence, re-check, park), for the macro and for
//! `Select` alike.

use std::fmt;
use std::ops::ControlFlow;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use crate::backoff::Backoff;
use crate::hook::{self, Describe, Op as OpKind, Park, WaitingOn};
use crate::rendezvous::Token;
use crate::sync::Arc;
use crate::sync::{fence, Ordering};

use super::op::{Op, OpRef};
use super::random::{nth_ready, random_below, random_u32, shuffle};
use crate::rendezvous::select::PacketOutcome;

/// How long a select may wait.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum Wait {
    /// Not at all: one try of every operation.
    Now,
    /// Until an operation completes.
    Forever,
    /// Until an operation completes or the deadline passes.
    Until(Instant),
}

impl Wait {
    /// For at most `timeout` (for ever if that is too far to represent).
    #[inline]
    #[must_use]
    pub fn timeout(timeout: Duration) -> Wait {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => Wait::Until(deadline),
            None => Wait::Forever,
        }
    }
}

/// The operations of a select, some perhaps removed.
pub(super) trait OpList {
    fn count(&self) -> usize;
    fn get(&mut self, i: usize) -> Option<&mut (dyn Op + '_)>;
    fn peek(&self, i: usize) -> Option<&(dyn Op + '_)>;
    /// Bit `i` set if operation `i` is [`ready`](Op::ready); for at most 64
    /// operations.
    fn ready_bits(&self) -> u64;
}

impl OpList for [OpRef<'_>] {
    #[inline]
    fn count(&self) -> usize {
        self.len()
    }
    #[inline]
    fn get(&mut self, i: usize) -> Option<&mut (dyn Op + '_)> {
        Some(&mut *self[i].0)
    }
    fn peek(&self, i: usize) -> Option<&(dyn Op + '_)> {
        Some(&*self[i].0)
    }
    #[inline]
    fn ready_bits(&self) -> u64 {
        self.iter()
            .enumerate()
            .fold(0, |bits, (i, op)| bits | u64::from(op.0.ready()) << i)
    }
}

impl<'a> OpList for [Box<dyn Op + 'a>] {
    #[inline]
    fn count(&self) -> usize {
        self.len()
    }
    #[inline]
    fn get(&mut self, i: usize) -> Option<&mut (dyn Op + '_)> {
        Some(&mut *self[i])
    }
    fn peek(&self, i: usize) -> Option<&(dyn Op + '_)> {
        Some(&*self[i])
    }
    #[inline]
    fn ready_bits(&self) -> u64 {
        self.iter()
            .enumerate()
            .fold(0, |bits, (i, op)| bits | u64::from(op.ready()) << i)
    }
}

/// The first operation, from `start` on (cyclically), that completes
/// (`consume`) or is ready (not `consume`).
#[inline]
fn scan<L: OpList + ?Sized>(ops: &mut L, start: usize, consume: bool) -> Option<usize> {
    let n = ops.count();
    // A wrapping step, not `% n`: a division per operation would cost as
    // much as the try itself.
    let mut i = start;
    for _ in 0..n {
        if let Some(op) = ops.get(i) {
            if if consume { op.attempt() } else { op.ready() } {
                return Some(i);
            }
        }
        i += 1;
        if i == n {
            i = 0;
        }
    }
    None
}

/// What [`look`] saw.
pub(super) enum Look {
    /// The operation picked among those that looked ready.
    Ready(usize),
    /// None looked ready.
    NoneReady,
    /// Not looked: one operation, or a loom model.
    Skipped,
}

/// Looks at every operation's readiness (loads only, no claim) and picks
/// one of the ready ones uniformly at random ([`pick_ready`]).
///
/// Why look before trying: trying in order from a random start makes "did
/// this try succeed" a coin toss for the branch predictor whenever some
/// operations are ready and others are not (the common case: one channel
/// has a message), and the try that follows a failed one calls another
/// operation's code through its vtable. A mispredicted branch and an
/// indirect call to a cold target cost about as much as the try itself
/// (`examples/select_cost.rs` times a select against a plain receive). Here the
/// loads run in a fixed order, the choice is
/// arithmetic, and the one try that follows usually succeeds. Looking
/// first is also what makes the choice fair: tries in order from a random
/// start would favour an operation that follows never-ready ones.
///
/// Not under loom: it is a pure shortcut (if the chosen try fails, the
/// ordinary scan follows), and its extra loads would only multiply the
/// interleavings a model explores.
#[inline]
pub(super) fn look<L: OpList + ?Sized>(ops: &mut L) -> Look {
    let n = ops.count();
    if cfg!(loom) || n < 2 {
        return Look::Skipped;
    }
    if n > 64 {
        return match pick_where(ops, &|op| op.ready()) {
            Some(i) => Look::Ready(i),
            None => Look::NoneReady,
        };
    }
    pick_ready(ops.ready_bits(), random_u32)
}

/// The pick among the operations whose bits are set in `ready` (bit `i`:
/// operation `i` looked ready): uniform, drawing a number from `random`
/// only when there is a choice to make.
#[inline]
pub(super) fn pick_ready(ready: u64, random: impl FnOnce() -> u32) -> Look {
    if ready == 0 {
        Look::NoneReady
    } else if ready & (ready - 1) == 0 {
        // One ready: no choice to make.
        Look::Ready(ready.trailing_zeros() as usize)
    } else {
        Look::Ready(nth_ready(ready, random()))
    }
}

/// One of the operations that satisfy `pred`, chosen uniformly at random:
/// counts them, draws, then walks to the chosen one. Two passes of calls
/// through the vtable, for the paths that are slow anyway (more operations
/// than a bit set holds; a select on its way out of a park). If fewer
/// satisfy `pred` on the second pass (readiness only ever is a snapshot),
/// the last one found.
fn pick_where<L: OpList + ?Sized>(ops: &mut L, pred: &dyn Fn(&dyn Op) -> bool) -> Option<usize> {
    let n = ops.count();
    let mut test = |i: usize| ops.get(i).is_some_and(|op| pred(op));
    let count = (0..n).filter(|&i| test(i)).count();
    if count == 0 {
        return None;
    }
    let mut k = random_below(count);
    let mut last = None;
    for i in 0..n {
        if test(i) {
            if k == 0 {
                return Some(i);
            }
            k -= 1;
            last = Some(i);
        }
    }
    last
}

/// Where a scan of `n` operations starts: the first if `biased`, else a
/// random one.
#[inline]
fn first_op(n: usize, biased: bool) -> usize {
    if biased {
        0
    } else {
        random_below(n)
    }
}

/// Runs a select: completes (`consume`) or finds ready (not `consume`) one
/// operation, waiting as `wait` allows. `None`: none within the wait.
#[inline(always)]
fn drive<L: OpList + ?Sized>(
    ops: &mut L,
    wait: Wait,
    consume: bool,
    biased: bool,
    start: usize,
) -> Option<usize> {
    if !biased {
        let first = look(ops);
        if let ControlFlow::Break(answer) = act_on_look(ops, first, wait, consume) {
            return answer;
        }
    }
    drive_after_look(ops, wait, consume, biased, start)
}

/// What the first look at readiness settles: `Break` with the select's
/// answer if the operation it picked completed (or, for a readiness probe
/// that may not wait, if nothing looked ready); `Continue` to try them all.
/// The macro's driver looks with [`look`], a [`Select`](crate::Select) with its own.
#[inline(always)]
pub(super) fn act_on_look<L: OpList + ?Sized>(
    ops: &mut L,
    look: Look,
    wait: Wait,
    consume: bool,
) -> ControlFlow<Option<usize>> {
    match look {
        Look::Ready(i) => {
            if !consume || ops.get(i).is_some_and(|op| op.attempt()) {
                return ControlFlow::Break(Some(i));
            }
        }
        // A readiness probe that may not wait has its answer.
        Look::NoneReady if !consume && matches!(wait, Wait::Now) => {
            return ControlFlow::Break(None)
        }
        Look::NoneReady | Look::Skipped => {}
    }
    ControlFlow::Continue(())
}

/// [`drive`] after its first look: tries every operation once from `start`,
/// then waits as `wait` allows.
#[inline(always)]
pub(super) fn drive_after_look<L: OpList + ?Sized>(
    ops: &mut L,
    wait: Wait,
    consume: bool,
    biased: bool,
    start: usize,
) -> Option<usize> {
    if let Some(i) = scan(ops, start, consume) {
        return Some(i);
    }
    let deadline = match wait {
        Wait::Now => return None,
        Wait::Forever => None,
        Wait::Until(deadline) => Some(deadline),
    };
    wait_for(ops, deadline, consume, biased)
}

/// The rest of [`drive`] once every operation was tried and failed: spin,
/// block and retry until one completes or `deadline` passes. Out of line,
/// so that a select that completes at once pays for none of it.
#[cold]
#[inline(never)]
fn wait_for<L: OpList + ?Sized>(
    ops: &mut L,
    deadline: Option<Instant>,
    consume: bool,
    biased: bool,
) -> Option<usize> {
    let n = ops.count();
    let mut backoff = Backoff::new();
    loop {
        // Every attempt so far failed. The deadline is checked after an
        // attempt, so a select woken just as it passes still uses the wake.
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        // Borrowed, not cloned, and only around the wait: the attempts
        // (which may run a send arm's message expression) happen outside.
        // Spin a little, but never yield the thread before parking: the
        // peers a select waits for are often spinning themselves (on
        // non-blocking selects or tries), and a yield hands the core to one
        // of them until the scheduler's next tick (milliseconds), while the
        // message that select could take arrives with nobody registered to
        // wake it. At capacity 0 no spin can succeed at all: a peer's try
        // completes only against the packets `block` queues.
        // (`examples/select_latency.rs` measures it.)
        let blocked = hook::with_current(|park| {
            if !backoff.is_spun() && park.spin_before_park() {
                backoff.snooze();
                Blocked::Retry(None)
            } else {
                block(ops, park, deadline, biased, consume)
            }
        });
        let preferred = match blocked {
            Blocked::Completed(i) => return Some(i),
            Blocked::Retry(preferred) => preferred,
        };
        // Start with the ready operation `block` picked, else with one
        // picked now: the scan tries its start first.
        let from = match preferred {
            Some(i) => i,
            None if biased => 0,
            None => match look(ops) {
                Look::Ready(i) => i,
                Look::NoneReady | Look::Skipped => first_op(n, false),
            },
        };
        if let Some(i) = scan(ops, from, consume) {
            return Some(i);
        }
    }
}

/// What a blocked select waits on: each of its operations.
struct Waits<'a, L: ?Sized>(&'a L);

impl<L: OpList + ?Sized> Describe for Waits<'_, L> {
    fn op(&self) -> OpKind {
        OpKind::Select
    }

    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.count();
        write!(
            f,
            "select on {n} operation{}",
            if n == 1 { "" } else { "s" }
        )?;
        let mut first = true;
        for i in 0..n {
            if let Some(on) = self.0.peek(i).and_then(|op| op.waits_on()) {
                f.write_str(if first { ": " } else { "; " })?;
                first = false;
                fmt::Display::fmt(&on, f)?;
            }
        }
        Ok(())
    }
}

/// Blocks once on every operation, without losing a wake-up: registers on
/// every operation's waiter list, fences, and parks only if every operation
/// is still blocked. On the way out, leaves the list of the one ready
/// operation it returns (to be retried first) and abandons the others.
fn block<L: OpList + ?Sized>(
    ops: &mut L,
    park: &dyn Park,
    deadline: Option<Instant>,
    biased: bool,
    consume: bool,
) -> Blocked {
    let n = ops.count();
    // Receives on rendezvous channels wait with packets, decided through
    // one token, so that they can be served while the select sleeps (not
    // when only looking for readiness: a served packet consumes).
    let token = (consume
        && (0..n).any(|i| ops.get(i).is_some_and(|op| op.in_rendezvous().is_some())))
    .then(Token::new);
    let mut registered = Registered {
        ops,
        done: false,
        token: token.clone(),
    };
    if let Some(token) = &token {
        // A sender serves the first packet it finds, so where several
        // receives of this select wait on one channel, the queue order
        // picks among them; and a packet queued earlier can be served
        // earlier. So, unless biased, the packets go in a random order.
        let mut order: Vec<usize> = (0..n)
            .filter(|&i| {
                registered
                    .ops
                    .get(i)
                    .is_some_and(|op| op.in_rendezvous().is_some())
            })
            .collect();
        if !biased {
            shuffle(&mut order);
        }
        for i in order {
            if let Some(op) = registered.ops.get(i).and_then(|op| op.in_rendezvous()) {
                op.queue_packet(park, token, i);
            }
        }
    }
    // Registered after the packets are queued: queuing one wakes a waiter
    // of the other side, which must not be this select (a select with a
    // send and a receive on one channel would wake itself, and spin).
    for i in 0..n {
        if let Some(op) = registered.ops.get(i) {
            op.register(park);
        }
    }
    fence(Ordering::SeqCst);
    // The ready operation to leave its list for (and retry first): the
    // first if biased, else one chosen uniformly.
    let find = |ops: &mut L, ready: &dyn Fn(&dyn Op) -> bool| {
        if biased {
            (0..n).find(|&i| ops.get(i).is_some_and(|op| ready(op)))
        } else {
            pick_where(ops, ready)
        }
    };
    let own = token.as_ref();
    let mut chosen = find(registered.ops, &|op| !op.still_blocked(own));
    if chosen.is_none() {
        // Cancelled (unwinding) out of the park after a peer served one of
        // our rendezvous packets: the hand-off stands, as for a plain
        // receive (`rendezvous/`); the unwinding goes on at the next
        // blocking operation or suspension.
        // A timer among the operations wakes the select when it is due:
        // nobody else would.
        let due = (0..n)
            .filter_map(|i| registered.ops.peek(i).and_then(|op| op.deadline()))
            .min();
        let wake_at = match (deadline, due) {
            (Some(deadline), Some(due)) => Some(deadline.min(due)),
            (deadline, due) => deadline.or(due),
        };
        let waits = Waits(&*registered.ops);
        let on = WaitingOn::on(&waits);
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| park.park_on(wake_at, on))) {
            if let Some(token) = registered.token.take() {
                let served = token.close().err();
                if let Some(i) = served {
                    // A send handed a partner lets it go; a reserved
                    // receive gives up unless it was filled already.
                    let completed = match registered.settle_packets(i) {
                        PacketOutcome::Completed => true,
                        PacketOutcome::Reserved => registered.await_fill(i, None, None),
                        PacketOutcome::Partner => {
                            registered.discard(i);
                            false
                        }
                        PacketOutcome::Nothing => false,
                    };
                    registered.finish(None);
                    if completed {
                        crate::rendezvous::defer(payload);
                        return Blocked::Completed(i);
                    }
                } else {
                    registered.settle_packets(usize::MAX);
                }
            }
            resume_unwind(payload);
        }
        // Only a choice of which registration to leave rather than abandon:
        // plain loads will do.
        chosen = find(registered.ops, &|op| op.ready());
    }
    // Before anything completes, decide the token: either a peer served
    // one of our packets (that operation is done, or about to be), or none
    // will.
    if let Some(token) = registered.token.take() {
        if let Err(i) = token.close() {
            // Registered nowhere from here: a wake-one meant for another
            // operation is handed on, not swallowed by a wait below. And
            // first: abandoning may run a waker (user code, which may
            // panic), and a partner taken below must reach the retry that
            // fills it with no user code in between (a `select!` arm, which
            // holds it, has no destructor to let it go: it would make the
            // borrows of its message expression outlive the select).
            registered.finish(None);
            match registered.settle_packets(i) {
                PacketOutcome::Completed => return Blocked::Completed(i),
                // A receiver handed this send its packet: the retry, which
                // starts with it, fills it.
                PacketOutcome::Partner => return Blocked::Retry(Some(i)),
                // A select's send reserved this receive: wait for its
                // message.
                PacketOutcome::Reserved => {
                    if registered.await_fill(i, Some(park), deadline) {
                        return Blocked::Completed(i);
                    }
                    return Blocked::Retry(None);
                }
                PacketOutcome::Nothing => return Blocked::Retry(None),
            }
        } else {
            registered.settle_packets(usize::MAX);
        }
    }
    registered.finish(chosen);
    Blocked::Retry(chosen)
}

/// How one [`block`] ended.
enum Blocked {
    /// Retry the operations, this ready one first if any.
    Retry(Option<usize>),
    /// A peer completed this receive through its rendezvous packet.
    Completed(usize),
}

/// The registrations of one [`block`]: ended on every way out. Normally by
/// [`finish`](Registered::finish); if the park (or a waker clone) unwinds,
/// by `Drop`, which abandons them all, so that none is left behind to
/// swallow a wake-one and none of the wakes taken is lost.
struct Registered<'o, L: OpList + ?Sized> {
    ops: &'o mut L,
    done: bool,
    /// The token of the rendezvous packets, until decided.
    token: Option<Arc<Token>>,
}

impl<L: OpList + ?Sized> Registered<'_, L> {
    /// Takes every rendezvous packet back; operation `served`'s keeps what
    /// its packet got (`usize::MAX`: none was served). Returns what that
    /// was.
    fn settle_packets(&mut self, served: usize) -> PacketOutcome {
        let mut outcome = PacketOutcome::Nothing;
        for i in 0..self.ops.count() {
            if let Some(op) = self.ops.get(i).and_then(|op| op.in_rendezvous()) {
                let settled = op.settle_packet(served == i);
                if served == i {
                    outcome = settled;
                }
            }
        }
        outcome
    }

    /// Lets go of what operation `i` holds (a partner), unwinding.
    fn discard(&mut self, i: usize) {
        if let Some(op) = self.ops.get(i) {
            op.discard();
        }
    }

    /// Operation `i`'s [`InRendezvous::await_fill`](crate::rendezvous::select::InRendezvous::await_fill).
    fn await_fill(&mut self, i: usize, park: Option<&dyn Park>, deadline: Option<Instant>) -> bool {
        self.ops
            .get(i)
            .and_then(|op| op.in_rendezvous())
            .is_some_and(|op| op.await_fill(park, deadline))
    }

    fn finish(&mut self, retry: Option<usize>) {
        for i in 0..self.ops.count() {
            if let Some(op) = self.ops.get(i) {
                op.unregister(retry == Some(i));
            }
        }
        self.done = true;
    }
}

impl<L: OpList + ?Sized> Drop for Registered<'_, L> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            // Unwinding: nothing completes, a message a packet got anyway
            // goes on to the next receiver, and a partner is let go.
            let _ = token.close();
            self.settle_packets(usize::MAX);
        }
        if !self.done {
            self.finish(None);
        }
    }
}

/// The macros' driver: completes one of `ops` (each at most once), waiting
/// as `wait` allows; `None` if none completed. `biased`: the first that can
/// complete, in order ([`select_biased!`](crate::select_biased!)), rather
/// than one chosen at random.
#[doc(hidden)]
#[inline]
pub fn run(ops: &mut [OpRef<'_>], wait: Wait, biased: bool) -> Option<usize> {
    drive(ops, wait, true, biased, first_op(ops.len(), biased))
}
