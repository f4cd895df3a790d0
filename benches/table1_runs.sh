#!/usr/bin/env bash
# Runs `table1` several times (default 5) and reports, for each figure the
# add-only protocol's targets are stated in, every run's value and the
# spread (min, median, max), so a figure is never quoted from its best run.
#
#   bash benches/table1_runs.sh [RUNS] > benches/results/table1_runs.txt
#
# Each run is a full `table1` (31 interleaved repetitions per cell, medians);
# its CSV is kept under target/swco/runs/<i>/. Needs only cargo and awk.
set -euo pipefail
runs=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo build --release -p swco-bench --example table1 >&2
bin=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/release/examples/table1
mkdir -p target/swco/runs
for i in $(seq 1 "$runs"); do
    echo "table1_runs: run $i of $runs" >&2
    "$bin" --out "target/swco/runs/$i" > "target/swco/runs.$i.txt"
done

awk -F, -v runs="$runs" '
FNR == 1 { run++; next }
{ key = $1 "," $2 "," $3 "," $4; for (c = 5; c <= NF; c++) v[run, key, c] = $c }
function f(r, key, col) { return v[r, key, col] + 0 }
function spread(name, unit, target, vals,    n, i, j, t, a, s) {
    n = split(vals, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    s = sprintf("%-58s", name)
    for (i = 1; i <= n; i++) s = s sprintf(" %7.2f", vals_in_order[i])
    printf "%s   min %7.2f  median %7.2f  max %7.2f %s (target %s)\n", s, a[1], a[int((n + 1) / 2)], a[n], unit, target
}
function row(name, unit, target, expr_kind, k1, c1, k2, c2,    r, vals, x) {
    vals = ""
    for (r = 1; r <= runs; r++) {
        x = (expr_kind == "ratio") ? f(r, k1, c1) / f(r, k2, c2) : f(r, k1, c1)
        vals_in_order[r] = x
        vals = vals " " x
    }
    spread(name, unit, target, vals)
}
END {
    up1 = "swco,updt,spread,1"; up32 = "swco,updt,spread,32"
    cs32 = "swco,cas,spread,32"; cp1 = "swco,cas,packed,1"
    cb32 = "swco,cas,batch,32"; ub32 = "swco,updt,batch,32"
    # CSV columns: 5 send_ns 6 recv_ns 7 send_wall 8 recv_wall 9 send_cpu
    # 10 recv_cpu 11 growth_send 12 growth_recv 13 growth_send_cpu
    # 14 growth_recv_cpu 15 growth_send_wall 16 growth_recv_wall
    printf "updt spread, one column per run, then the spread over the %d runs\n\n", runs
    row("wall ns/msg at n=32, updt spread / cas spread, send", "x", "<= 1.5", "ratio", up32, 7, cs32, 7)
    row("wall ns/msg at n=32, updt spread / cas spread, recv", "x", "<= 1.5", "ratio", up32, 8, cs32, 8)
    row("on-CPU growth n=1 -> 32, send", "x", "<= 3", "value", up32, 13)
    row("on-CPU growth n=1 -> 32, recv", "x", "<= 3", "value", up32, 14)
    row("per-producer growth n=1 -> 32, send", "x", "<= 10", "value", up32, 11)
    row("per-consumer growth n=1 -> 32, recv", "x", "<= 10", "value", up32, 12)
    row("n=1 send, updt spread / cas packed", "x", "<= 1.2", "ratio", up1, 5, cp1, 5)
    row("cas batch (k=16) n=32 wall ns/msg, send", "ns", "<= 2", "value", cb32, 7)
    row("cas batch (k=16) n=32 wall ns/msg, recv", "ns", "<= 2", "value", cb32, 8)
    row("updt batch (k=16) n=32 wall ns/msg, send", "ns", "<= 3", "value", ub32, 7)
    row("updt batch (k=16) n=32 wall ns/msg, recv", "ns", "<= 3", "value", ub32, 8)
}' $(for i in $(seq 1 "$runs"); do echo "target/swco/runs/$i/table1.csv"; done)
