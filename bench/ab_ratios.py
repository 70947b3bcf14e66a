#!/usr/bin/env python3
"""New/old time ratios from scripts/gpu-ab's rounds. Reads DIR/ab-<round>-<new|old>.csv,
the CSV each run of the command wrote (gpu-ab gives the command AB_ROUND, AB_SIDE
and AB_OUT, e.g. `cujit-serving-bench --csv "$AB_OUT/ab-$AB_ROUND-$AB_SIDE.csv"`), in
either of two shapes:
  cujit-serving-bench --csv: part,shape,dtype,page_size,metric,value,...,variant;
    the rows whose metric is time_us, and beside them each round's fraction_of_copy;
  cujit-bench's CSV: tag,B,H,S,D,causal,dtype,impl,us,...,variant; the us column.
For every timed row present in both trees, prints each round's time in each, the
geometric mean of new/old over the rounds (below 1: the new tree is faster), in how
many rounds the new tree was faster, and where the two trees ran different variants
(their tuners' picks: `gpu-ab -s` gives both one tree's). Exits 1 if DIR holds no
rounds of both trees, or a CSV is neither shape.
Usage: ab_ratios.py DIR"""
import csv
import glob
import math
import os
import re
import sys

SERVING_KEY = ("part", "shape", "dtype", "page_size")
BENCH_VALUES = {"us", "tflops", "variant", "relerr"}  # and every *_us and *_ms column (--dtype fp8: sixteen_bit_us)


def serving_label(key):
    part, shape, dtype, page = key
    return " ".join(x for x in (part, shape, dtype, f"page {page}" if page != "0" else "") if x)


def read_round(path):
    """{label: (time_us, fraction_of_copy or None, variant)} from one run's CSV."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return {}
    columns = rows[0].keys()
    out = {}
    if "metric" in columns:
        fractions = {tuple(r[c] for c in SERVING_KEY): float(r["value"]) for r in rows
                     if r["metric"] == "fraction_of_copy"}
        for r in rows:
            if r["metric"] == "time_us":
                key = tuple(r[c] for c in SERVING_KEY)
                out[serving_label(key)] = (float(r["value"]), fractions.get(key), r.get("variant", ""))
    elif "us" in columns:
        for r in rows:
            key = [r[c] for c in columns if c not in BENCH_VALUES and not c.endswith(("_us", "_ms"))]
            out[" ".join(key)] = (float(r["us"]), None, r.get("variant", ""))
    else:
        raise ValueError(f"{path}: neither cujit-serving-bench's nor cujit-bench's CSV")
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__.split("Usage: ")[1].strip(), file=sys.stderr)
        return 2
    rounds = {}
    for path in glob.glob(os.path.join(sys.argv[1], "ab-*-*.csv")):
        m = re.fullmatch(r"ab-(\d+)-(new|old)\.csv", os.path.basename(path))
        if m:
            try:
                rounds.setdefault(int(m.group(1)), {})[m.group(2)] = read_round(path)
            except (ValueError, KeyError) as e:
                print(f"ab_ratios: {e}", file=sys.stderr)
                return 1
    paired = [rounds[r] for r in sorted(rounds) if len(rounds[r]) == 2]
    if not paired:
        print(f"ab_ratios: no round in {sys.argv[1]} has both ab-N-new.csv and ab-N-old.csv", file=sys.stderr)
        return 1
    keys = [k for k in paired[0]["new"] if all(k in p["new"] and k in p["old"] for p in paired)]
    print(f"{len(paired)} rounds; new / old time, geometric mean over the rounds (below 1: new is faster)")
    for label in keys:
        new = [p["new"][label] for p in paired]
        old = [p["old"][label] for p in paired]
        ratio = math.exp(sum(math.log(n[0] / o[0]) for n, o in zip(new, old)) / len(paired))
        faster = sum(n[0] < o[0] for n, o in zip(new, old))
        print(f"{label}: {ratio:.3f}, faster in {faster} of {len(paired)}; new us {' '.join(f'{n[0]:.1f}' for n in new)}"
              f"; old us {' '.join(f'{o[0]:.1f}' for o in old)}")
        if all(n[1] is not None for n in new + old):
            print(f"    fraction of copy: new {' '.join(f'{n[1]:.3f}' for n in new)}"
                  f"; old {' '.join(f'{o[1]:.3f}' for o in old)}")
        variants = {n[2] for n in new}, {o[2] for o in old}
        if variants[0] != variants[1]:
            print(f"    variants differ: new {', '.join(sorted(variants[0]))}; old {', '.join(sorted(variants[1]))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
