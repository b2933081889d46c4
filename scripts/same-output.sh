#!/usr/bin/env bash
# Capture what a restructuring commit must not change: `joiner plan -o json` for
# every packbench case and `joiner replay`'s full output, wall-clock timings masked.
#
#   scripts/same-output.sh OUT [CASES]
#
# Run it on the commit before and after a restructuring and `diff -r` the two OUTs.
# CASES is a folder written by `go run ./cmd/packbench -write DIR`; pass the first
# run's OUT/cases to the second so both plan the very same inputs (the workload
# generators themselves may be what changed). Without CASES it is written into OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/same-output.sh OUT [CASES]}
cases=${2:-$out/cases}
mkdir -p "$out"
bin=$(mktemp -d); trap 'rm -rf "$bin"' EXIT
go build -trimpath -o "$bin/" ./cmd/joiner ./cmd/joiner-run
if [ ! -d "$cases" ]; then go run ./cmd/packbench -write "$cases" 2>/dev/null; fi
for d in "$cases"/*/; do
  c=$(basename "$d")
  "$bin/joiner" plan -f "$d" --catalog "$cases/$c.catalog" -o json > "$out/plan-$c.json"
done
# Wall-clock figures are the only thing allowed to differ: the time simulated in,
# each decision's milliseconds, and the control plane's bill, which prices the
# functions' measured milliseconds (Lambda GB-s) and log bytes (which hold them).
JOINER_RUN="$bin/joiner-run" "$bin/joiner" replay 2>&1 \
  | sed -E 's/simulated in [0-9.]+(µs|ms|s|m[0-9.]+s)/simulated in <wall>/; s/"decisionMillis": ?[0-9.e+-]+/"decisionMillis": 0/; s/"phaseMillis": ?\{[^}]*\}/"phaseMillis": {}/' \
  | sed -E '/^ *control plane /{s/ [0-9]+ ms / <ms> /g; s/= [0-9]+ GB-s/= <GB-s>/g}; /^ *control plane cost /{s/\$[0-9.]+\/month \(Lambda \$[0-9.]+/$<wall>\/month (Lambda $<wall>/; s/Logs \$[0-9.]+ for [0-9.]+ GB/Logs <wall>/}' \
  > "$out/replay.txt" || true
ls "$out" | sed 's/^/  /'
