//! An HPGMG-style smoother, the pattern a Sunway stencil code is built on:
//! a 3-D 7-point Jacobi sweep for −Δu = f on the unit cube (Dirichlet
//! zero boundary), the grid cut into slabs along z, one slab per executor,
//! neighbours trading halo planes over SPSC channels every sweep and the
//! residual reduced across the slabs over an MPSC channel.
//!
//! ```text
//! cargo run --release -p swco-bench --example stencil [-- --n N] [--sweeps S] [--reps R] [--executors E]
//! ```
//!
//! The same sweep runs three ways: serially, with rayon (`par_chunks_mut`
//! over z-planes, double-buffered, on a pool of E threads) and with swco
//! (E executors, one slab coroutine pinned on each). Every run checks its
//! result: the rayon and swco grids must match the serial grid within
//! 1e-12 and their residual histories must match the serial one, else the
//! run fails (exit code 1). Each time per sweep is the median of R runs.
//!
//! All three use one kernel, [`smooth_plane`], point by point in the same
//! order, so the grids agree to the bit; the residual is a max-norm, which
//! does not depend on the order of the reduction either.

use std::time::{Duration, Instant};

use rayon::prelude::*;
use swco::channel::{mpsc, spsc};
use swco::Runtime;

struct Args {
    n: usize,
    sweeps: usize,
    reps: usize,
    executors: usize,
}

