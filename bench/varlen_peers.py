"""cujit's ragged batch against PyTorch SDPA on the same batch padded.

One mixed batch (64 sequences of 128..8192 rows by default, the seed of
cujit-varlen-bench) is run three ways in one process, timed in rounds with
the method of bench/peers.py (triton.testing.do_bench: L2 cleared before each
repetition, CUDA events, median), who goes first alternating:
  - cujit: cujit_torch.attention_varlen on the packed rows;
  - SDPA's cuDNN and flash backends on the batch padded to the longest
    sequence ([B, H, max, D], causal top-left: a sequence's own rows see only
    its own keys, the padding rows are computed and thrown away);
and prints each median and cujit / peer (issue 19's bar: below 1, faster).
Also checks that cujit's rows match the padded SDPA result.

    python3 bench/varlen_peers.py [--sequences 64] [--min-len 128] [--max-len 8192]
                                  [--heads-q 32] [--heads-kv 8] [--head-dim 128] [--rounds 3]

Needs a GPU, torch, triton and a cujit build (bindings/python/cujit_torch.py).
"""

import argparse
import os
import random
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
import cujit_torch  # noqa: E402

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def lengths(n, low, high, seed=19):
    rng = random.Random(seed)
    return [rng.randint(low, high) for _ in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sequences", type=int, default=64)
    ap.add_argument("--min-len", type=int, default=128)
    ap.add_argument("--max-len", type=int, default=8192)
    ap.add_argument("--heads-q", type=int, default=32)
    ap.add_argument("--heads-kv", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dtype", choices=("fp16", "bf16"), default="bf16")
    args = ap.parse_args()
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    hq, hkv, d = args.heads_q, args.heads_kv, args.head_dim
    lens = lengths(args.sequences, args.min_len, args.max_len)
    total, longest = sum(lens), max(lens)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
    q = torch.randn(total, hq, d, dtype=dtype, device="cuda")
    k = torch.randn(total, hkv, d, dtype=dtype, device="cuda")
    v = torch.randn(total, hkv, d, dtype=dtype, device="cuda")

    # The padded batch: [B, H, max, D], K/V heads repeated for SDPA.
    def pad(x, heads):
        out = torch.zeros(len(lens), longest, heads, d, dtype=dtype, device="cuda")
        start = 0
        for b, n in enumerate(lens):
            out[b, :n] = x[start:start + n]
            start += n
        return out.transpose(1, 2).contiguous()

    qp, kp, vp = pad(q, hq), pad(k, hkv), pad(v, hkv)
    kp = kp.repeat_interleave(hq // hkv, dim=1)
    vp = vp.repeat_interleave(hq // hkv, dim=1)
    out = torch.empty_like(q)

    print(f"device: {torch.cuda.get_device_name()} torch {torch.__version__} cudnn {torch.backends.cudnn.version()}")
    print(f"{len(lens)} sequences of {args.min_len}..{args.max_len} rows ({total} in all, padded to {longest}), "
          f"Hq={hq} Hkv={hkv} D={d} {args.dtype}, causal")

    fns = {"cujit": lambda: cujit_torch.attention_varlen(q, k, v, cu, cu, longest, longest, causal=True,
                                                         bottom_right=True, out=out)}
    for name, backend in BACKENDS.items():
        def run(backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(qp, kp, vp, is_causal=True)
        try:
            run()
            fns[name] = run
        except RuntimeError as e:
            print(f"{name}: not available here ({str(e).splitlines()[0]})")

    # The sequences' rows agree (padding rows are not compared).
    fns["cujit"]()
    with sdpa_kernel(BACKENDS["flash"] if "flash" in fns else BACKENDS["cudnn"]):
        ref = F.scaled_dot_product_attention(qp, kp, vp, is_causal=True)
    start, worst = 0, 0.0
    for b, n in enumerate(lens):
        got = out[start:start + n].transpose(0, 1).float()
        want = ref[b, :, :n].float()
        worst = max(worst, ((got - want).norm() / want.norm()).item())
        start += n
    print(f"cujit against padded SDPA: worst per-sequence relative L2 error {worst:.2e}")

    times = {name: [] for name in fns}
    for r in range(args.rounds):
        order = list(fns) if r % 2 == 0 else list(reversed(fns))
        for name in order:
            times[name].append(do_bench(fns[name], warmup=25, rep=100, return_mode="median") * 1e3)
    median = {name: sorted(t)[len(t) // 2] for name, t in times.items()}
    flops = 4.0 * d * hq * sum(n * (n + 1) / 2 for n in lens)
    for name in fns:
        print(f"{name:>6}: {median[name]:10.1f} us  {flops / median[name] * 1e-6:7.1f} TFLOP/s (sequences' FLOPs)")
    for name in fns:
        if name != "cujit":
            ratio = median["cujit"] / median[name]
            print(f"cujit / {name} padded: {ratio:.3f} ({'PASS' if ratio < 1 else 'MISS'}: bar below 1)")


if __name__ == "__main__":
    main()
