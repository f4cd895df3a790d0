//! Blocking-path models: a consumer blocked on an empty ring is woken by a
//! send, a producer blocked on a full ring is woken by a receive, and no
//! wake-up is lost when a waiter's "register, fence, re-check" races the
//! peer's "make progress, fence, look for waiters". A lost wake-up leaves a
//! thread parked with nobody to unpark it, which loom reports as a deadlock.
#![cfg(loom)]

#[macro_use]
mod common;

use common::{recv_woken_by_send, send_woken_by_recv};
use swco_channel::{Cas, Mpmc, Mpsc, Spmc, Spsc, Updt};

// Receivers block on an empty ring: `[messages per producer]`, `[receives per
// consumer]`.
model!(
    cas_spsc_recv_woken_by_send,
    2,
    recv_woken_by_send::<Spsc, Cas>(&[2], &[2])
);
model!(
    cas_spmc_recv_woken_by_send,
    1,
    recv_woken_by_send::<Spmc, Cas>(&[2], &[1, 1])
);
model!(
    cas_mpsc_recv_woken_by_send,
    1,
    recv_woken_by_send::<Mpsc, Cas>(&[1, 1], &[2])
);
model!(
    cas_mpmc_recv_woken_by_send,
    1,
    recv_woken_by_send::<Mpmc, Cas>(&[2], &[1, 1])
);
model!(
    updt_spsc_recv_woken_by_send,
    2,
    recv_woken_by_send::<Spsc, Updt>(&[2], &[2])
);
model!(
    updt_spmc_recv_woken_by_send,
    1,
    recv_woken_by_send::<Spmc, Updt>(&[2], &[1, 1])
);
model!(
    updt_mpsc_recv_woken_by_send,
    1,
    recv_woken_by_send::<Mpsc, Updt>(&[1, 1], &[2])
);
model!(
    updt_mpmc_recv_woken_by_send,
    1,
    recv_woken_by_send::<Mpmc, Updt>(&[2], &[1, 1])
);

// Senders block on a full ring of one slot (one message put in first).
model!(
    cas_spsc_send_woken_by_recv,
    2,
    send_woken_by_recv::<Spsc, Cas>(&[1], &[2])
);
model!(
    cas_spmc_send_woken_by_recv,
    1,
    send_woken_by_recv::<Spmc, Cas>(&[1], &[1, 1])
);
model!(
    cas_mpsc_send_woken_by_recv,
    1,
    send_woken_by_recv::<Mpsc, Cas>(&[1, 1], &[3])
);
model!(
    cas_mpmc_send_woken_by_recv,
    2,
    send_woken_by_recv::<Mpmc, Cas>(&[1], &[2])
);
model!(
    updt_spsc_send_woken_by_recv,
    2,
    send_woken_by_recv::<Spsc, Updt>(&[1], &[2])
);
model!(
    updt_spmc_send_woken_by_recv,
    1,
    send_woken_by_recv::<Spmc, Updt>(&[1], &[1, 1])
);
model!(
    updt_mpsc_send_woken_by_recv,
    1,
    send_woken_by_recv::<Mpsc, Updt>(&[1, 1], &[3])
);
model!(
    updt_mpmc_send_woken_by_recv,
    2,
    send_woken_by_recv::<Mpmc, Updt>(&[1], &[2])
);