fn args() -> Args {
    let mut a = Args {
        n: 128,
        sweeps: 20,
        reps: 5,
        executors: 2,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--n" => a.n = value.parse().unwrap(),
            "--sweeps" => a.sweeps = value.parse().unwrap(),
            "--reps" => a.reps = value.parse().unwrap(),
            "--executors" => a.executors = value.parse().unwrap(),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(
        a.n >= 1 && a.sweeps >= 1 && a.reps >= 1,
        "n, sweeps and reps must be positive"
    );
    assert!(
        (1..=a.n).contains(&a.executors),
        "need between 1 and n executors (one slab of at least one plane each)"
    );
    a
}

/// The problem: N³ interior points at spacing h = 1/(N+1). A plane is
/// stored with its boundary ring, (N+2)² values, so the kernel needs no
/// special case at the edges; whole boundary planes (z = 0 and z = N+1)
/// are planes of zeros.
#[derive(Clone, Copy)]
struct Grid {
    n: usize,
    h2: f64,
}

impl Grid {
    fn new(n: usize) -> Self {
        let h = 1.0 / (n + 1) as f64;
        Grid { n, h2: h * h }
    }
    /// Values per stored plane (interior and boundary ring).
    fn plane(self) -> usize {
        (self.n + 2) * (self.n + 2)
    }
    /// The right-hand side on interior plane `k` (1..=N): a smooth bump,
    /// zero on the boundary ring.
    fn rhs_plane(self, k: usize) -> Vec<f64> {
        let m = self.n + 2;
        let h = self.h2.sqrt();
        let mut f = vec![0.0; self.plane()];
        let s = |i: usize| (std::f64::consts::PI * i as f64 * h).sin();
        for j in 1..=self.n {
            for i in 1..=self.n {
                f[j * m + i] = 3.0 * std::f64::consts::PI.powi(2) * s(i) * s(j) * s(k);
            }
        }
        f
    }
}

/// One Jacobi update of interior plane `here` into `out`, given the planes
/// `below` and `above` it and the right-hand side `f` of the plane:
/// `out = (sum of the 6 neighbours + h² f) / 6`. Returns the max-norm of the
/// residual f + Δu of the *input* on this plane, which falls out of the same
/// sum: f + Δu = 6 (out − u) / h².
fn smooth_plane(
    g: Grid,
    below: &[f64],
    here: &[f64],
    above: &[f64],
    f: &[f64],
    out: &mut [f64],
) -> f64 {
    let m = g.n + 2;
    let mut res = 0.0f64;
    for j in 1..=g.n {
        let r = j * m;
        // Row slices let the compiler drop the bounds checks in the inner loop.
        let (c, n, s) = (&here[r..r + m], &here[r + m..r + 2 * m], &here[r - m..r]);
        let (b, a, fr) = (&below[r..r + m], &above[r..r + m], &f[r..r + m]);
        let o = &mut out[r..r + m];
        for i in 1..=g.n {
            let sum = c[i - 1] + c[i + 1] + n[i] + s[i] + b[i] + a[i];
            let new = (sum + g.h2 * fr[i]) / 6.0;
            res = res.max((6.0 * (new - c[i]) / g.h2).abs());
            o[i] = new;
        }
    }
    res
}

/// What a run returns: the final grid (N+2 planes, boundaries included),
/// the residual before each sweep, and the time spent sweeping.
struct Run {
    u: Vec<f64>,
    residuals: Vec<f64>,
    time: Duration,
}

/// The right-hand side of the whole grid, planes 0..=N+1.
fn rhs(g: Grid) -> Vec<f64> {
    let mut f = vec![0.0; g.plane() * (g.n + 2)];
    for k in 1..=g.n {
        f[k * g.plane()..(k + 1) * g.plane()].copy_from_slice(&g.rhs_plane(k));
    }
    f
}

fn serial(g: Grid, f: &[f64], sweeps: usize) -> Run {
    let p = g.plane();
    let (mut u, mut v) = (vec![0.0; p * (g.n + 2)], vec![0.0; p * (g.n + 2)]);
    let mut residuals = Vec::with_capacity(sweeps);
    let t = Instant::now();
    for _ in 0..sweeps {
        let mut res = 0.0f64;
        for k in 1..=g.n {
            let out = &mut v[k * p..(k + 1) * p];
            let (b, h, a) = (
                &u[(k - 1) * p..k * p],
                &u[k * p..(k + 1) * p],
                &u[(k + 1) * p..(k + 2) * p],
            );
            res = res.max(smooth_plane(g, b, h, a, &f[k * p..(k + 1) * p], out));
        }
        residuals.push(res);
        std::mem::swap(&mut u, &mut v);
    }
    Run {
        u,
        residuals,
        time: t.elapsed(),
    }
}

fn rayon(g: Grid, f: &[f64], sweeps: usize, pool: &rayon::ThreadPool) -> Run {
    let p = g.plane();
    let (mut u, mut v) = (vec![0.0; p * (g.n + 2)], vec![0.0; p * (g.n + 2)]);
    let mut residuals = Vec::with_capacity(sweeps);
    let t = Instant::now();
    pool.install(|| {
        for _ in 0..sweeps {
            let src = &u;
            // One task per interior z-plane; the boundary planes stay zero.
            let res = v[p..(g.n + 1) * p]
                .par_chunks_mut(p)
                .enumerate()
                .map(|(k0, out)| {
                    let k = k0 + 1;
                    let (b, h, a) = (
                        &src[(k - 1) * p..k * p],
                        &src[k * p..(k + 1) * p],
                        &src[(k + 1) * p..(k + 2) * p],
                    );
                    smooth_plane(g, b, h, a, &f[k * p..(k + 1) * p], out)
                })
                .reduce(|| 0.0, f64::max);
            residuals.push(res);
            std::mem::swap(&mut u, &mut v);
        }
    });
    Run {
        u,
        residuals,
        time: t.elapsed(),
    }
}

/// The halo links of one slab: a sender and a receiver to each neighbour
/// (none at the top and bottom of the grid).
struct Links {
    down: Option<(spsc::Sender<Plane>, spsc::Receiver<Plane>)>,
    up: Option<(spsc::Sender<Plane>, spsc::Receiver<Plane>)>,
}

/// Halo buffers: each side of a link owns two planes for the whole run, a
/// ghost (the neighbour's last plane) and a spare. Sending copies our
/// boundary plane into the spare; receiving keeps the neighbour's buffer as
/// the new ghost and the old ghost becomes the spare. So no allocation per
/// sweep, one copy per plane sent, none on receipt.
type Plane = Box<[f64]>;

fn send_halo(tx: &spsc::Sender<Plane>, ours: &[f64], spare: &mut Plane) {
    let mut out = std::mem::take(spare);
    out.copy_from_slice(ours);
    tx.send(out).expect("neighbour slab hung up");
}

fn recv_halo(rx: &spsc::Receiver<Plane>, ghost: &mut Plane, spare: &mut Plane) {
    *spare = std::mem::replace(ghost, rx.recv().expect("neighbour slab hung up"));
}

/// The body of a slab coroutine: interior planes `k0..k1` of the grid.
/// It allocates (and so first touches) its planes on its own executor, as
/// a CPE keeps its slab in its local memory, and copies them into `result`
/// at the end. It reports (sweep, residual) to the coordinator every sweep
/// and returns when its sweeps started and ended.
fn slab(
    g: Grid,
    k0: usize,
    k1: usize,
    sweeps: usize,
    links: Links,
    residuals: mpsc::Sender<(usize, f64)>,
    result: &mut [f64],
) -> (Instant, Instant) {
    let (p, nz) = (g.plane(), k1 - k0);
    let f: Vec<f64> = (k0..k1).flat_map(|k| g.rhs_plane(k)).collect();
    let (mut u, mut v) = (vec![0.0; nz * p], vec![0.0; nz * p]);
    // Ghost planes start as zeros: right for the grid's boundary planes,
    // which are never exchanged, and for the initial guess u = 0.
    let plane = || vec![0.0; p].into_boxed_slice();
    let (mut ghost_lo, mut ghost_hi, mut spare_lo, mut spare_hi) =
        (plane(), plane(), plane(), plane());
    let start = Instant::now();
    for sweep in 0..sweeps {
        // Send both boundary planes before waiting for either ghost, so the
        // two neighbours' sends overlap instead of waiting on each other.
        if let Some((tx, _)) = &links.down {
            send_halo(tx, &u[..p], &mut spare_lo);
        }
        if let Some((tx, _)) = &links.up {
            send_halo(tx, &u[(nz - 1) * p..], &mut spare_hi);
        }
        if let Some((_, rx)) = &links.down {
            recv_halo(rx, &mut ghost_lo, &mut spare_lo);
        }
        if let Some((_, rx)) = &links.up {
            recv_halo(rx, &mut ghost_hi, &mut spare_hi);
        }
        let mut res = 0.0f64;
        for k in 0..nz {
            let b = if k == 0 {
                &ghost_lo[..]
            } else {
                &u[(k - 1) * p..k * p]
            };
            let a = if k == nz - 1 {
                &ghost_hi[..]
            } else {
                &u[(k + 1) * p..(k + 2) * p]
            };
            let out = &mut v[k * p..(k + 1) * p];
            res = res.max(smooth_plane(
                g,
                b,
                &u[k * p..(k + 1) * p],
                a,
                &f[k * p..(k + 1) * p],
                out,
            ));
        }
        // The coordinator does not answer, so this never holds the sweep up;
        // a solver that stops on the residual would wait for a broadcast here.
        residuals.send((sweep, res)).expect("coordinator hung up");
        std::mem::swap(&mut u, &mut v);
    }
    let end = Instant::now();
    result.copy_from_slice(&u);
    (start, end)
}

fn swco(g: Grid, sweeps: usize, rt: &Runtime) -> Run {
    let (p, e) = (g.plane(), rt.executors());
    let mut u = vec![0.0; p * (g.n + 2)];
    // Slab s owns interior planes bounds[s]..bounds[s + 1], as even as can be.
    let bounds: Vec<usize> = (0..=e).map(|s| 1 + s * g.n / e).collect();
    // Link s joins slab s and slab s + 1: one channel each way. Capacity 2:
    // a slab may send its next plane before its neighbour took the last one.
    let mut links: Vec<Links> = (0..e)
        .map(|_| Links {
            down: None,
            up: None,
        })
        .collect();
    for s in 0..e - 1 {
        let (up_tx, up_rx) = spsc::bounded(2);
        let (down_tx, down_rx) = spsc::bounded(2);
        links[s].up = Some((up_tx, down_rx));
        links[s + 1].down = Some((down_tx, up_rx));
    }
    let (res_tx, res_rx) = mpsc::bounded(4 * e);
    let mut residuals = vec![0.0f64; sweeps];
    let spans = rt.scope(|scope| {
        // Each slab gets its own piece of the result grid (the borrow is
        // scoped: the scope waits for every slab before it returns).
        let mut rest = &mut u[p..(g.n + 1) * p];
        let mut handles = Vec::with_capacity(e);
        for (s, links) in links.into_iter().enumerate() {
            let (k0, k1) = (bounds[s], bounds[s + 1]);
            let (mine, tail) = std::mem::take(&mut rest).split_at_mut((k1 - k0) * p);
            rest = tail;
            let tx = res_tx.clone();
            let h = scope
                .spawn_on(s, move || slab(g, k0, k1, sweeps, links, tx, mine))
                .expect("one executor per slab");
            handles.push(h);
        }
        drop(res_tx);
        // The coordinator (here the calling thread): the max over the slabs
        // for each sweep. Slabs may be a sweep apart, hence the sweep tag.
        for (sweep, r) in res_rx.iter() {
            residuals[sweep] = residuals[sweep].max(r);
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("slab panicked"))
            .collect::<Vec<_>>()
    });
    let start = spans.iter().map(|s| s.0).min().unwrap();
    let end = spans.iter().map(|s| s.1).max().unwrap();
    Run {
        u,
        residuals,
        time: end - start,
    }
}

fn check(what: &str, got: &Run, want: &Run) {
    let diff = got
        .u
        .iter()
        .zip(&want.u)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f64, f64::max);
    let res_diff = got
        .residuals
        .iter()
        .zip(&want.residuals)
        .map(|(a, b)| (a - b).abs() / b.abs().max(1e-300))
        .fold(0.0f64, f64::max);
    if diff > 1e-12 || res_diff > 1e-12 || got.residuals.len() != want.residuals.len() {
        eprintln!(
            "{what}: grid differs from serial by {diff:e}, residuals by {res_diff:e} (relative)"
        );
        std::process::exit(1);
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let a = args();
    let g = Grid::new(a.n);
    let f = rhs(g);
    let rt = Runtime::builder().executors(a.executors).build().unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(a.executors)
        .build()
        .unwrap();
    let per_sweep = |d: Duration| d / a.sweeps as u32;
    let (mut ts, mut tr, mut tw) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    // The three alternate rep by rep, so the host's swings in speed fall on all.
    for _ in 0..a.reps {
        let s = serial(g, &f, a.sweeps);
        let r = rayon(g, &f, a.sweeps, &pool);
        let w = swco(g, a.sweeps, &rt);
        check("rayon", &r, &s);
        check("swco", &w, &s);
        ts.push(per_sweep(s.time));
        tr.push(per_sweep(r.time));
        tw.push(per_sweep(w.time));
        last = Some(s.residuals);
    }
    let res = last.unwrap();
    let (ms, mr, mw) = (median(&mut ts), median(&mut tr), median(&mut tw));
    let ms_ = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "stencil n={}^3 sweeps={} executors={} reps={}: residual {:.4e} -> {:.4e} (all three agree)",
        a.n,
        a.sweeps,
        a.executors,
        a.reps,
        res[0],
        res[res.len() - 1],
    );
    println!(
        "time per sweep (median): serial {:.3} ms, rayon {:.3} ms, swco {:.3} ms; swco/rayon {:.3}, serial/swco {:.2}",
        ms_(ms),
        ms_(mr),
        ms_(mw),
        mw.as_secs_f64() / mr.as_secs_f64(),
        ms.as_secs_f64() / mw.as_secs_f64(),
    );
}
