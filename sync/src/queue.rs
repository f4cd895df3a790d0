//! The waiter list every type here parks on, as a dump describes it.

use std::fmt;
use std::ops::Deref;

use swco_wait::hook::{Describe, Op, WaitingOn};
use swco_wait::lock::CasLock;
use swco_wait::wait_list::{WaitList, Waiters};

/// A [`WaitList`] that says, in a runtime's dump, what its waiters wait on:
/// `what` (`"mutex"`, `"semaphore"`, …) seen as operation `op`, and the
/// address of the list (the same for every waiter of one object).
pub(crate) struct Queue {
    list: WaitList<CasLock>,
    op: Op,
    what: &'static str,
}

impl Queue {
    pub(crate) fn new(op: Op, what: &'static str) -> Self {
        Queue {
            list: WaitList::new(),
            op,
            what,
        }
    }

    /// What a party parked on this queue shows.
    pub(crate) fn waiting_on(&self) -> WaitingOn<'_> {
        WaitingOn::on(self)
    }
}

impl Deref for Queue {
    type Target = WaitList<CasLock>;
    fn deref(&self) -> &WaitList<CasLock> {
        &self.list
    }
}

impl Describe for Queue {
    fn op(&self) -> Op {
        self.op
    }
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on swco::sync::{} at {:p}", self.op, self.what, self)
    }
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("has_waiters", &self.list.has_waiters())
            .finish()
    }
}
