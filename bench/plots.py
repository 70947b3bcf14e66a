#!/usr/bin/env python3
"""Figures from the benchmarks' CSV files (PNG, matplotlib's Agg backend).

    python3 bench/plots.py --tflops interleaved.csv --serving cujit-serving.csv --first-call first_call.json

--tflops CSV...   TFLOP/s against sequence length, cujit and each peer, one
                  panel per head dim and causal or not (tflops.png). Any CSV
                  with the columns B,H,S,D,causal,dtype,impl and us (or
                  tflops): bench/interleaved.py --csv (cujit and the peers
                  timed in one process), or cujit-bench --csv together with
                  bench/peers.py --csv. Only the "grid" shapes (16k tokens a
                  batch) in float16 are drawn where the CSV has them.
--serving CSV     cujit-serving-bench --csv: each decode's K+V bytes/time as a
                  fraction of the copy rate against its KV length, contiguous
                  and paged (decode_bandwidth.png).
--first-call PATH first-call latency per shape (first_call.png): a JSON list
                  of objects, each one shape ("label", or B, H, S, D,
                  causal) whose numbers named *_ms are drawn as bars (e.g.
                  cold_ms, background_ms, tuned_ready_ms); a cujit-bench
                  CSV (its first_call_ms column); or the table `cujit-bench
                  --first-call` prints (any other file: first call in each
                  mode, and when the tuned config serves in background mode).
                  Without it the figure is skipped, and the output says so.
--out DIR         where the PNGs go (default docs/img).

The measurements are the benchmarks' own; this script only reads and draws.
"""
import argparse
import csv
import json
import math
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DPI = 100  # with the figure sizes below: PNGs of roughly 50-100 KB
FRACTION_BAR = 0.85  # cujit-serving-bench's bar for a decode's fraction of the copy rate


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def is_true(text):
    return str(text).strip().lower() in ("1", "true")


def dtype_name(text):
    return {"float16": "fp16", "half": "fp16", "bfloat16": "bf16"}.get(text, text)


def tflops_of(row):
    """The row's TFLOP/s: its tflops column, else 4*B*H*S^2*D (halved when causal) over its time."""
    if row.get("tflops") not in (None, "", "nan"):
        return float(row["tflops"])
    b, h, s, d = (int(row[k]) for k in ("B", "H", "S", "D"))
    flops = 4 * b * h * s * s * d / (2 if is_true(row["causal"]) else 1)
    return flops / (float(row["us"]) * 1e-6) / 1e12


def tflops_series(rows):
    """{(D, causal): {impl: [(S, TFLOP/s), ...] sorted by S}} over the grid's float16 shapes."""
    if any(r.get("tag") == "grid" for r in rows):
        rows = [r for r in rows if r.get("tag") == "grid"]
    rows = [r for r in rows if dtype_name(r.get("dtype", "fp16")) == "fp16"]
    # interleaved.py's "matmul" rows time a GEMM as a reference rate: no attention FLOPs to plot.
    rows = [r for r in rows if r.get("impl") != "matmul"]
    series = {}
    for r in rows:
        value = tflops_of(r)
        if not math.isfinite(value):  # a peer that could not run the shape
            continue
        key = (int(r["D"]), is_true(r["causal"]))
        series.setdefault(key, {}).setdefault(r["impl"], []).append((int(r["S"]), value))
    return {k: {impl: sorted(points) for impl, points in by_impl.items()} for k, by_impl in sorted(series.items())}


def plot_tflops(series, path):
    panels = list(series)
    cols = 2
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(10, 3.6 * rows), squeeze=False)
    for ax, (d, causal) in zip(axes.flat, panels):
        for impl, points in sorted(series[(d, causal)].items(), key=lambda kv: kv[0] != "cujit"):
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o", linewidth=2.5 if impl == "cujit" else 1.5, label=impl)
        ax.set_xscale("log", base=2)
        ax.set_title(f"D = {d}, {'causal' if causal else 'not causal'}")
        ax.set_xlabel("sequence length")
        ax.set_ylabel("TFLOP/s")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle("Attention forward, fp16, 16k tokens per batch")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def decode_points(rows):
    """{label: [(Sk, fraction of the copy rate, shape), ...]}: contiguous decodes as measured, paged ones as
    the contiguous fraction scaled by contiguous time / paged time (same shape, same run). FP8 caches
    ("fp8 KV" in the shape) are their own series, contiguous only."""
    fraction, time = {}, {}
    for r in rows:
        if r["part"] not in ("decode", "paged"):
            continue
        page = int(r["page_size"])
        if r["metric"] == "fraction_of_copy":
            fraction[r["shape"]] = float(r["value"])
        elif r["metric"] == "time_us":
            time[(r["shape"], page)] = float(r["value"])
    points = {}
    for (shape, page), us in sorted(time.items(), key=lambda kv: kv[0][1]):
        if shape not in fraction or (shape, 0) not in time:
            continue
        if "fp8 KV" in shape:
            if page != 0:
                continue
            label = "FP8 cache, contiguous"
        else:
            label = "contiguous" if page == 0 else f"paged, {page} keys a page"
        seq_k = int(re.search(r"Sk=(\d+)", shape).group(1))
        points.setdefault(label, []).append((seq_k, fraction[shape] * time[(shape, 0)] / us, shape))
    return {label: sorted(p) for label, p in points.items()}


