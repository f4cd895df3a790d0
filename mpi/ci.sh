#!/usr/bin/env bash
# swco-mpi's one command: installs what is missing (Open MPI, libclang for
# bindgen), builds, and runs the MPI tests and the ring example under
# mpirun with 2 and 4 ranks, and the stencil example on 2. Exits non-zero on any failure; every mpirun
# runs under `timeout`, so nothing hangs.
set -euo pipefail
cd "$(dirname "$0")"

MPIRUN_TIMEOUT=${MPIRUN_TIMEOUT:-120}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}

# --- install what is missing -------------------------------------------------
need=()
for pkg in libopenmpi-dev openmpi-bin libclang-dev; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
        need+=("$pkg")
    fi
done
if ((${#need[@]})); then
    command -v apt-get >/dev/null || { echo "ci.sh: need ${need[*]} and there is no apt-get" >&2; exit 1; }
    SUDO=()
    [ "$(id -u)" -ne 0 ] && SUDO=(sudo)
    echo "ci.sh: installing ${need[*]}"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

# --- build ---------------------------------------------------------------------
cargo build --release --tests --examples
cargo test --release --lib
# The README's examples and the API docs' examples, compiled (`no_run`
# where they need mpirun).
cargo test --release --doc
test_bin() {
    cargo test --release --test "$1" --no-run --message-format=json 2>/dev/null \
        | grep '"kind":\["test"\]' | grep -o '"executable":"[^"]*"' | cut -d'"' -f4
}
TEST_BIN=$(test_bin mpi)
HOSTED_BIN=$(test_bin hosted_shutdown)
for b in "$TEST_BIN" "$HOSTED_BIN"; do
    [ -x "$b" ] || { echo "ci.sh: cannot find an mpi test binary" >&2; exit 1; }
done
RING_BIN=$CARGO_TARGET_DIR/release/examples/ring
STENCIL_BIN=$CARGO_TARGET_DIR/release/examples/stencil

# --- run under mpirun ----------------------------------------------------------
run() {
    local n=$1; shift
    echo "=== mpirun -n $n $(basename "$1") ${SWCO_MPI_HOST:+(bridge on $SWCO_MPI_HOST)}"
    timeout --kill-after=10 "$MPIRUN_TIMEOUT" \
        mpirun --allow-run-as-root --oversubscribe -n "$n" "$@"
}
for n in 2 4; do
    SWCO_MPI_HOST=thread run "$n" "$TEST_BIN"
    SWCO_MPI_HOST=executor run "$n" "$TEST_BIN"
    run "$n" "$HOSTED_BIN"
    run "$n" "$RING_BIN"
done
# The stencil across two ranks, checked against the serial grid: a small
# grid, so it stays fast (N = 32, 10 sweeps, 2 slabs per rank).
for host in thread executor; do
    run 2 "$STENCIL_BIN" "$host" 32 10 2
done
echo "ci.sh: all MPI tests, the ring and the stencil passed (2 and 4 ranks; bridge on a thread and on an executor)"
