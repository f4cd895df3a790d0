//! A select picks uniformly among the operations that are ready, wherever
//! they sit among its arms: Go's `TestSelectFairness` shape (four arms, the
//! first two never ready, the last two always ready), for `select!` and
//! `Select`, with both protocols; and `select_biased!` / `Select::new_biased`
//! take the first ready arm.
//!
//! Nothing here blocks: every select has a ready arm.

use swco_channel::{mpmc, select, select_biased, spsc, Cas, Protocol, Select, Updt};

/// Rounds per test, as in Go's test.
const TRIALS: usize = 10_000;
/// How far an arm's count may stray from its fair share: 2.2 % of the
/// trials, 4.4 standard deviations of a fair coin over 10 000 tosses (a
/// fair select fails about once in 100 000 runs; a select that takes the
/// first ready arm from a random start gives 75 : 25 in this shape).
const SLACK: usize = TRIALS * 22 / 1000;

/// Fails unless every count is within [`SLACK`] of `TRIALS / counts.len()`.
fn assert_fair(counts: &[usize], what: &str) {
    assert_eq!(counts.iter().sum::<usize>(), TRIALS, "{what}: {counts:?}");
    let share = TRIALS / counts.len();
    eprintln!("{what}: {counts:?}");
    for &c in counts {
        assert!(
            c.abs_diff(share) <= SLACK,
            "{what}: unfair select, counts {counts:?} over {TRIALS} trials"
        );
    }
}

/// Go's channels: two always ready (more messages than trials), two never
/// (rendezvous channels whose senders never send), of mixed modes.
struct GoShape<P: Protocol> {
    always1: (mpmc::Sender<u8, P>, mpmc::Receiver<u8, P>),
    always2: (spsc::Sender<u8, P>, spsc::Receiver<u8, P>),
    never3: (mpmc::Sender<u8, P>, mpmc::Receiver<u8, P>),
    never4: (spsc::Sender<u8, P>, spsc::Receiver<u8, P>),
}

impl<P: Protocol> GoShape<P> {
    fn new() -> Self {
        let shape = GoShape {
            always1: mpmc::bounded_with(TRIALS),
            always2: spsc::bounded_with(TRIALS),
            never3: mpmc::bounded_with(0),
            never4: spsc::bounded_with(0),
        };
        for _ in 0..TRIALS {
            shape.always1.0.send(1).unwrap();
            shape.always2.0.send(2).unwrap();
        }
        shape
    }
}

fn go_fairness_macro<P: Protocol>() {
    let go = GoShape::<P>::new();
    let (r1, r2, r3, r4) = (&go.always1.1, &go.always2.1, &go.never3.1, &go.never4.1);
    let mut counts = [0usize; 2];
    for _ in 0..TRIALS {
        let b = select! {
            recv(r3) -> m => m.unwrap(),
            recv(r4) -> m => m.unwrap(),
            recv(r1) -> m => m.unwrap(),
            recv(r2) -> m => m.unwrap(),
        };
        counts[usize::from(b) - 1] += 1;
    }
    assert_fair(&counts, &format!("select!, {}", P::NAME));
}

fn go_fairness_select<P: Protocol>() {
    let go = GoShape::<P>::new();
    let mut sel = Select::new();
    sel.recv(&go.never3.1);
    sel.recv(&go.never4.1);
    let i1 = sel.recv(&go.always1.1);
    let i2 = sel.recv(&go.always2.1);
    let mut counts = [0usize; 2];
    for _ in 0..TRIALS {
        let oper = sel.select();
        let b = match oper.index() {
            i if i == i1 => oper.recv(&go.always1.1).unwrap(),
            i if i == i2 => oper.recv(&go.always2.1).unwrap(),
            i => panic!("selected operation {i}, which is never ready"),
        };
        counts[usize::from(b) - 1] += 1;
    }
    assert_fair(&counts, &format!("Select, {}", P::NAME));

    // `ready` picks the same way, without consuming.
    let mut seen = [0usize; 2];
    for _ in 0..TRIALS {
        match sel.ready() {
            i if i == i1 => seen[0] += 1,
            i if i == i2 => seen[1] += 1,
            i => panic!("operation {i} looked ready, which is never ready"),
        }
    }
    assert_fair(&seen, &format!("Select::ready, {}", P::NAME));
}

#[test]
fn macro_is_fair_in_go_shape_cas() {
    go_fairness_macro::<Cas>();
}

#[test]
fn macro_is_fair_in_go_shape_updt() {
    go_fairness_macro::<Updt>();
}

