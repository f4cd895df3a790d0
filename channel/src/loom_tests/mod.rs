//! Loom models of the channels that need the crate's internals, inside the
//! crate so that nothing is made public for them.
//!
//! They compile only for the crate's own unit tests under `--cfg loom`
//! (`#[cfg(all(test, loom))]`), where the `sync` shim hands out loom's
//! atomics, cells and parker. From the workspace root:
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p swco-channel --lib --release
//! ```
//!
//! * [`combining`]: flat combining on an `Updt` side, checked to be
//!   reached through the count of requests it served
//!   (`claim/combine.rs`).
//!
//! The models that go through the public API are in `swco-loom-tests`;
//! `loom-tests/README.md` lists every model, what it proves and the
//! mutations it catches.

mod combining;

/// The shared loom runner (`swco-test-support`): every bound of the search
/// set in code.
use swco_test_support::loom_check as check;
