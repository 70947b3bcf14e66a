#!/usr/bin/env python3
"""Joins cujit-bench's CSV with bench/peers.py's CSV (same shapes, same run) and
prints cujit time / peer time per shape, with geometric means over the grid.
A ratio below 1 means cujit is faster.

With --warm (a second process on the warm cache), the kernel times compared
are that process's: the first process times each shape right after tuning
it, with the GPU just out of a burst of load, and measured the same kernels
5-13% slower (docs/perf-log.md). Its first-call times are printed too.
With --default, how the untuned default config compares with the tuned one
(time ratio, above 1: the default is slower). With --gemm (gemm_rate.py's
CSV, same run), each D=128 S>=4k non-causal shape's TFLOP/s as a fraction of
the bf16 matmul rate.

Usage: compare.py CUJIT_CSV PEERS_CSV [--warm CSV] [--default CSV] [--gemm CSV] [--out RATIOS_CSV]
"""
import csv
import math
import sys


def key(row):
    return (row["tag"], int(row["B"]), int(row["H"]), int(row["S"]), int(row["D"]), row["causal"] == "True",
            row["dtype"])


def main():
    args = sys.argv[1:]
    options = {}
    for flag in ("--out", "--warm", "--default", "--gemm"):
        if flag in args:
            i = args.index(flag)
            options[flag] = args[i + 1]
            del args[i:i + 2]
    out_path = options.get("--out")
    cujit_csv, peers_csv = args[:2]
    ours = {key(r): r for r in csv.DictReader(open(cujit_csv))}
    warm = {key(r): r for r in csv.DictReader(open(options["--warm"]))} if "--warm" in options else {}
    timed = {k: warm.get(k, r) for k, r in ours.items()}  # the kernel times compared
    peers = {}
    for r in csv.DictReader(open(peers_csv)):
        peers.setdefault(key(r), {})[r["impl"]] = r
    # The peers the CSV has, in this order (bench/peers.py times SDPA's backends;
    # an older peers CSV may have "triton" as well).
    present = {impl for by_impl in peers.values() for impl in by_impl}
    impls = [i for i in ("flash", "cudnn", "efficient", "triton") if i in present]
    print(f"{'tag':10} {'B':>3} {'H':>3} {'S':>6} {'D':>4} {'c':>2} {'dtype':>8} | {'cujit us':>9} {'TFLOP/s':>7} | "
          + " ".join(f"{'/' + i:>8}" for i in impls) + " | variant")
    logs = {i: {} for i in impls}
    rows = []
    for k, r in timed.items():
        us = float(r["us"])
        cells, out = [], dict(tag=k[0], B=k[1], H=k[2], S=k[3], D=k[4], causal=k[5], dtype=k[6], cujit_us=us)
        for i in impls:
            p = peers.get(k, {}).get(i)
            peer_us = float(p["us"]) if p and p["us"] not in ("", "nan") else float("nan")
            ratio = us / peer_us if peer_us == peer_us and peer_us > 0 else float("nan")
            out[f"ratio_{i}"] = ratio
            cells.append(f"{ratio:8.3f}")
            if ratio == ratio and k[0] == "grid":
                logs[i].setdefault(k[4], []).append(math.log(ratio))
        rows.append(out)
        print(f"{k[0]:10} {k[1]:3} {k[2]:3} {k[3]:6} {k[4]:4} {int(k[5]):2} {k[6]:>8} | {us:9.1f} "
              f"{float(r['tflops']):7.0f} | " + " ".join(cells) + f" | {r['variant']}")
    print("geometric mean of cujit/peer time over the fp16 grid (below 1: cujit faster):")
    for i in impls:
        parts = []
        all_logs = []
        for d in sorted(logs[i]):
            parts.append(f"D={d}: {math.exp(sum(logs[i][d]) / len(logs[i][d])):.3f}")
            all_logs += logs[i][d]
        if all_logs:
            parts.append(f"all: {math.exp(sum(all_logs) / len(all_logs)):.3f}")
        print(f"  vs {i:7} " + ", ".join(parts))
    if "--gemm" in options:
        gemm = {r["dtype"]: float(r["tflops"]) for r in csv.DictReader(open(options["--gemm"]))}
        bf16 = gemm["bfloat16"]
        print(f"fraction of the bf16 matmul rate ({bf16:.0f} TFLOP/s, same run), D=128 S>=4k non-causal:")
        for k, r in timed.items():
            if k[4] == 128 and k[3] >= 4096 and not k[5]:
                print(f"  {k[0]:10} S={k[3]:6} {k[6]:>8}: {float(r['tflops']):5.0f} TFLOP/s = {float(r['tflops']) / bf16:.3f}")
    if "--warm" in options or "--default" in options:
        default = {key(r): r for r in csv.DictReader(open(options["--default"]))} if "--default" in options else {}
        print("first call (compile + tune, or load) in ms, and the untuned default config's time / tuned time:")
        print(f"{'tag':10} {'S':>6} {'D':>4} {'c':>2} | {'cold ms':>8} {'warm ms':>8} | {'default/tuned':>13} | default variant")
        worst = 0.0
        for k, r in ours.items():
            w = warm.get(k)
            d = default.get(k)
            ratio = float(d["us"]) / float(timed[k]["us"]) if d else float("nan")
            if ratio == ratio and k[0] == "grid":
                worst = max(worst, ratio)
            print(f"{k[0]:10} {k[3]:6} {k[4]:4} {int(k[5]):2} | {float(r['first_call_ms']):8.0f} "
                  f"{float(w['first_call_ms']) if w else float('nan'):8.1f} | {ratio:13.3f} | {d['variant'] if d else ''}")
        if default:
            print(f"worst default/tuned over the grid: {worst:.3f}")
    if out_path and rows:
        with open(out_path, "w") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
