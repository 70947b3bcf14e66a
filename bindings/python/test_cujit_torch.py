"""The PyTorch binding on a GPU, against float32 SDPA on the same inputs:
dtypes, head dims, both causal alignments, GQA, a [B, S, H, D] view, the
LSE, an explicit scale, a side stream, and the errors it must raise.

    python3 bindings/python/test_cujit_torch.py   (needs a GPU, torch, and a build)
"""
import math
import os
import sys
import unittest

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cujit_torch  # noqa: E402


def reference(q, k, v, causal, bottom_right, scale):
    """float32 attention and LSE, with GQA heads repeated and an explicit mask."""
    q, k, v = q.float(), k.float(), v.float()
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if causal:
        sq, sk = q.shape[2], k.shape[2]
        offset = sk - sq if bottom_right else 0
        keep = torch.arange(sk, device=q.device)[None, :] <= torch.arange(sq, device=q.device)[:, None] + offset
        s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # rows that see no key are zeros
    return p @ v, lse


def rel_error(got, want):
    return ((got.float() - want).norm() / want.norm().clamp_min(1e-30)).item()


class Binding(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(int.from_bytes(os.urandom(4), "little"))

    def check(self, dtype, d, b=2, hq=4, hkv=2, sq=129, sk=300, causal=False, bottom_right=False, scale=None,
              bshd=False):
        with self.subTest(dtype=dtype, d=d, hq=hq, hkv=hkv, sq=sq, sk=sk, causal=causal, bottom_right=bottom_right,
                          bshd=bshd):
            if bshd:  # [B, S, H, D] storage, viewed as [B, H, S, D]
                q = torch.randn(b, sq, hq, d, device="cuda", dtype=dtype).transpose(1, 2)
            else:
                q = torch.randn(b, hq, sq, d, device="cuda", dtype=dtype)
            k, v = (torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype) for _ in range(2))
            out, lse = cujit_torch.attention(q, k, v, causal=causal, bottom_right=bottom_right, scale=scale,
                                             return_lse=True)
            torch.cuda.synchronize()
            want, want_lse = reference(q, k, v, causal, bottom_right, scale or 1 / math.sqrt(d))
            self.assertLess(rel_error(out, want), 1e-2)
            finite = torch.isfinite(want_lse)
            self.assertTrue(torch.equal(torch.isfinite(lse), finite))
            self.assertLess((lse[finite] - want_lse[finite]).abs().max().item(), 1e-3 * max(1, want_lse.abs().max()))

    def test_dtypes_and_head_dims(self):
        for dtype in (torch.float16, torch.bfloat16):
            for d in (64, 128, 256):
                self.check(dtype, d)

    def test_causal_alignments_gqa_and_layouts(self):
        for bottom_right in (False, True):
            self.check(torch.float16, 64, causal=True, bottom_right=bottom_right)
            self.check(torch.bfloat16, 128, sq=300, sk=129, causal=True, bottom_right=bottom_right, bshd=True)
        self.check(torch.float16, 128, hq=8, hkv=1, scale=0.05)

    def test_matches_sdpa_on_a_side_stream(self):
        q, k, v = (torch.randn(4, 16, 1024, 64, device="cuda", dtype=torch.float16) for _ in range(3))
        want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            got = cujit_torch.attention(q, k, v, causal=True)
        torch.cuda.current_stream().wait_stream(stream)
        self.assertLess(rel_error(got, want.float()), 1e-2)

    def test_plan_names_a_variant(self):
        q = torch.randn(1, 2, 64, 64, device="cuda", dtype=torch.float16)
        name = cujit_torch.plan(q, q, q)
        family, variant = name.split("/")
        self.assertTrue(variant.startswith(family), name)

    def test_errors_say_what_to_fix(self):
        q = torch.randn(1, 2, 64, 64, device="cuda", dtype=torch.float16)
        with self.assertRaisesRegex(cujit_torch.CujitError, "float16 or torch.bfloat16"):
            cujit_torch.attention(q.float(), q, q)
        with self.assertRaisesRegex(cujit_torch.CujitError, "CUDA"):
            cujit_torch.attention(q.cpu(), q, q)
        with self.assertRaises(cujit_torch.CujitError) as caught:
            cujit_torch.attention(q, q[..., :32].contiguous(), q)  # head dims differ
        self.assertEqual(caught.exception.status, 1)  # CUJIT_INVALID_ARGUMENT


if __name__ == "__main__":
    unittest.main(verbosity=2)
