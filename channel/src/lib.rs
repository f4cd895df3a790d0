//! Bounded ring-buffer channels for coroutines and threads, in four modes
//! (SPSC, SPMC, MPSC, MPMC) and two synchronisation protocols:
//!
//! * [`Cas`] — compare-and-swap, what the Sunway MPE (and every x86/Arm core)
//!   has;
//! * [`Updt`] — only the Sunway CPE's `updt(n, addr)`: an atomic add that
//!   returns nothing, plus plain loads and stores (see [`updt`]).
//!
//! The mode is a type: [`spsc`], [`spmc`], [`mpsc`] and [`mpmc`] each have
//! `bounded` and `bounded_with`, and their own `Sender`/`Receiver`, `Clone`
//! only where the mode allows. A side with one endpoint sends (or receives)
//! with plain loads and stores: no read-modify-write on its data path.
//!
//! ```
//! use swco_channel::{mpmc, Updt};
//! use std::thread;
//!
//! let (tx, rx) = mpmc::bounded_with::<u64, Updt>(8);
//! let producers: Vec<_> = (0..4)
//!     .map(|p| {
//!         let tx = tx.clone();
//!         thread::spawn(move || for i in 0..100 { tx.send(p * 1000 + i).unwrap() })
//!     })
//!     .collect();
//! drop(tx);
//! let total: u64 = rx.iter().count() as u64;
//! for p in producers { p.join().unwrap(); }
//! assert_eq!(total, 400);
//! ```
//!
//! Blocking goes through the [`hook`]: by default the OS thread parks; the
//! swco executor installs a hook that suspends just the coroutine.
//!
//! Under `--cfg loom` the crate compiles against loom (see
//! `swco_wait::sync`), for model checking.
//!
//! The blocking machinery (the hook, the waiter lists and slots, the
//! register → re-check → park protocol, the add-only word and claim) is the
//! `swco-wait` crate's, which `swco::sync` builds on too; [`hook`] and
//! [`updt`] are re-exported from there.

#![warn(missing_docs)]

mod batch;
mod chan;
mod claim;
mod endpoint;
mod error;
mod future;
pub mod oneshot;
mod rendezvous;
mod ring;
mod select;
mod select_macro;
mod spaced;
mod timer;
mod waiting_on;

use swco_wait::{backoff, lock, sync, wait_list};
pub use swco_wait::{hook, updt};

pub use endpoint::{bounded_in, IntoIter, Iter, Receiver, Sender, TryIter};
pub use error::{
    RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};
pub use future::{RecvFuture, RecvFutureMut, SendFuture, SendFutureMut};
#[doc(hidden)]
pub use select::__private;
pub use select::{
    ReadyTimeoutError, Select, SelectRecv, SelectTimeoutError, SelectedOperation, TryReadyError,
    TrySelectError,
};
#[doc(hidden)]
pub use timer::TimerArm;
pub use timer::{after, at, never, tick, TimerReceiver};

/// A single-use channel: the [`oneshot::Sender`] sends one value
/// ([`send(self, v)`](oneshot::Sender::send), which never blocks), the
/// [`oneshot::Receiver`] receives it
/// ([`recv(self)`](oneshot::Receiver::recv)). A value sent before the
/// sender was dropped stays receivable; a sender dropped without sending
/// makes `recv` fail; a send to a dropped receiver gives the value back.
///
/// ```
/// use swco_channel::{oneshot, RecvError};
///
/// let (tx, rx) = oneshot::<String>();
/// std::thread::spawn(move || tx.send("result".to_string()).unwrap());
/// assert_eq!(rx.recv().unwrap(), "result");
///
/// let (tx, rx) = oneshot::<u8>();
/// drop(tx);
/// assert_eq!(rx.recv(), Err(RecvError));
/// ```
///
/// The receiver also works in a [`select!`] `recv` arm, by reference:
///
/// ```
/// use std::time::Duration;
/// use swco_channel::{after, oneshot, select};
///
/// let (tx, rx) = oneshot::<u32>();
/// tx.send(5).unwrap();
/// let got = select! {
///     recv(rx) -> v => v.ok(),
///     recv(after(Duration::from_secs(60))) -> _ => None,
/// };
/// assert_eq!(got, Some(5));
/// ```
#[must_use]
#[track_caller]
pub fn oneshot<T>() -> (oneshot::Sender<T>, oneshot::Receiver<T>) {
    oneshot::new()
}

