//! An executor's coroutine bookkeeping: the [`RunQueue`] of ready slots and
//! the [`TaskTable`] of its live coroutines, indexed by slot (the ones
//! neither running nor on the run queue are parked). Both are
//! thread-confined to the executor, inside its `Local`.
//!
//! # Invariants
//!
//! The [`TaskTable`]'s, stated on the type: it owns every task in it, and
//! only the executor loop, between resumes, dereferences a slot.

use std::collections::VecDeque;
use std::mem::MaybeUninit;

use crate::task::Task;

/// Ready coroutines, by slot, in FIFO order.
#[derive(Default)]
pub(crate) struct RunQueue(pub(crate) VecDeque<usize>);

/// Every live coroutine of the executor, indexed by slot: running, on the
/// [`RunQueue`], or parked (those neither running nor on the run queue). A
/// parked coroutine just stays in its slot, and a wake finds it here by
/// slot; there is no separate wait queue.
///
/// A task stays in its slot while it runs: the executor resumes it through
/// the slot's pointer, so a resume moves nothing.
///
/// # Invariants
///
/// * A non-null entry is a pointer from `Box::into_raw` (of a box made as
///   `MaybeUninit<Task>` and initialised), owned by this table: handed
///   back by [`take`](TaskTable::take) (as the box) or
///   [`take_finished`](TaskTable::take_finished) (as the task, the box
///   kept empty for reuse), or freed by `Drop`, and by nothing else.
/// * The task being resumed is reached only through the executor loop's
///   pointer (`Local::run_task`) until the resume
///   returns. Code running meanwhile (the coroutine, wakers, spawns) may
///   borrow this table, but only to reserve or fill *other* slots; the
///   accessors that dereference a slot (`get`, `get_mut`, `take`,
///   `take_any`) are called only by the executor loop between resumes.
#[derive(Default)]
pub(crate) struct TaskTable {
    slots: Vec<*mut Task>,
    free: Vec<usize>,
    /// Boxes of finished tasks, kept empty for the next ones (at most
    /// [`SPARE_BOXES`]): a new coroutine then allocates no task box.
    // The boxes are the point: each is an allocation a slot will own.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<MaybeUninit<Task>>>,
}

/// How many empty task boxes a table keeps.
const SPARE_BOXES: usize = 256;

impl TaskTable {
    pub(crate) fn reserve(&mut self) -> usize {
        match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(std::ptr::null_mut());
                self.slots.len() - 1
            }
        }
    }

    /// Puts `task` in `slot` (reserved, empty), in a spare box if there is
    /// one.
    pub(crate) fn put(&mut self, slot: usize, task: Task) {
        debug_assert!(self.slots[slot].is_null());
        let mut boxed = self
            .spare
            .pop()
            .unwrap_or_else(|| Box::new(MaybeUninit::uninit()));
        boxed.write(task);
        // `MaybeUninit<Task>` has `Task`'s layout, and the box now holds an
        // initialised task: the pointer is one `Box<Task>` would give.
        self.slots[slot] = Box::into_raw(boxed).cast::<Task>();
    }

    /// The task in `slot`, or null. Dereferencing it is subject to the
    /// type's invariants.
    #[inline]
    pub(crate) fn ptr(&self, slot: usize) -> *mut Task {
        self.slots
            .get(slot)
            .copied()
            .unwrap_or(std::ptr::null_mut())
    }

    pub(crate) fn take(&mut self, slot: usize) -> Option<Box<Task>> {
        let ptr = std::mem::replace(self.slots.get_mut(slot)?, std::ptr::null_mut());
        // SAFETY: a non-null entry came from `Box::into_raw` and is owned by
        // this table; nulling the entry above transfers that ownership back
        // to the box, exactly once.
        (!ptr.is_null()).then(|| unsafe { Box::from_raw(ptr) })
    }

    /// Takes the task out of `slot` (a finished one) and keeps its box,
    /// empty, for the next [`put`](TaskTable::put).
    pub(crate) fn take_finished(&mut self, slot: usize) -> Option<Task> {
        let ptr = std::mem::replace(self.slots.get_mut(slot)?, std::ptr::null_mut());
        if ptr.is_null() {
            return None;
        }
        // SAFETY: a non-null entry is a box holding an initialised task,
        // owned by this table (see `put`); nulling the entry above handed
        // that ownership to us, once. The read moves the task out, and the
        // allocation is from then on treated as uninitialised.
        let task = unsafe { ptr.read() };
        // SAFETY: the same allocation, typed as the `MaybeUninit<Task>` it
        // was made as (same layout); it holds no live task any more.
        let boxed = unsafe { Box::from_raw(ptr.cast::<MaybeUninit<Task>>()) };
        if self.spare.len() < SPARE_BOXES {
            self.spare.push(boxed);
        }
        Some(task)
    }

    pub(crate) fn release(&mut self, slot: usize) {
        self.free.push(slot);
    }

    pub(crate) fn get(&self, slot: usize) -> Option<&Task> {
        // SAFETY: a non-null entry points at a live task owned by this
        // table; it is called only between resumes, when no other reference
        // to a task exists (type invariants), and `&self` keeps the task from
        // being taken while the reference lives.
        unsafe { self.ptr(slot).as_ref() }
    }

    pub(crate) fn get_mut(&mut self, slot: usize) -> Option<&mut Task> {
        // SAFETY: as in `get`, with `&mut self` making the reference unique.
        unsafe { self.ptr(slot).as_mut() }
    }

    /// The number of slots, used or free: every task is in a slot below it.
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn take_any(&mut self) -> Option<Box<Task>> {
        let slot = self.slots.iter().position(|p| !p.is_null())?;
        self.take(slot)
    }
}

impl Drop for TaskTable {
    fn drop(&mut self) {
        for slot in 0..self.slots.len() {
            drop(self.take(slot));
        }
    }
}
