//! Waiting on several channel operations at once: [`Select`] and the
//! [`select!`](crate::select!) macro, shaped like crossbeam-channel's, so
//! that code moves over by changing an import.
//!
//! # How a select runs
//!
//! Every operation (a receive or a send, on a channel of any mode and
//! protocol) is seen through one object-safe, crate-private trait, `Op`:
//! a readiness check, a try, and registration on the waiter list of the
//! side it would block on. A select
//!
//! 1. looks at every operation's readiness (loads only) and tries one of
//!    the ready ones, chosen uniformly at random (a xorshift: the thread's
//!    for the macro, the `Select`'s own for a `Select`), so that each ready
//!    operation is as likely as any other wherever it sits among the arms;
//!    if that try fails, or nothing looked ready, it tries its operations
//!    once each from a random start, and completes the first that succeeds;
//!    a disconnected channel counts as ready (`look` says why it looks
//!    first). When only one operation looks ready, no random number is
//!    drawn. A biased select ([`Select::new_biased`],
//!    [`select_biased!`](crate::select_biased!)) skips the look and tries
//!    its operations in the order they were added;
//! 2. if none succeeds (and it may block), spins a little where the park
//!    context says that is worth it (threads, or a coroutine with nothing
//!    else to run), but unlike a blocking `recv` never yields the thread
//!    before parking: its peers may be spinning on tries, and a yield would
//!    hand the core to one of them until the scheduler's next tick;
//! 3. then (after queuing its rendezvous packets, below) registers on
//!    every involved channel's waiter list with the current park context
//!    ([`hook::with_current`](crate::hook::with_current)), issues
//!    `fence(SeqCst)`, re-checks every operation, and parks only if all of
//!    them are still blocked: the same register / fence / re-check as a
//!    blocking `send` or `recv` (invariant 3 of `chan/mod.rs`), so no wake-up is
//!    lost. In a coroutine only the coroutine suspends.
//! 4. On the way out it picks one ready operation (if any; uniformly
//!    again), *leaves* that channel's list (it is about to retry that
//!    operation, which uses any wake it was chosen for) and *abandons*
//!    every other registration: a wake-one that chose this select on a
//!    channel whose operation it will not complete is handed on to that
//!    channel's next waiter. Then it goes back to 1, starting with the
//!    operation it left. A guard abandons every registration if the park
//!    unwinds (a coroutine cancelled at shutdown), so nothing a select
//!    registered outlives it.
//!
//! # Rendezvous channels
//!
//! On a zero-capacity channel a receive is ready when a sender waits in the
//! rendezvous, and a send when a receiver does. A blocked select also waits
//! *in* the rendezvous for each of its operations, with a packet each, all
//! sharing one token, queued in a random order (a peer serves the first
//! packet it finds, so the order chooses among several operations on one
//! channel): a peer that arrives (a thread, a coroutine, a future, or
//! another select) decides the token for the packet it serves, and the
//! select decides it for itself before it completes anything else, so
//! exactly one operation completes (`rendezvous/`, invariant 5). A
//! send's packet holds its message if it is made; else (a `Select` send,
//! or a `select!` send whose message is made only once chosen) the
//! receiver that serves it hands the select a packet of its own and waits
//! there while the select wakes, makes the message and fills it, so that a
//! blocked select's send is seen by every receive, `try_recv` and readiness
//! included. The packets are queued before the select registers on the
//! waiter lists: queuing one wakes a waiter of the other side, which must
//! not be the select itself; and the select's own packets are no partner
//! of its operations. `ready` queues no packets (a served packet
//! consumes). A biased select queues its packets in the order of its
//! operations.
//!
//! A send chosen on a zero-capacity channel owns the receiver that made it
//! ready, as in crossbeam and Go: it is *reserved* (taken out of its queue)
//! until the send fills it, or lets it go (a dropped
//! [`SelectedOperation`], a message expression that panics: the receiver
//! then waits on as before). So `select!{send(s, r.recv().unwrap()) -> ..}`
//! sends to the receiver that was waiting when it was chosen, whoever
//! else arrives while the message is made (`rendezvous/`, invariant 7).
//!
//! # Exactly once
//!
//! A receive is selected by receiving: the message is taken out of the
//! channel when the operation is selected. The macro hands it straight to
//! its arm; [`Select`] keeps it in the operation's own typed slot (made once,
//! when [`Select::recv`] added the operation: no allocation per message)
//! until [`SelectedOperation::recv`] collects it, so nobody can take it in
//! between. A send is selected when the channel has room (or has lost its
//! receivers); see [`SelectedOperation::send`] for what that promises.
//!
//! # Where the parts are
//!
//! `random.rs`: the randomness; `op.rs`: the operation trait the engine
//! sees; `arms.rs`: the receive and send operations on channels;
//! `engine.rs`: the driver (look, try, block); `builder.rs`: [`Select`]
//! and its errors; `expansion.rs`: what the macros' expansion calls
//! (hidden). Each imports only ones listed before it. The macros
//! themselves are in `select_macro.rs`. What an operation does in a
//! rendezvous while its select is blocked is with the rest of capacity 0,
//! in `rendezvous/select.rs` (which imports nothing of this folder).

mod arms;
mod builder;
mod engine;
mod expansion;
mod op;
mod random;

pub use arms::SelectRecv;
pub(crate) use arms::{recv_op, RecvArm};
pub use builder::{
    ReadyTimeoutError, Select, SelectTimeoutError, SelectedOperation, TryReadyError, TrySelectError,
};
pub use expansion::__private;
pub(crate) use op::{Kind, Op, OpRef, Probe};
