"""Decode plans with forced split counts, against the copy rate of the same run.

For each decode shape (Sq = 1, every sequence Sk keys, a contiguous cache),
makes a cujit.KvPlan with num_splits = 0 (the plan's choice) and each count
given, and times plan.run as cujit-serving-bench does: L2 scrubbed by a read
before each run, CUDA events, median. Prints the time, K+V bytes / time as a
fraction of a 1 GiB device-to-device copy's rate (bytes read + written), the
split count the plan took and its variant. docs/perf-log.md ("decode v4")
has what it showed: where the combine pass and the cluster merge pay off.

    python3 bench/decode_splits.py [--splits 1,2,4,8,16,32] [--shape mqa] [--reps 40]

Needs a GPU, torch and a cujit build (bindings/python/cujit).
"""

import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
import cujit  # noqa: E402

# name: (B, Hq, Hkv, Sk, D, q dtype, cache dtype or None for q's)
SHAPES = {
    "mqa": (4, 32, 1, 32768, 128, torch.bfloat16, None),
    "b128_hkv1": (128, 8, 1, 2048, 128, torch.float16, None),
    "b8_8k": (8, 32, 8, 8192, 128, torch.float16, None),
    "fp8_b8_8k": (8, 32, 8, 8192, 128, torch.float16, torch.float8_e4m3fn),
    "fp8_d64_b32": (32, 16, 4, 8192, 64, torch.float16, torch.float8_e4m3fn),
    "small": (1, 32, 8, 4096, 128, torch.float16, None),
    "long": (1, 64, 8, 131072, 128, torch.bfloat16, None),
}


def median_us(fn, scrub, reps):
    for _ in range(5):
        fn()
    times = []
    for _ in range(reps):
        scrub.sum(dtype=torch.int32)  # a read: leaves no dirty lines for the timed run to write back
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", default="1,2,4,8,16,32", help="forced split counts, besides the plan's choice")
    parser.add_argument("--shape", action="append", choices=sorted(SHAPES), help="shapes to time (default: all)")
    parser.add_argument("--reps", type=int, default=40)
    args = parser.parse_args()
    dev = torch.device("cuda")
    scrub = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    src = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    copy_rate = 2 * src.numel() / median_us(lambda: dst.copy_(src), scrub, 10) / 1e6  # TB/s
    del src, dst
    print(f"{torch.cuda.get_device_name()}: copy {copy_rate:.3f} TB/s")
    torch.manual_seed(0)
    for name in args.shape or list(SHAPES):
        b, hq, hkv, sk, d, dtype, kv_dtype = SHAPES[name]
        q = torch.randn(b, 1, hq, d, device=dev, dtype=dtype)
        k = torch.randn(b, sk, hkv, d, device=dev).to(kv_dtype or dtype)
        v = torch.randn(b, sk, hkv, d, device=dev).to(kv_dtype or dtype)
        lens = torch.full((b,), sk, dtype=torch.int32, device=dev)
        descale = torch.ones(b, hkv, device=dev) if kv_dtype is not None else None
        out = torch.empty_like(q)
        kv_bytes = 2 * k.numel() * k.element_size()
        for splits in [0] + [int(s) for s in args.splits.split(",") if s]:
            plan = cujit.KvPlan(batch=b, heads_q=hq, heads_kv=hkv, head_dim=d, max_seq_k=sk, dtype=dtype,
                                kv_dtype=kv_dtype, num_splits=splits)
            us = median_us(lambda: plan.run(q, k, v, cache_seqlens=lens, k_descale=descale, v_descale=descale,
                                            out=out), scrub, args.reps)
            print(f"{name:12s} splits {splits:3d} -> {plan.num_splits:3d} {us:9.2f} us  "
                  f"{kv_bytes / us / 1e6 / copy_rate:.3f} of copy  {plan.variant}", flush=True)


if __name__ == "__main__":
    main()