def plot_decode(points, path):
    fig, ax = plt.subplots(figsize=(9, 4.8))
    for (label, p), marker in zip(points.items(), "osD^v"):
        ax.scatter([x for x, _, _ in p], [y for _, y, _ in p], marker=marker, s=40, label=label)
    for x, y, shape in points.get("contiguous", []):
        ax.annotate(shape.split(" Sk=")[0], (x, y), textcoords="offset points", xytext=(4, -10), fontsize=6)
    ax.axhline(FRACTION_BAR, color="gray", linestyle="--", linewidth=1, label=f"bar ({FRACTION_BAR})")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("KV length (keys per sequence)")
    ax.set_ylabel("K+V bytes / time, fraction of the copy rate")
    ax.set_title("Decode (Sq = 1) against the device-to-device copy rate")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def shape_label(record):
    if "label" in record:
        return str(record["label"])
    causal = " causal" if is_true(record.get("causal", "0")) else ""
    return f"B={record['B']} H={record['H']} S={record['S']} D={record['D']}{causal}"


def first_call_table_records(path):
    """Records of `cujit-bench --first-call`'s table: per shape, each mode's first call and when tuned serves."""
    by_shape = {}
    with open(path) as fh:
        for line in fh:
            parts = [p.split() for p in line.split("|")]
            if len(parts) < 3 or len(parts[0]) != 2 or len(parts[1]) != 2 or not parts[2]:
                continue
            (mode, shape), (first_ms, _), tuned_ms = parts[0], parts[1], parts[2][0]
            try:
                first, tuned = float(first_ms), float(tuned_ms)
            except ValueError:
                continue  # the header
            B, H, S, D, dtype, causal = shape.split(",")
            record = by_shape.setdefault(shape, dict(B=B, H=H, S=S, D=D, causal=causal))
            record[f"{mode}_first_call_ms"] = first
            if mode == "background":
                record["background_tuned_serves_ms"] = tuned
    return list(by_shape.values())


def first_call_groups(path):
    """(shape labels, {series name: [ms per shape]}) from a JSON list, a cujit-bench CSV or its --first-call table."""
    if not path.endswith((".csv", ".json")):
        records = first_call_table_records(path)
        names = list(dict.fromkeys(k for r in records for k in r if k.endswith("_ms")))
    elif path.endswith(".csv"):
        records = [dict(r, cujit_bench_first_call_ms=r["first_call_ms"]) for r in read_csv(path)]
        names = ["cujit_bench_first_call_ms"]
    else:
        with open(path) as fh:
            records = json.load(fh)
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise ValueError(f"{path}: expected a JSON list of objects, one per shape")
        names = list(dict.fromkeys(k for r in records for k, v in r.items()
                                   if k.endswith("_ms") and isinstance(v, (int, float))))
    if not records or not names:
        raise ValueError(f"{path}: no shapes with a number named *_ms")
    labels = [shape_label(r) for r in records]
    return labels, {n: [float(r[n]) if r.get(n) not in (None, "") else float("nan") for r in records] for n in names}


def plot_first_call(labels, groups, path):
    fig, ax = plt.subplots(figsize=(min(16, max(6, 0.6 * len(labels) + 3)), 4.8))
    width = 0.8 / len(groups)
    for i, (name, values) in enumerate(groups.items()):
        xs = [j + (i - (len(groups) - 1) / 2) * width for j in range(len(labels))]
        ax.bar(xs, values, width, label=name[:-3].replace("_", " "))
    ax.set_yscale("log")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("ms (log scale)")
    ax.set_title("First call of a new shape class")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tflops", nargs="+", default=[], metavar="CSV")
    ap.add_argument("--serving", metavar="CSV")
    ap.add_argument("--first-call", metavar="PATH")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "img"))
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    written = []
    if args.tflops:
        series = tflops_series([r for path in args.tflops for r in read_csv(path)])
        if not series:
            raise SystemExit(f"plots: no float16 rows with B,H,S,D,causal,impl in {' '.join(args.tflops)}")
        written.append(os.path.join(args.out, "tflops.png"))
        plot_tflops(series, written[-1])
    else:
        print("plots: TFLOP/s figure skipped: no --tflops CSV (bench/interleaved.py --csv)")
    if args.serving:
        points = decode_points(read_csv(args.serving))
        if not points:
            raise SystemExit(f"plots: no decode rows (part decode, metrics time_us and fraction_of_copy) in "
                             f"{args.serving}")
        written.append(os.path.join(args.out, "decode_bandwidth.png"))
        plot_decode(points, written[-1])
    else:
        print("plots: decode bandwidth figure skipped: no --serving CSV (cujit-serving-bench --csv)")
    if args.first_call:
        labels, groups = first_call_groups(args.first_call)
        written.append(os.path.join(args.out, "first_call.png"))
        plot_first_call(labels, groups, written[-1])
    else:
        print("plots: first-call figure skipped: no --first-call data (a JSON list of shapes with *_ms numbers, "
              "or cujit-bench's CSV)")
    for path in written:
        print(f"wrote {os.path.normpath(path)} ({os.path.getsize(path) // 1024} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
