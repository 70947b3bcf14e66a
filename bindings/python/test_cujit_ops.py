"""cujit's PyTorch operators on a GPU (bindings/python/cujit/ops.py): a
model block (linear -> cujit attention -> linear) compiled with
torch.compile(fullgraph=True), replayed under torch.cuda.graph, exported
with torch.export, run under inference mode, each against the same block
with float64 SDPA (math); the KV-cache, ragged and out= calls compiled, and
VarlenPlan's prepare and run compiled in one function; torch.library.opcheck
on every operator; an FP8 (e4m3) cache with descale
factors through both KV-cache operators, compiled, and KvPlan, against
float64 attention over the dequantized cache (sm_89 or newer), and the
errors for missing or misplaced factors; FP8 (e4m3) q, k and v with descale
factors per (sequence, KV head), per KV head and per tensor, eager, through
both operators and compiled, against float64 attention over the dequantized
inputs (sm_89 or newer), and the errors for missing, extra, misplaced or
mixed-dtype arguments; a call with an input that requires grad refused at
once.

    python3 bindings/python/test_cujit_ops.py   (needs a GPU, torch >= 2.4, and a build or the installed package)

Without torch or a GPU it exits 77 (ctest's skip code) after saying why.
"""
import itertools
import math
import os
import sys
import unittest

try:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:
    torch = None

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cujit  # noqa: E402
from test_cujit_torch import kv_reference  # noqa: E402  (float64 attention over a KV cache)


def skip_reason():
    if torch is None:
        return "torch is not installed"
    if not hasattr(torch.library, "custom_op"):
        return f"torch {torch.__version__} has no torch.library.custom_op (2.4 or later needed)"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch"
    return None


SKIP = skip_reason()
requires_gpu = unittest.skipIf(SKIP is not None, SKIP or "")
TOLERANCE = dict(atol=2e-2, rtol=2e-2)  # opcheck: runs of one op may differ by a config's rounding


def rel_error(got, want):
    return ((got.double() - want.double()).norm() / want.double().norm().clamp_min(1e-30)).item()


if torch is not None:
    class Block(torch.nn.Module):
        """x [B, S, E] -> qkv projection -> causal attention over H heads of D -> output projection."""

        def __init__(self, heads, head_dim, use_cujit=True):
            super().__init__()
            embed = heads * head_dim
            self.heads, self.head_dim, self.use_cujit = heads, head_dim, use_cujit
            self.qkv = torch.nn.Linear(embed, 3 * embed)
            self.proj = torch.nn.Linear(embed, embed)

        def forward(self, x):
            b, s, e = x.shape
            qkv = self.qkv(x).view(b, s, 3, self.heads, self.head_dim)
            q, k, v = [qkv[:, :, i].transpose(1, 2) for i in range(3)]  # [B, H, S, D] views, no copies
            if self.use_cujit:
                o = cujit.attention(q, k, v, causal=True)
            else:
                with sdpa_kernel(SDPBackend.MATH):
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(o.transpose(1, 2).reshape(b, s, e))


def make_block(heads=4, head_dim=64, dtype=None):
    torch.manual_seed(0)
    block = Block(heads, head_dim).cuda().to(dtype or torch.float16).eval().requires_grad_(False)
    return block


def reference(block, x):
    """The same block in float64, attention by SDPA's math backend."""
    ref = Block(block.heads, block.head_dim, use_cujit=False).cuda().double().eval().requires_grad_(False)
    ref.load_state_dict({k: v.double() for k, v in block.state_dict().items()})
    return ref(x.double())


def fresh_compile(fn):
    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True)


