//! The ring buffer: slots with per-slot stamps, and position arithmetic.
//!
//! A *position* names a slot and a lap: `pos = lap | index`, where `index <
//! capacity` occupies the low bits and the lap counts in units of
//! `one_lap = (capacity + 1).next_power_of_two()`. So capacity is exactly
//! what was asked for (not rounded up), every slot is usable, and moving to
//! the next position never needs a division.
//!
//! Each slot carries a *stamp*, stored only after the slot's data, which says
//! whose turn the slot is (Vyukov's bounded queue):
//!
//! * `stamp == pos`      — free: a producer at `pos` may write it;
//! * `stamp == pos + 1`  — full: written at `pos`, a consumer at `pos` may read it;
//! * after the read, `stamp = pos + one_lap`: free for the producer one lap on.
//!
//! The stamp is what publishes a slot: a consumer never reads a slot whose
//! stamp does not say "written at my position", so a claim's critical section
//! may end before the copy. Stamps are only ever loaded and stored, never
//! read-modify-written, so they serve the add-only `Updt` protocol unchanged.

use std::mem::MaybeUninit;

use crate::sync::{Ordering, UnsafeCell};
use crate::updt::UpdtCell;

/// One cell of the ring.
pub struct Slot<T> {
    /// Whose turn it is; see the module docs. Stored with `Release` after the
    /// data, loaded with `Acquire` before touching it.
    stamp: UpdtCell,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// Which side is asking about a slot.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Turn {
    /// A producer wants a free slot.
    Produce,
    /// A consumer wants a written slot.
    Consume,
}

/// What a slot's stamp says to a claimant at some position.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Readiness {
    /// The slot is this claimant's to take.
    Ready,
    /// The other side has not finished with the slot's previous turn: the
    /// ring is full (for a producer) or empty (for a consumer), or the peer
    /// is between its claim and its publish.
    Behind,
    /// Another claimant of this side already took the position: reload.
    Stale,
}

pub struct Ring<T> {
    slots: Box<[Slot<T>]>,
    capacity: usize,
    one_lap: usize,
}

