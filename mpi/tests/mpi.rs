//! The MPI tests: one binary, run by `ci.sh` under `mpirun -n 2` and
//! `-n 4` (alone it is a one-rank world and most cases skip). Every case
//! runs on every rank; a failed assertion panics, which exits non-zero and
//! makes mpirun fail. Each case uses its own tags.
//!
//! With `SWCO_MPI_HOST=executor` the bridge runs as a coroutine
//! (`World::init_on`) on executor 0 of one runtime, and every case's
//! coroutines run on that runtime too, beside the bridge; otherwise the
//! bridge has its own thread and each case its own runtime. `ci.sh` runs
//! both.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use swco_mpi::mpi::traits::Equivalence;
use swco_mpi::{
    RecvTimeoutError, RemoteSender, SendError, SendTimeoutError, Source, TrySendError, World,
};

/// A message that says who sent it and in which order.
#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
struct Stamp {
    rank: i32,
    sender: u32,
    seq: u64,
}
impl swco_mpi::Typed for Stamp {}

/// The runtime hosting the bridge, when `SWCO_MPI_HOST=executor`.
static HOST: OnceLock<swco::Runtime> = OnceLock::new();

/// The runtime a case's coroutines run on: its own, or the host's.
enum CaseRt {
    Own(swco::Runtime),
    Host(&'static swco::Runtime),
}

impl Deref for CaseRt {
    type Target = swco::Runtime;
    fn deref(&self) -> &swco::Runtime {
        match self {
            CaseRt::Own(rt) => rt,
            CaseRt::Host(rt) => rt,
        }
    }
}

impl CaseRt {
    /// Waits for the case's coroutines: shuts its own runtime down; the
    /// host's lives on (the cases join what they spawn there).
    fn shutdown(self) {
        if let CaseRt::Own(rt) = self {
            rt.shutdown();
        }
    }
}

fn runtime() -> CaseRt {
    match HOST.get() {
        Some(rt) => CaseRt::Host(rt),
        None => CaseRt::Own(
            swco::Runtime::builder()
                .executors(2)
                .build()
                .expect("runtime"),
        ),
    }
}

/// Checks that every (rank, sender) stream is 0, 1, 2, ... with `per` items.
fn check_streams(got: &[Stamp], streams: usize, per: u64) {
    let mut next: HashMap<(i32, u32), u64> = HashMap::new();
    for s in got {
        let n = next.entry((s.rank, s.sender)).or_insert(0);
        assert_eq!(s.seq, *n, "out of order or duplicate: {s:?}");
        *n += 1;
    }
    assert_eq!(next.len(), streams, "streams seen");
    assert!(
        next.values().all(|&n| n == per),
        "a stream lost messages: {next:?}"
    );
    assert_eq!(got.len() as u64, streams as u64 * per);
}

/// Runs `body(tx, rank, sender)` for `senders` senders, each a coroutine
/// with its own clone of `tx`; drops `tx` (so the route closes when they
/// are done) and joins them all.
fn run_senders<F>(world: &World, rt: &swco::Runtime, tx: RemoteSender<Stamp>, senders: u32, body: F)
where
    F: Fn(&RemoteSender<Stamp>, i32, u32) + Clone + Send + 'static,
{
    let hs: Vec<_> = (0..senders)
        .map(|sender| {
            let (tx, body, rank) = (tx.clone(), body.clone(), world.rank());
            rt.spawn(move || body(&tx, rank, sender))
        })
        .collect();
    drop(tx);
    for h in hs {
        h.join().expect("sender");
    }
}

/// Many coroutines on every other rank feed one receiver on rank 0:
/// exactly-once, per-sender order, exact count.
fn fan_in(world: &Arc<World>) {
    const TAG: u16 = 10;
    const SENDERS: u32 = 16;
    const PER: u64 = 2_000;
    let rt = runtime();
    if world.rank() == 0 {
        let rx = world.receiver::<Stamp>(Source::Others, TAG, 32);
        let got: Vec<Stamp> = rx.iter().collect();
        check_streams(&got, (world.size() as usize - 1) * SENDERS as usize, PER);
        let st = rx.stats();
        assert!(st.max_in_flight <= 32 && st.max_buffered <= 32, "{st:?}");
        println!("fan_in: {} messages, {st:?}", got.len());
    } else {
        let tx = world.sender::<Stamp>(0, TAG);
        run_senders(world, &rt, tx, SENDERS, |tx, rank, sender| {
            for seq in 0..PER {
                tx.send(Stamp { rank, sender, seq }).expect("send");
            }
        });
    }
    rt.shutdown();
}

/// Every rank sends to every rank (itself included) and receives from all.
fn all_to_all(world: &Arc<World>) {
    const TAG: u16 = 11;
    const SENDERS: u32 = 4;
    const PER: u64 = 500;
    let rt = runtime();
    let rx = world.receiver_any::<Stamp>(TAG, 8);
    let mut hs = Vec::new();
    for dest in 0..world.size() {
        let tx = world.sender::<Stamp>(dest, TAG);
        for s in 0..SENDERS {
            let tx = tx.clone();
            let rank = world.rank();
            let sender = dest as u32 * 100 + s;
            hs.push(rt.spawn(move || {
                for seq in 0..PER {
                    tx.send(Stamp { rank, sender, seq }).expect("send");
                }
            }));
        }
    }
    let me = world.rank() as u32;
    let consumer = rt.spawn(move || rx.iter().collect::<Vec<_>>());
    for h in hs {
        h.join().expect("sender");
    }
    let got = consumer.join().expect("consumer");
    assert!(got.iter().all(|s| s.sender / 100 == me));
    check_streams(&got, world.size() as usize * SENDERS as usize, PER);
    println!("all_to_all: rank {me} got {}", got.len());
    rt.shutdown();
}

/// A receiver that does not consume holds its senders to `capacity`
/// messages: the credit bound, seen from both sides.
fn credit_bound(world: &Arc<World>) {
    const TAG: u16 = 20;
    const GO: u16 = 21;
    const CAP: usize = 4;
    const TOTAL: u64 = 200;
    match world.rank() {
        0 => {
            let tx = world.sender::<u64>(1, TAG);
            let go = world.sender::<u64>(1, GO);
            // The first CAP sends have credit coming: they complete, however
            // long the receiver's rank takes to open its end and grant it
            // (a loaded machine may take seconds; the bound is a hang guard,
            // not a timing).
            for i in 0..CAP as u64 {
                tx.send_timeout(i, Duration::from_secs(60))
                    .expect("credit for the first CAP sends");
            }
            // The next one has none while the receiver sleeps: it times out
            // (a bug that granted more would let it through).
            let ok = CAP as u64;
            assert_eq!(
                tx.send_timeout(ok, Duration::from_millis(300)),
                Err(SendTimeoutError::Timeout(ok)),
                "a send beyond the capacity completed while the receiver slept"
            );
            assert!(matches!(tx.try_send(ok), Err(TrySendError::Full(v)) if v == ok));
            go.send(ok).expect("go");
            for i in ok..TOTAL {
                tx.send(i).expect("send");
            }
            println!(
                "credit_bound: {ok} sends completed against a sleeping receiver of capacity {CAP}"
            );
        }
        1 => {
            let rx = world.receiver::<u64>(0, TAG, CAP);
            let go = world.receiver::<u64>(0, GO, 1);
            assert_eq!(go.recv(), Ok(CAP as u64));
            // Everything that could be sent before we consumed is buffered here.
            let t0 = Instant::now();
            while rx.len() < CAP && t0.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(rx.len(), CAP);
            let got: Vec<u64> = rx.iter().collect();
            assert_eq!(got, (0..TOTAL).collect::<Vec<_>>());
            let st = rx.stats();
            assert!(st.max_in_flight <= CAP, "{st:?}");
            assert!(st.max_buffered <= CAP, "{st:?}");
            assert_eq!(st.received, TOTAL);
            println!("credit_bound: {st:?}");
        }
        _ => {}
    }
}

/// Dropping the receiver fails blocked and later senders, value given back.
fn receiver_dropped(world: &Arc<World>) {
    const TAG: u16 = 30;
    const SENDERS: u64 = 3;
    let rt = runtime();
    match world.rank() {
        0 => {
            let tx = world.sender::<u64>(1, TAG);
            let hs: Vec<_> = (0..SENDERS)
                .map(|s| {
                    let tx = tx.clone();
                    rt.spawn(move || {
                        let mut i = 0;
                        loop {
                            let v = s * 1_000_000 + i;
                            match tx.send(v) {
                                Ok(()) => i += 1,
                                Err(SendError(back)) => {
                                    assert_eq!(back, v, "value given back");
                                    return i;
                                }
                            }
                        }
                    })
                })
                .collect();
            let sent: u64 = hs.into_iter().map(|h| h.join().expect("sender")).sum();
            assert!(tx.is_disconnected());
            assert_eq!(tx.send(7), Err(SendError(7)));
            assert!(matches!(tx.try_send(8), Err(TrySendError::Disconnected(8))));
            println!("receiver_dropped: {sent} sent before the receiver went, then SendError");
        }
        1 => {
            let rx = world.receiver::<u64>(0, TAG, 2);
            for _ in 0..5 {
                rx.recv().expect("recv");
            }
            drop(rx);
        }
        _ => {}
    }
    rt.shutdown();
}

/// Dropping every sender lets the receiver drain, then `RecvError`; a
/// sender that sends nothing still closes; a route closed stays closed.
fn senders_dropped(world: &Arc<World>) {
    const TAG: u16 = 40;
    const EMPTY: u16 = 41;
    const N: u64 = 1_000;
    match world.rank() {
        0 => {
            let tx = world.sender::<u64>(1, TAG);
            for i in 0..N {
                tx.send(i).expect("send");
            }
            drop(tx);
            drop(world.sender::<u64>(1, EMPTY));
            // Born disconnected: the route closed when its last sender went.
            let late = world.sender::<u64>(1, EMPTY);
            assert_eq!(late.send(1), Err(SendError(1)));
        }
        1 => {
            let empty = world.receiver::<u64>(0, EMPTY, 4);
            let rx = world.receiver::<u64>(0, TAG, 16);
            std::thread::sleep(Duration::from_millis(50));
            let got: Vec<u64> = rx.iter().collect();
            assert_eq!(got, (0..N).collect::<Vec<_>>());
            assert_eq!(
                rx.recv_timeout(Duration::from_millis(10)),
                Err(RecvTimeoutError::Disconnected)
            );
            assert!(empty.recv().is_err());
            println!("senders_dropped: drained {} then RecvError", got.len());
        }
        _ => {}
    }
}

/// Batches: coroutines on every other rank send runs of all sizes (some
/// larger than the receiver's capacity, so credit splits them) with
/// `send_batch` and `try_send_batch`; rank 0 takes them with `recv_batch`,
/// `try_recv_batch` and single `recv`s in between (which must take the rest
/// of a run a batch left first). Exactly once, per-sender order, exact
/// count, and the credit bound holds.
fn batches(world: &Arc<World>) {
    const TAG: u16 = 60;
    const SENDERS: u32 = 4;
    const PER: u64 = 3_000;
    const CAP: usize = 16;
    let rt = runtime();
    if world.rank() == 0 {
        let rx = world.receiver::<Stamp>(Source::Others, TAG, CAP);
        let mut got = Vec::new();
        let mut rounds = 0u64;
        loop {
            rounds += 1;
            let max = 1 + (rounds % 40) as usize;
            let r = if rounds % 5 == 0 {
                // A single receive between batches: it takes the rest of a
                // run a batch left pending first, so order still holds.
                rx.recv().map(|m| got.push(m)).map(|()| 1).map_err(|_| ())
            } else if rounds % 3 == 0 {
                match rx.try_recv_batch(&mut got, max) {
                    Err(swco_mpi::TryRecvError::Empty) => continue,
                    r => r.map_err(|_| ()),
                }
            } else {
                rx.recv_batch(&mut got, max).map_err(|_| ())
            };
            match r {
                Ok(n) => assert!(n >= 1 && n <= max, "took {n} with max {max}"),
                Err(()) => break,
            }
        }
        check_streams(&got, (world.size() as usize - 1) * SENDERS as usize, PER);
        let st = rx.stats();
        assert!(st.max_in_flight <= CAP && st.max_buffered <= CAP, "{st:?}");
        assert_eq!(st.received, got.len() as u64);
        println!("batches: {} messages in {rounds} takes, {st:?}", got.len());
    } else {
        let tx = world.sender::<Stamp>(0, TAG);
        run_senders(world, &rt, tx, SENDERS, |tx, rank, sender| {
            let mut seq = 0;
            let mut size = 1;
            while seq < PER {
                let end = (seq + size).min(PER);
                let run: Vec<Stamp> = (seq..end).map(|seq| Stamp { rank, sender, seq }).collect();
                if sender % 2 == 0 {
                    assert_eq!(tx.send_batch(run), Ok((end - seq) as usize));
                } else {
                    // Try, and on `Full` go on with what is left.
                    let mut rest = run;
                    loop {
                        match tx.try_send_batch(rest) {
                            Ok(_) => break,
                            Err(TrySendError::Full(left)) => {
                                rest = left;
                                swco::yield_now();
                            }
                            Err(e) => panic!("{e:?}"),
                        }
                    }
                }
                seq = end;
                size = size * 3 % 97 + 1; // 1 .. 97, some above CAP
            }
        });
    }
    rt.shutdown();
}

/// Batches longer than the receiving bridge's posted buffer: every other
/// rank sends runs of 10 000 (more than the 4 096 messages a posted receive
/// holds) to a receiver of capacity 12 000, so each run crosses as several
/// MPI messages, which must arrive whole, once and in order.
fn long_batches(world: &Arc<World>) {
    const TAG: u16 = 90;
    const RUN: u64 = 10_000;
    const RUNS: u64 = 3;
    let rt = runtime();
    if world.rank() == 0 {
        let rx = world.receiver::<Stamp>(Source::Others, TAG, 12_000);
        let mut got = Vec::new();
        while rx.recv_batch(&mut got, 5_000).is_ok() {}
        check_streams(&got, world.size() as usize - 1, RUN * RUNS);
        let st = rx.stats();
        assert_eq!(st.received, got.len() as u64);
        assert!(st.max_in_flight <= 12_000, "{st:?}");
        // Each run of 10 000 crossed as at least three MPI messages.
        let senders = (world.size() - 1) as u64;
        assert!(st.batches >= senders * RUNS * 3, "runs not cut: {st:?}");
        println!(
            "long_batches: {} messages in {} MPI batches",
            got.len(),
            st.batches
        );
    } else {
        let tx = world.sender::<Stamp>(0, TAG);
        run_senders(world, &rt, tx, 1, |tx, rank, sender| {
            for r in 0..RUNS {
                let run: Vec<Stamp> = (r * RUN..(r + 1) * RUN)
                    .map(|seq| Stamp { rank, sender, seq })
                    .collect();
                assert_eq!(tx.send_batch(run), Ok(RUN as usize));
            }
        });
    }
    rt.shutdown();
}

/// Long typed batches beside an open byte route: rank 0 keeps a receiver
/// of byte messages open (so its bridge probes for them) while every other
/// rank sends 50 000 `u64`s in one `send_batch`, which crosses as many
/// MPI messages of the posted buffer's size on one tag. Each rank's values
/// must arrive exactly once and in order; then one byte message per rank,
/// sent after its batch, arrives intact.
fn long_batches_beside_bytes(world: &Arc<World>) {
    const BYTES_TAG: u16 = 80;
    const TAG: u16 = 81;
    const PER: u64 = 50_000;
    let rt = runtime();
    // A value says which rank sent it (high half) and its place (low half).
    let value = |rank: i32, seq: u64| (rank as u64) << 32 | seq;
    let note = |rank: i32| format!("rank {rank} done").into_bytes();
    let senders = world.size() as usize - 1;
    if world.rank() == 0 {
        let bytes_rx = world.receiver::<Vec<u8>>(Source::Others, BYTES_TAG, 2);
        let rx = world.receiver::<u64>(Source::Others, TAG, 20_000);
        let mut got = Vec::new();
        while rx.recv_batch(&mut got, 5_000).is_ok() {}
        let mut next: HashMap<i32, u64> = HashMap::new();
        for (i, &v) in got.iter().enumerate() {
            let rank = (v >> 32) as i32;
            let n = next.entry(rank).or_insert(0);
            assert_eq!(
                v,
                value(rank, *n),
                "rank {rank}'s value {n} out of order or duplicate, at {i}: got seq {}",
                v & 0xffff_ffff
            );
            *n += 1;
        }
        assert_eq!(next.len(), senders, "ranks seen: {next:?}");
        assert!(next.values().all(|&n| n == PER), "values lost: {next:?}");
        assert_eq!(got.len(), senders * PER as usize);
        let mut notes: Vec<Vec<u8>> = bytes_rx.iter().collect();
        notes.sort();
        let mut want: Vec<Vec<u8>> = (1..world.size()).map(note).collect();
        want.sort();
        assert_eq!(notes, want, "one byte message per rank");
        let st = rx.stats();
        assert_eq!(st.received, got.len() as u64);
        println!(
            "long_batches_beside_bytes: {} values in {} MPI batches, in order",
            got.len(),
            st.batches
        );
    } else {
        let bytes_tx = world.sender::<Vec<u8>>(0, BYTES_TAG);
        let tx = world.sender::<u64>(0, TAG);
        let rank = world.rank();
        let h = rt.spawn(move || {
            let run: Vec<u64> = (0..PER).map(|seq| value(rank, seq)).collect();
            assert_eq!(tx.send_batch(run), Ok(PER as usize));
            drop(tx);
            bytes_tx.send(note(rank)).expect("byte message");
        });
        h.join().expect("sender");
    }
    rt.shutdown();
}

/// Request and reply: a coroutine on rank 0 sends each other rank in turn
/// a number and waits for it back plus one, many times over. On a hosted
/// bridge's executor this is the path where the waiter polls MPI itself
/// and the reply goes out with its own `MPI_Isend`; every answer must be
/// the right one, and nothing may be left over.
fn ping_pong(world: &Arc<World>) {
    const TAG: u16 = 100;
    const TRIPS: u64 = 2_000;
    let rt = runtime();
    let rank = world.rank();
    let size = world.size();
    if rank == 0 {
        let peers: Vec<_> = (1..size)
            .map(|peer| {
                (
                    world.sender::<u64>(peer, TAG),
                    world.receiver::<u64>(peer, TAG + peer as u16, 4),
                )
            })
            .collect();
        let h = rt.spawn(move || {
            for i in 0..TRIPS {
                for (tx, rx) in &peers {
                    tx.send(i).expect("ping");
                    assert_eq!(rx.recv(), Ok(i + 1), "the answer to {i}");
                }
            }
            for (tx, rx) in peers {
                drop(tx);
                assert_eq!(rx.recv(), Err(swco_mpi::RecvError), "a reply too many");
            }
        });
        h.join().expect("pinger");
        println!(
            "ping_pong: {TRIPS} round trips with each of {} ranks",
            size - 1
        );
    } else {
        let rx = world.receiver::<u64>(0, TAG, 4);
        let tx = world.sender::<u64>(0, TAG + rank as u16);
        let h = rt.spawn(move || {
            let mut n = 0;
            for v in rx.iter() {
                tx.send(v + 1).expect("pong");
                n += 1;
            }
            assert_eq!(n, TRIPS, "pings answered");
        });
        h.join().expect("ponger");
    }
    rt.shutdown();
}

/// A batch sender whose receiver goes away gets back exactly the messages
/// that were not sent, in order; later batches get everything back.
fn batch_receiver_dropped(world: &Arc<World>) {
    const TAG: u16 = 61;
    const CAP: usize = 4;
    const TAKEN: usize = 6;
    match world.rank() {
        0 => {
            let tx = world.sender::<u64>(1, TAG);
            let values: Vec<u64> = (0..1_000).collect();
            let Err(SendError(rest)) = tx.send_batch(values.clone()) else {
                panic!("the receiver leaves before 1 000 messages fit");
            };
            let sent = values.len() - rest.len();
            assert_eq!(rest, values[sent..], "the unsent suffix, in order");
            assert!(sent >= TAKEN, "at least what the receiver took went out");
            assert_eq!(tx.send_batch(vec![1, 2, 3]), Err(SendError(vec![1, 2, 3])));
            assert_eq!(
                tx.send_batch_timeout(vec![4, 5], Duration::from_millis(10)),
                Err(SendTimeoutError::Disconnected(vec![4, 5]))
            );
            println!(
                "batch_receiver_dropped: {sent} sent, {} given back",
                rest.len()
            );
        }
        1 => {
            let rx = world.receiver::<u64>(0, TAG, CAP);
            let mut got = Vec::new();
            while got.len() < TAKEN {
                let want = TAKEN - got.len();
                rx.recv_batch(&mut got, want).expect("recv");
            }
            assert_eq!(got, (0..TAKEN as u64).collect::<Vec<_>>());
            drop(rx);
        }
        _ => {}
    }
}

/// Byte messages of all lengths, from the last rank to rank 0.
fn bytes(world: &Arc<World>) {
    const TAG: u16 = 50;
    let last = world.size() - 1;
    let msg = |i: usize| -> Vec<u8> { (0..i * 37 % 3000).map(|j| (i + j) as u8).collect() };
    if world.rank() == last {
        let tx = world.sender::<Vec<u8>>(0, TAG);
        for i in 0..500 {
            tx.send(msg(i)).expect("send");
        }
    }
    if world.rank() == 0 {
        let rx = world.receiver::<Vec<u8>>(last, TAG, 8);
        let mut n = 0;
        for (i, m) in rx.iter().enumerate() {
            assert_eq!(m, msg(i));
            n += 1;
        }
        assert_eq!(n, 500);
        println!("bytes: 500 byte messages intact");
    }
}

/// The world finalises while senders on every other rank are mid-stream:
/// every `send` that returned `Ok` is delivered (rank 0 counts what came
/// and tells each rank, which compares with its own count of `Ok`s), each
/// stream a gap-free prefix, and every later send gets its value back.
fn finalize_race(world: Arc<World>) {
    const TAG: u16 = 70;
    const COUNT_TAG: u16 = 71;
    const SENDERS: u32 = 8;
    let world = Arc::try_unwrap(world).unwrap_or_else(|_| panic!("the world is shared"));
    if world.rank() == 0 {
        let rx = world.receiver::<Stamp>(Source::Others, TAG, 64);
        let counts: Vec<_> = (1..world.size())
            .map(|r| (r, world.sender::<u64>(r, COUNT_TAG)))
            .collect();
        let mut next: HashMap<(i32, u32), u64> = HashMap::new();
        for s in rx.iter() {
            let n = next.entry((s.rank, s.sender)).or_insert(0);
            assert_eq!(s.seq, *n, "out of order, duplicate or a gap: {s:?}");
            *n += 1;
        }
        for (r, tx) in counts {
            let got: u64 = next
                .iter()
                .filter(|((rank, _), _)| *rank == r)
                .map(|(_, n)| n)
                .sum();
            tx.send(got).expect("count");
        }
        world.finalize();
        println!("finalize_race: {} streams, every Ok delivered", next.len());
    } else {
        let count_rx = world.receiver::<u64>(Source::Rank(0), COUNT_TAG, 4);
        let tx = world.sender::<Stamp>(0, TAG);
        let rt = runtime();
        let progress = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let rank = world.rank();
        // Coroutines and plain threads, sending until the route closes.
        let stream = move |tx: swco_mpi::RemoteSender<Stamp>,
                           sender: u32,
                           progress: Arc<std::sync::atomic::AtomicU64>| {
            let mut seq = 0;
            loop {
                match tx.send(Stamp { rank, sender, seq }) {
                    Ok(()) => seq += 1,
                    Err(SendError(back)) => {
                        assert_eq!(back, Stamp { rank, sender, seq }, "the value comes back");
                        return seq;
                    }
                }
                progress.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        };
        let coroutines: Vec<_> = (0..SENDERS)
            .map(|sender| {
                let (tx, progress) = (tx.clone(), progress.clone());
                rt.spawn(move || stream(tx, sender, progress))
            })
            .collect();
        let threads: Vec<_> = (SENDERS..SENDERS + 2)
            .map(|sender| {
                let (tx, progress) = (tx.clone(), progress.clone());
                std::thread::spawn(move || stream(tx, sender, progress))
            })
            .collect();
        drop(tx);
        while progress.load(std::sync::atomic::Ordering::Relaxed) < 20_000 {
            std::thread::sleep(Duration::from_millis(1));
        }
        world.finalize();
        let mut ok: u64 = coroutines
            .into_iter()
            .map(|h| h.join().expect("sender"))
            .sum();
        ok += threads
            .into_iter()
            .map(|h| h.join().expect("sender"))
            .sum::<u64>();
        rt.shutdown();
        assert_eq!(
            count_rx.recv(),
            Ok(ok),
            "rank 0 received every Ok'd message"
        );
        println!("finalize_race: rank {rank}: {ok} sends returned Ok, all delivered");
    }
}

fn main() {
    let hosted = match std::env::var("SWCO_MPI_HOST").as_deref() {
        Ok("executor") => true,
        Ok("thread") | Err(_) => false,
        Ok(other) => panic!("SWCO_MPI_HOST={other}: expected `executor` or `thread`"),
    };
    let world = if hosted {
        let host = HOST.get_or_init(|| {
            swco::Runtime::builder()
                .executors(2)
                .stack_size(swco_mpi::MIN_BRIDGE_STACK)
                .build()
                .expect("host runtime")
        });
        World::init_on(host, 0)
    } else {
        World::init()
    };
    let world = Arc::new(world.expect("MPI init"));
    assert!(World::init().is_err(), "a second init is an error");
    if world.size() < 2 {
        println!("one rank: run under mpirun -n 2 or more (bash mpi/ci.sh); only all_to_all runs");
        all_to_all(&world);
        return;
    }
    let t0 = Instant::now();
    let rank = world.rank();
    // Each case's time on rank 0, so a slow case stands out in CI's log.
    let timed = |name: &str, case: &dyn Fn()| {
        let t = Instant::now();
        case();
        if rank == 0 {
            println!("{name}: {:.2?}", t.elapsed());
        }
    };
    timed("fan_in", &|| fan_in(&world));
    timed("all_to_all", &|| all_to_all(&world));
    timed("credit_bound", &|| credit_bound(&world));
    timed("receiver_dropped", &|| receiver_dropped(&world));
    timed("senders_dropped", &|| senders_dropped(&world));
    timed("bytes", &|| bytes(&world));
    timed("batches", &|| batches(&world));
    timed("batch_receiver_dropped", &|| batch_receiver_dropped(&world));
    timed("long_batches", &|| long_batches(&world));
    timed("long_batches_beside_bytes", &|| {
        long_batches_beside_bytes(&world)
    });
    timed("ping_pong", &|| ping_pong(&world));
    let t = Instant::now();
    finalize_race(world);
    if rank == 0 {
        println!("finalize_race: {:.2?}", t.elapsed());
    }
    if let Some(host) = HOST.get() {
        host.shutdown();
    }
    let how = if hosted { "executor" } else { "thread" };
    println!(
        "rank {rank}: all MPI tests passed (bridge on a {how}) in {:.2?}",
        t0.elapsed()
    );
}
