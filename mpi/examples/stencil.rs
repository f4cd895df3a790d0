//! The HPGMG-style smoother of `benches/examples/stencil.rs` across two MPI
//! ranks: a 3-D 7-point Jacobi sweep for −Δu = f on the unit cube
//! (Dirichlet zero boundary), the N interior z-planes cut in two halves,
//! one per rank, and each half into slabs, one coroutine per executor.
//! Slabs of one rank trade halo planes over SPSC channels; the plane
//! between the two ranks crosses through swco-mpi typed routes, as a batch
//! of `f64` each way each sweep. Each rank reduces its slabs' residuals,
//! and rank 1 sends its history to rank 0, which takes the max per sweep.
//!
//! Rank 1 then sends its half of the grid to rank 0, which checks the whole
//! grid against a serial computation (max abs diff ≤ 1e-12) and the
//! residual history against the serial one (relative diff ≤ 1e-12). Every
//! run uses one kernel point by point in the same order, so the grids
//! agree to the bit. Exits non-zero on a mismatch.
//!
//! ```text
//! cargo build --release --examples
//! mpirun -n 2 target/release/examples/stencil [thread|executor] [N] [SWEEPS] [SLABS]
//! ```
//!
//! `thread`/`executor`: where the bridge runs (default `executor`);
//! N = 32, SWEEPS = 10 and SLABS = 2 (per rank, one executor each) by default.

mod common;

use swco::channel::{mpsc, spsc};
use swco_mpi::{RemoteReceiver, RemoteSender};

/// Rank 0's top plane going up to rank 1.
const HALO_UP: u16 = 1;
/// Rank 1's bottom plane going down to rank 0.
const HALO_DOWN: u16 = 2;
/// Rank 1's residual history.
const RESIDUALS: u16 = 3;
/// Rank 1's half of the final grid.
const GRID: u16 = 4;

/// The problem: N³ interior points at spacing h = 1/(N+1). A plane is
/// stored with its boundary ring, (N+2)² values, so the kernel needs no
/// special case at the edges; the boundary planes z = 0 and z = N+1 are
/// planes of zeros.
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

/// One Jacobi update of interior plane `here` into `out` (the bench's
/// kernel): `out = (sum of the 6 neighbours + h² f) / 6`; returns the
/// max-norm of the residual f + Δu of the input on this plane.
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

/// The serial reference: the whole grid (N+2 planes) after `sweeps`
/// sweeps, and the residual before each.
fn serial(g: Grid, sweeps: usize) -> (Vec<f64>, Vec<f64>) {
    let p = g.plane();
    let mut f = vec![0.0; p * (g.n + 2)];
    for k in 1..=g.n {
        f[k * p..(k + 1) * p].copy_from_slice(&g.rhs_plane(k));
    }
    let (mut u, mut v) = (vec![0.0; p * (g.n + 2)], vec![0.0; p * (g.n + 2)]);
    let mut residuals = Vec::with_capacity(sweeps);
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
    (u, residuals)
}

/// A halo plane between two slabs of one rank: a boxed plane, moved (the
/// two sides swap buffers, as in the bench).
type Plane = Box<[f64]>;

/// A slab's link to the neighbour on one side.
enum Link {
    /// A slab of the same rank.
    Local(spsc::Sender<Plane>, spsc::Receiver<Plane>),
    /// The slab across the rank boundary: a plane goes as one batch of
    /// `f64`, and arrives as one or more runs, gathered in `buf`.
    Remote {
        tx: RemoteSender<f64>,
        rx: RemoteReceiver<f64>,
        buf: Vec<f64>,
    },
}

impl Link {
    /// Sends our boundary plane `ours` (through `spare`, for a local link).
    fn send(&self, ours: &[f64], spare: &mut Plane) {
        match self {
            Link::Local(tx, _) => {
                let mut out = std::mem::take(spare);
                out.copy_from_slice(ours);
                tx.send(out).expect("neighbour slab hung up");
            }
            Link::Remote { tx, .. } => {
                let sent = tx
                    .send_batch(ours.iter().copied())
                    .expect("the other rank hung up");
                assert_eq!(sent, ours.len());
            }
        }
    }