@requires_gpu
class CompiledBlock(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(int.from_bytes(os.urandom(4), "little"))

    def test_fullgraph_compile_matches_float64_sdpa(self):
        for dtype in (torch.float16, torch.bfloat16):
            with self.subTest(dtype=dtype):
                block = make_block(dtype=dtype)
                x = torch.randn(2, 200, 256, device="cuda", dtype=dtype)
                compiled = fresh_compile(block)
                got = compiled(x)
                self.assertEqual(got.shape, x.shape)
                self.assertEqual(got.dtype, dtype)
                bound = 2e-2 if dtype == torch.float16 else 5e-2  # bf16 keeps 8 bits of mantissa
                self.assertLess(rel_error(got, reference(block, x)), bound)
                self.assertLess(rel_error(got, block(x)), bound / 2)  # eager: the same op

    def test_compiled_block_replays_in_a_cuda_graph(self):
        block = make_block()
        compiled = fresh_compile(block)
        static_x = torch.randn(2, 256, 256, device="cuda", dtype=torch.float16)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the capture: compiles, tunes, loads
            for _ in range(3):
                compiled(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = compiled(static_x)
        for _ in range(2):  # new inputs in the captured buffer: the replay computes on them
            static_x.copy_(torch.randn_like(static_x))
            graph.replay()
            torch.cuda.synchronize()
            self.assertLess(rel_error(static_y, reference(block, static_x)), 2e-2)

    def test_inference_mode_eager_and_compiled(self):
        block = make_block()
        x = torch.randn(1, 130, 256, device="cuda", dtype=torch.float16)
        want = reference(block, x)
        with torch.inference_mode():
            eager = block(x)
            compiled = fresh_compile(block)(x)
        self.assertLess(rel_error(eager, want), 2e-2)
        self.assertLess(rel_error(compiled, want), 2e-2)

    def test_export_holds_the_operator_and_runs(self):
        block = make_block()
        x = torch.randn(2, 128, 256, device="cuda", dtype=torch.float16)
        exported = torch.export.export(block, (x,))
        targets = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
        self.assertTrue(any("cujit.attention" in t for t in targets), targets)
        got = exported.module()(x)
        self.assertLess(rel_error(got, reference(block, x)), 2e-2)


def paged_case(batch=3, sq=1, hq=8, hkv=2, d=128, lengths=(1, 17, 300), page_size=16, capacity=320):
    q = torch.randn(batch, sq, hq, d, device="cuda", dtype=torch.float16)
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    max_pages = (capacity + page_size - 1) // page_size
    num_pages = batch * max_pages + 3
    k, v = (torch.randn(num_pages, page_size, hkv, d, device="cuda", dtype=torch.float16) for _ in range(2))
    table = torch.randperm(num_pages, device="cuda")[:batch * max_pages].to(torch.int32).reshape(batch, max_pages)
    return q, k, v, lens, table


def ragged_case(q_lens=(5, 70, 33), k_lens=(9, 70, 100), hq=8, hkv=2, d=64):
    """Packed q, k, v whose sequences cover every row (so every output row is written)."""
    q = torch.randn(sum(q_lens), hq, d, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(sum(k_lens), hkv, d, device="cuda", dtype=torch.float16) for _ in range(2))

    def sums(lengths):
        return torch.tensor([0] + [sum(lengths[:i + 1]) for i in range(len(lengths))], dtype=torch.int32,
                            device="cuda")
    return q, k, v, sums(q_lens), sums(k_lens), max(q_lens), max(k_lens)


@requires_gpu
class CompiledCalls(unittest.TestCase):
    """The serving calls and out= under torch.compile(fullgraph=True), against eager."""

    def test_kvcache_varlen_and_out(self):
        q, k, v, lens, table = paged_case()
        rq, rk, rv, cu_q, cu_k, max_q, max_k = ragged_case()
        dq, dk, dv = (torch.randn(1, 4, 100, 64, device="cuda", dtype=torch.float16) for _ in range(3))

        def calls(out):
            decode, lse = cujit.attention_with_kvcache(q, k, v, cache_seqlens=lens, block_table=table,
                                                       return_lse=True)
            ragged = cujit.attention_varlen(rq, rk, rv, cu_q, cu_k, max_q, max_k, causal=True, bottom_right=True)
            cujit.attention(dq, dk, dv, out=out)
            return decode, lse, ragged, out * 2  # out read after the call: the mutation is ordered before it

        eager = calls(torch.empty_like(dq))
        compiled = fresh_compile(calls)(torch.empty_like(dq))
        torch.cuda.synchronize()
        for got, want in zip(compiled, eager):
            self.assertEqual(got.shape, want.shape)
            finite = torch.isfinite(want)
            self.assertTrue(torch.equal(torch.isfinite(got), finite))
            self.assertLess(rel_error(got[finite], want[finite]), 1e-2)

    def test_kv_plan_run_compiles_and_matches_eager(self):
        q, k, v, lens, table = paged_case()
        plan = cujit.KvPlan(batch=3, heads_q=8, heads_kv=2, head_dim=128, max_seq_k=300, page_size=16)
        eager = plan.run(q, k, v, cache_seqlens=lens, block_table=table)

        def run(q):
            return plan.run(q, k, v, cache_seqlens=lens, block_table=table)
        got = fresh_compile(run)(q)
        torch.cuda.synchronize()
        self.assertLess(rel_error(got, eager), 1e-2)

    def test_varlen_plan_prepare_and_run_compile_and_match_eager(self):
        """The compiled prepare is kept and runs before the compiled run: each step gives its own batch's result,
        not that of the list an earlier prepare left."""
        q, k, v, cu_q, cu_k, max_q, max_k = ragged_case()  # q_lens (5, 70, 33), k_lens (9, 70, 100)
        moved_q, moved_k = (torch.tensor([0, *itertools.accumulate(n)], dtype=torch.int32, device="cuda")
                            for n in ((70, 33, 5), (100, 9, 70)))  # the same composition
        plan = cujit.VarlenPlan(q, k, v, cu_q, cu_k, max_q, max_k, causal=True, bottom_right=True)

        def step(q, cu_q, cu_k, workspace):
            plan.prepare(cu_q, cu_k, workspace=workspace)
            return plan.run(q, k, v, workspace=workspace)
        # The list in the plan's own memory, then in a workspace of the caller's.
        for workspace in (None, torch.empty(plan.workspace_bytes, dtype=torch.uint8, device="cuda")):
            compiled = fresh_compile(step)
            for sums, other in (((cu_q, cu_k), (moved_q, moved_k)), ((moved_q, moved_k), (cu_q, cu_k))):
                eager = step(q, *sums, workspace)
                plan.prepare(*other, workspace=workspace)  # the list a compiled step without its prepare would run over
                got = compiled(q, *sums, workspace)
                torch.cuda.synchronize()
                self.assertTrue(torch.equal(got, eager), "own memory" if workspace is None else "a workspace")


@requires_gpu
class OpCheck(unittest.TestCase):
    """torch.library.opcheck: schema (mutation, aliasing), fake tensors, AOT dispatch with dynamic shapes."""

    def opcheck(self, op, *args, test_utils=None):
        op(*args)  # tune first, so the checks' runs all use the tuned config
        torch.cuda.synchronize()
        chosen = {} if test_utils is None else dict(test_utils=test_utils)
        torch.library.opcheck(op, args, **TOLERANCE, **chosen)

    def test_attention(self):
        q = torch.randn(1, 4, 77, 64, device="cuda", dtype=torch.float16)
        k, v = (torch.randn(1, 2, 90, 64, device="cuda", dtype=torch.float16) for _ in range(2))
        for return_lse in (False, True):
            self.opcheck(torch.ops.cujit.attention.default, q, k, v, None, None, None, True, True, None, return_lse)
        lse = torch.empty(1, 4, 77, device="cuda", dtype=torch.float32)
        self.opcheck(torch.ops.cujit.attention_out.default, q, k, v, torch.empty_like(q), lse, None, None, None, False,
                     False, 0.1)
        self.opcheck(torch.ops.cujit.attention_out.default, q, k, v, torch.empty_like(q), None, None, None, None, True,
                     False, None)

    def test_attention_varlen(self):
        q, k, v, cu_q, cu_k, max_q, max_k = ragged_case()
        self.opcheck(torch.ops.cujit.attention_varlen.default, q, k, v, cu_q, cu_k, max_q, max_k, None, None, None,
                     True, True, None, True)
        lse = torch.empty(q.shape[1], q.shape[0], device="cuda", dtype=torch.float32)
        self.opcheck(torch.ops.cujit.attention_varlen_out.default, q, k, v, torch.empty_like(q), lse, cu_q, cu_k,
                     max_q, max_k, None, None, None, False, False, None)

    def test_fp8_attention_and_varlen(self):
        if torch.cuda.get_device_capability() < (8, 9):
            self.skipTest("FP8 attention needs an sm_89 or newer GPU")
        # opcheck's schema test scales the inputs, and PyTorch has no
        # arithmetic on float8_e4m3fn ("mul_cuda" not implemented): the other
        # three tests run. The schema (mutation, aliasing) is the 16-bit
        # calls' above, which the schema test covers.
        utils = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
        (q, k, v), (qs, ks, vs), _ = fp8_inputs(sq=100, sk=100)
        self.opcheck(torch.ops.cujit.attention.default, q, k, v, qs, ks, vs, True, True, None, True, test_utils=utils)
        given = torch.empty(q.shape, dtype=torch.float16, device="cuda")
        self.opcheck(torch.ops.cujit.attention_out.default, q, k, v, given, None, qs, ks, vs, False, False, None,
                     test_utils=utils)
        (rq, rk, rv), (rqs, rks, rvs), _, (cu_q, cu_k, max_q, max_k) = fp8_ragged_inputs([70, 0, 130], [90, 5, 130])
        self.opcheck(torch.ops.cujit.attention_varlen.default, rq, rk, rv, cu_q, cu_k, max_q, max_k, rqs, rks, rvs,
                     True, True, None, True, test_utils=utils)

    def test_attention_with_kvcache(self):
        q, k, v, lens, table = paged_case(sq=2, lengths=(2, 17, 300))  # each sequence holds its new rows
        self.opcheck(torch.ops.cujit.attention_with_kvcache.default, q, k, v, lens, table, None, None, False, True, None,
                     0, True)
        lse = torch.empty(q.shape[0], q.shape[2], q.shape[1], device="cuda", dtype=torch.float32)
        self.opcheck(torch.ops.cujit.attention_with_kvcache_out.default, q, k, v, torch.empty_like(q), lse, lens,
                     table, None, None, False, True, None, 1)

    def test_kv_plan_run(self):
        q, k, v, lens, table = paged_case()
        plan = cujit.KvPlan(batch=3, heads_q=8, heads_kv=2, head_dim=128, max_seq_k=300, page_size=16)
        workspace = torch.empty(max(plan.workspace_bytes, 16), dtype=torch.uint8, device="cuda")
        self.opcheck(torch.ops.cujit.kv_plan_run.default, plan._address, q, k, v, torch.empty_like(q), None, lens,
                     table, None, None, False, workspace)

    def test_varlen_plan_prepare_and_run(self):
        q, k, v, cu_q, cu_k, max_q, max_k = ragged_case()
        plan = cujit.VarlenPlan(q, k, v, cu_q, cu_k, max_q, max_k, causal=True)
        lse = torch.empty(q.shape[1], q.shape[0], device="cuda", dtype=torch.float32)
        workspace = torch.empty(plan.workspace_bytes, dtype=torch.uint8, device="cuda")
        for memory in (None, workspace):  # the plan's own tile list, then the caller's
            self.opcheck(torch.ops.cujit.varlen_plan_prepare.default, plan._address, plan._token, cu_q, cu_k, max_q,
                         max_k, memory)
            self.opcheck(torch.ops.cujit.varlen_plan_run.default, plan._address, plan._token, q, k, v,
                         torch.empty_like(q), lse, None, None, None, True, False, None, plan.batch, memory)


def fp8_cache(shape, dtype=None):
    """Random FP8 values as stored (e4m3 unless dtype says; the factors that scale them come separately)."""
    return (torch.randn(shape, device="cuda") * 2).to(dtype or torch.float8_e4m3fn)


def dequantized(cache, factors, block_table=None):
    """float64 values of an e4m3 cache: each stored value times its (sequence, KV head)'s factor, factors
    [B, Hkv]; through block_table, each sequence's pages take its row of factors."""
    values = cache.double()
    if block_table is None:
        return values * factors.double()[:, None, :, None]  # [B, S_cap, Hkv, D]
    for b in range(block_table.shape[0]):
        pages = block_table[b].long()
        values[pages] = values[pages] * factors[b].double()[None, None, :, None]  # [pages, page_size, Hkv, D]
    return values


@requires_gpu
class Fp8Cache(unittest.TestCase):
    """An FP8 (e4m3) cache with descale factors, against float64 attention over the dequantized cache."""

    def setUp(self):
        if torch.cuda.get_device_capability() < (8, 9):
            self.skipTest("an FP8 cache needs an sm_89 or newer GPU")
        torch.manual_seed(int.from_bytes(os.urandom(4), "little"))

    def paged(self, batch=3, hkv=2, d=128, page_size=16, lengths=(1, 100, 333), dtype=None):
        """Decode q (bf16 unless dtype says) over shuffled e4m3 pages, with random factors per (sequence, KV head)."""
        q = torch.randn(batch, 1, 8, d, device="cuda", dtype=dtype or torch.bfloat16)
        max_pages = -(-max(lengths) // page_size)
        num_pages = batch * max_pages + 3
        k, v = (fp8_cache((num_pages, page_size, hkv, d)) for _ in range(2))
        table = torch.randperm(num_pages, device="cuda")[:batch * max_pages].to(torch.int32).reshape(batch, max_pages)
        lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
        # [B, Hkv] views of [Hkv, B] storage (strides 1, B): read in place
        k_scale, v_scale = ((torch.rand(hkv, batch, device="cuda") * 0.9 + 0.1).t() for _ in range(2))
        return q, k, v, lens, table, k_scale, v_scale

    def expect_close(self, q, k, v, lens, table, out, lse):
        want, want_lse = kv_reference(q, k, v, lens, table, True, 1 / math.sqrt(q.shape[-1]))
        self.assertEqual(out.dtype, q.dtype)
        self.assertLess(rel_error(out, want), 1e-2)
        err = (lse.double() - want_lse).abs().max().item()
        self.assertLess(err, 1e-3 * max(1.0, want_lse.abs().max().item()))

    def test_paged_decode_with_factors_per_sequence_and_kv_head(self):
        q, k, v, lens, table, k_scale, v_scale = self.paged()
        out, lse = cujit.attention_with_kvcache(q, k, v, cache_seqlens=lens, block_table=table, k_descale=k_scale,
                                                v_descale=v_scale, return_lse=True)
        torch.cuda.synchronize()
        self.expect_close(q, dequantized(k, k_scale, table), dequantized(v, v_scale, table), lens, table, out, lse)
        # Both registered operators take the factors, and so does the compiled call (the fake implementation).
        through_op, _ = torch.ops.cujit.attention_with_kvcache(q, k, v, lens, table, k_scale, v_scale, False, True,
                                                               None, 0, False)
        given = torch.empty_like(q)
        torch.ops.cujit.attention_with_kvcache_out(q, k, v, given, None, lens, table, k_scale, v_scale, False, True,
                                                   None, 0)
        compiled = fresh_compile(lambda q: cujit.attention_with_kvcache(
            q, k, v, cache_seqlens=lens, block_table=table, k_descale=k_scale, v_descale=v_scale))(q)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(through_op, out))
        self.assertTrue(torch.equal(given, out))
        self.assertLess(rel_error(compiled, out), 1e-2)

    def test_paged_decode_with_factors_per_page(self):
        # Each page quantized with factors of its own ([num_pages, Hkv]); f16 q with factors spread over 100x.
        q, k, v, lens, table, _, _ = self.paged(dtype=torch.float16)
        (num_pages, page_size, hkv, d), (batch, max_pages) = k.shape, table.shape
        k_scale, v_scale = ((10 ** (torch.rand(num_pages, hkv, device="cuda") * 2 - 2)) for _ in range(2))
        want_k, want_v = (c.double() * f.double()[:, None, :, None] for c, f in ((k, k_scale), (v, v_scale)))
        out, lse = cujit.attention_with_kvcache(q, k, v, cache_seqlens=lens, block_table=table, k_descale=k_scale,
                                                v_descale=v_scale, descale_per_page=True, return_lse=True)
        plan = cujit.KvPlan(batch=batch, heads_q=8, heads_kv=hkv, head_dim=d, max_seq_k=max_pages * page_size,
                            page_size=page_size, kv_dtype=torch.float8_e4m3fn, descale_per_page=True)
        planned = plan.run(q, k, v, cache_seqlens=lens, block_table=table, k_descale=k_scale, v_descale=v_scale)
        torch.cuda.synchronize()
        self.expect_close(q, want_k, want_v, lens, table, out, lse)
        self.assertLess(rel_error(planned, out), 1e-2)
        with self.assertRaisesRegex(cujit.CujitError, r"\[num_pages, Hkv\] = \[%d, 2\]" % num_pages):
            cujit.attention_with_kvcache(q, k, v, cache_seqlens=lens, block_table=table, k_descale=k_scale[:2],
                                         v_descale=v_scale[:2], descale_per_page=True)
        contiguous = fp8_cache((batch, 336, hkv, d))
        with self.assertRaisesRegex(cujit.CujitError, "descale_per_page"):
            cujit.attention_with_kvcache(q, contiguous, contiguous, cache_seqlens=lens, k_descale=k_scale[:3],
                                         v_descale=v_scale[:3], descale_per_page=True)

    def test_plan_with_one_factor_for_a_contiguous_cache(self):
        batch, hkv, d, lengths = 3, 2, 64, (5, 64, 200)
        q = torch.randn(batch, 1, 8, d, device="cuda", dtype=torch.float16)
        k, v = (fp8_cache((batch, 208, hkv, d)) for _ in range(2))
        lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
        k_scale = torch.tensor([0.3], device="cuda")  # one element: [1] or a 0-dim tensor
        v_scale = torch.tensor(1.7, device="cuda")
        plan = cujit.KvPlan(batch=batch, heads_q=8, heads_kv=hkv, head_dim=d, max_seq_k=max(lengths),
                            kv_dtype=torch.float8_e4m3fn)
        self.assertEqual(plan.kv_dtype, torch.float8_e4m3fn)
        out, lse = plan.run(q, k, v, cache_seqlens=lens, k_descale=k_scale, v_descale=v_scale, return_lse=True)
        given = torch.empty_like(q)
        torch.ops.cujit.kv_plan_run(plan._address, q, k, v, given, None, lens, None, k_scale, v_scale, False, None)
        torch.cuda.synchronize()
        self.expect_close(q, k.double() * k_scale.double(), v.double() * v_scale.double(), lens, None, out, lse)
        self.assertTrue(torch.equal(given, out))

    def test_plans_for_token_major_and_head_major_caches(self):
        # At head dim 64 with 4 query rows per KV head a token-major plan reads two KV heads a CTA; a head-major
        # one, one. Either plan runs either layout to the same results.
        batch, hkv, d, lengths = 3, 4, 64, (5, 64, 200)
        q = torch.randn(batch, 1, 16, d, device="cuda", dtype=torch.bfloat16)
        token_major = [fp8_cache((batch, 208, hkv, d)) for _ in range(2)]
        head_major = [t.transpose(1, 2).contiguous().transpose(1, 2) for t in token_major]  # same values
        lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
        k_scale, v_scale = ((torch.rand(batch, hkv, device="cuda") * 0.9 + 0.1) for _ in range(2))
        plans = {flag: cujit.KvPlan(batch=batch, heads_q=16, heads_kv=hkv, head_dim=d, max_seq_k=max(lengths),
                                    dtype=torch.bfloat16, kv_dtype=torch.float8_e4m3fn, head_major=flag)
                 for flag in (False, True)}
        self.assertIn("_kvheads2_", plans[False].variant)
        self.assertNotIn("_kvheads2_", plans[True].variant)
        want_k = token_major[0].double() * k_scale.double()[:, None, :, None]
        want_v = token_major[1].double() * v_scale.double()[:, None, :, None]
        for plan in plans.values():
            for k, v in (token_major, head_major):
                out, lse = plan.run(q, k, v, cache_seqlens=lens, k_descale=k_scale, v_descale=v_scale,
                                    return_lse=True)
                torch.cuda.synchronize()
                self.expect_close(q, want_k, want_v, lens, None, out, lse)

    def test_missing_or_misplaced_factors_raise(self):
        q, k, v, lens, table, k_scale, v_scale = self.paged()
        call = cujit.attention_with_kvcache
        with self.assertRaisesRegex(cujit.CujitError, "v_descale is null"):
            call(q, k, v, cache_seqlens=lens, block_table=table, k_descale=k_scale)
        with self.assertRaisesRegex(cujit.CujitError, "k_descale is null"):
            call(q, k, v, cache_seqlens=lens, block_table=table)
        plan = cujit.KvPlan(batch=3, heads_q=8, heads_kv=2, head_dim=128, max_seq_k=333, page_size=16,
                            dtype=torch.bfloat16, kv_dtype=torch.float8_e4m3fn)
        with self.assertRaisesRegex(cujit.CujitError, "k_descale is null"):
            plan.run(q, k, v, cache_seqlens=lens, block_table=table)
        # Factors for a 16-bit cache, and the argument checks made before the library sees them.
        k16, v16 = (t.to(torch.bfloat16) for t in (k, v))
        with self.assertRaisesRegex(cujit.CujitError, "k_descale is set but the cache is"):
            call(q, k16, v16, cache_seqlens=lens, block_table=table, k_descale=k_scale, v_descale=v_scale)
        with self.assertRaisesRegex(cujit.CujitError, r"k_descale has shape \[3, 1\]; it must be \[B, Hkv\]"):
            call(q, k, v, cache_seqlens=lens, block_table=table, k_descale=k_scale[:, :1], v_descale=v_scale)
        with self.assertRaisesRegex(cujit.CujitError, "v_descale is torch.float64"):
            call(q, k, v, cache_seqlens=lens, block_table=table, k_descale=k_scale, v_descale=v_scale.double())
        with self.assertRaisesRegex(cujit.CujitError, "same shape and strides"):
            call(q, k, v, cache_seqlens=lens, block_table=table, k_descale=k_scale, v_descale=v_scale.contiguous())
        with self.assertRaisesRegex(cujit.CujitError, "kv_dtype is torch.float16 and dtype torch.bfloat16"):
            cujit.KvPlan(batch=3, heads_q=8, heads_kv=2, head_dim=128, max_seq_k=333, dtype=torch.bfloat16,
                         kv_dtype=torch.float16)


def dense_reference(q, k, v, causal, bottom_right, scale):
    """float64 attention of q [B, Hq, Sq, D] over k, v [B, Hkv, Sk, D] (float64 values), GQA heads repeated."""
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    s = q @ k.transpose(-1, -2) * scale
    if causal:
        sq, sk = q.shape[2], k.shape[2]
        keep = torch.arange(sk, device=q.device)[None, :] <= torch.arange(sq, device=q.device)[:, None] + (
            sk - sq if bottom_right else 0)
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1).nan_to_num(0.0) @ v


def fp8_inputs(batch=2, hq=8, hkv=2, sq=200, sk=333, d=128, descales="per_sequence"):
    """e4m3 q [B, Hq, Sq, D], k, v [B, Hkv, Sk, D], float32 factors laid out as `descales` says
    (per_sequence [B, Hkv], per_head [Hkv], per_tensor one element), and the float64 dequantized q, k, v."""
    q = fp8_cache((batch, hq, sq, d))
    k, v = (fp8_cache((batch, hkv, sk, d)) for _ in range(2))

    def factors():
        if descales == "per_tensor":
            return torch.rand((), device="cuda") * 0.9 + 0.1
        if descales == "per_head":
            return torch.rand(hkv, device="cuda") * 0.9 + 0.1
        return (torch.rand(hkv, batch, device="cuda") * 0.9 + 0.1).t()  # [B, Hkv] view of [Hkv, B] storage
    scales = [factors() for _ in range(3)]

    def real(t, f, heads):
        f = f.double().expand(batch, hkv).repeat_interleave(heads // hkv, dim=1)  # [B, H]: a head takes its KV head's
        return t.double() * f[:, :, None, None]
    return (q, k, v), scales, (real(q, scales[0], hq), real(k, scales[1], hkv), real(v, scales[2], hkv))


@requires_gpu
class E5m2Cache(unittest.TestCase):
    """An e5m2 cache (vLLM's fp8_e5m2): any GPU, the same factors and checks as e4m3's."""

    def setUp(self):
        torch.manual_seed(int.from_bytes(os.urandom(4), "little"))

    def test_paged_decode_and_plan_against_the_dequantized_cache(self):
        batch, hkv, d, page_size, lengths = 3, 2, 128, 16, (1, 100, 333)
        q = torch.randn(batch, 1, 8, d, device="cuda", dtype=torch.float16)
        max_pages = -(-max(lengths) // page_size)
        num_pages = batch * max_pages + 3
        k, v = (fp8_cache((num_pages, page_size, hkv, d), torch.float8_e5m2) for _ in range(2))
        table = torch.randperm(num_pages, device="cuda")[:batch * max_pages].to(torch.int32).reshape(batch, max_pages)
        lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
        k_scale, v_scale = ((torch.rand(batch, hkv, device="cuda") * 0.9 + 0.1) for _ in range(2))
        out, lse = cujit.attention_with_kvcache(q, k, v, cache_seqlens=lens, block_table=table, k_descale=k_scale,
                                                v_descale=v_scale, return_lse=True)
        plan = cujit.KvPlan(batch=batch, heads_q=8, heads_kv=hkv, head_dim=d, max_seq_k=max(lengths),
                            page_size=page_size, dtype=torch.float16, kv_dtype=torch.float8_e5m2)
        planned = plan.run(q, k, v, cache_seqlens=lens, block_table=table, k_descale=k_scale, v_descale=v_scale)
        torch.cuda.synchronize()
        Fp8Cache.expect_close(self, q, dequantized(k, k_scale, table), dequantized(v, v_scale, table), lens, table,
                              out, lse)
        self.assertTrue(torch.equal(planned, out))
        # An e4m3 cache under the e5m2 plan is refused by name.
        with self.assertRaisesRegex(cujit.CujitError, "cache.k has dtype e4m3"):
            plan.run(q, k.view(torch.float8_e4m3fn), v.view(torch.float8_e4m3fn), cache_seqlens=lens,
                     block_table=table, k_descale=k_scale, v_descale=v_scale)

    def test_e5m2_attention_inputs_are_refused(self):
        q, k, v = (torch.randn(1, 2, 64, 64, device="cuda").to(torch.float8_e5m2) for _ in range(3))
        with self.assertRaisesRegex(cujit.CujitError, "e5m2"):
            cujit.attention(q, k, v)


@requires_gpu
class Fp8Attention(unittest.TestCase):
    """FP8 (e4m3) q, k, v against float64 attention over the dequantized inputs. P is rounded to e4m3, so the
    bound is a relative L2 error of 5e-2 (tests/gpu/test_fp8_attention_gpu.cpp holds the kernels to a tighter,
    emulated one)."""

    def setUp(self):
        if torch.cuda.get_device_capability() < (8, 9):
            self.skipTest("FP8 attention needs an sm_89 or newer GPU")
        torch.manual_seed(int.from_bytes(os.urandom(4), "little"))

    def check(self, causal=False, bottom_right=False, out_dtype=None, **shape):
        with self.subTest(causal=causal, bottom_right=bottom_right, out_dtype=out_dtype, **shape):
            (q, k, v), (qs, ks, vs), real = fp8_inputs(**shape)
            given = None if out_dtype is None else torch.empty(q.shape, dtype=out_dtype, device="cuda")
            out, lse = cujit.attention(q, k, v, causal=causal, bottom_right=bottom_right, out=given,
                                       return_lse=True, q_descale=qs, k_descale=ks, v_descale=vs)
            torch.cuda.synchronize()
            self.assertEqual(out.dtype, out_dtype or torch.bfloat16)
            self.assertEqual(out.shape, q.shape)
            if given is not None:
                self.assertIs(out, given)
            want = dense_reference(*real, causal, bottom_right, 1 / math.sqrt(q.shape[-1]))
            self.assertLess(rel_error(out, want), 5e-2)
            self.assertEqual(tuple(lse.shape), tuple(q.shape[:3]))
            return q, k, v, qs, ks, vs, out

    def test_each_descale_layout_and_head_dim(self):
        self.check(causal=True, bottom_right=True)
        self.check(d=64, descales="per_head", out_dtype=torch.float16)
        self.check(hq=4, hkv=4, sq=129, sk=129, causal=True, descales="per_tensor")

    def test_operators_and_compiled_call_give_the_eager_result(self):
        q, k, v, qs, ks, vs, eager = self.check(sq=100, sk=100)
        through_op, _ = torch.ops.cujit.attention(q, k, v, qs, ks, vs, False, False, None, False)
        given = torch.empty(q.shape, dtype=torch.bfloat16, device="cuda")
        torch.ops.cujit.attention_out(q, k, v, given, None, qs, ks, vs, False, False, None)
        compiled = fresh_compile(lambda q: cujit.attention(q, k, v, q_descale=qs, k_descale=ks, v_descale=vs))(q)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(through_op, eager))
        self.assertTrue(torch.equal(given, eager))
        self.assertEqual(compiled.dtype, torch.bfloat16)  # the fake implementation's dtype
        self.assertLess(rel_error(compiled, eager), 1e-2)
        self.assertIn("/", cujit.plan(q, k, v, q_descale=qs, k_descale=ks, v_descale=vs))


def fp8_ragged_inputs(q_lens, k_lens, hq=8, hkv=2, d=128):
    """A ragged FP8 batch: e4m3 q [total_q, Hq, D], k, v [total_k, Hkv, D], float32 factors [B, Hkv] (one per
    sequence and KV head), the float64 dequantized q, k, v of each sequence as [1, H, S, D], and the prefix sums
    with the longest lengths."""
    batch = len(q_lens)
    q, k, v = fp8_cache((sum(q_lens), hq, d)), fp8_cache((sum(k_lens), hkv, d)), fp8_cache((sum(k_lens), hkv, d))
    scales = [torch.rand(batch, hkv, device="cuda") * 0.9 + 0.1 for _ in range(3)]
    cu_q, cu_k = (torch.tensor([0] + list(itertools.accumulate(n)), dtype=torch.int32, device="cuda")
                  for n in (q_lens, k_lens))
    real = []
    for b in range(batch):
        def part(t, cu, f, heads):
            rows = t[cu[b]:cu[b + 1]].double().transpose(0, 1)[None]  # [1, H, S, D]
            return rows * f[b].double().repeat_interleave(heads // hkv)[None, :, None, None]
        real.append((part(q, cu_q, scales[0], hq), part(k, cu_k, scales[1], hkv), part(v, cu_k, scales[2], hkv)))
    return (q, k, v), scales, real, (cu_q, cu_k, max(q_lens), max(k_lens))


@requires_gpu
class Fp8RaggedAttention(unittest.TestCase):
    """FP8 (e4m3) ragged batches, each sequence against float64 attention over its dequantized rows (factors per
    sequence and KV head); the bound as Fp8Attention's."""

    def setUp(self):
        if torch.cuda.get_device_capability() < (8, 9):
            self.skipTest("FP8 attention needs an sm_89 or newer GPU")
        torch.manual_seed(int.from_bytes(os.urandom(4), "little"))

    def test_mixed_lengths_per_sequence_factors(self):
        q_lens, k_lens = [70, 0, 130, 1, 257], [90, 5, 130, 40, 300]
        (q, k, v), factors, real, (cu_q, cu_k, max_q, max_k) = fp8_ragged_inputs(q_lens, k_lens)
        for out_dtype in (None, torch.float16):
            given = None if out_dtype is None else torch.empty(q.shape, dtype=out_dtype, device="cuda")
            out, lse = cujit.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=True, bottom_right=True,
                                              out=given, return_lse=True, q_descale=factors[0],
                                              k_descale=factors[1], v_descale=factors[2])
            torch.cuda.synchronize()
            self.assertEqual(out.dtype, out_dtype or torch.bfloat16)
            self.assertEqual(tuple(lse.shape), (q.shape[1], q.shape[0]))
            for b, (rq, rk, rv) in enumerate(real):
                if q_lens[b] == 0:
                    continue
                want = dense_reference(rq, rk, rv, True, True, 1 / math.sqrt(q.shape[-1]))[0].transpose(0, 1)
                got = out[cu_q[b]:cu_q[b + 1]]
                self.assertLess(rel_error(got, want), 5e-2, f"sequence {b}")

    def test_factors_must_be_per_sequence(self):
        (q, k, v), factors, _, (cu_q, cu_k, max_q, max_k) = fp8_ragged_inputs([10, 20], [10, 20])
        with self.assertRaisesRegex(cujit.CujitError, r"q_descale has shape \[3, 2\]; it must be \[B, Hkv\] = "
                                                      r"\[2, 2\]"):
            cujit.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, q_descale=torch.ones(3, 2, device="cuda"),
                                   k_descale=factors[1], v_descale=factors[2])
        with self.assertRaisesRegex(cujit.CujitError, "q_descale, k_descale and v_descale are None"):
            cujit.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k)


