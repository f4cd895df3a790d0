//! Draws a swco trace (the Chrome trace-event JSON that
//! [`RuntimeBuilder::trace`](swco::RuntimeBuilder::trace) writes) as an SVG
//! timeline: one lane per executor, a rectangle per run coloured by
//! coroutine, and ticks above each lane for spawns, parks and wakes.
//!
//! ```text
//! cargo run --release -p swco-bench --example trace_svg -- TRACE.json OUT.svg [--from MS] [--to MS] [--width PX]
//! ```
//!
//! `--from` and `--to` draw a window of the trace (milliseconds since the
//! runtime was built); by default the whole of it.
//!
//! A trace holds up to a million events per executor, far more than an
//! SVG can draw usefully: runs at least a pixel wide are drawn as they
//! are (a run continued by the same coroutine within half a pixel is
//! drawn as one), and the runs narrower than a pixel are drawn per pixel
//! column, as a bar per coroutine as tall as its share of the column's
//! time. Instants are drawn once per kind and
//! column. So the file's size follows the picture's width, not the trace's
//! length.

use std::collections::{BTreeMap, HashMap};
use std::error::Error;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

/// A run of a coroutine on a lane, in ms.
struct Run {
    lane: usize,
    start: f64,
    end: f64,
    /// Index into the coroutine list.
    who: usize,
}

/// An instant on a lane, in ms.
struct Instant {
    lane: usize,
    at: f64,
    kind: usize,
}

/// The instant kinds drawn, in their row order above a lane.
const KINDS: [&str; 3] = ["spawn", "park", "wake"];

/// Colours of the coroutines (Tableau 20, the strong ones first), reused
/// in turn when there are more coroutines.
const PALETTE: [RGBColor; 20] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(174, 199, 232),
    RGBColor(255, 187, 120),
    RGBColor(152, 223, 138),
    RGBColor(255, 152, 150),
    RGBColor(197, 176, 213),
    RGBColor(196, 156, 148),
    RGBColor(247, 182, 210),
    RGBColor(199, 199, 199),
    RGBColor(219, 219, 141),
    RGBColor(158, 218, 229),
];

/// The colours of the instant kinds, as in [`KINDS`]: greys, apart from
/// the coroutines' colours.
const KIND_COLOURS: [RGBColor; 3] = [
    RGBColor(0, 0, 0),
    RGBColor(95, 95, 95),
    RGBColor(165, 165, 165),
];

/// How many coroutines the legend names (the busiest).
const LEGEND: usize = 12;

/// Width of the legend strip, in pixels.
const LEGEND_WIDTH: u32 = 190;

/// The trace, read: lane names, coroutine names (by first appearance),
/// runs and instants, times in ms.
struct Trace {
    lanes: Vec<String>,
    coroutines: Vec<String>,
    runs: Vec<Run>,
    instants: Vec<Instant>,
    dropped: String,
}

fn read(path: &str) -> Result<Trace, Box<dyn Error>> {
    let text = std::fs::read_to_string(path)?;
    let json: Value = serde_json::from_str(&text)?;
    let events = json["traceEvents"]
        .as_array()
        .ok_or("no traceEvents array")?;
    let mut tids: BTreeMap<u64, String> = BTreeMap::new();
    for e in events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
    {
        if let (Some(tid), Some(name)) = (e["tid"].as_u64(), e["args"]["name"].as_str()) {
            tids.insert(tid, name.to_owned());
        }
    }
    // Tracks with events but no name still get a lane.
    for e in events.iter().filter(|e| e["ph"] != "M") {
        if let Some(tid) = e["tid"].as_u64() {
            tids.entry(tid).or_insert_with(|| format!("tid {tid}"));
        }
    }
    let lane_of: HashMap<u64, usize> = tids.keys().enumerate().map(|(i, &t)| (t, i)).collect();
    let mut who_of: HashMap<String, usize> = HashMap::new();
    let mut coroutines = Vec::new();
    let (mut runs, mut instants) = (Vec::new(), Vec::new());
    for e in events {
        let (Some(tid), Some(ts)) = (e["tid"].as_u64(), e["ts"].as_f64()) else {
            continue;
        };
        let lane = lane_of[&tid];
        let at = ts / 1000.0;
        match e["ph"].as_str() {
            Some("X") => {
                let name = e["name"].as_str().unwrap_or("?").to_owned();
                let next = who_of.len();
                let who = *who_of.entry(name.clone()).or_insert_with(|| {
                    coroutines.push(name);
                    next
                });
                let dur = e["dur"].as_f64().unwrap_or(0.0) / 1000.0;
                runs.push(Run {
                    lane,
                    start: at,
                    end: at + dur,
                    who,
                });
            }
            Some("i") => {
                if let Some(kind) = KINDS.iter().position(|k| e["name"] == *k) {
                    instants.push(Instant { lane, at, kind });
                }
            }
            _ => {}
        }
    }
    runs.sort_by(|a, b| (a.lane, a.start).partial_cmp(&(b.lane, b.start)).unwrap());
    let dropped = json["otherData"]["swco_dropped_events"]
        .as_str()
        .unwrap_or("?")
        .to_owned();
    Ok(Trace {
        lanes: tids.into_values().collect(),
        coroutines,
        runs,
        instants,
        dropped,
    })
}

