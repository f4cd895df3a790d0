//! What the `select!` macros' expansion calls: the first try
//! (`FirstTry`) and the `__private` module that names everything the
//! expansion uses. Hidden, not API.

use super::engine::{pick_ready, Look};
use super::random::random_u32;

/// The macro's first try, made before [`run`] with each arm's own methods
/// rather than through `&mut dyn Op`: the arms' readiness probes and the
/// one try that follows are then inlined at the call site, with no call
/// through a vtable (a plain `recv` is short enough that indirect calls
/// per arm would cost a select as much as the receive itself). It makes the same pick as [`look`]: a ready arm chosen
/// uniformly at random, or, made [`biased`](FirstTry::biased), the first
/// ready arm. The expansion probes every arm in order
/// ([`probe`](FirstTry::probe)), asks for the pick
/// ([`pick`](FirstTry::pick)), then offers each arm its turn
/// ([`turn`](FirstTry::turn)); only the picked one is tried. If nothing
/// looked ready or the try failed, [`run`] does the whole select as before
/// (a failed try has changed nothing: a receive took nothing, a send made
/// its message and keeps it for its next try).
///
/// Not under loom, as [`look`], and not past 64 arms.
#[doc(hidden)]
#[derive(Default)]
pub struct FirstTry {
    /// The arm the next `probe` or `turn` is for (after the probes, the
    /// number of arms).
    k: usize,
    ready: u64,
    /// Set by a `pick` that returns `true`, before any `turn`.
    picked: usize,
    /// Picks the first ready arm rather than a random one.
    biased: bool,
}

impl FirstTry {
    /// A first try that picks the first ready arm, for
    /// [`select_biased!`](crate::select_biased!).
    #[inline]
    #[must_use]
    pub fn biased() -> Self {
        FirstTry {
            biased: true,
            ..FirstTry::default()
        }
    }

    /// Records the next arm's readiness.
    #[inline]
    pub fn probe(&mut self, ready: bool) {
        self.ready |= u64::from(ready) << (self.k & 63);
        self.k += 1;
    }

    /// Picks the arm to try; `false` if there is none (or no first try).
    #[inline]
    pub fn pick(&mut self) -> bool {
        // Every arm was probed, so `k` is their number.
        let n = std::mem::replace(&mut self.k, 0);
        if cfg!(loom) || !(1..=64).contains(&n) {
            return false;
        }
        let look = if self.biased {
            pick_ready(self.ready & self.ready.wrapping_neg(), || 0)
        } else {
            // One arm ready (the common case: a message on one channel)
            // draws no random number.
            pick_ready(self.ready, random_u32)
        };
        match look {
            Look::Ready(i) => {
                self.picked = i;
                true
            }
            Look::NoneReady | Look::Skipped => false,
        }
    }

    /// Whether the next arm is the picked one.
    #[inline]
    pub fn turn(&mut self) -> bool {
        let mine = self.k == self.picked;
        self.k += 1;
        mine
    }
}

/// What the [`select!`](crate::select!) macro expands to uses. Not API.
#[doc(hidden)]
pub mod __private {
    pub use super::FirstTry;
    pub use crate::select::arms::{RecvArm, SendArm};
    pub use crate::select::engine::{run, Wait};
    pub use crate::select::op::OpRef;
}