@requires_gpu
class Fp8AttentionErrors(unittest.TestCase):
    """Made before the library sees the call: any GPU."""

    def test_missing_extra_misplaced_and_mixed_arguments_raise(self):
        (q, k, v), (qs, ks, vs), _ = fp8_inputs(sq=64, sk=64)
        with self.assertRaisesRegex(cujit.CujitError, "v_descale is None: q, k and v are torch.float8_e4m3fn"):
            cujit.attention(q, k, v, q_descale=qs, k_descale=ks)
        with self.assertRaisesRegex(cujit.CujitError, "q_descale, k_descale and v_descale are None"):
            cujit.attention(q, k, v)
        q16, k16, v16 = (t.to(torch.float16) for t in (q, k, v))
        with self.assertRaisesRegex(cujit.CujitError, "q_descale is given but q, k and v are torch.float16"):
            cujit.attention(q16, k16, v16, q_descale=qs, k_descale=ks, v_descale=vs)
        with self.assertRaisesRegex(cujit.CujitError, "k_descale is on cpu; cujit needs CUDA tensors"):
            cujit.attention(q, k, v, q_descale=qs, k_descale=ks.cpu(), v_descale=vs)
        with self.assertRaisesRegex(cujit.CujitError, "q_descale is torch.float64; it must be torch.float32"):
            cujit.attention(q, k, v, q_descale=qs.double(), k_descale=ks, v_descale=vs)
        with self.assertRaisesRegex(cujit.CujitError, r"q is torch.float8_e4m3fn, k torch.float8_e4m3fn and v "
                                                      "torch.float16: FP8 attention takes q, k and v all in"):
            cujit.attention(q, k, v16, q_descale=qs, k_descale=ks, v_descale=vs)
        with self.assertRaisesRegex(cujit.CujitError, r"q_descale has shape \[8\]; it must be \[B, Hkv\]"):
            cujit.attention(q, k, v, q_descale=torch.ones(8, device="cuda"), k_descale=ks, v_descale=vs)
        with self.assertRaisesRegex(TypeError, "q_descale must be a torch.Tensor or None, not float"):
            cujit.attention(q, k, v, q_descale=0.5, k_descale=ks, v_descale=vs)
        # The library's own check, passed through: out must be 16-bit.
        with self.assertRaises(cujit.CujitError) as caught:
            cujit.attention(q, k, v, q_descale=qs, k_descale=ks, v_descale=vs, out=torch.empty_like(q))
        self.assertEqual(caught.exception.status, 1)  # CUJIT_INVALID_ARGUMENT
        self.assertIn("out e4m3", str(caught.exception))


