//! No silent hangs: a runtime's dump (field by field), its stall report
//! (fires once per stall, never for sleepers or a runtime that makes
//! progress), and the report of a drop that waits for coroutines that do
//! not finish. Every scenario that can hang runs in a child process whose
//! stderr the test reads.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use swco_channel::{mpmc, spsc, Cas, Select, Updt};
use swco_executor::{CoroutineDump, CoroutineState, Runtime, RuntimeDump};

use common::{exited, in_child_process, run_child};

const FILE: &str = file!();

/// Takes dumps until `ready` holds (or a minute passes: then the last one,
/// which fails the caller's checks with its contents).
fn dump_until(rt: &Runtime, ready: impl Fn(&RuntimeDump) -> bool) -> RuntimeDump {
    let start = Instant::now();
    loop {
        let dump = rt.dump();
        if ready(&dump) || start.elapsed() > Duration::from_secs(60) {
            return dump;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

fn named<'a>(dump: &'a RuntimeDump, name: &str) -> &'a CoroutineDump {
    dump.coroutines()
        .iter()
        .find(|c| c.name() == Some(name))
        .unwrap_or_else(|| panic!("no coroutine {name:?} in\n{dump}"))
}

/// Touches `kib` KiB of stack, then blocks on `rx`.
#[inline(never)]
fn deep_then_wait(kib: usize, rx: &spsc::Receiver<u8, Updt>) -> u8 {
    let mut buf = [0u8; 40 * 1024];
    for i in (0..kib * 1024).step_by(512) {
        buf[i] = i as u8;
    }
    std::hint::black_box(&mut buf);
    rx.recv().unwrap()
}

#[test]
fn a_dump_names_each_coroutine_where_it_runs_and_what_it_waits_on() {
    let rt = Runtime::builder().executors(2).build().unwrap();

    let (data_tx, data_rx) = spsc::bounded_with::<u8, Updt>(3);
    let data_line = line!() - 1;
    let (full_tx, full_rx) = mpmc::bounded::<u8>(1);
    let full_line = line!() - 1;
    full_tx.send(0).unwrap();
    let (zero_tx, zero_rx) = mpmc::bounded_with::<u8, Cas>(0);
    let zero_line = line!() - 1;

    let receiver = rt
        .spawn_builder()
        .name("receiver")
        .on(0)
        .spawn(move || deep_then_wait(36, &data_rx))
        .unwrap();
    let receiver_line = line!() - 2;
    let sender_tx = full_tx.clone();
    let sender = rt
        .spawn_builder()
        .name("sender")
        .on(1)
        .spawn(move || sender_tx.send(1).unwrap())
        .unwrap();
    let sleeper = rt
        .spawn_builder()
        .name("sleeper")
        .on(1)
        .spawn(|| swco_executor::sleep(Duration::from_secs(600)))
        .unwrap();
    let sleeper_id = sleeper.id();
    let selector = rt
        .spawn_builder()
        .name("selector")
        .on(0)
        .spawn(move || {
            let mut sel = Select::new();
            sel.recv(&zero_rx);
            let op = sel.select();
            op.recv(&zero_rx).unwrap()
        })
        .unwrap();
    let joiner = rt
        .spawn_builder()
        .name("joiner")
        .on(1)
        .spawn(move || receiver.join().unwrap())
        .unwrap();
    let unnamed = rt.spawn_on(0, swco_executor::yield_now).unwrap();
    unnamed.join().unwrap();

    let dump = dump_until(&rt, |d| {
        d.coroutines().len() == 5
            && d.coroutines().iter().all(|c| {
                matches!(
                    c.state(),
                    CoroutineState::Parked | CoroutineState::ParkedUntilDeadline
                )
            })
    });
    let text = dump.to_string();
    assert_eq!(dump.coroutines().len(), 5, "{text}");
    assert!(dump.unanswered().is_empty(), "{text}");

    let r = named(&dump, "receiver");
    assert_eq!(r.cpe(), 0, "{text}");
    assert_eq!(r.state(), CoroutineState::Parked);
    assert_eq!(
        r.waiting_on(),
        format!("recv on spsc channel (updt, capacity 3) made at {FILE}:{data_line}"),
    );
    assert_eq!(r.spawned_at(), format!("{FILE}:{receiver_line}"));
    assert!(
        r.stack_high_water() >= 36 * 1024,
        "36 KiB touched, {} measured",
        r.stack_high_water()
    );
    assert!(r.stack_high_water() <= rt.stack_size(), "{text}");

    let s = named(&dump, "sender");
    assert_eq!(s.cpe(), 1);
    assert_eq!(
        s.waiting_on(),
        format!("send on mpmc channel (cas, capacity 1) made at {FILE}:{full_line}")
    );
    assert!(s.stack_high_water() > 0, "{text}");

    let sl = named(&dump, "sleeper");
    assert_eq!(sl.state(), CoroutineState::ParkedUntilDeadline);
    assert_eq!(sl.waiting_on(), "sleep");
    assert_eq!(sl.id(), sleeper_id);

    let se = named(&dump, "selector");
    assert_eq!(
        se.waiting_on(),
        format!("select on 1 operation: recv on mpmc channel (cas, capacity 0) made at {FILE}:{zero_line}")
    );

    let j = named(&dump, "joiner");
    assert!(
        j.waiting_on().starts_with(&format!(
            "join on coroutine #{} \"receiver\" spawned at {FILE}:{receiver_line}",
            r.id()
        )),
        "{}",
        j.waiting_on()
    );

    // One line per coroutine, grouped by executor.
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].contains("5 live coroutines on 2 executors"),
        "{text}"
    );
    let e0 = lines
        .iter()
        .position(|l| l.starts_with("executor 0"))
        .unwrap();
    let e1 = lines
        .iter()
        .position(|l| l.starts_with("executor 1"))
        .unwrap();
    let receiver_at = lines
        .iter()
        .position(|l| l.contains("\"receiver\""))
        .unwrap();
    let sender_at = lines.iter().position(|l| l.contains("\"sender\"")).unwrap();
    assert!(
        e0 < receiver_at && receiver_at < e1 && e1 < sender_at,
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with("  #")).count(),
        5,
        "{text}"
    );

    // Let everything go.
    data_tx.send(9).unwrap();
    assert_eq!(full_rx.recv().unwrap(), 0);
    zero_tx.send(7).unwrap();
    assert_eq!(joiner.join().unwrap(), 9);
    sender.join().unwrap();
    assert_eq!(selector.join().unwrap(), 7);
    drop(sleeper);
    rt.shutdown_timeout(Duration::ZERO).ok();
}

