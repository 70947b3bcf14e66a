#!/usr/bin/env bash
# On a GPU machine: runs cujit-bench and the peer benchmark in one command
# and prints cujit / peer ratios on the PERFORMANCE.md grid.
# Usage: bench/run_compare.sh [--quick] [OUTDIR]
# PEERS (default ../shared/bench/peers.py, else .peers/peers.py) names peers.py.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=""; [[ ${1:-} == --quick ]] && { quick="--quick"; shift; }
out=${1:-bench-out}
mkdir -p "$out"
peers=${PEERS:-}
for candidate in ../shared/bench/peers.py .peers/peers.py; do
  [[ -z $peers && -f $candidate ]] && peers=$candidate
done
[[ -n $peers ]] || { echo "run_compare: peers.py not found; set PEERS" >&2; exit 1; }
build=${CUJIT_BUILD_DIR:-build}
[[ -x $build/tools/cujit-bench ]] || scripts/build
"$build/tools/cujit-bench" $quick --csv "$out/cujit.csv" | tee "$out/cujit.txt"
PYTHONUNBUFFERED=1 python3 "$peers" $quick --csv "$out/peers.csv" | tee "$out/peers.txt"
python3 bench/compare.py "$out/cujit.csv" "$out/peers.csv" --out "$out/ratios.csv" | tee "$out/ratios.txt"
