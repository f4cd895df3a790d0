//! The seed paper's Table 1, reproduced: mean time of one send and of one
//! receive on an MPMC channel with n = 1, 10, 32 producers and consumers,
//! for swco's two protocols, coroutines `packed` on one executor (the
//! paper's MPE case) or `spread` one per executor (its CPE case), beside
//! crossbeam-channel on OS threads and may coroutines measured in the same
//! run.
//!
//! ```text
//! cargo run --release -p swco-bench --example table1 [-- --quick] [--reps R] [--m M] [--out DIR]
//! ```
//!
//! The experiment (docs/DESIGN.md, "How Table 1 is measured"): the channel
//! holds all n·m messages, so nothing blocks; n producers each send m
//! xorshift values and time their own loop; then n consumers each receive m
//! and time theirs. `send_ns` is the mean over producers of elapsed/m (the
//! paper's figure), `send_wall_ns` the whole phase's wall time / (n·m);
//! likewise for receive. Every cell runs `--reps` times (cells interleaved,
//! so machine noise hits all alike) and each figure is the median.
//!
//! m defaults to 10 000: at tens of ns per operation a producer's loop takes
//! well under a millisecond, so it usually fits in one OS time slice even
//! with 32 executor threads sharing 2 cores, and the per-operation figure is
//! the cost of the operation rather than of being descheduled mid-loop.
//!
//! Output: the table on stdout, progress on stderr, and
//! `<workspace>/target/swco/table1.csv` and `table1.svg`. The directory is
//! fixed at compile time (the parent of `CARGO_MANIFEST_DIR`), not from
//! `CARGO_TARGET_DIR`, so the README's command always leaves the files in
//! the same place; `--out DIR` overrides it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use swco::channel::{Cas, Updt};
use swco::Runtime;
use swco_bench::{
    batch_generation_ns, median, table1_cell, Crossbeam, May, Place, Sample, Swco, System, BATCH,
    PAPER_CPE_RECV, PAPER_CPE_SEND, PAPER_MPE_RECV, PAPER_MPE_SEND, TABLE1_EXECUTORS, TABLE1_N,
};

/// A row of the table: system, protocol, placement.
type Key = [&'static str; 3];

struct Options {
    quick: bool,
    reps: usize,
    m: usize,
    out: PathBuf,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| -> Option<String> {
        args.iter()
            .position(|a| a == name)
            .map(|i| args.get(i + 1).unwrap_or_else(|| usage(name)).clone())
    };
    for a in &args {
        if a == "--help" || a == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        if a.starts_with("--") && !["--quick", "--reps", "--m", "--out"].contains(&a.as_str()) {
            usage(a);
        }
    }
    let quick = args.iter().any(|a| a == "--quick");
    let number = |name: &str, default: usize| -> usize {
        value(name).map_or(default, |v| v.parse().unwrap_or_else(|_| usage(name)))
    };
    Options {
        quick,
        reps: number("--reps", if quick { 5 } else { 31 }).max(1),
        m: number("--m", if quick { 2_000 } else { 10_000 }).max(1),
        out: value("--out").map_or_else(|| workspace_root().join("target/swco"), PathBuf::from),
    }
}

/// The workspace root: the parent of this package's directory (`benches/`),
/// fixed at compile time.
fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("swco-bench lives in a directory of the workspace")
}

const USAGE: &str = "usage: table1 [--quick] [--reps R] [--m M] [--out DIR]
  --quick    5 runs per cell, m = 2000 (what CI runs)
  --reps R   runs per cell; each figure is the median (default 31)
  --m M      messages per producer and per consumer (default 10000)
  --out DIR  where table1.csv and table1.svg go (default <workspace>/target/swco)";

fn usage(bad: &str) -> ! {
    eprintln!("table1: bad argument {bad}");
    eprintln!("{USAGE}");
    std::process::exit(2)
}

