//! Loom models of the executor's synchronisation cores, inside the crate
//! so that they reach its internals without any of them being public.
//!
//! They compile only for the crate's own unit tests under `--cfg loom`
//! (`#[cfg(all(test, loom))]`): there the crate's `sync` shim hands out
//! loom's atomics, locks and cells, and the thread parker is loom's, while
//! everything that needs real threads or coroutine stacks (the runtime,
//! the executors, the stacks) is left out of the build. Loom threads stand
//! in for executors, coroutines and wakers. From the workspace root:
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p swco-executor --lib --release
//! ```
//!
//! * [`wake`]: the per-coroutine wake state (`wake.rs`);
//! * [`inbox`]: the hand-off to a parking executor (`inbox.rs`);
//! * [`join`]: the join-handle hand-off and `JoinHandle::cancel`
//!   (`join.rs`);
//! * [`chunks`]: `parallel_for`'s chunk claim (`chunks.rs`);
//! * [`stall`]: the stall detector's idle accounting (`stall.rs`).
//!
//! `loom-tests/README.md` lists every model, what it proves and the
//! mutations it catches.

/// Defines a `#[test]` that model-checks `body`, with a preemption bound
/// (`bound: n`) or without one (`unbounded`).
// Defined before the models' modules, which see it by textual scope.
macro_rules! model {
    ($(#[$attr:meta])* $name:ident, unbounded, $body:expr) => {
        $(#[$attr])*
        #[test]
        fn $name() {
            $crate::loom_tests::check(stringify!($name), None, move || $body);
        }
    };
    ($(#[$attr:meta])* $name:ident, bound: $bound:expr, $body:expr) => {
        $(#[$attr])*
        #[test]
        fn $name() {
            $crate::loom_tests::check(stringify!($name), Some($bound), move || $body);
        }
    };
}

mod chunks;
mod inbox;
mod join;
mod stall;
mod wake;

/// The shared loom runner (`swco-test-support`): every bound of the search
/// set in code.
use swco_test_support::loom_check as check;
