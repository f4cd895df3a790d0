//! `RuntimeBuilder::trace`: the Chrome trace-event file a runtime writes at
//! shutdown, parsed back and checked against what the coroutines did.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use swco_channel::spsc;
use swco_executor::{BuildError, Runtime};

/// A fresh path in the temporary directory, removed when dropped.
struct TempPath(PathBuf);

impl TempPath {
    fn new(tag: &str) -> Self {
        TempPath(
            std::env::temp_dir().join(format!("swco-trace-test-{tag}-{}.json", std::process::id())),
        )
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn read_trace(path: &TempPath) -> Value {
    let text = std::fs::read_to_string(&path.0).expect("the trace file was written");
    serde_json::from_str(&text).expect("the trace is valid JSON")
}

fn events(trace: &Value) -> &Vec<Value> {
    trace["traceEvents"]
        .as_array()
        .expect("a traceEvents array")
}

fn ph<'a>(events: &'a [Value], ph: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    events.iter().filter(move |e| e["ph"] == ph)
}

fn id_of(e: &Value) -> Option<u64> {
    e["args"]["id"].as_u64()
}

fn dropped(trace: &Value) -> u64 {
    trace["otherData"]["swco_dropped_events"]
        .as_str()
        .expect("otherData names the dropped count")
        .parse()
        .expect("a count")
}

/// A named pair ping-pongs across the two executors, an unnamed pair on
/// one executor, and unnamed sleepers wake by their deadlines.
#[test]
fn the_trace_shows_every_coroutine_on_its_executor() {
    const ROUNDS: u32 = 200;
    const SLEEPERS: usize = 3;
    let path = TempPath::new("main");
    let rt = Runtime::builder()
        .executors(2)
        .trace(&path.0)
        .build()
        .unwrap();

    let (ping_tx, ping_rx) = spsc::bounded::<u32>(1);
    let (pong_tx, pong_rx) = spsc::bounded::<u32>(1);
    let ping = rt
        .spawn_builder()
        .name("ping \"0\"")
        .on(0)
        .spawn(move || {
            for i in 0..ROUNDS {
                ping_tx.send(i).unwrap();
                assert_eq!(pong_rx.recv().unwrap(), i);
            }
            swco_executor::sleep(Duration::from_millis(2));
        })
        .unwrap();
    let pong = rt
        .spawn_builder()
        .name("pong")
        .on(1)
        .spawn(move || {
            for v in ping_rx {
                pong_tx.send(v).unwrap();
            }
        })
        .unwrap();

    // The unnamed pair shares executor 1: its hops are local wakes.
    let (a_tx, a_rx) = spsc::bounded::<u32>(1);
    let (b_tx, b_rx) = spsc::bounded::<u32>(1);
    let echo = rt
        .spawn_on(1, move || {
            for v in a_rx {
                b_tx.send(v).unwrap();
            }
        })
        .unwrap();
    let driver = rt
        .spawn_on(1, move || {
            for i in 0..ROUNDS {
                a_tx.send(i).unwrap();
                assert_eq!(b_rx.recv().unwrap(), i);
            }
        })
        .unwrap();
    let sleepers: Vec<_> = (0..SLEEPERS)
        .map(|i| {
            rt.spawn_on(i % 2, move || {
                swco_executor::sleep(Duration::from_millis(1 + i as u64))
            })
            .unwrap()
        })
        .collect();

    let unnamed: BTreeSet<u64> = [echo.id(), driver.id()]
        .into_iter()
        .chain(sleepers.iter().map(|h| h.id()))
        .collect();
    let (ping_id, pong_id) = (ping.id(), pong.id());
    ping.join().unwrap();
    pong.join().unwrap();
    driver.join().unwrap();
    echo.join().unwrap();
    for s in sleepers {
        s.join().unwrap();
    }
    rt.shutdown();

    let trace = read_trace(&path);
    let events = events(&trace);
    assert_eq!(
        dropped(&trace),
        0,
        "nothing dropped at the default capacity"
    );

    // One named track per executor.
    let threads: Vec<(u64, &str)> = ph(events, "M")
        .filter(|e| e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(threads, [(0, "swco-cpe-0"), (1, "swco-cpe-1")]);

    // Runs: complete events named after their coroutine, on its executor,
    // in time order and never overlapping on a track.
    let runs: Vec<&Value> = ph(events, "X").collect();
    let mut runs_of: BTreeMap<u64, usize> = BTreeMap::new();
    let mut busy: BTreeMap<u64, f64> = BTreeMap::new();
    let mut last_end: BTreeMap<u64, f64> = BTreeMap::new();
    for run in &runs {
        let id = id_of(run).expect("a run names its coroutine's id");
        let tid = run["tid"].as_u64().unwrap();
        let (ts, dur) = (run["ts"].as_f64().unwrap(), run["dur"].as_f64().unwrap());
        assert!(dur >= 0.0, "{run}");
        assert_eq!(run["pid"], 0);
        let end = last_end.entry(tid).or_insert(0.0);
        assert!(ts + 1e-3 >= *end, "runs overlap on track {tid}: {run}");
        *end = ts + dur;
        *runs_of.entry(id).or_default() += 1;
        *busy.entry(id).or_default() += dur;
        let name = run["name"].as_str().unwrap();
        if id == ping_id {
            assert_eq!(name, "ping \"0\"", "a name with quotes survives");
            assert_eq!(run["args"]["coroutine"], "ping \"0\"");
            assert_eq!(tid, 0, "ping runs on executor 0");
        } else if id == pong_id {
            assert_eq!(name, "pong");
            assert_eq!(tid, 1, "pong runs on executor 1");
        } else {
            assert!(unnamed.contains(&id), "an unknown coroutine: {run}");
            assert_eq!(name, format!("#{id}"), "an unnamed coroutine is its id");
        }
    }
    for id in [ping_id, pong_id] {
        assert!(busy[&id] > 0.0, "coroutine {id} took time");
        // Every hop across executors suspends one side or the other; ping
        // runs once more than it blocks at least.
        assert!(
            runs_of[&id] >= 2,
            "coroutine {id} ran {} times",
            runs_of[&id]
        );
    }

    // Instants: spawn, park and wake (local, remote and timer).
    let instants: Vec<&Value> = ph(events, "i").collect();
    for e in &instants {
        assert_eq!(e["s"], "t", "thread-scoped: {e}");
    }
    let count = |name: &str, id: u64| {
        instants
            .iter()
            .filter(|e| e["name"] == name && id_of(e) == Some(id))
            .count()
    };
    let all: BTreeSet<u64> = unnamed.iter().copied().chain([ping_id, pong_id]).collect();
    for &id in &all {
        assert_eq!(count("spawn", id), 1, "coroutine {id} spawned once");
        assert!(
            runs_of.get(&id).copied().unwrap_or(0) >= 1,
            "coroutine {id} ran"
        );
        let (parks, wakes) = (count("park", id), count("wake", id));
        assert!(
            parks >= 1,
            "coroutine {id} parked (every one blocks or sleeps)"
        );
        assert!(
            wakes <= parks,
            "coroutine {id}: {wakes} wakes, {parks} parks"
        );
        assert!(
            runs_of[&id] >= wakes,
            "coroutine {id}: every wake leads to a run"
        );
    }
    let wakes_from = |from: &str| {
        instants
            .iter()
            .filter(|e| e["name"] == "wake" && e["args"]["from"] == from)
            .count()
    };
    assert!(wakes_from("local") > 0, "the unnamed pair wakes locally");
    assert!(
        wakes_from("remote") > 0,
        "ping and pong wake across executors"
    );
    assert!(
        wakes_from("timer") > SLEEPERS,
        "the sleepers, and ping, wake by their deadlines"
    );
    for e in instants.iter().filter(|e| e["name"] == "spawn") {
        let id = id_of(e).unwrap();
        if id == ping_id {
            assert_eq!(e["tid"], 0, "a spawn is recorded where it arrives");
        } else if id == pong_id {
            assert_eq!(e["tid"], 1);
        }
    }
}

#[test]
fn an_unwritable_trace_path_is_a_build_error() {
    let path = PathBuf::from("/nonexistent-dir/x.json");
    let err = Runtime::builder()
        .executors(1)
        .trace(&path)
        .build()
        .expect_err("no such directory");
    match &err {
        BuildError::Trace { path: p, error } => {
            assert_eq!(p, &path);
            assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("not a trace error: {other:?}"),
    }
    let shown = err.to_string();
    assert!(shown.contains("/nonexistent-dir/x.json"), "{shown}");
    assert!(std::error::Error::source(&err).is_some());
}

#[test]
fn a_tiny_buffer_drops_events_and_says_how_many() {
    const CAPACITY: usize = 16;
    let path = TempPath::new("tiny");
    let rt = Runtime::builder()
        .executors(2)
        .trace(&path.0)
        .trace_capacity(CAPACITY)
        .build()
        .unwrap();
    // A producer and a consumer on each executor: every hop parks one.
    for cpe in 0..2 {
        let (tx, rx) = spsc::bounded::<u32>(1);
        let consumer = rt.spawn_on(cpe, move || rx.iter().count()).unwrap();
        rt.spawn_on(cpe, move || (0..1000).for_each(|i| tx.send(i).unwrap()))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(consumer.join().unwrap(), 1000);
    }
    drop(rt); // the drop shuts down and writes the file as well

    let trace = read_trace(&path);
    let events = events(&trace);
    let dropped_total = dropped(&trace);
    assert!(dropped_total > 0, "a 16-event buffer overflows");
    let mut marked = 0;
    for tid in 0..2u64 {
        let kept = events
            .iter()
            .filter(|e| e["ph"] != "M" && e["tid"] == tid && e["cat"] != "trace")
            .count();
        assert!(kept <= CAPACITY, "executor {tid} kept {kept} events");
        for full in events
            .iter()
            .filter(|e| e["name"] == "trace buffer full" && e["tid"] == tid)
        {
            assert_eq!(kept, CAPACITY, "only a full buffer drops");
            marked += full["args"]["dropped"].as_u64().unwrap();
        }
    }
    assert_eq!(marked, dropped_total, "the per-track marks add up");
    let per: Vec<u64> = trace["otherData"]["swco_dropped_per_executor"]
        .as_str()
        .unwrap()
        .split(',')
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(per.len(), 2);
    assert_eq!(per.iter().sum::<u64>(), dropped_total);
}