#[test]
fn select_struct_is_fair_in_go_shape_cas() {
    go_fairness_select::<Cas>();
}

#[test]
fn select_struct_is_fair_in_go_shape_updt() {
    go_fairness_select::<Updt>();
}

/// Three ready arms among six, at uneven gaps (`[idle, A, idle, idle, B,
/// C]`), and sends mixed with receives: each ready one a third of the time.
#[test]
fn three_ready_among_six_each_get_a_third() {
    let (tx_a, rx_a) = mpmc::bounded::<u8>(1);
    let (tx_b, rx_b) = spsc::bounded_with::<u8, Updt>(1);
    let (tx_c, rx_c) = mpmc::bounded::<u8>(1);
    let idle: Vec<_> = (0..3).map(|_| mpmc::bounded::<u8>(1)).collect();
    tx_a.send(0).unwrap();
    let mut macro_counts = [0usize; 3];
    for _ in 0..TRIALS {
        select! {
            recv(idle[0].1) -> _ => unreachable!(),
            recv(rx_a) -> m => { macro_counts[0] += 1; tx_a.send(m.unwrap()).unwrap(); }
            recv(idle[1].1) -> _ => unreachable!(),
            recv(idle[2].1) -> _ => unreachable!(),
            send(tx_b, 1) -> r => { r.unwrap(); macro_counts[1] += 1; rx_b.recv().unwrap(); }
            send(tx_c, 2) -> r => { r.unwrap(); macro_counts[2] += 1; rx_c.recv().unwrap(); }
        }
    }
    assert_fair(&macro_counts, "select!, three of six");

    let mut sel = Select::new();
    sel.recv(&idle[0].1);
    let a = sel.recv(&rx_a);
    sel.recv(&idle[1].1);
    sel.recv(&idle[2].1);
    let b = sel.send(&tx_b);
    let c = sel.send(&tx_c);
    let mut counts = [0usize; 3];
    for _ in 0..TRIALS {
        let oper = sel.select();
        match oper.index() {
            i if i == a => {
                counts[0] += 1;
                tx_a.send(oper.recv(&rx_a).unwrap()).unwrap();
            }
            i if i == b => {
                counts[1] += 1;
                oper.send(&tx_b, 1).unwrap();
                rx_b.recv().unwrap();
            }
            i if i == c => {
                counts[2] += 1;
                oper.send(&tx_c, 2).unwrap();
                rx_c.recv().unwrap();
            }
            i => panic!("selected operation {i}, which is never ready"),
        }
    }
    assert_fair(&counts, "Select, three of six");
}

/// More operations than the look's 64-bit set: still uniform among the
/// ready ones (two, at positions 3 and 70).
#[test]
fn select_over_80_operations_is_fair() {
    let chans: Vec<_> = (0..80).map(|_| spsc::bounded::<usize>(1)).collect();
    let ready = [3, 70];
    for k in ready {
        chans[k].0.send(k).unwrap();
    }
    let mut sel = Select::new();
    for (_, rx) in &chans {
        sel.recv(rx);
    }
    let mut counts = [0usize; 2];
    for _ in 0..TRIALS {
        let oper = sel.select();
        let k = oper.index();
        let slot = ready
            .iter()
            .position(|&r| r == k)
            .unwrap_or_else(|| panic!("selected operation {k}, which is never ready"));
        assert_eq!(oper.recv(&chans[k].1), Ok(k));
        counts[slot] += 1;
        chans[k].0.send(k).unwrap();
    }
    assert_fair(&counts, "Select, 80 operations");
}

/// `select_biased!` and `Select::new_biased` take the first ready arm, in
/// the order written.
#[test]
fn biased_selects_take_the_first_ready_arm() {
    let go = GoShape::<Cas>::new();
    let (r1, r2, r3, r4) = (&go.always1.1, &go.always2.1, &go.never3.1, &go.never4.1);
    for _ in 0..TRIALS / 4 {
        let b = select_biased! {
            recv(r3) -> m => m.unwrap(),
            recv(r4) -> m => m.unwrap(),
            recv(r1) -> m => m.unwrap(),
            recv(r2) -> m => m.unwrap(),
        };
        assert_eq!(b, 1, "select_biased! skipped the first ready arm");
    }
    let mut sel = Select::new_biased();
    sel.recv(r4);
    let second = sel.recv(r2);
    sel.recv(r1);
    for _ in 0..TRIALS / 4 {
        let oper = sel.select();
        assert_eq!(oper.index(), second, "new_biased skipped the first ready");
        assert_eq!(oper.recv(r2), Ok(2));
    }
}