#[test]
fn a_dump_from_inside_a_coroutine_suspends_only_it() {
    let rt = std::sync::Arc::new(Runtime::builder().executors(1).build().unwrap());
    let (tx, rx) = mpmc::bounded::<u8>(0);
    let waiter = rt
        .spawn_builder()
        .name("waiter")
        .spawn(move || rx.recv().unwrap())
        .unwrap();
    let rt2 = rt.clone();
    let dumper = rt.spawn(move || {
        // On the only executor: its part is written while this one is
        // suspended in the dump.
        loop {
            let dump = rt2.dump();
            let w = dump
                .coroutines()
                .iter()
                .find(|c| c.name() == Some("waiter"));
            if let Some(w) = w.filter(|w| w.state() == CoroutineState::Parked) {
                return (dump.coroutines().len(), w.waiting_on().to_owned());
            }
            swco_executor::yield_now();
        }
    });
    let (count, waiting) = dumper.join().unwrap();
    assert_eq!(count, 2, "the waiter and the dumping coroutine itself");
    assert!(
        waiting.starts_with("recv on mpmc channel (cas, capacity 0)"),
        "{waiting}"
    );
    tx.send(1).unwrap();
    assert_eq!(waiter.join().unwrap(), 1);
}

#[test]
fn an_empty_or_shut_down_runtime_dumps_nothing() {
    let rt = Runtime::builder().executors(3).build().unwrap();
    let dump = rt.dump();
    assert!(dump.coroutines().is_empty());
    assert!(dump.unanswered().is_empty());
    assert!(dump
        .to_string()
        .contains("0 live coroutines on 3 executors"));
    rt.shutdown();
    let dump = rt.dump();
    assert!(dump.coroutines().is_empty() && dump.unanswered().is_empty());
}

