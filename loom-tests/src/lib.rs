//! Loom model checking of the swco channel protocols.
//!
//! This crate has no library code: its models live in `tests/` and compile
//! only under `--cfg loom`, so that a plain `cargo test --workspace` skips
//! them. Run them with
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" cargo test -p swco-loom-tests --release
//! ```
//!
//! * `tests/data_path.rs` — exactly once, FIFO per producer, capacity, no
//!   read of an unpublished slot;
//! * `tests/blocking.rs` — blocked senders and receivers are woken, no lost
//!   wake-up;
//! * `tests/disconnect.rs` — the last endpoint's drop wakes the other side;
//! * `tests/waiter_slot.rs` — the single-waiter slot of a side with one
//!   endpoint replaces its kept waker safely when the endpoint blocks again
//!   on another thread;
//! * `tests/updt_claim.rs` — the add-only claim is a mutual exclusion;
//! * `tests/batch.rs` — batches: one claim per run, runs that cross the
//!   ring's end, give-back of the unsent tail, no lost wake-up;
//! * `tests/paper.rs` — the seed paper's Figures 5 and 6 as printed, and the
//!   counterexamples loom finds in them.
//!
//! See `loom-tests/README.md` for the table of models, what each proves, their
//! preemption bounds and the suite's wall time.