@requires_gpu
class NoBackwardYet(unittest.TestCase):
    def test_requires_grad_is_refused_at_the_call(self):
        q = torch.randn(1, 2, 64, 64, device="cuda", dtype=torch.float16, requires_grad=True)
        k, v = (torch.randn(1, 2, 64, 64, device="cuda", dtype=torch.float16) for _ in range(2))
        with self.assertRaisesRegex(cujit.CujitError, "no backward pass yet.*torch.no_grad") as caught:
            cujit.attention(q, k, v)
        self.assertEqual(caught.exception.status, 2)  # CUJIT_UNSUPPORTED
        pq, pk, pv, lens, table = paged_case()
        with self.assertRaisesRegex(cujit.CujitError, "attention_with_kvcache.*no backward"):
            cujit.attention_with_kvcache(pq, pk.requires_grad_(), pv, cache_seqlens=lens, block_table=table)
        rq, rk, rv, cu_q, cu_k, max_q, max_k = ragged_case()
        with self.assertRaisesRegex(cujit.CujitError, "attention_varlen.*no backward"):
            cujit.attention_varlen(rq, rk, rv.requires_grad_(), cu_q, cu_k, max_q, max_k)
        # What the message says works: no grad mode, inference mode, detached inputs.
        want = cujit.attention(q.detach(), k, v)
        with torch.no_grad():
            self.assertLess(rel_error(cujit.attention(q, k, v), want), 1e-2)
        with torch.inference_mode():
            self.assertLess(rel_error(cujit.attention(q, k, v), want), 1e-2)


