#!/usr/bin/env bash
# On a GPU machine: runs cujit-bench and the peer benchmark in one command
# and prints cujit / peer ratios on the PERFORMANCE.md grid, plus cujit's
# cold-start figures (first call on an empty cache, then in a new process on
# the warm cache), how close the untuned default config comes to the tuned one,
# the host overhead of a call (host-overhead.txt), small shapes next to the
# floor of the timing method (latency.txt) and the matmul rate (gemm.txt);
# then cujit and the SDPA backends timed back to back in one process
# (interleaved.txt: bench/interleaved.py, through bindings/python).
# Usage: bench/run_compare.sh [--quick] [OUTDIR]
# The peers are PyTorch SDPA's backends (bench/peers.py); PEERS names another
# script with the same CSV columns.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=""; [[ ${1:-} == --quick ]] && { quick="--quick"; shift; }
out=${1:-bench-out}
mkdir -p "$out"
peers=${PEERS:-bench/peers.py}
build=${CUJIT_BUILD_DIR:-build}
[[ -x $build/tools/cujit-bench ]] || scripts/build
export CUJIT_CACHE_DIR=$(mktemp -d /tmp/cujit-bench-cache-XXXXXX)
# Cold: every first call compiles and tunes.
"$build/tools/cujit-bench" $quick --csv "$out/cujit.csv" | tee "$out/cujit.txt"
# Warm: a new process on the same cache compiles and tunes nothing.
"$build/tools/cujit-bench" $quick --csv "$out/cujit-warm.csv" > "$out/cujit-warm.txt"
# Untuned: the heuristic default config of each shape.
CUJIT_AUTOTUNE=off "$build/tools/cujit-bench" $quick --csv "$out/cujit-default.csv" > "$out/cujit-default.txt"
# Host time per jit::attention call next to a bare launch (warm cache: nothing to compile or tune).
"$build/tools/cujit-bench" --host-overhead --host-overhead-csv "$out/host-overhead.csv" > "$out/host-overhead.txt"
# Small shapes next to empty kernels launched and timed the same way (the floor of the method).
"$build/tools/cujit-bench" --latency --latency-csv "$out/latency.csv" > "$out/latency.txt"
PYTHONUNBUFFERED=1 python3 "$peers" $quick --csv "$out/peers.csv" | tee "$out/peers.txt"
python3 bench/gemm_rate.py --csv "$out/gemm.csv" | tee "$out/gemm.txt"
python3 bench/compare.py "$out/cujit.csv" "$out/peers.csv" --warm "$out/cujit-warm.csv" \
  --default "$out/cujit-default.csv" --gemm "$out/gemm.csv" --out "$out/ratios.csv" | tee "$out/ratios.txt"
# The same comparison in one process, alternating (cujit through bindings/python).
PYTHONUNBUFFERED=1 python3 bench/interleaved.py $quick --csv "$out/interleaved.csv" | tee "$out/interleaved.txt"
