#!/usr/bin/env python3
"""The GPU's dense matmul rate, measured as the peers are (triton's do_bench,
median, L2 flushed): a large torch.matmul in bf16 and fp16, and
torch._scaled_mm in e4m3 (bf16 out, per-tensor scales) where the GPU has
FP8 tensor cores. Issue 3's target for D=128 S>=4k attention is a fraction
of the bf16 rate measured in the same run; FP8 attention's (issue 20) a
fraction of the e4m3 one. Usage: gemm_rate.py [--csv PATH]
"""
import csv
import sys

import torch
import triton


def main():
    csv_path = sys.argv[sys.argv.index("--csv") + 1] if "--csv" in sys.argv else "gemm.csv"
    n = 8192
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        ms = triton.testing.do_bench(lambda: a @ b, warmup=25, rep=200, return_mode="median")
        tflops = 2 * n ** 3 / (ms * 1e-3) / 1e12
        name = str(dtype).split(".")[-1]
        print(f"matmul {n}x{n}x{n} {name}: {ms * 1000:.1f} us, {tflops:.0f} TFLOP/s")
        rows.append(dict(dtype=name, n=n, us=ms * 1000, tflops=tflops))
    if torch.cuda.get_device_capability() >= (8, 9):
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
        one = torch.tensor(1.0, device="cuda")
        ms = triton.testing.do_bench(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                                     warmup=25, rep=200, return_mode="median")
        tflops = 2 * n ** 3 / (ms * 1e-3) / 1e12
        print(f"_scaled_mm {n}x{n}x{n} e4m3: {ms * 1000:.1f} us, {tflops:.0f} TFLOP/s")
        rows.append(dict(dtype="e4m3", n=n, us=ms * 1000, tflops=tflops))
    with open(csv_path, "w") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