    /// Receives the neighbour's plane into `ghost`.
    fn recv(&mut self, ghost: &mut Plane, spare: &mut Plane) {
        match self {
            Link::Local(_, rx) => {
                *spare = std::mem::replace(ghost, rx.recv().expect("neighbour slab hung up"));
            }
            Link::Remote { rx, buf, .. } => {
                buf.clear();
                while buf.len() < ghost.len() {
                    let want = ghost.len() - buf.len();
                    rx.recv_batch(buf, want).expect("the other rank hung up");
                }
                ghost.copy_from_slice(buf);
            }
        }
    }
}

/// The body of a slab coroutine: global interior planes `k0..k1`. It
/// reports (sweep, residual) to its rank's coordinator every sweep and
/// returns its planes at the end.
fn slab(
    g: Grid,
    (k0, k1): (usize, usize),
    sweeps: usize,
    mut down: Option<Link>,
    mut up: Option<Link>,
    residuals: &mpsc::Sender<(usize, f64)>,
) -> Vec<f64> {
    let (p, nz) = (g.plane(), k1 - k0);
    let f: Vec<f64> = (k0..k1).flat_map(|k| g.rhs_plane(k)).collect();
    let (mut u, mut v) = (vec![0.0; nz * p], vec![0.0; nz * p]);
    // Ghost planes start as zeros: right for the grid's boundary planes,
    // which are never exchanged, and for the initial guess u = 0.
    let plane = || vec![0.0; p].into_boxed_slice();
    let (mut ghost_lo, mut ghost_hi, mut spare_lo, mut spare_hi) =
        (plane(), plane(), plane(), plane());
    for sweep in 0..sweeps {
        // Both boundary planes out before waiting for either ghost.
        if let Some(l) = &down {
            l.send(&u[..p], &mut spare_lo);
        }
        if let Some(l) = &up {
            l.send(&u[(nz - 1) * p..], &mut spare_hi);
        }
        if let Some(l) = &mut down {
            l.recv(&mut ghost_lo, &mut spare_lo);
        }
        if let Some(l) = &mut up {
            l.recv(&mut ghost_hi, &mut spare_hi);
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
        residuals.send((sweep, res)).expect("coordinator hung up");
        std::mem::swap(&mut u, &mut v);
    }
    u
}

/// Runs this rank's half: its slabs as coroutines, one per executor, the
/// end slab linked to the other rank by `remote`. Returns the half's
/// interior planes (in order) and its residual history.
fn half(
    g: Grid,
    (k0, k1): (usize, usize),
    sweeps: usize,
    rt: &swco::Runtime,
    remote: Link,
    remote_is_up: bool,
) -> (Vec<f64>, Vec<f64>) {
    let e = rt.executors();
    // Slab s owns planes bounds[s]..bounds[s + 1], as even as can be.
    let bounds: Vec<usize> = (0..=e).map(|s| k0 + s * (k1 - k0) / e).collect();
    let mut downs: Vec<Option<Link>> = (0..e).map(|_| None).collect();
    let mut ups: Vec<Option<Link>> = (0..e).map(|_| None).collect();
    for s in 0..e - 1 {
        // Capacity 2: a slab may send its next plane before its neighbour
        // took the last one.
        let (up_tx, up_rx) = spsc::bounded(2);
        let (down_tx, down_rx) = spsc::bounded(2);
        ups[s] = Some(Link::Local(up_tx, down_rx));
        downs[s + 1] = Some(Link::Local(down_tx, up_rx));
    }
    if remote_is_up {
        ups[e - 1] = Some(remote);
    } else {
        downs[0] = Some(remote);
    }
    let (res_tx, res_rx) = mpsc::bounded(4 * e);
    let mut residuals = vec![0.0f64; sweeps];
    let planes = rt.scope(|scope| {
        let handles: Vec<_> = downs
            .into_iter()
            .zip(ups)
            .enumerate()
            .map(|(s, (down, up))| {
                let (range, tx) = ((bounds[s], bounds[s + 1]), res_tx.clone());
                scope
                    .spawn_on(s, move || slab(g, range, sweeps, down, up, &tx))
                    .expect("one executor per slab")
            })
            .collect();
        drop(res_tx);
        // This rank's reduction: the max over its slabs, per sweep (slabs
        // may be a sweep apart, hence the sweep number).
        for (sweep, r) in res_rx.iter() {
            residuals[sweep] = residuals[sweep].max(r);
        }
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("slab panicked"))
            .collect::<Vec<f64>>()
    });
    (planes, residuals)
}

