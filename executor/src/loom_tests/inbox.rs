//! The inbox hand-off to a parking executor ([`Inbox`], `inbox.rs`): wakes
//! and spawns pushed from other threads are never slept through, arrive
//! once each and in order, and a node is read only after its push
//! happened-before (loom's cells in the nodes).

use std::ptr::NonNull;

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::inbox::{Inbox, InboxQueue, SpawnNode, Spawnable, WakeLink};
use crate::sync::Parker;
use crate::wake::WakeState;

/// What an executor took from its inbox, in the order it took it.
#[derive(Default)]
struct Taken {
    wakes: Vec<usize>,
    spawns: Vec<u32>,
}

/// The executor side of the inbox protocol, as `Local::run` does it: drain,
/// and unless `done`, park through the inbox's sleep protocol
/// ([`Inbox::park`]: `EMPTY -> SLEEPING`, or drain again if something
/// arrived). Loom's parker may return spuriously; that only loops. If a push
/// or a stop request could be slept through, loom reports a deadlock.
fn executor_until(
    inbox: &Inbox<u32>,
    parker: &Parker,
    mut done: impl FnMut(&Taken) -> bool,
) -> Taken {
    let mut taken = Taken::default();
    let mut spare = InboxQueue::default();
    loop {
        if inbox.drain_into(&mut spare) {
            taken.wakes.append(&mut spare.wakes);
            taken.spawns.append(&mut spare.spawns);
        }
        if done(&taken) {
            return taken;
        }
        inbox.park(parker, None);
    }
}

/// Queues a remote wake through `link`, as `schedule` does for the winner
/// of a coroutine's `WAITING -> RUNNING` transition.
fn push_wake(inbox: &Inbox<u32>, link: &WakeLink) {
    // SAFETY: each model pushes a link at most once between drains of it,
    // and keeps it alive (in an `Arc`) until the inbox is gone.
    unsafe { inbox.push_wake(link) }
}

/// After every pusher is joined: nothing is left to take, so nothing was
/// delivered twice.
fn assert_nothing_left(inbox: &Inbox<u32>) {
    let mut spare = InboxQueue::default();
    assert!(!inbox.is_pending());
    assert!(
        !inbox.drain_into(&mut spare),
        "delivered twice or left over"
    );
}

model!(
    /// One pusher hands a wake, then a spawn, to an executor that drains and
    /// parks: neither is slept through (the second push may be the one that
    /// finds the executor `SLEEPING`), each is delivered exactly once, and
    /// the executor reads each node only after its push happened-before
    /// (loom's `UnsafeCell` in the nodes). Bound 20 does not cut the search:
    /// bound 40 explores the same executions.
    executor_inbox_hand_off_is_never_slept_through,
    bound: 20,
    {
        let parker = Parker::new();
        let inbox = Arc::new(Inbox::<u32>::new(parker.unparker()));
        let link = Arc::new(WakeLink::new(7));
        let pusher = {
            let (inbox, link) = (inbox.clone(), link.clone());
            thread::spawn(move || {
                push_wake(&inbox, &link);
                inbox.push_spawn(8);
            })
        };
        let taken = executor_until(&inbox, &parker, |t| {
            t.wakes.len() + t.spawns.len() == 2
        });
        assert_eq!((taken.wakes, taken.spawns), (vec![7], vec![8]));
        pusher.join().unwrap();
        assert_nothing_left(&inbox);
    }
);

model!(
    /// Two pushers, two wakes each, against a draining, parking executor:
    /// only the push that clears `SLEEPING` unparks, yet all four arrive,
    /// exactly once, each pusher's in the order it pushed them.
    executor_inbox_two_pushers_both_delivered,
    bound: 2,
    {
        let parker = Parker::new();
        let inbox = Arc::new(Inbox::<u32>::new(parker.unparker()));
        let pushers: Vec<_> = [10, 20]
            .into_iter()
            .map(|base| {
                let inbox = inbox.clone();
                let links = Arc::new([WakeLink::new(base), WakeLink::new(base + 1)]);
                thread::spawn(move || {
                    push_wake(&inbox, &links[0]);
                    push_wake(&inbox, &links[1]);
                    links
                })
            })
            .collect();
        let taken = executor_until(&inbox, &parker, |t| t.wakes.len() == 4);
        for base in [10, 20] {
            let mine: Vec<usize> = taken
                .wakes
                .iter()
                .copied()
                .filter(|w| w / 10 == base / 10)
                .collect();
            assert_eq!(mine, vec![base, base + 1], "order broken: {:?}", taken.wakes);
        }
        let _links: Vec<_> = pushers.into_iter().map(|p| p.join().unwrap()).collect();
        assert_nothing_left(&inbox);
    }
);

