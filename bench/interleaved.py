"""cujit against SDPA's cuDNN (and flash) backend in one process, interleaved.

Each shape of the PERFORMANCE.md grid is timed in rounds; every round times
cujit and each peer back to back (alternating who goes first) with the same
method as bench/peers.py (triton.testing.do_bench: L2 cleared
before each repetition, CUDA events, median). Clocks and temperature drift
between the two, or between runs, then move both sides of a ratio alike.
Prints, per shape, the median time of each and cujit/peer per round. At
D = 128, S >= 4k, non-causal, a bf16 8192^3 matmul (bench/gemm_rate.py's)
joins the rounds, and cujit's TFLOP/s as a fraction of its rate is printed
(issue 3's target is 0.85).

    python3 bench/interleaved.py [--quick] [--rounds N] [--peers cudnn,flash] [--csv PATH]

Needs a GPU, torch, triton and a cujit build (bindings/python/cujit_torch.py
says where it looks for the library). cujit tunes each new shape class on
its first call, before the rounds.
"""
import argparse
import contextlib
import csv
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
import cujit_torch  # noqa: E402

GEMM_N = 8192
DTYPE_NAMES = {torch.float16: "fp16", torch.bfloat16: "bf16"}
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def grid(quick):
    """(tag, B, H, S, D, causal, dtype): as peers.py, 16k tokens per batch, hidden 2048."""
    shapes = [("small", 1, 16, 1024, 64, False, torch.float16), ("small", 2, 8, 256, 64, False, torch.float16)]
    for d in (64, 128):
        for s in ((1024, 4096, 16384) if quick else (512, 1024, 2048, 4096, 8192, 16384)):
            for causal in (False, True):
                shapes.append(("grid", 16384 // s, 2048 // d, s, d, causal, torch.float16))
    shapes.append(("grid-bf16", 4, 16, 4096, 128, False, torch.bfloat16))
    return shapes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="S = 1k, 4k, 16k only")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--peers", default="cudnn,flash")
    ap.add_argument("--shape", action="append", default=[], help="B,H,S,D,dtype,causal instead of the grid")
    ap.add_argument("--inputs", choices=("normal", "uniform"), default="normal",
                    help="q, k, v from N(0, 1) (as peers.py) or U(-1, 1) (as cujit-bench before it matched peers.py)")
    ap.add_argument("--csv", default=None)
    args = ap.parse_args()
    peers = args.peers.split(",")
    shapes = grid(args.quick)
    if args.shape:
        shapes = []
        for text in args.shape:
            b, h, s, d, dt, c = text.split(",")
            by_name = {n: t for t, n in DTYPE_NAMES.items()}
            shapes.append(("custom", int(b), int(h), int(s), int(d), c == "1", by_name[dt]))
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__, "cudnn",
          torch.backends.cudnn.version(), flush=True)
    print(f"{'tag':9} {'B':>3} {'H':>3} {'S':>6} {'D':>4} {'c':>2} {'dt':>5} | {'cujit us':>9} "
          + " ".join(f"{p + ' us':>9} {'ratio':>6} {'per round':>17}" for p in peers) + " | variant")
    rows, logs = [], {p: [] for p in peers}
    matmul_inputs = None
    for tag, b, h, s, d, causal, dtype in shapes:
        torch.manual_seed(0)
        if args.inputs == "normal":
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3))
        else:
            q, k, v = (torch.rand(b, h, s, d, device="cuda", dtype=dtype) * 2 - 1 for _ in range(3))
        out = torch.empty_like(q)
        fns = {"cujit": lambda: cujit_torch.attention(q, k, v, causal=causal, out=out)}
        for p in peers:
            fns[p] = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        # Correctness first: each against float32 SDPA on a slice of heads
        # (the whole problem's float32 scores would not fit at S = 16k).
        want = F.scaled_dot_product_attention(q[:1, :2].float(), k[:1, :2].float(), v[:1, :2].float(),
                                              is_causal=causal)
        errors = {}
        for name, fn in fns.items():
            with backend(name):
                got = fn()[:1, :2].float()
            errors[name] = ((got - want).norm() / want.norm()).item()
        variant = cujit_torch.plan(q, k, v, causal=causal)
        with_matmul = d == 128 and not causal and s >= 4096
        if with_matmul:
            if matmul_inputs is None:
                matmul_inputs = [torch.randn(GEMM_N, GEMM_N, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
            a, bm = matmul_inputs
            fns["matmul"] = lambda: a @ bm
        times = {name: [] for name in fns}
        for r in range(args.rounds):
            order = list(fns) if r % 2 == 0 else list(fns)[::-1]
            for name in order:
                with backend(name):  # entered once per measurement, as peers.py does
                    times[name].append(do_bench(fns[name], warmup=25, rep=100, return_mode="median") * 1e3)
        med = {name: statistics.median(t) for name, t in times.items()}
        cells = []
        for p in peers:
            per_round = [c / x for c, x in zip(times["cujit"], times[p])]
            ratio = med["cujit"] / med[p]
            logs[p].append(math.log(ratio))
            cells.append(f"{med[p]:9.1f} {ratio:6.3f} {min(per_round):8.3f}-{max(per_round):.3f}")
        if with_matmul:
            attn_flops = 4 * b * h * s * s * d
            of_matmul = [(attn_flops / c) / (2 * GEMM_N ** 3 / m) for c, m in zip(times["cujit"], times["matmul"])]
            cells.append(f"of matmul {statistics.median(of_matmul):.3f} ({min(of_matmul):.3f}-{max(of_matmul):.3f}, "
                         f"matmul {2 * GEMM_N ** 3 / med['matmul'] / 1e6:.0f} TFLOP/s)")
        bad = {n: round(e, 4) for n, e in errors.items() if not e < 2e-2}
        print(f"{tag:9} {b:3} {h:3} {s:6} {d:4} {int(causal):2} {DTYPE_NAMES[dtype]:>5} | {med['cujit']:9.1f} "
              + " ".join(cells) + f" | {variant.split('/')[-1]}" + (f"  WRONG {bad}" if bad else ""), flush=True)
        for name in fns:
            rows.append(dict(tag=tag, B=b, H=h, S=s, D=d, causal=int(causal), dtype=DTYPE_NAMES[dtype], impl=name,
                             us=med[name], us_rounds=" ".join(f"{t:.2f}" for t in times[name]),
                             relerr=errors.get(name, float("nan")), variant=variant if name == "cujit" else ""))
        del q, k, v, out
    for p in peers:
        print(f"geomean cujit/{p}: {math.exp(sum(logs[p]) / len(logs[p])):.3f} over {len(logs[p])} shapes")
    if args.csv:
        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


def backend(name):
    """SDPA restricted to the peer's backend; nothing for cujit."""
    return sdpa_kernel(BACKENDS[name]) if name in BACKENDS else contextlib.nullcontext()


if __name__ == "__main__":
    main()