// SAFETY: a slot's value is only touched by the one party that owns the
// slot's current turn (see the stamps above), so sharing the ring between
// threads is sound whenever the values themselves may move between threads.
unsafe impl<T: Send> Send for Ring<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> Ring<T> {
    /// # Panics
    /// If `capacity` is zero, or so large that positions could not tell laps
    /// apart.
    pub(crate) fn new(capacity: usize) -> Self {
        assert!(
            capacity >= 1,
            "a ring needs at least one slot (zero-capacity channels use a rendezvous)"
        );
        assert!(
            capacity <= usize::MAX / 4,
            "channel capacity {capacity} is too large"
        );
        let one_lap = (capacity + 1).next_power_of_two();
        let slots = (0..capacity)
            .map(|i| Slot {
                stamp: UpdtCell::new(i),
                value: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect();
        Ring {
            slots,
            capacity,
            one_lap,
        }
    }

    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    #[inline]
    fn index(&self, pos: usize) -> usize {
        pos & (self.one_lap - 1)
    }

    /// The position after `pos`.
    #[inline]
    pub(crate) fn next(&self, pos: usize) -> usize {
        let index = self.index(pos);
        if index + 1 < self.capacity {
            pos.wrapping_add(1)
        } else {
            (pos & !(self.one_lap - 1)).wrapping_add(self.one_lap)
        }
    }

    #[inline]
    pub(crate) fn slot(&self, pos: usize) -> &Slot<T> {
        let index = self.index(pos);
        debug_assert!(index < self.capacity);
        // SAFETY: positions are only ever made by `next` from the initial
        // positions `0..capacity`, so their index is below `capacity`.
        unsafe { self.slots.get_unchecked(index) }
    }

    /// What the stamp of the slot at `pos` says to a claimant of `turn`.
    #[inline]
    pub(crate) fn readiness(&self, turn: Turn, pos: usize) -> Readiness {
        // Acquire: pairs with the `Release` store of the stamp by the other
        // side, so its data write (or read) of the slot happens-before ours.
        let stamp = self.slot(pos).stamp.load(Ordering::Acquire);
        let (ready, behind) = match turn {
            Turn::Produce => (pos, pos.wrapping_add(1).wrapping_sub(self.one_lap)),
            Turn::Consume => (pos.wrapping_add(1), pos),
        };
        if stamp == ready {
            Readiness::Ready
        } else if stamp == behind {
            Readiness::Behind
        } else {
            Readiness::Stale
        }
    }

    /// What a claimant holding its side exclusively (an add-only claim)
    /// takes from `pos`: `Some((n, end))`, the run of
    /// [`ready_run`](Ring::ready_run), if the slot at `pos` is ready for
    /// `turn`; `None` if the ring is full (or empty) there.
    #[inline]
    pub(crate) fn run_from(&self, turn: Turn, pos: usize, max: usize) -> Option<(usize, usize)> {
        (self.readiness(turn, pos) == Readiness::Ready).then(|| self.ready_run(turn, pos, max))
    }

    /// The run of positions from `first` (whose slot the caller found
    /// `Ready`) whose slots are all ready for `turn`, at most `max` long:
    /// returns its length and the position after it. Looking ahead is safe
    /// for a claimant: a slot ready for a position stays ready until that
    /// position's claimant uses it, and the claim that follows covers the
    /// whole run or fails as a whole.
    #[inline]
    pub(crate) fn ready_run(&self, turn: Turn, first: usize, max: usize) -> (usize, usize) {
        if max <= 1 {
            return (1, self.next(first));
        }
        // The stamp that says "ready" is `pos` (produce) or `pos + 1`
        // (consume); see the module docs.
        let offset = match turn {
            Turn::Produce => 0,
            Turn::Consume => 1,
        };
        let mut n = 1;
        'runs: for (pos, index, len) in self.segments(first, max.min(self.capacity)) {
            // The first slot was checked by the caller.
            let skip = usize::from(pos == first);
            for j in skip..len {
                // SAFETY: `segments` keeps `index + j < capacity`.
                let slot = unsafe { self.slots.get_unchecked(index + j) };
                // Acquire: as in `readiness`.
                if slot.stamp.load(Ordering::Acquire) != pos.wrapping_add(j + offset) {
                    break 'runs;
                }
                n += 1;
            }
        }
        (n, self.advance(first, n))
    }

    /// The positions from `first` on, `n <= capacity` of them, as at most
    /// two stretches of consecutive slots `(first position, first index,
    /// length)`: the one up to the ring's end, and the one from its start
    /// (one lap on). Loops over a stretch need no wrap test per slot.
    #[inline(always)]
    fn segments(&self, first: usize, n: usize) -> [(usize, usize, usize); 2] {
        debug_assert!(n <= self.capacity);
        let index = self.index(first);
        let head = n.min(self.capacity - index);
        let next_lap = (first & !(self.one_lap - 1)).wrapping_add(self.one_lap);
        [(first, index, head), (next_lap, 0, n - head)]
    }

    /// The position `n <= capacity` after `pos`.
    #[inline]
    fn advance(&self, pos: usize, n: usize) -> usize {
        let [_, (next_lap, _, wrapped)] = self.segments(pos, n);
        if wrapped == 0 && self.index(pos) + n < self.capacity {
            pos.wrapping_add(n)
        } else {
            next_lap.wrapping_add(wrapped)
        }
    }

    /// [`write_from`](Ring::write_from) for the `n` positions from `first`,
    /// from the `n` values at `src`, in order.
    ///
    /// # Safety
    /// As for `write_from`, for each position of the run and each value.
    #[inline]
    pub(crate) unsafe fn write_run_from(&self, first: usize, src: *const T, n: usize) {
        let mut src = src;
        for (pos, index, len) in self.segments(first, n) {
            for j in 0..len {
                // SAFETY: `segments` keeps `index + j < capacity`.
                let slot = unsafe { self.slots.get_unchecked(index + j) };
                // SAFETY: as in `write_from`, for this value and position.
                slot.value.with_mut(|p| unsafe {
                    std::ptr::copy_nonoverlapping(src, (*p).as_mut_ptr(), 1)
                });
                // Release: as in `write_from`.
                slot.stamp.store(pos.wrapping_add(j + 1), Ordering::Release);
                // SAFETY: stays within (or one past) the caller's `n` values.
                src = unsafe { src.add(1) };
            }
        }
    }

    /// [`read`](Ring::read) for the `n` positions from `first`, moving the
    /// values to `dst`, in order.
    ///
    /// # Safety
    /// As for `read`, for each position of the run; `dst` is valid for `n`
    /// writes and does not overlap the ring.
    #[inline]
    pub(crate) unsafe fn read_run_into(&self, first: usize, dst: *mut T, n: usize) {
        let mut dst = dst;
        let one_lap = self.one_lap;
        for (pos, index, len) in self.segments(first, n) {
            for j in 0..len {
                // SAFETY: `segments` keeps `index + j < capacity`.
                let slot = unsafe { self.slots.get_unchecked(index + j) };
                // SAFETY: as in `read`; the caller vouches for `dst`.
                slot.value
                    .with(|p| unsafe { std::ptr::copy_nonoverlapping((*p).as_ptr(), dst, 1) });
                // Release: as in `read`.
                slot.stamp
                    .store(pos.wrapping_add(j + one_lap), Ordering::Release);
                // SAFETY: stays within (or one past) the caller's `n` slots.
                dst = unsafe { dst.add(1) };
            }
        }
    }

    /// Moves the value at `src` into the slot at `pos` (a bitwise copy, made
    /// once, straight into the slot) and publishes it to consumers.
    ///
    /// # Safety
    /// The caller has claimed `pos` as a producer (the slot was `Ready` for
    /// `Produce` and no other producer can claim `pos`). `src` points to a
    /// valid `T` outside the ring, which the caller must treat as moved from
    /// (forget, not drop).
    #[inline]
    pub(crate) unsafe fn write_from(&self, pos: usize, src: *const T) {
        let slot = self.slot(pos);
        // SAFETY: the caller owns the slot until the stamp store below, and
        // `src` is valid for reads and, lying outside the ring, does not
        // overlap the slot.
        slot.value
            .with_mut(|p| unsafe { std::ptr::copy_nonoverlapping(src, (*p).as_mut_ptr(), 1) });
        // Release: the data above must be visible before the stamp says so.
        slot.stamp.store(pos.wrapping_add(1), Ordering::Release);
    }

    /// Takes the value out of the slot at `pos` and frees the slot for the
    /// producer one lap on.
    ///
    /// # Safety
    /// The caller has claimed `pos` as a consumer (the slot was `Ready` for
    /// `Consume` and no other consumer can claim `pos`).
    #[inline]
    pub(crate) unsafe fn read(&self, pos: usize) -> T {
        let slot = self.slot(pos);
        // SAFETY: the caller owns the slot, and its stamp (loaded with
        // Acquire) said it holds a value written at `pos`.
        let value = slot.value.with(|p| unsafe { (*p).assume_init_read() });
        // Release: our read of the data must finish before a producer may
        // overwrite it.
        slot.stamp
            .store(pos.wrapping_add(self.one_lap), Ordering::Release);
        value
    }

    /// How many messages lie between `head` and `tail`, given a consistent
    /// snapshot of the two.
    #[inline]
    pub(crate) fn distance(&self, head: usize, tail: usize) -> usize {
        let hix = self.index(head);
        let tix = self.index(tail);
        if hix < tix {
            tix - hix
        } else if hix > tix {
            self.capacity - hix + tix
        } else if tail == head {
            0
        } else {
            self.capacity
        }
    }

    /// Whether a producer at `tail` is a full lap ahead of a consumer at `head`.
    #[inline]
    pub(crate) fn is_full_at(&self, head: usize, tail: usize) -> bool {
        head.wrapping_add(self.one_lap) == tail
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: every endpoint is gone, and this is the only
        // call, over all the slots.
        unsafe { drop_values(&self.slots, self.one_lap, 0) };
    }
}

/// Drops the values still held in `slots[start..]`. Like a `Vec`, if one
/// value's drop panics, the ones after it are still dropped (by a guard,
/// while unwinding) and then the panic goes on; a second panicking drop
/// during that aborts, as it does for a `Vec`.
///
/// # Safety
/// The caller has exclusive access to the ring (every endpoint is gone), and
/// no slot from `start` on has had its value dropped already.
unsafe fn drop_values<T>(slots: &[Slot<T>], one_lap: usize, start: usize) {
    /// Drops the rest when a value's drop unwinds.
    struct Rest<'a, T> {
        slots: &'a [Slot<T>],
        one_lap: usize,
        start: usize,
    }