/// Runs one cell of every row for `n`, in an order rotated by `rep` so no
/// row always runs first (right after an idle spell) or last.
fn one_round(rt: &Runtime, n: usize, m: usize, rep: usize, mut record: impl FnMut(Key, Sample)) {
    let seed = 0x5EED ^ (rep as u64) << 8 ^ n as u64;
    let rows: [&dyn Fn() -> (Key, Sample); 8] = [
        &|| run(&Swco::<Cas>::new(rt, Place::Packed), n, m, seed),
        &|| run(&Swco::<Cas>::new(rt, Place::Spread), n, m, seed),
        &|| run(&Swco::<Updt>::new(rt, Place::Packed), n, m, seed),
        &|| run(&Swco::<Updt>::new(rt, Place::Spread), n, m, seed),
        &|| run(&Swco::<Cas>::new(rt, Place::Batch), n, m, seed),
        &|| run(&Swco::<Updt>::new(rt, Place::Batch), n, m, seed),
        &|| run(&Crossbeam, n, m, seed),
        &|| run(&May, n, m, seed),
    ];
    for k in 0..rows.len() {
        let (key, sample) = rows[(k + rep) % rows.len()]();
        record(key, sample);
    }
}

fn run<S: System>(sys: &S, n: usize, m: usize, seed: u64) -> (Key, Sample) {
    (sys.label(), table1_cell(sys, n, m, seed))
}

/// The order rows are printed, plotted and written in.
const ROWS: [Key; 8] = [
    ["swco", "cas", "packed"],
    ["swco", "cas", "spread"],
    ["swco", "updt", "packed"],
    ["swco", "updt", "spread"],
    ["swco", "cas", "batch"],
    ["swco", "updt", "batch"],
    ["crossbeam", "-", "threads"],
    ["may", "-", "spread"],
];

/// Medians per row and n.
type Medians = BTreeMap<(Key, usize), Sample>;

fn main() {
    let opt = options();
    let may_workers = May::configure();
    let rt = Runtime::builder()
        .executors(TABLE1_EXECUTORS)
        .build()
        .expect("a runtime with 32 executors");
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    eprintln!(
        "table1: m = {} per worker, {} reps, {} cores; swco: {} executors; may: {} workers",
        opt.m, opt.reps, cores, TABLE1_EXECUTORS, may_workers
    );

    // Warm-up, discarded: starts may's and the runtime's threads, faults in
    // the allocator's arenas, and lets the CPU clock settle.
    for &n in &TABLE1_N {
        one_round(&rt, n, opt.m.min(1_000), 0, |_, _| {});
    }

    let started = Instant::now();
    let mut samples: BTreeMap<(Key, usize), Vec<Sample>> = BTreeMap::new();
    for rep in 0..opt.reps {
        for &n in &TABLE1_N {
            one_round(&rt, n, opt.m, rep, |key, s| {
                samples.entry((key, n)).or_default().push(s)
            });
        }
        eprintln!(
            "table1: rep {}/{} done ({:.1} s)",
            rep + 1,
            opt.reps,
            started.elapsed().as_secs_f64()
        );
    }
    rt.shutdown();

    let medians: Medians = samples
        .into_iter()
        .map(|(k, v)| {
            let pick = |f: fn(&Sample) -> f64| median(&mut v.iter().map(f).collect::<Vec<_>>());
            let s = Sample {
                send_ns: pick(|s| s.send_ns),
                recv_ns: pick(|s| s.recv_ns),
                send_wall_ns: pick(|s| s.send_wall_ns),
                recv_wall_ns: pick(|s| s.recv_wall_ns),
                send_cpu_ns: pick(|s| s.send_cpu_ns),
                recv_cpu_ns: pick(|s| s.recv_cpu_ns),
            };
            (k, s)
        })
        .collect();

    print!("{}", report(&opt, cores, may_workers, &medians));

    std::fs::create_dir_all(&opt.out).expect("create the output directory");
    let csv = opt.out.join("table1.csv");
    std::fs::write(&csv, to_csv(&medians)).expect("write table1.csv");
    let svg = opt.out.join("table1.svg");
    plot(&svg, &medians).expect("draw table1.svg");
    eprintln!("table1: wrote {} and {}", csv.display(), svg.display());
}

fn get(m: &Medians, key: Key, n: usize) -> Sample {
    m[&(key, n)]
}

fn name(key: Key) -> String {
    format!("{} {} {}", key[0], key[1], key[2])
}

