"""The PyTorch binding on a GPU. attention(): against float32 SDPA on the
same inputs: dtypes, head dims, both causal alignments, GQA, a [B, S, H, D]
view, the LSE, an explicit scale, a side stream, and the errors it must
raise. attention_varlen(): sequence by sequence against the same reference
over packed ragged batches (empty sequences, sequences without keys, rows
past the last sequence left untouched), both causal alignments, GQA, the LSE
[Hq, total_q], and the errors it must raise. VarlenPlan: prepared once and
run for two layers, bitwise equal to attention_varlen and close to the
reference, prepare and run replayed in a CUDA graph with new prefix sums,
and its refusals. attention_with_kvcache() and KvPlan: against a float64 reference over
contiguous and paged (shuffled) caches with per-sequence lengths, GQA,
decode (Sq = 1) and Sq = 4, causal and not, the LSE, plan reuse, a CUDA
graph replay, plain eager mode, and the errors they must raise.

    python3 bindings/python/test_cujit_torch.py   (needs a GPU, torch, and a build)

Without torch or a GPU every test is skipped, and run as a program it exits
77 (ctest's skip code) after saying why.
"""
import math
import os
import sys
import unittest

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if torch is not None:
    import cujit_torch  # noqa: E402  (the first name of the package, kept as an alias)


def skip_reason():
    if torch is None:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch"
    return None


SKIP = skip_reason()
requires_gpu = unittest.skipIf(SKIP is not None, SKIP or "")


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


@requires_gpu
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


def varlen_reference(q, k, v, cu_seqlens_q, cu_seqlens_k, causal, bottom_right, scale):
    """reference() on each sequence of a packed batch: out [total_q, Hq, D] (zeros outside every sequence)
    and lse [Hq, total_q] (NaN outside every sequence)."""
    out = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    lse = torch.full((q.shape[1], q.shape[0]), float("nan"), dtype=torch.float32, device=q.device)
    cu_q, cu_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for b in range(len(cu_q) - 1):
        rows, keys = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        if rows.start == rows.stop:
            continue
        # [n, H, D] -> [1, H, n, D]
        o, l = reference(*(t[s].transpose(0, 1)[None] for t, s in ((q, rows), (k, keys), (v, keys))), causal,
                         bottom_right, scale)
        out[rows] = o[0].transpose(0, 1)
        lse[:, rows] = l[0]
    return out, lse


def prefix_sums(lengths):
    """int32 [len(lengths) + 1] on the GPU: 0, then the running totals."""
    sums = [0]
    for n in lengths:
        sums.append(sums[-1] + n)
    return torch.tensor(sums, dtype=torch.int32, device="cuda")


def packed_layer(q_lens, k_lens, hq=8, hkv=2, d=128, dtype=None):
    """Random float16 (or dtype) q [sum(q_lens), Hq, D], k and v [sum(k_lens), Hkv, D]."""
    dtype = dtype or torch.float16
    q = torch.randn(sum(q_lens), hq, d, device="cuda", dtype=dtype)
    k, v = (torch.randn(sum(k_lens), hkv, d, device="cuda", dtype=dtype) for _ in range(2))
    return q, k, v


