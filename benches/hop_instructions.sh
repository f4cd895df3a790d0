#!/bin/bash
# Instructions per blocking round trip of executor/examples/hop_cost.rs,
# exact, from callgrind: the difference between runs of 100 000 and
# 200 000 rounds, over 100 000 (setup and teardown cancel out).
#
#   cargo build --release -p swco-executor --example hop_cost
#   bash benches/hop_instructions.sh target/release/examples/hop_cost cas 1 spsc
#
# Arguments: the hop_cost binary, then its protocol (cas|updt), capacity
# (1, or 0 for rendezvous) and mode (spsc|mpmc). Compare two builds by
# running it on each binary.
set -euo pipefail
bin=$1; protocol=${2:-cas}; capacity=${3:-1}; mode=${4:-spsc}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
totals=()
for n in 100000 200000; do
    valgrind --tool=callgrind --callgrind-out-file="$out/cg.$n" \
        "$bin" "$protocol" "$n" "$capacity" "$mode" >/dev/null 2>&1
    totals+=("$(callgrind_annotate "$out/cg.$n" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')")
done
echo "$protocol capacity $capacity $mode: $(( (totals[1] - totals[0]) / 100000 )) instructions per round trip"
