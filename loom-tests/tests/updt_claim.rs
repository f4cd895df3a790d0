//! The add-only claim (`swco_channel::updt::UpdtClaim`, the seed paper's
//! Figure 6 claim corrected) is a mutual exclusion: every cursor and waiter
//! list of an `Updt` channel relies on it. Loom's `UnsafeCell` tracking
//! reports any two holders whose critical sections are not ordered.
#![cfg(loom)]

#[macro_use]
mod common;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use swco_channel::updt::UpdtClaim;

/// A counter guarded by an [`UpdtClaim`].
struct Guarded {
    claim: UpdtClaim,
    count: UnsafeCell<u32>,
}

// SAFETY: `count` is only touched by the holder of `claim`; that the claim
// really excludes is what the models below check.
unsafe impl Sync for Guarded {}

impl Guarded {
    fn new() -> Self {
        Guarded {
            claim: UpdtClaim::new(),
            count: UnsafeCell::new(0),
        }
    }

    /// Increments the counter under the claim, then commits (or undoes) it.
    fn bump(&self, commit: bool) {
        self.claim.claim();
        // SAFETY: we hold the claim.
        self.count.with_mut(|c| unsafe { *c += 1 });
        if commit {
            self.claim.commit();
        } else {
            self.claim.undo();
        }
    }

    /// One `try_claim`; increments under it if won.
    fn try_bump(&self) -> bool {
        if !self.claim.try_claim() {
            return false;
        }
        // SAFETY: we hold the claim.
        self.count.with_mut(|c| unsafe { *c += 1 });
        self.claim.commit();
        true
    }

    fn count(&self) -> u32 {
        // SAFETY: called after every other thread is joined.
        self.count.with(|c| unsafe { *c })
    }
}

// Three claimants (two threads and the main one), one of which releases by
// `undo` (as a lock release or a full ring does) and two by `commit`.
model!(updt_claim_mutual_exclusion, 1, {
    let g = Arc::new(Guarded::new());
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let g = g.clone();
            thread::spawn(move || g.bump(true))
        })
        .collect();
    g.bump(false);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(g.count(), 3);
});

// Single attempts: colliding claimants may both lose, but never both win,
// and a loser leaves no trace (a later claim still succeeds).
model!(updt_claim_try_claim_excludes, 3, {
    let g = Arc::new(Guarded::new());
    let other = {
        let g = g.clone();
        thread::spawn(move || g.try_bump())
    };
    let mine = g.try_bump();
    let theirs = other.join().unwrap();
    assert_eq!(g.count(), u32::from(mine) + u32::from(theirs));
    assert!(g.try_bump(), "a lost attempt left the claim held");
});
