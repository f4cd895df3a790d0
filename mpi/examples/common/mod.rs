//! What the two-rank examples share: choosing where the bridge runs.

use swco_mpi::World;

/// A runtime of `executors` executors (stacks large enough for a hosted
/// bridge) and a `World` whose bridge runs where the first command-line
/// argument says: `thread` (its own thread, `World::init`) or `executor`
/// (a coroutine on executor 0, `World::init_on`); `default` without one.
/// Panics unless the world has exactly two ranks.
pub fn two_ranks(executors: usize, default: &str) -> (World, swco::Runtime, String) {
    let host = std::env::args().nth(1).unwrap_or_else(|| default.into());
    let rt = swco::Runtime::builder()
        .executors(executors)
        .stack_size(swco_mpi::MIN_BRIDGE_STACK)
        .build()
        .expect("runtime");
    let world = match host.as_str() {
        "thread" => World::init(),
        "executor" => World::init_on(&rt, 0),
        other => panic!("bridge host {other:?}: expected `thread` or `executor`"),
    }
    .expect("MPI init");
    // Exactly two: the cells' barriers span the whole world, so a third
    // rank that sat out would hang them.
    assert_eq!(world.size(), 2, "run under mpirun -n 2");
    (world, rt, host)
}