@requires_gpu
class VarlenBinding(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(int.from_bytes(os.urandom(4), "little"))

    def check(self, q_lens, k_lens, dtype=None, d=128, hq=8, hkv=2, causal=False, bottom_right=False,
              scale=None, spare_q=0, spare_k=0):
        """spare_q, spare_k: packed rows past the last sequence (not read; out's must stay as they were)."""
        dtype = dtype or torch.float16
        with self.subTest(q_lens=q_lens, k_lens=k_lens, dtype=dtype, d=d, hq=hq, hkv=hkv, causal=causal,
                          bottom_right=bottom_right, spare_q=spare_q, spare_k=spare_k):
            total_q, total_k = sum(q_lens) + spare_q, sum(k_lens) + spare_k
            q = torch.randn(total_q, hq, d, device="cuda", dtype=dtype)
            k, v = (torch.randn(total_k, hkv, d, device="cuda", dtype=dtype) for _ in range(2))
            cu_q, cu_k = prefix_sums(q_lens), prefix_sums(k_lens)
            out = torch.full_like(q, 7.0)  # poison: rows outside every sequence must keep it
            got, lse = cujit_torch.attention_varlen(q, k, v, cu_q, cu_k, max(q_lens), max(k_lens), causal=causal,
                                                    bottom_right=bottom_right, scale=scale, out=out,
                                                    return_lse=True)
            torch.cuda.synchronize()
            self.assertIs(got, out)
            self.assertEqual(tuple(lse.shape), (hq, total_q))
            self.assertEqual(lse.dtype, torch.float32)
            want, want_lse = varlen_reference(q, k, v, cu_q, cu_k, causal, bottom_right, scale or 1 / math.sqrt(d))
            used = sum(q_lens)
            self.assertLess(rel_error(out[:used], want[:used]), 1e-2)
            self.assertTrue(torch.all(out[used:] == 7.0))
            lse, want_lse = lse[:, :used], want_lse[:, :used]
            finite = torch.isfinite(want_lse)
            self.assertTrue(torch.equal(torch.isfinite(lse), finite))
            if finite.any():
                err = (lse[finite] - want_lse[finite]).abs().max().item()
                self.assertLess(err, 1e-3 * max(1.0, want_lse[finite].abs().max().item()))

    def test_dtypes_and_head_dims(self):
        for dtype in (torch.float16, torch.bfloat16):
            for d in (64, 128, 256):
                self.check((100, 300, 1), (200, 129, 64), dtype=dtype, d=d)

    def test_causal_alignments_per_sequence(self):
        # Sequences with more rows than keys, fewer, as many; one of many 128-row blocks.
        for bottom_right in (False, True):
            self.check((300, 17, 64, 1), (100, 300, 64, 40), causal=True, bottom_right=bottom_right)
            self.check((129, 5), (129, 500), dtype=torch.bfloat16, d=64, causal=True, bottom_right=bottom_right)

    def test_empty_sequences_and_sequences_without_keys(self):
        # No query rows (nothing written), and rows that see no key (zeros, LSE -inf).
        self.check((0, 50, 0, 130), (10, 0, 0, 70))
        self.check((40, 0, 200), (0, 30, 200), causal=True, bottom_right=True)

    def test_gqa_scale_and_rows_past_the_last_sequence(self):
        self.check((64, 200, 3), (64, 300, 9), hq=8, hkv=1, scale=0.05)
        self.check((70, 150), (90, 260), spare_q=37, spare_k=21)

    def test_matches_dense_attention_for_one_sequence(self):
        q = torch.randn(1, 8, 257, 128, device="cuda", dtype=torch.float16)
        k, v = (torch.randn(1, 2, 400, 128, device="cuda", dtype=torch.float16) for _ in range(2))
        dense = cujit_torch.attention(q, k, v, causal=True, bottom_right=True)
        packed = [t[0].transpose(0, 1).contiguous() for t in (q, k, v)]  # [S, H, D]
        ragged = cujit_torch.attention_varlen(*packed, prefix_sums([257]), prefix_sums([400]), 257, 400,
                                              causal=True, bottom_right=True)
        torch.cuda.synchronize()
        self.assertLess(rel_error(ragged, dense[0].transpose(0, 1).float()), 1e-2)

    def test_errors_name_the_argument(self):
        q = torch.randn(300, 8, 64, device="cuda", dtype=torch.float16)
        k = torch.randn(500, 2, 64, device="cuda", dtype=torch.float16)
        cu_q, cu_k = prefix_sums((100, 200)), prefix_sums((250, 250))
        call = cujit_torch.attention_varlen
        with self.assertRaisesRegex(cujit_torch.CujitError, "cu_seqlens_q is torch.int64"):
            call(q, k, k, cu_q.long(), cu_k, 200, 250)
        with self.assertRaisesRegex(cujit_torch.CujitError, "cu_seqlens_k has shape"):
            call(q, k, k, cu_q, cu_k[:2], 200, 250)
        with self.assertRaisesRegex(cujit_torch.CujitError, "cu_seqlens_k is on cpu"):
            call(q, k, k, cu_q, cu_k.cpu(), 200, 250)
        with self.assertRaisesRegex(cujit_torch.CujitError, "q has 4 dimensions"):
            call(q[None], k, k, cu_q, cu_k, 200, 250)
        with self.assertRaisesRegex(cujit_torch.CujitError, "q is torch.float32"):
            call(q.float(), k, k, cu_q, cu_k, 200, 250)
        # The library's own check, passed through: no sequence is longer than k's 500 packed rows.
        with self.assertRaises(cujit_torch.CujitError) as caught:
            call(q, k, k, cu_q, cu_k, 200, 501)
        self.assertEqual(caught.exception.status, 1)  # CUJIT_INVALID_ARGUMENT
        self.assertIn("batch.max_seqlen_k", str(caught.exception))

    def test_plan_is_prepared_once_and_run_for_each_layer(self):
        q_lens, k_lens = (100, 0, 300, 1), (200, 50, 129, 64)  # sequence 1 has no query rows
        cu_q, cu_k = prefix_sums(q_lens), prefix_sums(k_lens)
        layers = [packed_layer(q_lens, k_lens) for _ in range(2)]  # one batch composition, two layers
        plan = cujit_torch.VarlenPlan(*layers[0], cu_q, cu_k, max(q_lens), max(k_lens), causal=True,
                                      bottom_right=True)
        family, variant = plan.variant.split("/")  # the ragged variant of its family that each run launches
        self.assertTrue(variant.startswith(family) and "_varlen" in variant, plan.variant)
        self.assertGreater(plan.workspace_bytes, 0)
        plan.prepare(cu_q, cu_k)
        for q, k, v in layers:
            out, lse = plan.run(q, k, v, return_lse=True)
            once, once_lse = cujit_torch.attention_varlen(q, k, v, cu_q, cu_k, max(q_lens), max(k_lens), causal=True,
                                                          bottom_right=True, return_lse=True)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(out, once))  # bitwise: the same kernel over the same tiles
            self.assertTrue(torch.equal(lse, once_lse))
            want, _ = varlen_reference(q, k, v, cu_q, cu_k, True, True, 1 / math.sqrt(q.shape[-1]))
            self.assertLess(rel_error(out, want), 1e-2)

    def test_plan_keeps_a_list_in_each_callers_workspace(self):
        """Two batches of one composition, each listed into its own workspace, then run from it in turn: each run
        computes its own batch, bitwise as a run from the plan's own list does."""
        batches = ((100, 640, 0, 260), (640, 0, 300, 60))  # one composition: 4 sequences, longest 640, 1000 rows
        q, k, v = packed_layer(batches[0], batches[0])
        plan = cujit_torch.VarlenPlan(q, k, v, prefix_sums(batches[0]), prefix_sums(batches[0]), 640, 640,
                                      causal=True)
        workspaces = [torch.empty(plan.workspace_bytes, dtype=torch.uint8, device="cuda") for _ in batches]
        for lens, workspace in zip(batches, workspaces):
            plan.prepare(prefix_sums(lens), prefix_sums(lens), workspace=workspace)
        for lens, workspace in zip(batches, workspaces):
            out = plan.run(q, k, v, workspace=workspace)
            plan.prepare(prefix_sums(lens), prefix_sums(lens))  # the same batch in the plan's own memory
            own = plan.run(q, k, v)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(out, own), lens)
            want, _ = varlen_reference(q, k, v, prefix_sums(lens), prefix_sums(lens), True, False,
                                       1 / math.sqrt(q.shape[-1]))
            self.assertLess(rel_error(out, want), 1e-2)
        small = torch.empty(plan.workspace_bytes - 1, dtype=torch.uint8, device="cuda")
        for short in (lambda: plan.prepare(prefix_sums(batches[0]), prefix_sums(batches[0]), workspace=small),
                      lambda: plan.run(q, k, v, workspace=small)):
            with self.assertRaisesRegex(cujit_torch.CujitError, "workspace must be a contiguous tensor of at least"):
                short()
        with self.assertRaisesRegex(cujit_torch.CujitError, "workspace is on cpu"):
            plan.run(q, k, v, workspace=workspaces[0].cpu())
        # The library's own check, passed through: a misaligned address.
        with self.assertRaises(cujit_torch.CujitError) as caught:
            plan.run(q, k, v, workspace=torch.empty(plan.workspace_bytes + 16, dtype=torch.uint8, device="cuda")[1:])
        self.assertIn("run.workspace", str(caught.exception))

    def test_plan_prepare_and_run_replay_in_a_cuda_graph(self):
        lens, moved = (100, 640, 0, 260), (640, 0, 300, 60)  # one composition: 4 sequences, longest 640, 1000 rows
        q, k, v = packed_layer(lens, lens)
        cu_q, cu_k = prefix_sums(lens), prefix_sums(lens)
        plan = cujit_torch.VarlenPlan(q, k, v, cu_q, cu_k, 640, 640, causal=True)
        static_out = torch.empty_like(q)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the capture, as PyTorch asks
            plan.prepare(cu_q, cu_k)
            plan.run(q, k, v, out=static_out)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            plan.prepare(cu_q, cu_k)
            plan.run(q, k, v, out=static_out)
        # New prefix sums in the captured tensors: the replay lists and computes that batch.
        for sums in (moved, lens):
            cu_q.copy_(prefix_sums(sums))
            cu_k.copy_(prefix_sums(sums))
            static_out.zero_()
            graph.replay()
            want = cujit_torch.attention_varlen(q, k, v, cu_q, cu_k, 640, 640, causal=True)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(static_out, want), sums)

    def test_plan_refusals_name_the_argument(self):
        q, k, v = packed_layer((100, 200), (250, 250))
        cu_q, cu_k = prefix_sums((100, 200)), prefix_sums((250, 250))
        plan = cujit_torch.VarlenPlan(q, k, v, cu_q, cu_k, 200, 250)
        with self.assertRaisesRegex(cujit_torch.CujitError, "cu_seqlens_k is on cpu but the plan was made on cuda"):
            plan.prepare(cu_q, cu_k.cpu())
        with self.assertRaisesRegex(cujit_torch.CujitError, "q is on cpu but the plan was made on cuda"):
            plan.run(q.cpu(), k, v)
        # The library's own check, passed through: the plan is for two sequences.
        with self.assertRaises(cujit_torch.CujitError) as caught:
            plan.prepare(prefix_sums((100, 100, 100)), prefix_sums((100, 150, 250)))
        self.assertEqual(caught.exception.status, 1)  # CUJIT_INVALID_ARGUMENT
        self.assertIn("the batch has 3 sequences", str(caught.exception))
        plan.close()
        for closed in (lambda: plan.prepare(cu_q, cu_k), lambda: plan.run(q, k, v)):
            with self.assertRaises(cujit_torch.CujitError) as caught:
                closed()
            self.assertEqual(caught.exception.status, 1)
            self.assertIn("this VarlenPlan is closed", str(caught.exception))
        plan.close()  # again: nothing to free


