#!/usr/bin/env python3
"""The peers cujit is compared with: PyTorch SDPA's fused attention backends
(flash, efficient, cudnn), each forced in turn, on cujit-bench's grid.

Each is timed with triton.testing.do_bench (25 ms of warm-up, 100 ms of
repetitions, the L2 cache cleared before each, CUDA events, the median), and
checked against float32 SDPA first: a relative error above 2e-2 is flagged.
A backend that cannot run a shape gets a NaN time and the reason.

    python3 bench/peers.py [--quick] [--csv PATH]

Prints a table and writes CSV (default peers.csv) with the columns
tag,B,H,S,D,causal,dtype,impl,us,tflops,relerr, one row per shape and
backend, which bench/compare.py joins with cujit-bench's CSV. Needs a GPU,
torch and triton.
"""
import argparse
import csv
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION}
TOLERANCE = 2e-2


def shapes(quick):
    """(tag, B, H, S, D, causal, dtype), as tools/cujit_bench.cpp's grid(): the
    seed shapes, then 16k tokens per batch at hidden size 2048, one bf16 shape
    and one at D = 256."""
    out = [("seed001", 1, 16, 1024, 64, False, torch.float16), ("seed003", 2, 8, 256, 64, False, torch.float16),
           ("seed002", 32, 8, 128, 64, False, torch.float16), ("seed002", 8, 8, 512, 64, False, torch.float16)]
    for d in (64, 128):
        for s in ((1024, 4096, 16384) if quick else (512, 1024, 2048, 4096, 8192, 16384)):
            for causal in (False, True):
                out.append(("grid", 16384 // s, 2048 // d, s, d, causal, torch.float16))
    out.append(("grid-bf16", 4, 16, 4096, 128, False, torch.bfloat16))
    out.append(("d256", 2, 8, 8192, 256, False, torch.float16))
    return out


def time_backend(backend, q, k, v, causal, reference):
    """(median us, relative error) of SDPA restricted to `backend`; (nan, why) if it cannot run."""
    def call():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    try:
        with sdpa_kernel(backend):
            out = call()
            error = ((out.float() - reference).norm() / reference.norm()).item()
            return do_bench(call, warmup=25, rep=100, return_mode="median") * 1e3, error
    except RuntimeError as e:
        return float("nan"), str(e).splitlines()[0][:60]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="S = 1k, 4k, 16k only")
    ap.add_argument("--csv", default="peers.csv")
    args = ap.parse_args()
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__, "cudnn",
          torch.backends.cudnn.version(), flush=True)
    print(f"{'tag':10} {'B':>3} {'H':>3} {'S':>6} {'D':>4} {'c':>2} {'dtype':>8} | "
          + " ".join(f"{name:>16}" for name in BACKENDS))
    rows = []
    for tag, b, h, s, d, causal, dtype in shapes(args.quick):
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3))
        reference = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        dtype_name = str(dtype).split(".")[-1]
        cells, problems = [], []
        for name, backend in BACKENDS.items():
            us, error = time_backend(backend, q, k, v, causal, reference)
            tflops = flops / (us * 1e-6) / 1e12 if us == us else float("nan")
            cells.append(f"{us:8.1f}us {tflops:4.0f}T")
            if not isinstance(error, float) or not error <= TOLERANCE:
                problems.append(f"{name}: {error}")
            rows.append(dict(tag=tag, B=b, H=h, S=s, D=d, causal=causal, dtype=dtype_name, impl=name, us=us,
                             tflops=tflops, relerr=error))
        print(f"{tag:10} {b:3} {h:3} {s:6} {d:4} {int(causal):2} {dtype_name:>8} | " + " ".join(cells)
              + (f"  FAILED or WRONG: {'; '.join(problems)}" if problems else ""), flush=True)
        del q, k, v, reference
    with open(args.csv, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.csv}")


if __name__ == "__main__":
    main()
