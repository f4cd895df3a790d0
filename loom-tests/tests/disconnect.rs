//! Disconnection models: the last sender's drop wakes every receiver blocked
//! on an empty ring (after they drain what is buffered), and the last
//! receiver's drop wakes every sender blocked on a full ring (which gets its
//! message back). In the modes with several endpoints on a side, each of them
//! is dropped on its own thread, so which one is "last" is part of the race.
#![cfg(loom)]

#[macro_use]
mod common;

use common::{recv_woken_by_disconnect, send_woken_by_disconnect};
use swco_channel::{Cas, Mpmc, Mpsc, Spmc, Spsc, Updt};

// (producers, consumers)
model!(
    cas_spsc_recv_woken_by_disconnect,
    2,
    recv_woken_by_disconnect::<Spsc, Cas>(1, 1)
);
model!(
    cas_spmc_recv_woken_by_disconnect,
    1,
    recv_woken_by_disconnect::<Spmc, Cas>(1, 2)
);
model!(
    cas_mpsc_recv_woken_by_disconnect,
    2,
    recv_woken_by_disconnect::<Mpsc, Cas>(2, 1)
);
model!(
    cas_mpmc_recv_woken_by_disconnect,
    2,
    recv_woken_by_disconnect::<Mpmc, Cas>(2, 1)
);
model!(
    updt_spsc_recv_woken_by_disconnect,
    2,
    recv_woken_by_disconnect::<Spsc, Updt>(1, 1)
);
model!(
    updt_spmc_recv_woken_by_disconnect,
    1,
    recv_woken_by_disconnect::<Spmc, Updt>(1, 2)
);
model!(
    updt_mpsc_recv_woken_by_disconnect,
    2,
    recv_woken_by_disconnect::<Mpsc, Updt>(2, 1)
);
model!(
    updt_mpmc_recv_woken_by_disconnect,
    2,
    recv_woken_by_disconnect::<Mpmc, Updt>(2, 1)
);

model!(
    cas_spsc_send_woken_by_disconnect,
    2,
    send_woken_by_disconnect::<Spsc, Cas>(1, 1)
);
model!(
    cas_spmc_send_woken_by_disconnect,
    2,
    send_woken_by_disconnect::<Spmc, Cas>(1, 2)
);
model!(
    cas_mpsc_send_woken_by_disconnect,
    1,
    send_woken_by_disconnect::<Mpsc, Cas>(2, 1)
);
model!(
    cas_mpmc_send_woken_by_disconnect,
    1,
    send_woken_by_disconnect::<Mpmc, Cas>(2, 1)
);
model!(
    updt_spsc_send_woken_by_disconnect,
    2,
    send_woken_by_disconnect::<Spsc, Updt>(1, 1)
);
model!(
    updt_spmc_send_woken_by_disconnect,
    2,
    send_woken_by_disconnect::<Spmc, Updt>(1, 2)
);
model!(
    updt_mpsc_send_woken_by_disconnect,
    1,
    send_woken_by_disconnect::<Mpsc, Updt>(2, 1)
);
model!(
    updt_mpmc_send_woken_by_disconnect,
    1,
    send_woken_by_disconnect::<Mpmc, Updt>(2, 1)
);