def kv_reference(q, k_cache, v_cache, seqlens, block_table, causal, scale):
    """float64 out [B, Sq, Hq, D] and lse [B, Hq, Sq] of q ([B, Sq, Hq, D]) over each sequence's first
    seqlens[b] cached keys, read through the block table when there is one; bottom-right causal."""
    batch, sq, hq, d = q.shape
    hkv = k_cache.shape[2]
    out = torch.zeros(batch, sq, hq, d, dtype=torch.float64, device=q.device)
    lse = torch.empty(batch, hq, sq, dtype=torch.float64, device=q.device)
    for b in range(batch):
        n = int(seqlens[b])
        if block_table is None:
            k, v = k_cache[b, :n], v_cache[b, :n]
        else:
            page_size = k_cache.shape[1]
            pages = block_table[b, :(n + page_size - 1) // page_size].long()
            k = k_cache[pages].reshape(-1, hkv, d)[:n]
            v = v_cache[pages].reshape(-1, hkv, d)[:n]
        # [n, Hkv, D] -> [Hq, n, D]: query head h reads KV head h // (Hq / Hkv)
        k, v = (t.double().transpose(0, 1).repeat_interleave(hq // hkv, dim=0) for t in (k, v))
        s = q[b].double().transpose(0, 1) @ k.transpose(1, 2) * scale  # [Hq, Sq, n]
        if causal:
            rows = torch.arange(sq, device=q.device)[:, None]
            keep = torch.arange(n, device=q.device)[None, :] <= rows + n - sq
            s = s.masked_fill(~keep, float("-inf"))
        lse[b] = torch.logsumexp(s, dim=-1)
        out[b] = (torch.softmax(s, dim=-1).nan_to_num(0.0) @ v).transpose(0, 1)
    return out, lse


def kv_case(batch=3, sq=1, hq=8, hkv=2, d=128, dtype=None, lengths=(1, 17, 300), page_size=0, capacity=320):
    """q [B, Sq, Hq, D], K/V caches, int32 lengths and, for a paged cache, an int32 block table of
    shuffled page ids (the pool has spare pages that no sequence uses)."""
    dtype = dtype or torch.float16
    q = torch.randn(batch, sq, hq, d, device="cuda", dtype=dtype)
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    if page_size == 0:
        k, v = (torch.randn(batch, capacity, hkv, d, device="cuda", dtype=dtype) for _ in range(2))
        return q, k, v, lens, None
    max_pages = (capacity + page_size - 1) // page_size
    num_pages = batch * max_pages + 5
    k, v = (torch.randn(num_pages, page_size, hkv, d, device="cuda", dtype=dtype) for _ in range(2))
    table = torch.randperm(num_pages, device="cuda")[:batch * max_pages].to(torch.int32).reshape(batch, max_pages)
    return q, k, v, lens, table


@requires_gpu
class KvCacheBinding(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(int.from_bytes(os.urandom(4), "little"))

    def expect_close(self, case, out, lse, causal=True, scale=None):
        q, k, v, lens, table = case
        torch.cuda.synchronize()
        want, want_lse = kv_reference(q, k, v, lens, table, causal, scale or 1 / math.sqrt(q.shape[-1]))
        self.assertEqual(out.shape, q.shape)
        self.assertLess(rel_error(out, want), 1e-2)
        self.assertEqual(lse.shape, (q.shape[0], q.shape[2], q.shape[1]))
        self.assertEqual(lse.dtype, torch.float32)
        finite = torch.isfinite(want_lse)
        self.assertTrue(torch.equal(torch.isfinite(lse), finite))
        err = (lse.double()[finite] - want_lse[finite]).abs().max().item()
        self.assertLess(err, 1e-3 * max(1.0, want_lse[finite].abs().max().item()))

    def check(self, causal=True, scale=None, num_splits=0, **shape):
        with self.subTest(causal=causal, scale=scale, num_splits=num_splits, **shape):
            case = kv_case(**shape)
            q, k, v, lens, table = case
            out, lse = cujit_torch.attention_with_kvcache(q, k, v, cache_seqlens=lens, block_table=table,
                                                          causal=causal, scale=scale, num_splits=num_splits,
                                                          return_lse=True)
            self.expect_close(case, out, lse, causal, scale)

    def test_contiguous_cache_with_seqlens(self):
        for dtype in (torch.float16, torch.bfloat16):
            self.check(dtype=dtype)
        self.check(d=64, lengths=(320, 5, 64), scale=0.05)

    def test_paged_cache_with_shuffled_pages(self):
        self.check(page_size=16, lengths=(15, 17, 300))
        self.check(page_size=16, dtype=torch.bfloat16, lengths=(16, 1, 320), num_splits=1)

    def test_gqa_8_query_heads_over_2_kv_heads(self):
        self.check(hq=8, hkv=2, page_size=16)
        self.check(hq=8, hkv=2)

    def test_decode_and_four_rows_causal_bottom_right_and_not(self):
        for sq in (1, 4):
            for causal in (True, False):
                self.check(sq=sq, causal=causal, page_size=16, lengths=(4, 33, 300))
                self.check(sq=sq, causal=causal, lengths=(5, 100, 320))

    def test_lse_is_float32_batch_heads_rows(self):
        case = kv_case(sq=4, lengths=(4, 20, 320))
        q, k, v, lens, table = case
        out, lse = cujit_torch.attention_with_kvcache(q, k, v, cache_seqlens=lens, return_lse=True)
        self.assertEqual(tuple(lse.shape), (3, 8, 4))
        self.expect_close(case, out, lse)
        # Without return_lse only out comes back, into the given tensor.
        given = torch.empty_like(q)
        self.assertIs(cujit_torch.attention_with_kvcache(q, k, v, cache_seqlens=lens, out=given), given)

    def plan_for(self, case, causal=True, num_splits=0):
        q, k, v, lens, table = case
        return cujit_torch.KvPlan(batch=q.shape[0], heads_q=q.shape[2], heads_kv=k.shape[2], head_dim=q.shape[3],
                                  max_seq_k=int(lens.max()), seq_q=q.shape[1], dtype=q.dtype,
                                  page_size=0 if table is None else k.shape[1], causal=causal,
                                  num_splits=num_splits)

    def test_plan_is_reused_across_layers_and_runs(self):
        layers = [kv_case(page_size=16, lengths=(1, 100, 300)) for _ in range(2)]
        lens, table = layers[0][3], layers[0][4]
        layers = [(q, k, v, lens, table) for q, k, v, _, _ in layers]  # one batch composition, two layers
        plan = self.plan_for(layers[0])
        self.assertIn("/", plan.variant)
        self.assertGreaterEqual(plan.num_splits, 1)
        if plan.num_splits == 1:  # several: a workspace, unless merged in their cluster (two on sm_90)
            self.assertEqual(plan.workspace_bytes, 0)
        for case in layers:
            q, k, v, lens, table = case
            out, lse = plan.run(q, k, v, cache_seqlens=lens, block_table=table, return_lse=True)
            self.expect_close(case, out, lse)
            again = plan.run(q, k, v, cache_seqlens=lens, block_table=table)
            workspace = torch.empty(max(plan.workspace_bytes, 1), dtype=torch.uint8, device="cuda")
            given = plan.run(q, k, v, cache_seqlens=lens, block_table=table, workspace=workspace)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(again, out))  # bitwise: a fixed plan is deterministic
            self.assertTrue(torch.equal(given, out))

    def test_plan_run_replays_in_a_cuda_graph(self):
        case = kv_case(page_size=16, lengths=(7, 150, 300))
        q, k, v, lens, table = case
        plan = self.plan_for(case)
        static_q, static_out = q.clone(), torch.empty_like(q)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the capture, as PyTorch asks
            plan.run(static_q, k, v, cache_seqlens=lens, block_table=table, out=static_out)
        torch.cuda.current_stream().wait_stream(side)
        eager = plan.run(q, k, v, cache_seqlens=lens, block_table=table)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            plan.run(static_q, k, v, cache_seqlens=lens, block_table=table, out=static_out)
        static_out.zero_()
        graph.replay()
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(static_out, eager))
        # New inputs in the captured buffers: the replay computes on them.
        fresh = torch.randn_like(q)
        static_q.copy_(fresh)
        lens.copy_(torch.tensor([300, 1, 64], dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        want, _ = kv_reference(fresh, k, v, lens, table, True, 1 / math.sqrt(q.shape[-1]))
        self.assertLess(rel_error(static_out, want), 1e-2)

    def test_runs_in_plain_eager_mode(self):
        """No torch.compile: the binding is ctypes calls on eager tensors, and TorchDynamo sees no frame."""
        import torch._dynamo
        counters = torch._dynamo.utils.counters
        counters.clear()
        real_compile = torch.compile

        def forbidden(*args, **kwargs):
            raise AssertionError("torch.compile was called")

        torch.compile = forbidden
        try:
            case = kv_case(page_size=16)
            q, k, v, lens, table = case
            out, lse = cujit_torch.attention_with_kvcache(q, k, v, cache_seqlens=lens, block_table=table,
                                                          return_lse=True)
            planned = self.plan_for(case).run(q, k, v, cache_seqlens=lens, block_table=table)
        finally:
            torch.compile = real_compile
        self.assertEqual(sum(counters["frames"].values()), 0)
        self.expect_close(case, out, lse)
        self.expect_close(case, planned, lse)

    def test_errors_name_the_argument(self):
        q, k, v, lens, table = kv_case(page_size=16)
        call = cujit_torch.attention_with_kvcache
        with self.assertRaisesRegex(cujit_torch.CujitError, "block_table is torch.int64"):
            call(q, k, v, cache_seqlens=lens, block_table=table.long())
        with self.assertRaisesRegex(cujit_torch.CujitError, "cache_seqlens is torch.float32"):
            call(q, k, v, cache_seqlens=lens.float(), block_table=table)
        with self.assertRaisesRegex(cujit_torch.CujitError, "block_table has shape"):
            call(q, k, v, cache_seqlens=lens, block_table=table[:2])
        with self.assertRaisesRegex(cujit_torch.CujitError, "cache_seqlens has strides"):
            call(q, k, v, cache_seqlens=lens[:1].expand(3), block_table=table)
        with self.assertRaisesRegex(cujit_torch.CujitError, "block_table is on cpu"):
            call(q, k, v, cache_seqlens=lens, block_table=table.cpu())
        with self.assertRaisesRegex(cujit_torch.CujitError, "q is torch.float32"):
            call(q.float(), k, v, cache_seqlens=lens, block_table=table)
        with self.assertRaisesRegex(cujit_torch.CujitError, "k_cache has 3 dimensions"):
            call(q, k[0], v, cache_seqlens=lens, block_table=table)
        plan = self.plan_for((q, k, v, lens, table))
        with self.assertRaisesRegex(cujit_torch.CujitError, "cache_seqlens is None"):
            plan.run(q, k, v, block_table=table)
        # Three splits: merged by the combine pass through the workspace on every GPU (sm_90 merges two in
        # their cluster, with none).
        split = self.plan_for((q, k, v, lens, table), num_splits=3)
        self.assertGreater(split.workspace_bytes, 0)
        with self.assertRaisesRegex(cujit_torch.CujitError, "workspace must be"):
            split.run(q, k, v, cache_seqlens=lens, block_table=table,
                      workspace=torch.empty(split.workspace_bytes - 1, dtype=torch.uint8, device="cuda"))
        # The library's own check, passed through: 10 pages of 16 keys cannot hold the plan's 300.
        with self.assertRaises(cujit_torch.CujitError) as caught:
            plan.run(q, k, v, cache_seqlens=lens, block_table=table[:, :10])
        self.assertEqual(caught.exception.status, 1)  # CUJIT_INVALID_ARGUMENT
        self.assertIn("too narrow", str(caught.exception))


if __name__ == "__main__":
    if SKIP is not None:
        print(f"{os.path.basename(__file__)}: Skipped\n{SKIP}")  # the form scripts/ctest_summary.py reads
        sys.exit(77)
    unittest.main(verbosity=2)