/// Receives exactly `n` values from `rx`.
fn recv_exactly(rx: &RemoteReceiver<f64>, n: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let want = n - out.len();
        rx.recv_batch(&mut out, want).expect("rank 1 hung up");
    }
    out
}

fn arg(i: usize, default: usize) -> usize {
    std::env::args().nth(i).map_or(default, |a| {
        a.parse().expect("N, SWEEPS and SLABS are numbers")
    })
}

fn main() {
    let (n, sweeps, slabs) = (arg(2, 32), arg(3, 10), arg(4, 2));
    assert!(
        n >= 2 * slabs && sweeps >= 1 && slabs >= 1,
        "need N >= 2 * SLABS (a plane per slab), SWEEPS >= 1"
    );
    let (world, rt, host) = common::two_ranks(slabs, "executor");
    let g = Grid::new(n);
    let p = g.plane();
    let rank = world.rank();
    // Rank 0 owns interior planes 1..mid, rank 1 mid..N+1.
    let mid = 1 + n / 2;
    // Each halo route carries up to two planes: a rank may send its next
    // plane before the other took the last one, as on the local links.
    let ok = if rank == 0 {
        let rx = world.receiver::<f64>(1, HALO_DOWN, 2 * p);
        let res_rx = world.receiver::<f64>(1, RESIDUALS, sweeps);
        let grid_rx = world.receiver::<f64>(1, GRID, 4 * p);
        let remote = Link::Remote {
            tx: world.sender::<f64>(1, HALO_UP),
            rx,
            buf: Vec::with_capacity(p),
        };
        let (mine, mut residuals) = half(g, (1, mid), sweeps, &rt, remote, true);
        // The reduction across the ranks: the max of the two, per sweep.
        for (r, theirs) in residuals.iter_mut().zip(recv_exactly(&res_rx, sweeps)) {
            *r = r.max(theirs);
        }
        let theirs = recv_exactly(&grid_rx, (n + 1 - mid) * p);
        let mut u = vec![0.0; p * (n + 2)];
        u[p..mid * p].copy_from_slice(&mine);
        u[mid * p..(n + 1) * p].copy_from_slice(&theirs);
        let (want_u, want_res) = serial(g, sweeps);
        let diff = u
            .iter()
            .zip(&want_u)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f64, f64::max);
        let res_diff = residuals
            .iter()
            .zip(&want_res)
            .map(|(a, b)| (a - b).abs() / b.abs().max(1e-300))
            .fold(0.0f64, f64::max);
        println!(
            "stencil n={n}^3 sweeps={sweeps} on 2 ranks x {slabs} slabs (bridge on {host}): \
             residual {:.4e} -> {:.4e}; grid vs serial max abs diff {diff:e}, residuals {res_diff:e} (relative)",
            residuals[0],
            residuals[sweeps - 1],
        );
        diff <= 1e-12 && res_diff <= 1e-12
    } else {
        let rx = world.receiver::<f64>(0, HALO_UP, 2 * p);
        let remote = Link::Remote {
            tx: world.sender::<f64>(0, HALO_DOWN),
            rx,
            buf: Vec::with_capacity(p),
        };
        let (mine, residuals) = half(g, (mid, n + 1), sweeps, &rt, remote, false);
        world
            .sender::<f64>(0, RESIDUALS)
            .send_batch(residuals)
            .expect("rank 0 hung up");
        world
            .sender::<f64>(0, GRID)
            .send_batch(mine)
            .expect("rank 0 hung up");
        true
    };
    drop(world);
    rt.shutdown();
    if !ok {
        eprintln!("rank {rank}: the grid or the residuals differ from the serial computation");
        std::process::exit(1);
    }
}