mod sealed {
    pub trait Sealed {}
}

/// A synchronisation protocol for the sides with several endpoints:
/// [`Cas`] or [`Updt`].
pub trait Protocol: sealed::Sealed + Send + Sync + 'static {
    #[doc(hidden)]
    type Cursor: claim::Cursor;
    #[doc(hidden)]
    type Lock: lock::RawLock;
    /// `"cas"` or `"updt"`.
    const NAME: &'static str;
}

/// Compare-and-swap: claims by CAS on the position (the seed paper's
/// Figure 5, corrected), waiter lists under a CAS spin lock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Cas;

/// Add-only: every shared word is an [`updt::UpdtCell`] (add without result,
/// load, store); claims by the seed paper's Figure 6, corrected; waiter lists
/// under the same add-only claim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Updt;

impl sealed::Sealed for Cas {}
impl sealed::Sealed for Updt {}

impl Protocol for Cas {
    type Cursor = claim::CasCursor;
    type Lock = lock::CasLock;
    const NAME: &'static str = "cas";
}

impl Protocol for Updt {
    type Cursor = claim::UpdtCursor;
    type Lock = updt::UpdtClaim;
    const NAME: &'static str = "updt";
}

/// A channel mode: how many endpoints each side may have.
pub trait Mode: sealed::Sealed + Send + Sync + 'static {
    #[doc(hidden)]
    type Tx<P: Protocol>: claim::Cursor;
    #[doc(hidden)]
    type Rx<P: Protocol>: claim::Cursor;
    /// Where blocked senders wait: a lock-free single-waiter slot if the
    /// sender side has one endpoint, else a waiter list.
    #[doc(hidden)]
    type TxWait<P: Protocol>: wait_list::Waiters;
    /// Where blocked receivers wait, likewise.
    #[doc(hidden)]
    type RxWait<P: Protocol>: wait_list::Waiters;
    /// [`NotSyncEndpoint`] for a single side, so its endpoint is `Send` but
    /// not `Sync`.
    #[doc(hidden)]
    type TxShare: Send;
    #[doc(hidden)]
    type RxShare: Send;
    /// `"spsc"`, `"spmc"`, `"mpsc"` or `"mpmc"`.
    const NAME: &'static str;
}

/// Modes whose `Sender` is `Clone`: [`Mpsc`], [`Mpmc`].
pub trait ManyProducers: Mode {}
/// Modes whose `Receiver` is `Clone`: [`Spmc`], [`Mpmc`].
pub trait ManyConsumers: Mode {}

/// The marker of an endpoint alone on its side (an `spsc` endpoint, an
/// `spmc` sender, an `mpsc` receiver): such an endpoint is `Send` but not
/// `Sync`, because that side claims slots without synchronisation, for one
/// user at a time. A compiler error that names this type is about sharing
/// such an endpoint between threads (an `Arc` of it, a `&` in a scoped
/// thread): move it instead, or use a mode whose side has many endpoints.
pub struct NotSyncEndpoint(std::marker::PhantomData<std::cell::Cell<()>>);

type Lone = NotSyncEndpoint;