    impl<T> Drop for Rest<'_, T> {
        fn drop(&mut self) {
            // SAFETY: our caller's contract, for the slots after the one
            // whose drop is unwinding (which no longer holds a value).
            unsafe { drop_values(self.slots, self.one_lap, self.start) };
        }
    }

    for (index, slot) in slots.iter().enumerate().skip(start) {
        // Nothing is mid-claim: a slot holds a value exactly when its stamp
        // is one past a position of its index.
        // Relaxed: exclusive access already orders us after every
        // endpoint's last touch of the ring.
        let stamp = slot.stamp.load(Ordering::Relaxed);
        if stamp & (one_lap - 1) == index + 1 {
            let rest = Rest {
                slots,
                one_lap,
                start: index + 1,
            };
            // SAFETY: the stamp says the slot was written and not read, and
            // the caller says it was not dropped yet and no one else can
            // touch it.
            slot.value.with_mut(|p| unsafe { (*p).assume_init_drop() });
            std::mem::forget(rest);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    impl<T> Ring<T> {
        /// `write_from`, by value.
        ///
        /// # Safety
        /// As for `write_from`.
        unsafe fn write(&self, pos: usize, value: T) {
            let value = std::mem::ManuallyDrop::new(value);
            // SAFETY: our caller's contract; `value` is never dropped here.
            unsafe { self.write_from(pos, &*value) };
        }
    }

    #[test]
    fn positions_visit_every_slot_once_per_lap() {
        for capacity in [1, 2, 3, 7, 8, 9] {
            let ring = Ring::<u8>::new(capacity);
            let mut pos = 0;
            for lap in 0..3 {
                for i in 0..capacity {
                    assert_eq!(ring.index(pos), i, "capacity {capacity} lap {lap}");
                    pos = ring.next(pos);
                }
            }
        }
    }

    #[test]
    fn advancing_by_a_run_is_stepping_one_by_one() {
        for capacity in [1, 2, 3, 7, 8, 9] {
            let ring = Ring::<u8>::new(capacity);
            let mut pos = 0;
            for _ in 0..3 * capacity {
                let mut step = pos;
                for n in 0..=capacity {
                    assert_eq!(ring.advance(pos, n), step, "capacity {capacity} n {n}");
                    step = ring.next(step);
                }
                pos = ring.next(pos);
            }
        }
    }

    #[test]
    fn stamps_hand_a_slot_back_and_forth() {
        let ring = Ring::<String>::new(3);
        let mut tail = 0;
        let mut head = 0;
        for round in 0..10 {
            assert_eq!(ring.readiness(Turn::Produce, tail), Readiness::Ready);
            assert_eq!(ring.readiness(Turn::Consume, head), Readiness::Behind);
            // SAFETY: single-threaded; we claim `tail` as the only producer.
            unsafe { ring.write(tail, round.to_string()) };
            assert_eq!(ring.readiness(Turn::Consume, head), Readiness::Ready);
            tail = ring.next(tail);
            assert_eq!(ring.distance(head, tail), 1);
            // SAFETY: as above, for the consumer.
            assert_eq!(unsafe { ring.read(head) }, round.to_string());
            head = ring.next(head);
            assert_eq!(ring.distance(head, tail), 0);
        }
    }

    #[test]
    fn full_ring_reports_full_and_distance_capacity() {
        let ring = Ring::<u8>::new(3);
        let mut tail = 0;
        for v in 0..3 {
            // SAFETY: single-threaded, positions in order.
            unsafe { ring.write(tail, v) };
            tail = ring.next(tail);
        }
        assert!(ring.is_full_at(0, tail));
        assert_eq!(ring.distance(0, tail), 3);
        assert_eq!(ring.readiness(Turn::Produce, tail), Readiness::Behind);
        // Dropping the ring drops the three values (checked by Miri-less
        // valgrind runs; here it must simply not crash).
    }

    /// Counts its drops; the one with `explode` set panics in its drop
    /// (after counting).
    struct Bomb<'a> {
        dropped: &'a std::cell::Cell<usize>,
        explode: bool,
    }

    impl Drop for Bomb<'_> {
        fn drop(&mut self) {
            self.dropped.set(self.dropped.get() + 1);
            if self.explode {
                panic!("a value's drop panics");
            }
        }
    }

    #[test]
    fn freeing_drops_every_value_past_a_panicking_drop() {
        let dropped = std::cell::Cell::new(0);
        let ring = Ring::new(5);
        let (mut head, mut tail) = (0, 0);
        // Wrap once, so the values sit at indices 2, 3, 4, 0, 1 (in order).
        for _ in 0..2 {
            // SAFETY: single-threaded, positions in order.
            unsafe {
                ring.write(
                    tail,
                    Bomb {
                        dropped: &dropped,
                        explode: false,
                    },
                )
            };
            tail = ring.next(tail);
            // SAFETY: as above, for the consumer.
            std::mem::forget(unsafe { ring.read(head) });
            head = ring.next(head);
        }
        for i in 0..5 {
            let bomb = Bomb {
                dropped: &dropped,
                explode: i == 1,
            };
            // SAFETY: single-threaded, positions in order.
            unsafe { ring.write(tail, bomb) };
            tail = ring.next(tail);
        }
        let freeing = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(ring)));
        assert!(
            freeing.is_err(),
            "the drop's panic did not reach the dropper"
        );
        assert_eq!(
            dropped.get(),
            5,
            "values left undropped after a panicking drop"
        );
    }
}
