//! Data-path models: exactly once, FIFO per producer, never more than
//! capacity buffered, and no read of an unpublished slot, for both protocols
//! in all four modes. Non-blocking operations only; blocking and
//! disconnection have their own files.
//!
//! Plans are `capacity, [try_send attempts per producer], [try_recv attempts
//! per consumer]`; the main thread is the last consumer, and drains the ring
//! after the others are joined. Every plan offers more messages than the
//! ring holds, so whenever a receive comes between two sends, the ring wraps.
#![cfg(loom)]

#[macro_use]
mod common;

use common::data_path;
use swco_channel::{Cas, Mpmc, Mpsc, Spmc, Spsc, Updt};

// Capacity 1: every second message needs a receive in between.
model!(
    cas_spsc_exactly_once_cap1,
    2,
    data_path::<Spsc, Cas>(1, &[2], &[2])
);
model!(
    cas_spmc_exactly_once_cap1,
    2,
    data_path::<Spmc, Cas>(1, &[2], &[1, 1])
);
model!(
    cas_mpsc_exactly_once_cap1,
    2,
    data_path::<Mpsc, Cas>(1, &[1, 1], &[2])
);
model!(
    cas_mpmc_exactly_once_cap1,
    1,
    data_path::<Mpmc, Cas>(1, &[1, 1], &[1, 1])
);
model!(
    updt_spsc_exactly_once_cap1,
    2,
    data_path::<Spsc, Updt>(1, &[2], &[2])
);
model!(
    updt_spmc_exactly_once_cap1,
    2,
    data_path::<Spmc, Updt>(1, &[2], &[1, 1])
);
model!(
    updt_mpsc_exactly_once_cap1,
    2,
    data_path::<Mpsc, Updt>(1, &[1, 1], &[2])
);
model!(
    updt_mpmc_exactly_once_cap1,
    1,
    data_path::<Mpmc, Updt>(1, &[1, 1], &[1, 1])
);

// Capacity 2, three messages: the third can only go round into slot 0.
model!(
    cas_spsc_exactly_once_cap2,
    2,
    data_path::<Spsc, Cas>(2, &[3], &[2])
);
model!(
    cas_spmc_exactly_once_cap2,
    2,
    data_path::<Spmc, Cas>(2, &[3], &[1, 1])
);
model!(
    cas_mpsc_exactly_once_cap2,
    2,
    data_path::<Mpsc, Cas>(2, &[2, 1], &[2])
);
model!(
    cas_mpmc_exactly_once_cap2,
    1,
    data_path::<Mpmc, Cas>(2, &[2, 1], &[1, 1])
);
model!(
    updt_spsc_exactly_once_cap2,
    2,
    data_path::<Spsc, Updt>(2, &[3], &[2])
);
model!(
    updt_spmc_exactly_once_cap2,
    2,
    data_path::<Spmc, Updt>(2, &[3], &[1, 1])
);
model!(
    updt_mpsc_exactly_once_cap2,
    2,
    data_path::<Mpsc, Updt>(2, &[2, 1], &[2])
);
model!(
    updt_mpmc_exactly_once_cap2,
    1,
    data_path::<Mpmc, Updt>(2, &[2, 1], &[1, 1])
);

// The seed paper's overfill race: one slot more offered than there is, and
// no receive until the producers are done.
model!(
    cas_spsc_within_capacity,
    2,
    data_path::<Spsc, Cas>(1, &[2], &[0])
);
model!(
    cas_spmc_within_capacity,
    2,
    data_path::<Spmc, Cas>(1, &[2], &[0, 0])
);
model!(
    cas_mpsc_within_capacity,
    2,
    data_path::<Mpsc, Cas>(1, &[1, 1], &[0])
);
model!(
    cas_mpmc_within_capacity,
    2,
    data_path::<Mpmc, Cas>(1, &[1, 1], &[0, 0])
);
model!(
    updt_spsc_within_capacity,
    2,
    data_path::<Spsc, Updt>(1, &[2], &[0])
);
model!(
    updt_spmc_within_capacity,
    2,
    data_path::<Spmc, Updt>(1, &[2], &[0, 0])
);
model!(
    updt_mpsc_within_capacity,
    2,
    data_path::<Mpsc, Updt>(1, &[1, 1], &[0])
);
model!(
    updt_mpmc_within_capacity,
    2,
    data_path::<Mpmc, Updt>(1, &[1, 1], &[0, 0])
);