macro_rules! mode {
    (
        $(#[$doc:meta])* $name:ident, $str:literal,
        tx: $tx:ty, rx: $rx:ty, tx_wait: $txw:ty, rx_wait: $rxw:ty, $txs:ty, $rxs:ty
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub struct $name;
        impl sealed::Sealed for $name {}
        impl Mode for $name {
            type Tx<P: Protocol> = $tx;
            type Rx<P: Protocol> = $rx;
            type TxWait<P: Protocol> = $txw;
            type RxWait<P: Protocol> = $rxw;
            type TxShare = $txs;
            type RxShare = $rxs;
            const NAME: &'static str = $str;
        }
    };
}

// A single side's waiter slot is `WaiterSlot<true>` when the side that wakes
// it has one endpoint too (spsc), `WaiterSlot<false>` when it has several.
mode!(
    /// One producer, one consumer: no synchronisation on either side.
    Spsc, "spsc", tx: claim::Single, rx: claim::Single,
    tx_wait: wait_list::WaiterSlot<true>, rx_wait: wait_list::WaiterSlot<true>, Lone, Lone
);
mode!(
    /// One producer, many consumers: consumers claim through the protocol.
    Spmc, "spmc", tx: claim::Single, rx: P::Cursor,
    tx_wait: wait_list::WaiterSlot<false>, rx_wait: wait_list::WaitList<P::Lock>, Lone, ()
);
mode!(
    /// Many producers, one consumer: producers claim through the protocol.
    Mpsc, "mpsc", tx: P::Cursor, rx: claim::Single,
    tx_wait: wait_list::WaitList<P::Lock>, rx_wait: wait_list::WaiterSlot<false>, (), Lone
);
mode!(
    /// Many producers, many consumers: both sides claim through the protocol.
    Mpmc, "mpmc", tx: P::Cursor, rx: P::Cursor,
    tx_wait: wait_list::WaitList<P::Lock>, rx_wait: wait_list::WaitList<P::Lock>, (), ()
);

impl ManyProducers for Mpsc {}
impl ManyProducers for Mpmc {}
impl ManyConsumers for Spmc {}
impl ManyConsumers for Mpmc {}

macro_rules! mode_module {
    ($(#[$doc:meta])* $module:ident, $mode:ident) => {
        $(#[$doc])*
        pub mod $module {
            use crate::{Cas, Protocol};

            /// The sending endpoint of this mode.
            pub type Sender<T, P = Cas> = crate::Sender<T, crate::$mode, P>;
            /// The receiving endpoint of this mode.
            pub type Receiver<T, P = Cas> = crate::Receiver<T, crate::$mode, P>;

            /// A channel of this mode holding up to `capacity` messages,
            /// synchronised by compare-and-swap.
            ///
            /// A `capacity` of 0 makes a rendezvous channel: a send completes
            /// only when a receiver takes the message, as on Go's unbuffered
            /// channels.
            ///
            /// # Panics
            ///
            /// If `capacity` exceeds `usize::MAX / 4` (ring positions could no
            /// longer tell laps apart).
            #[track_caller]
            pub fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
                crate::bounded_in(capacity)
            }

            /// A channel of this mode holding up to `capacity` messages,
            /// synchronised by protocol `P` ([`Cas`] or [`Updt`](crate::Updt)).
            ///
            /// A `capacity` of 0 makes a rendezvous channel: a send completes
            /// only when a receiver takes the message, as on Go's unbuffered
            /// channels.
            ///
            /// # Panics
            ///
            /// If `capacity` exceeds `usize::MAX / 4` (ring positions could no
            /// longer tell laps apart).
            #[track_caller]
            pub fn bounded_with<T, P: Protocol>(capacity: usize) -> (Sender<T, P>, Receiver<T, P>) {
                crate::bounded_in(capacity)
            }
        }
    };
}

mode_module!(
    /// Single producer, single consumer.
    ///
    /// ```
    /// let (tx, rx) = swco_channel::spsc::bounded(2);
    /// std::thread::spawn(move || for i in 0..10 { tx.send(i).unwrap() });
    /// assert_eq!(rx.iter().sum::<i32>(), 45);
    /// ```
    spsc, Spsc
);
mode_module!(
    /// Single producer, many consumers (`Receiver: Clone`).
    ///
    /// ```
    /// let (tx, rx) = swco_channel::spmc::bounded_with::<u32, swco_channel::Updt>(2);
    /// let rx2 = rx.clone();
    /// let t = std::thread::spawn(move || rx2.iter().count());
    /// for i in 0..100 { tx.send(i).unwrap() }
    /// drop(tx);
    /// assert_eq!(rx.iter().count() + t.join().unwrap(), 100);
    /// ```
    spmc, Spmc
);
mode_module!(
    /// Many producers (`Sender: Clone`), single consumer.
    ///
    /// ```
    /// let (tx, rx) = swco_channel::mpsc::bounded(2);
    /// let tx2 = tx.clone();
    /// std::thread::spawn(move || tx2.send(1).unwrap());
    /// tx.send(2).unwrap();
    /// drop(tx);
    /// assert_eq!(rx.iter().sum::<i32>(), 3);
    /// ```
    mpsc, Mpsc
);
mode_module!(
    /// Many producers, many consumers: both endpoints are `Clone`.
    ///
    /// ```
    /// let (tx, rx) = swco_channel::mpmc::bounded(16);
    /// let (tx2, rx2) = (tx.clone(), rx.clone());
    /// tx2.send("hello").unwrap();
    /// assert_eq!(rx.recv(), Ok("hello"));
    /// drop((tx, tx2));
    /// assert!(rx2.recv().is_err());
    /// ```
    mpmc, Mpmc
);

#[cfg(test)]
mod static_checks {
    use super::*;
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    assert_impl_all!(mpmc::Sender<u8>: Clone, Send, Sync);
    assert_impl_all!(mpmc::Receiver<u8>: Clone, Send, Sync);
    assert_impl_all!(mpsc::Sender<u8, Updt>: Clone, Send, Sync);
    assert_not_impl_any!(mpsc::Receiver<u8, Updt>: Clone, Sync);
    assert_impl_all!(mpsc::Receiver<u8, Updt>: Send);
    assert_impl_all!(spmc::Receiver<u8>: Clone, Send, Sync);
    assert_not_impl_any!(spmc::Sender<u8>: Clone, Sync);
    assert_not_impl_any!(spsc::Sender<u8, Updt>: Clone, Sync);
    assert_not_impl_any!(spsc::Receiver<u8>: Clone, Sync);
    assert_impl_all!(spsc::Sender<u8>: Send);
    assert_not_impl_any!(mpmc::Sender<std::rc::Rc<u8>>: Send, Sync);
    assert_impl_all!(crate::SendError<u8>: std::error::Error);

    // Every mode and protocol's channel is at most 16-aligned, so that its
    // `Arc` comes from `malloc`, not `posix_memalign` (see `spaced.rs`), and
    // its hot words are still a gap apart.
    macro_rules! chan_layout {
        ($($m:ty),*) => {$(
            static_assertions::const_assert!(
                std::mem::align_of::<crate::chan::Chan<u64, $m, Cas>>() <= 16
            );
            static_assertions::const_assert!(
                std::mem::align_of::<crate::chan::Chan<u64, $m, Updt>>() <= 16
            );
        )*};
    }
    chan_layout!(Spsc, Spmc, Mpsc, Mpmc);

    // Not under loom: it makes a channel outside a loom model.
    #[cfg(not(loom))]
    #[test]
    fn hot_words_are_a_gap_apart() {
        use crate::spaced::GAP;
        fn check<M: Mode, P: Protocol>() {
            let (tx, _rx) = crate::endpoint::bounded_in::<u64, M, P>(4);
            let c = &*tx.chan;
            let base = c as *const _ as usize;
            let at = |p: *const u8| p as usize - base;
            let words = c.layout_probe();
            for pair in words.windows(2) {
                assert!(
                    at(pair[1].0) >= at(pair[0].0) + pair[0].1 + GAP,
                    "{} and {} are closer than {GAP} bytes",
                    at(pair[0].0),
                    at(pair[1].0)
                );
            }
        }
        check::<Spsc, Cas>();
        check::<Mpmc, Cas>();
        check::<Mpmc, Updt>();
        check::<Spmc, Updt>();
    }
}

/// The loom models that need the crate's internals (the combining path's
/// count of served requests): only in the crate's own unit tests under
/// `--cfg loom`. The models that go through the public API are in
/// `swco-loom-tests`.
#[cfg(all(test, loom))]
mod loom_tests;

/// The README's example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(all(test, not(loom)))]
mod waiting_on_tests {
    use crate::chan::Chan;
    use crate::{Cas, Mpmc, Spsc, Updt};

    /// What a blocked party on a channel waits on, as a dump shows it:
    /// the operation, the mode, protocol and capacity, and where the
    /// channel was made; a receive waiting for a selecting send's fill
    /// says so, and which way it got there.
    #[test]
    fn a_channel_describes_each_wait_on_it() {
        let chan = Chan::<u8, Mpmc, Cas>::new(0);
        let line = line!() - 1;
        let at = format!("made at {}:{line}", file!());
        assert_eq!(
            chan.waiting_on::<true>().to_string(),
            format!("recv on mpmc channel (cas, capacity 0) {at}")
        );
        assert_eq!(
            chan.waiting_on::<false>().to_string(),
            format!("send on mpmc channel (cas, capacity 0) {at}")
        );
        assert_eq!(
            chan.awaiting_fill::<false>().to_string(),
            format!(
                "recv (reserved by a selecting send, awaiting its fill) \
                 on mpmc channel (cas, capacity 0) {at}"
            )
        );
        assert!(chan
            .awaiting_fill::<true>()
            .to_string()
            .starts_with("recv (handed as a partner to a selecting send"));
        let spsc = Chan::<u8, Spsc, Updt>::new(4);
        assert!(spsc
            .waiting_on::<true>()
            .to_string()
            .starts_with("recv on spsc channel (updt, capacity 4) made at"));
    }
}