model!(
    /// A stop request (a flag, then an unpark with no item, as
    /// `ExecutorShared::request_stop` does) and a push race with an executor
    /// that drains and parks: the executor sees the stop and takes the
    /// wake. Neither wake-up is slept through, nor is the push lost when the
    /// stop request's unpark (or a spurious one) ends the park first and the
    /// executor clears `SLEEPING` itself.
    executor_inbox_stop_request_wakes_a_parking_executor,
    bound: 4,
    {
        let parker = Parker::new();
        let inbox = Arc::new(Inbox::<u32>::new(parker.unparker()));
        let stop = Arc::new(AtomicBool::new(false));
        let stopper = {
            let (inbox, stop) = (inbox.clone(), stop.clone());
            thread::spawn(move || {
                // Release: as `request_stop`.
                stop.store(true, Ordering::Release);
                inbox.unpark();
            })
        };
        let link = Arc::new(WakeLink::new(5));
        let pusher = {
            let (inbox, link) = (inbox.clone(), link.clone());
            thread::spawn(move || push_wake(&inbox, &link))
        };
        let mut stopped = false;
        let taken = executor_until(&inbox, &parker, |t| {
            // Acquire: as `Local::run`, pairs with the stopper's Release.
            stopped = stopped || stop.load(Ordering::Acquire);
            stopped && t.wakes.len() == 1
        });
        assert_eq!(taken.wakes, vec![5]);
        stopper.join().unwrap();
        pusher.join().unwrap();
        assert_nothing_left(&inbox);
    }
);

model!(
    /// A coroutine's one wake link is queued again after the executor took
    /// it: the waker pushes it only after winning the coroutine's
    /// `WAITING -> RUNNING` transition, the executor drains it, "runs" the
    /// coroutine, which parks again (`prepare_park`), and the waker wakes it
    /// a second time through the same link. Both wakes arrive, once each,
    /// and loom's cell in the link shows the second push's write of `next`
    /// never races the drain's read of it (the `AcqRel` of the wake state
    /// orders them).
    executor_inbox_wake_link_is_reused_after_its_drain,
    bound: 4,
    {
        let parker = Parker::new();
        let inbox = Arc::new(Inbox::<u32>::new(parker.unparker()));
        let state = Arc::new(WakeState::new());
        let link = Arc::new(WakeLink::new(3));
        assert!(state.prepare_park());
        let waker = {
            let (inbox, state, link) = (inbox.clone(), state.clone(), link.clone());
            thread::spawn(move || {
                let mut pushed = 0;
                while pushed < 2 {
                    if state.notify() {
                        push_wake(&inbox, &link);
                        pushed += 1;
                    } else {
                        // Running, with a wake now pending, or not parked
                        // again yet: a real waker would be done; the model
                        // waits for the second park to wake it once more.
                        thread::yield_now();
                    }
                }
            })
        };
        let mut woken = 0;
        let taken = executor_until(&inbox, &parker, |t| {
            // The coroutine runs once per wake taken, then parks again
            // (a pending wake cancels the park: it runs on).
            while woken < t.wakes.len() {
                woken += 1;
                while woken < 2 && !state.prepare_park() {}
            }
            t.wakes.len() == 2
        });
        assert_eq!(taken.wakes, vec![3, 3]);
        waker.join().unwrap();
        assert_nothing_left(&inbox);
    }
);

/// A loom item that carries its own inbox node, as a spawned coroutine's
/// job does (its node lives in the coroutine's one allocation).
struct Carried(Arc<CarriedCell>);

struct CarriedCell {
    node: SpawnNode<Carried>,
    value: u32,
}

// SAFETY: the node lives in the item's own allocation, kept alive by the
// item while it is queued; each model pushes an item again only after the
// drain took it out.
unsafe impl Spawnable for Carried {
    fn embedded_node(&self) -> Option<NonNull<SpawnNode<Carried>>> {
        Some(NonNull::from(&self.0.node))
    }
}

fn carried(value: u32) -> Carried {
    Carried(Arc::new(CarriedCell {
        node: SpawnNode::new(),
        value,
    }))
}

model!(
    /// Spawns that carry their own node: two pushed from another thread
    /// arrive once each, in order, and neither node is freed by the drain
    /// (the items still own them); one is then pushed again through the
    /// same node and arrives again. Loom's cells in the node show that the
    /// drain reads what each push wrote, and that the second push's writes
    /// follow the first drain's reads.
    executor_inbox_carried_spawn_nodes,
    bound: 4,
    {
        let parker = Parker::new();
        let inbox = Arc::new(Inbox::<Carried>::new(parker.unparker()));
        let pusher = {
            let inbox = inbox.clone();
            thread::spawn(move || {
                inbox.push_spawn(carried(1));
                inbox.push_spawn(carried(2));
            })
        };
        let mut got = Vec::new();
        let mut spare = InboxQueue::default();
        while got.len() < 2 {
            if inbox.drain_into(&mut spare) {
                got.append(&mut spare.spawns);
            } else {
                inbox.park(&parker, None);
            }
        }
        pusher.join().unwrap();
        assert_eq!(got.iter().map(|c| c.0.value).collect::<Vec<_>>(), [1, 2]);
        // The same item, through the same node, once more.
        let again = got.remove(0);
        let pusher = {
            let inbox = inbox.clone();
            thread::spawn(move || inbox.push_spawn(again))
        };
        loop {
            if inbox.drain_into(&mut spare) {
                break;
            }
            inbox.park(&parker, None);
        }
        pusher.join().unwrap();
        assert_eq!(spare.spawns.len(), 1);
        assert_eq!(spare.spawns[0].0.value, 1);
    }
);