/// Formats ns compactly: 3 significant figures, no exponent.
fn ns(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn report(opt: &Options, cores: usize, may_workers: usize, m: &Medians) -> String {
    let mut o = String::new();
    let w = 22;
    let _ = writeln!(
        o,
        "\nTable 1: ns per operation as seen by one producer/consumer \
         (median of {} runs, m = {} per worker, {} cores{})",
        opt.reps,
        opt.m,
        cores,
        if opt.quick { ", --quick" } else { "" }
    );
    let _ = writeln!(
        o,
        "{:<w$} {:>9} {:>9} {:>9}   {:>9} {:>9} {:>9}",
        "", "send n=1", "n=10", "n=32", "recv n=1", "n=10", "n=32"
    );
    let line = |o: &mut String, label: &str, s: &[f64], r: &[f64]| {
        let _ = writeln!(
            o,
            "{label:<w$} {:>9} {:>9} {:>9}   {:>9} {:>9} {:>9}",
            ns(s[0]),
            ns(s[1]),
            ns(s[2]),
            ns(r[0]),
            ns(r[1]),
            ns(r[2])
        );
    };
    line(&mut o, "paper MPE (CAS)", &PAPER_MPE_SEND, &PAPER_MPE_RECV);
    line(&mut o, "paper CPE (updt)", &PAPER_CPE_SEND, &PAPER_CPE_RECV);
    let row = |o: &mut String, key: Key, f: fn(&Sample) -> f64, g: fn(&Sample) -> f64| {
        let s: Vec<f64> = TABLE1_N.iter().map(|&n| f(&get(m, key, n))).collect();
        let r: Vec<f64> = TABLE1_N.iter().map(|&n| g(&get(m, key, n))).collect();
        line(o, &name(key), &s, &r);
    };
    for key in ROWS {
        row(&mut o, key, |s| s.send_ns, |s| s.recv_ns);
    }
    let _ = writeln!(o, "\nWall ns per message, whole phase / (n*m)");
    for key in ROWS {
        row(&mut o, key, |s| s.send_wall_ns, |s| s.recv_wall_ns);
    }

    let _ = writeln!(
        o,
        "\nOn-CPU ns per operation: CPU time of the worker's thread during its loop / m \
         (the rest of the first table is time spent waiting for a core)"
    );
    for key in ROWS {
        row(&mut o, key, |s| s.send_cpu_ns, |s| s.recv_cpu_ns);
    }

    let _ = writeln!(o, "\nRatios (per-operation figures)");
    let ratio = |o: &mut String, label: &str, num: [f64; 6], den: [f64; 6]| {
        let q: Vec<String> = (0..6).map(|i| format!("{:.2}x", num[i] / den[i])).collect();
        let _ = writeln!(
            o,
            "{label:<34} {:>8} {:>8} {:>8}   {:>8} {:>8} {:>8}",
            q[0], q[1], q[2], q[3], q[4], q[5]
        );
    };
    let ours = |key: Key| -> [f64; 6] {
        let mut v = [0.0; 6];
        for (i, &n) in TABLE1_N.iter().enumerate() {
            v[i] = get(m, key, n).send_ns;
            v[3 + i] = get(m, key, n).recv_ns;
        }
        v
    };
    let cat = |a: [f64; 3], b: [f64; 3]| [a[0], a[1], a[2], b[0], b[1], b[2]];
    let _ = writeln!(
        o,
        "{:<34} {:>8} {:>8} {:>8}   {:>8} {:>8} {:>8}",
        "", "send n=1", "n=10", "n=32", "recv n=1", "n=10", "n=32"
    );
    let cas_packed = ours(ROWS[0]);
    let updt_spread = ours(ROWS[3]);
    let crossbeam = ours(ROWS[6]);
    let may = ours(ROWS[7]);
    ratio(
        &mut o,
        "paper MPE / swco cas packed",
        cat(PAPER_MPE_SEND, PAPER_MPE_RECV),
        cas_packed,
    );
    ratio(
        &mut o,
        "paper CPE / swco updt spread",
        cat(PAPER_CPE_SEND, PAPER_CPE_RECV),
        updt_spread,
    );
    for key in &ROWS[..6] {
        ratio(
            &mut o,
            &format!("{} / crossbeam", name(*key)),
            ours(*key),
            crossbeam,
        );
    }
    for key in &ROWS[..6] {
        ratio(&mut o, &format!("{} / may", name(*key)), ours(*key), may);
    }

    let _ = writeln!(
        o,
        "\nGrowth from n=1 to n=32 (send, recv; then the same for on-CPU ns and wall ns)"
    );
    for key in ROWS {
        let g = growth(m, key);
        let _ = writeln!(
            o,
            "{:<w$} {:>8.1}x {:>8.1}x   on-CPU {:>6.1}x {:>6.1}x   wall {:>6.1}x {:>6.1}x",
            name(key),
            g[0],
            g[1],
            g[2],
            g[3],
            g[4],
            g[5]
        );
    }
    let _ = writeln!(
        o,
        "{:<w$} {:>8.1}x {:>8.1}x   {:<8} {:>8.1}x {:>8.1}x",
        "paper MPE",
        PAPER_MPE_SEND[2] / PAPER_MPE_SEND[0],
        PAPER_MPE_RECV[2] / PAPER_MPE_RECV[0],
        "CPE",
        PAPER_CPE_SEND[2] / PAPER_CPE_SEND[0],
        PAPER_CPE_RECV[2] / PAPER_CPE_RECV[0]
    );

    let _ = writeln!(o, "\nTargets");
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    let t1 = cas_packed[0] / crossbeam[0];
    let _ = writeln!(
        o,
        "  swco cas packed n=1 send <= crossbeam n=1 send: {:.1} vs {:.1} ns ({:.2}x): {}",
        cas_packed[0],
        crossbeam[0],
        t1,
        verdict(t1 <= 1.0)
    );
    let (gs, gr) = (
        updt_spread[2] / updt_spread[0],
        updt_spread[5] / updt_spread[3],
    );
    let _ = writeln!(
        o,
        "  swco updt spread grows <= 10x from n=1 to n=32: send {:.1}x, recv {:.1}x: {}",
        gs,
        gr,
        verdict(gs <= 10.0 && gr <= 10.0)
    );
    // The add-only protocol under contention, and batches.
    let at32 = |key: Key| get(m, key, TABLE1_N[2]);
    let (updt32, cas32) = (at32(ROWS[3]), at32(ROWS[1]));
    let wall = |s: Sample| s.send_wall_ns.max(s.recv_wall_ns);
    let q = wall(updt32) / wall(cas32);
    let _ = writeln!(
        o,
        "  swco updt spread n=32 wall ns/message <= 1.5x cas spread's: {:.1} vs {:.1} ns ({:.2}x): {}",
        wall(updt32),
        wall(cas32),
        q,
        verdict(q <= 1.5)
    );
    let g = growth(m, ROWS[3]);
    let _ = writeln!(
        o,
        "  swco updt spread on-CPU growth n=1 to n=32 <= 3x: send {:.1}x, recv {:.1}x: {}",
        g[2],
        g[3],
        verdict(g[2] <= 3.0 && g[3] <= 3.0)
    );
    let q = updt_spread[0] / cas_packed[0];
    let _ = writeln!(
        o,
        "  swco updt spread n=1 send <= 1.2x cas packed n=1 send: {:.1} vs {:.1} ns ({:.2}x): {}",
        updt_spread[0],
        cas_packed[0],
        q,
        verdict(q <= 1.2)
    );
    for (key, limit) in [(ROWS[4], 2.0), (ROWS[5], 3.0)] {
        let s = at32(key);
        let _ = writeln!(
            o,
            "  {} (k = {BATCH}) n=32 wall ns/message <= {limit} ns: send {:.2}, recv {:.2}: {}",
            name(key),
            s.send_wall_ns,
            s.recv_wall_ns,
            verdict(wall(s) <= limit)
        );
    }
    // What bounds the batch rows' wall figure from below in this run: n
    // workers on `cores` cores cannot finish faster than their summed
    // on-CPU time spread over every core.
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    let _ = writeln!(
        o,
        "    (of each batch send figure, {:.2} ns per message is the producers' own xorshift, measured without a channel)",
        batch_generation_ns(1_000_000)
    );
    for key in [ROWS[4], ROWS[5]] {
        let (one, s) = (get(m, key, TABLE1_N[0]), at32(key));
        let _ = writeln!(
            o,
            "    {} n=32 on-CPU send {:.2}, recv {:.2} ns/message (n=1: {:.2}, {:.2}); on {cores} cores the wall figure cannot go below on-CPU / cores: send {:.2}, recv {:.2}",
            name(key),
            s.send_cpu_ns,
            s.recv_cpu_ns,
            one.send_cpu_ns,
            one.recv_cpu_ns,
            s.send_cpu_ns / cores,
            s.recv_cpu_ns / cores,
        );
    }
    for (label, key) in [("packed", ROWS[0]), ("spread", ROWS[1])] {
        let v = ours(key);
        let worst = (0..6).map(|i| v[i] / may[i]).fold(0.0, f64::max);
        let _ = writeln!(
            o,
            "  swco cas {label} <= may at every n (send and recv): worst {:.2}x: {}",
            worst,
            verdict(worst <= 1.0)
        );
    }
    let _ = writeln!(
        o,
        "  (may: {may_workers} workers, coroutine i queued on worker i mod {may_workers}, work stealing on)"
    );
    o
}

/// Growth of a row's figures from n = 1 to n = 32: per-worker send and
/// receive, on-CPU send and receive, wall send and receive.
fn growth(m: &Medians, key: Key) -> [f64; 6] {
    let (a, b) = (get(m, key, TABLE1_N[0]), get(m, key, TABLE1_N[2]));
    [
        b.send_ns / a.send_ns,
        b.recv_ns / a.recv_ns,
        b.send_cpu_ns / a.send_cpu_ns,
        b.recv_cpu_ns / a.recv_cpu_ns,
        b.send_wall_ns / a.send_wall_ns,
        b.recv_wall_ns / a.recv_wall_ns,
    ]
}

/// One line per row and n; the `growth_*` columns (n = 1 to n = 32, the
/// same on each of a row's lines) let a script check the scaling targets.
fn to_csv(m: &Medians) -> String {
    let mut o = String::from(
        "system,protocol,placement,n,send_ns,recv_ns,send_wall_ns,recv_wall_ns,\
         send_cpu_ns,recv_cpu_ns,growth_send,growth_recv,growth_send_cpu,growth_recv_cpu,\
         growth_send_wall,growth_recv_wall\n",
    );
    for key in ROWS {
        let g = growth(m, key);
        for &n in &TABLE1_N {
            let s = get(m, key, n);
            let _ = writeln!(
                o,
                "{},{},{},{},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2}",
                key[0],
                key[1],
                key[2],
                n,
                s.send_ns,
                s.recv_ns,
                s.send_wall_ns,
                s.recv_wall_ns,
                s.send_cpu_ns,
                s.recv_cpu_ns,
                g[0],
                g[1],
                g[2],
                g[3],
                g[4],
                g[5]
            );
        }
    }
    o
}

/// Send and receive ns against n, both axes logarithmic, one line per row,
/// the paper's two rows dashed.
fn plot(path: &std::path::Path, m: &Medians) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;

    let root = SVGBackend::new(path, (1200, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 2));
    let colours = [
        RGBColor(31, 119, 180),
        RGBColor(174, 199, 232),
        RGBColor(214, 39, 40),
        RGBColor(255, 152, 150),
        RGBColor(255, 127, 14),
        RGBColor(255, 187, 120),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
    ];
    let (lo, hi) = m
        .values()
        .flat_map(|s| [s.send_ns, s.recv_ns])
        .chain(PAPER_CPE_RECV)
        .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    for (panel, (title, f, paper)) in panels.iter().zip([
        (
            "send: ns per operation",
            (|s: &Sample| s.send_ns) as fn(&Sample) -> f64,
            [PAPER_MPE_SEND, PAPER_CPE_SEND],
        ),
        (
            "receive: ns per operation",
            |s: &Sample| s.recv_ns,
            [PAPER_MPE_RECV, PAPER_CPE_RECV],
        ),
    ]) {
        let mut chart = ChartBuilder::on(panel)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(
                (0.8f64..40.0).log_scale(),
                ((lo / 1.5).max(1.0)..hi * 1.5).log_scale(),
            )?;
        chart
            .configure_mesh()
            .x_desc("producers = consumers (n)")
            .y_desc("ns")
            // The fine lines of a log mesh crowd into a grey band; the
            // decades are enough.
            .light_line_style(TRANSPARENT)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        for (i, key) in ROWS.iter().enumerate() {
            let colour = colours[i];
            let pts: Vec<(f64, f64)> = TABLE1_N
                .iter()
                .map(|&n| (n as f64, f(&get(m, *key, n))))
                .collect();
            chart
                .draw_series(LineSeries::new(pts, colour.stroke_width(2)).point_size(3))?
                .label(name(*key))
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(2))
                });
        }
        let grey = RGBColor(140, 140, 140);
        for (label, values, colour) in [
            ("paper MPE (CAS)", paper[0], BLACK),
            ("paper CPE (updt)", paper[1], grey),
        ] {
            let pts: Vec<(f64, f64)> = TABLE1_N.iter().map(|&n| n as f64).zip(values).collect();
            chart
                .draw_series(DashedLineSeries::new(pts, 6, 4, colour.stroke_width(2)))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()?;
    }
    root.present()?;
    Ok(())
}
