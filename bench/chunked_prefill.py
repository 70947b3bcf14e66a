"""A chunked prefill's attention over a KV cache: cujit's routes and PyTorch SDPA.

Each of B sequences has a prefix of P cached keys and a new chunk of C query
rows whose keys are already appended (L = P + C keys), causal bottom-right:
chunk row i sees keys 0 .. P + i. The same numbers are run five ways in one
process, timed in rounds with bench/peers.py's method (triton's do_bench: L2
cleared before each repetition, CUDA events, median), who goes first
alternating:
  - paged: cujit.attention_with_kvcache over page pools [pages, page, Hkv, D]
    with the sequences' pages shuffled (on sm_90a the sm90 prefill kernel
    for chunks of 128 rows or more, else the split-KV decode family);
  - cache: the same over a contiguous cache [B, L, Hkv, D];
  - dense: cujit.attention on [B, H, S, D] views of the contiguous cache,
    bottom_right=True (the prefill family: sm90 on sm_90a);
  - varlen: cujit.attention_varlen on the rows packed token-major
    (FlashAttention's varlen route for a chunk over a contiguous cache);
  - sdpa-<backend>: F.scaled_dot_product_attention with the lower-right
    causal bias (enable_gqa) under that backend, where it takes the call
    (flash: FlashAttention-2, whose causal mask is bottom-right).
Prints each median in us and TFLOP/s (the FLOPs of the visible pairs) and
each route's time over the dense kernel's, and checks every route's output
against the dense one.

    python3 bench/chunked_prefill.py [--batch 4] [--prefix 8192] [--chunk 512 2048]
        [--heads-q 32] [--heads-kv 8] [--head-dim 128] [--page-size 16] [--dtype bf16] [--rounds 3]

Needs a GPU, torch, triton and a cujit build (bindings/python).
"""

import argparse
import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
import cujit  # noqa: E402

SDPA_BACKENDS = {"sdpa-cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa-flash": SDPBackend.FLASH_ATTENTION,
                 "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION}


def paged_pools(k, v, page_size, seed=29):
    """k, v [B, L, Hkv, D] as pools [pages, page_size, Hkv, D] with the pages
    shuffled over the pool, and the int32 block table [B, pages_per_seq]."""
    b, length, hkv, d = k.shape
    per_seq = -(-length // page_size)
    pad = per_seq * page_size - length
    gen = torch.Generator(device="cpu").manual_seed(seed)
    order = torch.randperm(b * per_seq, generator=gen)
    table = order.view(b, per_seq).to(torch.int32).cuda()

    def pool(x):
        x = F.pad(x, (0, 0, 0, 0, 0, pad)).reshape(b * per_seq, page_size, hkv, d)
        out = torch.empty_like(x)
        out[order.cuda()] = x
        return out

    return pool(k), pool(v), table


def routes(args, chunk, dtype):
    b, hq, hkv, d, prefix = args.batch, args.heads_q, args.heads_kv, args.head_dim, args.prefix
    length = prefix + chunk
    q = torch.randn(b, chunk, hq, d, dtype=dtype, device="cuda")
    k = torch.randn(b, length, hkv, d, dtype=dtype, device="cuda")
    v = torch.randn(b, length, hkv, d, dtype=dtype, device="cuda")
    lens = torch.full((b,), length, dtype=torch.int32, device="cuda")
    k_pool, v_pool, table = paged_pools(k, v, args.page_size)
    cu_q = torch.arange(0, (b + 1) * chunk, chunk, dtype=torch.int32, device="cuda")
    cu_k = torch.arange(0, (b + 1) * length, length, dtype=torch.int32, device="cuda")
    qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, S, D] views
    fns = {
        "dense": lambda: cujit.attention(qh, kh, vh, causal=True, bottom_right=True).transpose(1, 2),
        "paged": lambda: cujit.attention_with_kvcache(q, k_pool, v_pool, cache_seqlens=lens, block_table=table),
        "cache": lambda: cujit.attention_with_kvcache(q, k, v, cache_seqlens=lens),
        "varlen": lambda: cujit.attention_varlen(q.view(b * chunk, hq, d), k.view(b * length, hkv, d),
                                                 v.view(b * length, hkv, d), cu_q, cu_k, chunk, length,
                                                 causal=True, bottom_right=True).view(b, chunk, hq, d),
    }
    bias = causal_lower_right(chunk, length)
    for name, backend in SDPA_BACKENDS.items():
        def run(backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(qh, kh, vh, attn_mask=bias, enable_gqa=True).transpose(1, 2)
        fns[name] = run
    return fns


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--prefix", type=int, default=8192)
    ap.add_argument("--chunk", type=int, nargs="+", default=[512, 2048])
    ap.add_argument("--heads-q", type=int, default=32)
    ap.add_argument("--heads-kv", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--dtype", choices=("fp16", "bf16"), default="bf16")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    # SDPA's reasons for refusing a backend, once per call: the failure below says it once.
    warnings.filterwarnings("ignore", category=UserWarning, module="torch.nn.attention")
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    print(f"device: {torch.cuda.get_device_name()} torch {torch.__version__}")
    for chunk in args.chunk:
        print(f"\nB={args.batch} prefix {args.prefix} + chunk {chunk}, Hq={args.heads_q} Hkv={args.heads_kv} "
              f"D={args.head_dim} {args.dtype}, page size {args.page_size}, causal bottom-right")
        fns = routes(args, chunk, dtype)
        want = fns["dense"]().float()
        for name in list(fns):
            try:
                got = fns[name]().float()
            except Exception as e:  # noqa: BLE001 (a peer that refuses the shape is reported, not fatal)
                print(f"{name:>15}: not available ({str(e).splitlines()[0][:120]})")
                del fns[name]
                continue
            err = ((got - want).norm() / want.norm()).item()
            if not err < 2e-2:
                print(f"{name:>15}: relative L2 error {err:.2e} against dense: not timed")
                del fns[name]
        times = {name: [] for name in fns}
        for r in range(args.rounds):
            for name in (list(fns) if r % 2 == 0 else list(reversed(fns))):
                times[name].append(do_bench(fns[name], warmup=25, rep=100, return_mode="median") * 1e3)
        median = {name: sorted(t)[len(t) // 2] for name, t in times.items()}
        pairs = args.batch * (chunk * args.prefix + chunk * (chunk + 1) / 2)
        flops = 4.0 * args.head_dim * args.heads_q * pairs
        for name in fns:
            print(f"{name:>15}: {median[name]:10.1f} us  {flops / median[name] * 1e-6:7.1f} TFLOP/s  "
                  f"{median[name] / median['dense']:.3f} of dense's time")


if __name__ == "__main__":
    main()
