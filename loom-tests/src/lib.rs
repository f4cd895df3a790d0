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
//! The models that need a crate's internals are not here but in that crate,
//! as its unit tests under `cfg(all(test, loom))`: the channel's (flat
//! combining, checked to be reached) in `channel/src/loom_tests/`, run with
//! `RUSTFLAGS="--cfg loom" cargo test -p swco-channel --lib --release`, and
//! the executor's (wake state, inbox, join slot and cancel, chunk claim,
//! stall accounting) in `executor/src/loom_tests/`, run with
//! `RUSTFLAGS="--cfg loom" cargo test -p swco-executor --lib --release`.
//!
//! See `loom-tests/README.md` for the table of models, what each proves, their
//! preemption bounds and the suite's wall time.