fn flag(args: &[String], name: &str) -> Option<f64> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
}

/// Vertical extent of lane `lane`'s run band and of its tick row `kind`,
/// lane 0 at the top (y grows upwards in the chart).
fn band(lanes: usize, lane: usize) -> (f64, f64) {
    let top = (lanes - lane) as f64;
    (top - 0.92, top - 0.38)
}

fn tick_row(lanes: usize, lane: usize, kind: usize) -> (f64, f64) {
    let top = (lanes - lane) as f64 - 0.06;
    let h = 0.1;
    (top - h * (kind + 1) as f64 + 0.02, top - h * kind as f64)
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(input), Some(output)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: trace_svg TRACE.json OUT.svg [--from MS] [--to MS] [--width PX]");
        std::process::exit(2);
    };
    let trace = read(input)?;
    let lanes = trace.lanes.len().max(1);
    let last = trace
        .runs
        .iter()
        .map(|r| r.end)
        .chain(trace.instants.iter().map(|i| i.at))
        .fold(0.0f64, f64::max);
    let from = flag(&args, "--from").unwrap_or(0.0);
    let to = flag(&args, "--to").unwrap_or(last).max(from + 1e-3);
    let width = flag(&args, "--width").unwrap_or(1400.0) as u32;
    let height = 150 + 110 * lanes as u32;

    // Busy time per coroutine: the busiest over the whole trace get the
    // strong colours (the same in every window drawn of it), and the
    // legend names the busiest of those that ran in the window.
    let mut busy_all = vec![0.0f64; trace.coroutines.len()];
    let mut busy = vec![0.0f64; trace.coroutines.len()];
    for r in &trace.runs {
        busy_all[r.who] += r.end - r.start;
        busy[r.who] += (r.end.min(to) - r.start.max(from)).max(0.0);
    }
    let mut rank: Vec<usize> = (0..trace.coroutines.len()).collect();
    rank.sort_by(|&a, &b| busy_all[b].total_cmp(&busy_all[a]));
    let mut colour = vec![PALETTE[0]; trace.coroutines.len()];
    for (i, &who) in rank.iter().enumerate() {
        colour[who] = PALETTE[i % PALETTE.len()];
    }

    let root = SVGBackend::new(output, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    // The legend gets a strip of its own, right of the lanes.
    let (main, side) = root.split_horizontally(width.saturating_sub(LEGEND_WIDTH));
    let file = std::path::Path::new(input)
        .file_name()
        .map_or_else(|| input.clone(), |f| f.to_string_lossy().into_owned());
    let caption = format!(
        "{file}: {} runs, {} instants on {} executors ({} events dropped)",
        trace.runs.len(),
        trace.instants.len(),
        trace.lanes.len(),
        trace.dropped
    );
    let mut chart = ChartBuilder::on(&main)
        .caption(caption, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(100)
        .build_cartesian_2d(from..to, 0.0..lanes as f64)?;
    chart
        .configure_mesh()
        .x_desc("ms since the runtime was built")
        .disable_y_mesh()
        .disable_y_axis()
        .draw()?;
    // Lane names left of their bands (the mesh labels numbers only).
    let label = ("sans-serif", 13)
        .into_font()
        .into_text_style(&main)
        .pos(Pos::new(HPos::Right, VPos::Center));
    for (lane, name) in trace.lanes.iter().enumerate() {
        let (y0, y1) = band(lanes, lane);
        let (x, y) = chart.backend_coord(&(from, (y0 + y1) / 2.0));
        main.draw(&Text::new(name.clone(), (x - 8, y), label.clone()))?;
    }

    let (px, _) = chart.plotting_area().dim_in_pixel();
    let columns = px.max(1) as usize;
    let ms_per_px = (to - from) / columns as f64;
    let column = |t: f64| (((t - from) / ms_per_px).floor().max(0.0) as usize).min(columns - 1);

    // A run continued by the same coroutine within half a pixel is one.
    let mut merged: Vec<(usize, usize, f64, f64)> = Vec::new(); // (lane, who, start, end)
    for r in &trace.runs {
        let (start, end) = (r.start.max(from), r.end.min(to));
        if end < start {
            continue;
        }
        match merged.last_mut() {
            Some((lane, who, _, e))
                if *lane == r.lane && *who == r.who && start - *e < ms_per_px / 2.0 =>
            {
                *e = end;
            }
            _ => merged.push((r.lane, r.who, start, end)),
        }
    }
    // Runs a pixel wide or more as they are; narrower ones into buckets of
    // busy time per lane, column and coroutine.
    let mut wide: Vec<Vec<(usize, f64, f64)>> = vec![Vec::new(); trace.coroutines.len()];
    let mut narrow: HashMap<(usize, usize), HashMap<usize, f64>> = HashMap::new();
    for (lane, who, start, end) in merged {
        if end - start >= ms_per_px {
            wide[who].push((lane, start, end));
        } else {
            *narrow
                .entry((lane, column(start)))
                .or_default()
                .entry(who)
                .or_default() += end - start;
        }
    }

    // (text, colour, whether a tick) per legend line.
    let mut legend: Vec<(String, RGBColor, bool)> = Vec::new();
    let mut unnamed = 0;
    for &who in &rank {
        let c = colour[who];
        let rects = wide[who].iter().map(|&(lane, start, end)| {
            let (y0, y1) = band(lanes, lane);
            Rectangle::new([(start, y0), (end, y1)], c.filled())
        });
        chart.draw_series(rects)?;
        if busy[who] > 0.0 {
            if legend.len() < LEGEND {
                legend.push((trace.coroutines[who].clone(), c, false));
            } else {
                unnamed += 1;
            }
        }
    }
    if unnamed > 0 {
        legend.push((format!("({unnamed} more)"), WHITE, false));
    }
    // A column of narrow runs: one bar per coroutine, stacked from the
    // band's foot, each as tall as its share of the column's time (the
    // busiest at the foot), so a column half idle is half empty and two
    // coroutines taking turns fill it in their proportions.
    let mut columns_drawn = Vec::new();
    for (&(lane, col), by_who) in &narrow {
        let mut shares: Vec<(usize, f64)> = by_who.iter().map(|(&w, &t)| (w, t)).collect();
        shares.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let x0 = from + col as f64 * ms_per_px;
        let (y0, y1) = band(lanes, lane);
        let mut y = y0;
        for (who, t) in shares {
            let h = (y1 - y0) * (t / ms_per_px).min(1.0);
            let top = (y + h).min(y1);
            columns_drawn.push(Rectangle::new(
                [(x0, y), (x0 + ms_per_px, top)],
                colour[who].filled(),
            ));
            y = top;
        }
    }
    chart.draw_series(columns_drawn)?;

    // Ticks: once per lane, kind and column.
    let mut ticked: Vec<Vec<bool>> = vec![vec![false; columns * KINDS.len()]; lanes];
    for (kind, name) in KINDS.iter().enumerate() {
        let c = KIND_COLOURS[kind];
        let mut ticks = Vec::new();
        for i in trace
            .instants
            .iter()
            .filter(|i| i.kind == kind && i.at >= from && i.at <= to)
        {
            let col = column(i.at);
            let seen = &mut ticked[i.lane][col * KINDS.len() + kind];
            if std::mem::replace(seen, true) {
                continue;
            }
            let (y0, y1) = tick_row(lanes, i.lane, kind);
            ticks.push(PathElement::new(
                [(i.at, y0), (i.at, y1)],
                c.stroke_width(1),
            ));
        }
        chart.draw_series(ticks)?;
        legend.push((format!("{name} (tick row {})", kind + 1), c, true));
    }
    let text = ("sans-serif", 12)
        .into_font()
        .into_text_style(&side)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (name, c, tick)) in legend.into_iter().enumerate() {
        let y = 60 + 20 * i as i32;
        if tick {
            side.draw(&PathElement::new(
                [(17, y - 7), (17, y + 7)],
                c.stroke_width(2),
            ))?;
        } else {
            side.draw(&Rectangle::new([(10, y - 6), (24, y + 6)], c.filled()))?;
        }
        side.draw(&Text::new(name, (32, y), text.clone()))?;
    }
    root.present()?;
    println!(
        "{output}: {} lanes, {from:.3}–{to:.3} ms, {} coroutines",
        lanes,
        trace.coroutines.len()
    );
    Ok(())
}