/// An executor that runs a coroutine that never suspends cannot answer:
/// the dump names it instead of hanging.
#[test]
fn an_executor_that_cannot_answer_is_named() {
    in_child_process("an_executor_that_cannot_answer_is_named", || {
        let rt = Runtime::builder().executors(2).build().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let spinner = rt
            .spawn_on(1, move || {
                while !s.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
            .unwrap();
        thread::sleep(Duration::from_millis(50));
        let dump = rt.dump();
        assert_eq!(dump.unanswered(), &[1], "{dump}");
        assert!(dump.to_string().contains("did not answer"), "{dump}");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spinner.join().unwrap();
    });
}

// ---- stall and drop reports -------------------------------------------

/// How many times a child's stderr reports a stall.
fn reports(stderr: &str) -> usize {
    stderr.lines().filter(|l| l.contains("stalled")).count()
}

const PERIOD: Duration = Duration::from_millis(300);

/// A runtime of `executors` that reports stalls after [`PERIOD`].
fn reporting(executors: usize) -> Runtime {
    Runtime::builder()
        .executors(executors)
        .stall_report(Some(PERIOD))
        .build()
        .unwrap()
}

/// Runs test `name` in a child, which must succeed; its stderr, which must
/// report `expected` stalls.
fn child_reports(name: &str, expected: usize) -> String {
    let (status, stderr) = exited(name, run_child(name));
    assert!(status.success(), "{stderr}");
    assert_eq!(reports(&stderr), expected, "{stderr}");
    stderr
}

/// Two coroutines that wait on each other: one report (however long the
/// stall lasts), with the dump under it; then a plain thread wakes them
/// (a report is not an abort).
#[test]
fn a_stall_is_reported_once_with_the_dump() {
    const NAME: &str = "a_stall_is_reported_once_with_the_dump";
    if common::in_child() {
        let rt = reporting(2);
        let (a_tx, a_rx) = mpmc::bounded::<u8>(0);
        let (b_tx, b_rx) = mpmc::bounded::<u8>(0);
        let b_tx2 = b_tx.clone();
        let left = rt
            .spawn_builder()
            .name("left")
            .spawn(move || {
                let got = a_rx.recv().unwrap();
                b_tx.send(got).unwrap();
            })
            .unwrap();
        let right = rt
            .spawn_builder()
            .name("right")
            .spawn(move || b_rx.recv().unwrap() + b_rx.recv().unwrap())
            .unwrap();
        thread::sleep(PERIOD * 6);
        a_tx.send(1).unwrap();
        b_tx2.send(2).unwrap();
        left.join().unwrap();
        assert_eq!(right.join().unwrap(), 3);
        return;
    }
    let stderr = child_reports(NAME, 1);
    let first = stderr.lines().find(|l| l.contains("stalled")).unwrap();
    assert!(first.contains("2 live coroutines"), "{first}");
    assert!(first.contains("not an abort"), "{first}");
    assert!(
        stderr.contains("\"left\" [parked: recv on mpmc channel (cas, capacity 0)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("\"right\" [parked: recv on mpmc channel (cas, capacity 0)"),
        "{stderr}"
    );
}

/// Sleeping coroutines, and a runtime that keeps making progress (fed by
/// a plain thread more often than the period), are no stall.
#[test]
fn sleepers_and_progress_are_no_stall() {
    const NAME: &str = "sleepers_and_progress_are_no_stall";
    if common::in_child() {
        let rt = reporting(2);
        let sleeper = rt.spawn(|| swco_executor::sleep(PERIOD * 4));
        sleeper.join().unwrap();
        let (tx, rx) = spsc::bounded::<u32>(1);
        let consumer = rt.spawn(move || rx.iter().sum::<u32>());
        for i in 0..20 {
            thread::sleep(PERIOD / 5);
            tx.send(i).unwrap();
        }
        drop(tx);
        assert_eq!(consumer.join().unwrap(), (0..20).sum::<u32>());
        return;
    }
    child_reports(NAME, 0);
}

/// `stall_report(None)` never reports.
#[test]
fn a_stall_report_can_be_turned_off() {
    const NAME: &str = "a_stall_report_can_be_turned_off";
    if common::in_child() {
        let rt = Runtime::builder()
            .executors(1)
            .stall_report(None)
            .build()
            .unwrap();
        let (tx, rx) = mpmc::bounded::<u8>(0);
        let h = rt.spawn(move || rx.recv().unwrap());
        thread::sleep(PERIOD * 3);
        tx.send(5).unwrap();
        assert_eq!(h.join().unwrap(), 5);
        return;
    }
    child_reports(NAME, 0);
}

/// A drop that waits for a coroutine that does not finish reports it after
/// the period, once (the executors' own report of the same stall and the
/// drop's are one), and keeps waiting until a plain thread lets it finish.
#[test]
fn a_drop_that_waits_reports_once_and_keeps_waiting() {
    const NAME: &str = "a_drop_that_waits_reports_once_and_keeps_waiting";
    if common::in_child() {
        let rt = reporting(2);
        let (tx, rx) = mpmc::bounded::<u8>(0);
        let h = rt
            .spawn_builder()
            .name("forgotten")
            .spawn(move || rx.recv().unwrap())
            .unwrap();
        let feeder = thread::spawn(move || {
            thread::sleep(PERIOD * 5);
            tx.send(3).unwrap();
        });
        drop(rt);
        assert_eq!(h.join().unwrap(), 3);
        feeder.join().unwrap();
        return;
    }
    let stderr = child_reports(NAME, 1);
    assert!(
        stderr.contains("\"forgotten\" [parked: recv on mpmc channel"),
        "{stderr}"
    );
}

/// A drop that waits for a coroutine that keeps running (never finishes,
/// never stalls) reports too.
#[test]
fn a_drop_that_waits_for_a_busy_coroutine_reports() {
    const NAME: &str = "a_drop_that_waits_for_a_busy_coroutine_reports";
    if common::in_child() {
        let rt = reporting(1);
        let until = Instant::now() + PERIOD * 4;
        let h = rt
            .spawn_builder()
            .name("busy")
            .spawn(move || {
                while Instant::now() < until {
                    swco_executor::yield_now();
                }
            })
            .unwrap();
        drop(rt);
        h.join().unwrap();
        return;
    }
    let stderr = child_reports(NAME, 1);
    assert!(stderr.contains("\"busy\" [runnable]"), "{stderr}");
}

/// The stats keep the deepest stack use: exact once the runtime is shut
/// down, whether or not a dump saw the coroutine.
#[test]
fn the_stats_keep_the_deepest_stack_use() {
    let rt = Runtime::builder().executors(2).build().unwrap();
    let (tx, rx) = spsc::bounded_with::<u8, Updt>(1);
    let deep = rt.spawn_on(1, move || deep_then_wait(36, &rx)).unwrap();
    let shallow = rt.spawn_on(0, || 1u8).unwrap();
    assert_eq!(shallow.join().unwrap(), 1);
    tx.send(4).unwrap();
    assert_eq!(deep.join().unwrap(), 4);
    rt.shutdown();
    let stats = rt.stats();
    let e1 = stats.executors[1].stack_high_water as usize;
    assert!(e1 >= 36 * 1024, "36 KiB touched, {e1} measured");
    assert!(e1 <= rt.stack_size());
    assert!(stats.executors[0].stack_high_water > 0);
    assert_eq!(
        stats.total().stack_high_water as usize,
        e1.max(stats.executors[0].stack_high_water as usize)
    );
}

/// Opted in, `SIGQUIT` writes a dump to stderr and the program goes on.
#[test]
fn sigquit_writes_a_dump_when_asked_to() {
    const NAME: &str = "sigquit_writes_a_dump_when_asked_to";
    if common::in_child() {
        let rt = Runtime::builder()
            .executors(2)
            .dump_on_sigquit(true)
            .build()
            .unwrap();
        let (tx, rx) = mpmc::bounded::<u8>(0);
        let h = rt
            .spawn_builder()
            .name("sleepy")
            .spawn(move || rx.recv().unwrap())
            .unwrap();
        dump_until(&rt, |d| {
            d.coroutines()
                .iter()
                .any(|c| c.state() == CoroutineState::Parked)
        });
        // SAFETY: raising a signal has no memory-safety preconditions; its
        // handler only writes a byte to a pipe.
        unsafe { libc::raise(libc::SIGQUIT) };
        // The dump is written by its own thread; give it time, then go on
        // (the parent checks that it was written).
        thread::sleep(Duration::from_secs(3));
        tx.send(8).unwrap();
        assert_eq!(h.join().unwrap(), 8);
        println!("went on after SIGQUIT");
        return;
    }
    let out = run_child(NAME);
    let stdout = out.stdout.clone();
    let (status, stderr) = exited(NAME, out);
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("went on after SIGQUIT"), "{stdout}");
    assert!(stderr.contains("swco: SIGQUIT"), "{stderr}");
    assert!(
        stderr.contains("\"sleepy\" [parked: recv on mpmc channel"),
        "{stderr}"
    );
}

/// A receive handed as a partner to a selecting send (its try met the
/// select's message-less packet) waits for that send to make its message
/// and fill the packet. Its dump line names the wait and the packet's
/// state: "not filled yet" while the send's message expression runs, so a
/// receive parked on a packet that reads "filled" would be a lost wake-up.
#[test]
fn a_receive_awaiting_a_selecting_sends_fill_shows_its_packet() {
    let rt = Runtime::builder().executors(1).build().unwrap();
    let (tx, rx) = mpmc::bounded_with::<u32, Cas>(0);
    let (gate_tx, gate_rx) = mpmc::bounded::<()>(1);
    // A thread whose select's send is blocked, its message not made yet;
    // once chosen, its message expression waits at the gate.
    let sender = thread::spawn(move || {
        swco_channel::select! {
            send(tx, {
                gate_rx.recv().unwrap();
                7
            }) -> r => r.unwrap(),
        }
    });
    let receiver = rt
        .spawn_builder()
        .name("partner")
        .spawn(move || loop {
            match rx.try_recv() {
                Ok(v) => break v,
                Err(_) => swco_executor::yield_now(),
            }
        })
        .unwrap();
    let waits = |d: &RuntimeDump| {
        d.coroutines()
            .iter()
            .any(|c| c.name() == Some("partner") && c.state() == CoroutineState::Parked)
    };
    let dump = dump_until(&rt, waits);
    let text = dump.to_string();
    let waiting = named(&dump, "partner").waiting_on().to_string();
    assert!(
        waiting.starts_with("recv (handed as a partner to a selecting send, awaiting its fill)"),
        "{text}"
    );
    assert!(waiting.ends_with("; its packet: not filled yet"), "{text}");
    gate_tx.send(()).unwrap();
    assert_eq!(receiver.join().unwrap(), 7);
    sender.join().unwrap();
}