class EagerPath(unittest.TestCase):
    def test_eager_calls_skip_the_dispatcher_and_match_the_operator(self):
        from cujit import ops
        q, k, v = (torch.randn(2, 4, 96, 64, device="cuda", dtype=torch.float16) for _ in range(3))
        self.assertTrue(ops.direct(q, k, v, True))
        eager = cujit.attention(q, k, v, causal=True)
        through_op, _ = torch.ops.cujit.attention(q, k, v, None, None, None, True, False, None, False)
        self.assertTrue(torch.equal(eager, through_op))
        pq, pk, pv, lens, table = paged_case()
        self.assertTrue(torch.equal(cujit.attention_with_kvcache(pq, pk, pv, cache_seqlens=lens, block_table=table),
                                    torch.ops.cujit.attention_with_kvcache(pq, pk, pv, lens, table, None, None, False,
                                                                           True, None, 0, False)[0]))
        # Fake tensors and dispatch modes take the operator.
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            fake = torch.empty(1, 2, 64, 64, device="cuda", dtype=torch.float16)
            self.assertFalse(ops.direct(fake))
            self.assertEqual(cujit.attention(fake, fake, fake).shape, fake.shape)


if __name__ == "__main__":
    if SKIP is not None:
        print(f"{os.path.basename(__file__)}: Skipped\n{SKIP}")  # the form scripts/ctest_summary.py reads
        sys.exit(77)
    unittest.main(verbosity=2)
