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
use std::sync::atomic::Ordering;
use swco_channel::updt::{UpdtCell, UpdtClaim};

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

/// What a cursor guards (`value`, its position) and what a waiter of the
/// other side leaves (`flag`, its registration).
struct Dekker {
    claim: UpdtClaim,
    value: UpdtCell,
    flag: UpdtCell,
}

impl Dekker {
    fn new() -> Self {
        Dekker {
            claim: UpdtClaim::new(),
            value: UpdtCell::new(0),
            flag: UpdtCell::new(0),
        }
    }

    /// A holder: moves `value` under the claim, commits (a plain store), then
    /// looks for a waiter, as a cursor's claimant does before it notifies.
    fn hold_and_look(&self) -> bool {
        self.claim.claim();
        // Relaxed, as a cursor's store of its position under the claim: the
        // commit's Release store publishes it.
        let v = self.value.load(Ordering::Relaxed);
        self.value.store(v + 1, Ordering::Relaxed);
        self.claim.commit();
        // Relaxed, as the waiter list's `len`: the claim's add orders it.
        self.flag.load(Ordering::Relaxed) == 1
    }
}

// The waiter's half of "register, then re-check": it registers, then
// `synchronize`s, then re-reads the guarded value. With commits being plain
// stores, the only thing that pairs the two sides is the add each makes to
// `claims`; whichever order they land in, the holder sees the registration
// or the waiter sees the holder's update, never neither.
model!(updt_claim_synchronize_never_misses_a_holder, 2, {
    let d = Arc::new(Dekker::new());
    let holder = {
        let d = d.clone();
        thread::spawn(move || d.hold_and_look())
    };
    d.flag.store(1, Ordering::Relaxed);
    d.claim.synchronize();
    let saw_update = d.value.load(Ordering::Relaxed) == 1;
    let saw_waiter = holder.join().unwrap();
    assert!(saw_update || saw_waiter, "a wake-up was lost");
});

// As above with two holders, one of which may collide with the other: the
// waiter that sees neither registration-seeing holder must see both updates.
model!(updt_claim_synchronize_two_holders, 1, {
    let d = Arc::new(Dekker::new());
    let holders: Vec<_> = (0..2)
        .map(|_| {
            let d = d.clone();
            thread::spawn(move || d.hold_and_look())
        })
        .collect();
    d.flag.store(1, Ordering::Relaxed);
    d.claim.synchronize();
    let seen = d.value.load(Ordering::Relaxed);
    let missed = holders
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|saw| !saw)
        .count();
    // Every holder that missed the registration must be in what we saw.
    assert!(
        seen >= missed as usize,
        "a wake-up was lost: saw {seen}, {missed} holders missed us"
    );
});
