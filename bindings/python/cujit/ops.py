"""cujit's calls as PyTorch operators (torch.library.custom_op, namespace
cujit), and the functions that call them.

    out = cujit.attention(q, k, v, causal=True)                 # torch.ops.cujit.attention
    out = cujit.attention(q8, k8, v8, q_descale=qs, k_descale=ks, v_descale=vs)   # FP8 (e4m3) in, bf16 out
    out = cujit.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table)
    out = cujit.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=True)

To torch.compile (fullgraph=True too) and torch.export each operator is one
opaque node whose fake implementation gives the outputs' shapes and dtypes;
the real one enqueues the C call on PyTorch's current stream, so it can be
captured by torch.cuda.graph once its shape class is tuned (run it once
before capturing). The functional operators (attention,
attention_with_kvcache, attention_varlen) return (out, lse), lse empty
unless asked for; with out= the *_out operators write the given tensors
(declared as mutated). KvPlan.run is cujit::kv_plan_run; VarlenPlan.prepare
and run are cujit::varlen_plan_prepare and cujit::varlen_plan_run.

There is no backward yet: a call with an input that requires grad while
grad mode is on fails at once with CujitError (UNSUPPORTED); call under
torch.no_grad() or torch.inference_mode(), or pass detached tensors. A
backward would be added with torch.library.register_autograd on the
functional operators, which already return the LSE it needs.
"""
import ctypes
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _structs, _views
from ._library import CujitError, check, library

__all__ = ["attention", "plan", "attention_varlen", "attention_with_kvcache"]


def refuse_grad(call, *tensors):
    """No backward exists: say so at the call, not at backward()."""
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors):
        raise CujitError(_structs.UNSUPPORTED,
                         f"cujit.{call}: an input requires grad, and cujit has no backward pass yet. Call it under "
                         "torch.no_grad() or torch.inference_mode() (or pass tensors without requires_grad, e.g. "
                         "x.detach()) to run it for inference.")


# Output allocation, shared by the real and the fake implementations so their
# shapes, dtypes and strides agree: out is a contiguous tensor shaped like q,
# in q's dtype, or bfloat16 for FP8 q (as jit::attention allocates); lse is
# float32 (empty when not asked for).

def _like_q(q):
    return q.new_empty(q.shape, dtype=torch.bfloat16 if q.dtype == torch.float8_e4m3fn else q.dtype)


def _lse(q, shape, wanted):
    return q.new_empty(shape if wanted else (0,), dtype=torch.float32)


def _dense_lse_shape(q):
    return tuple(q.shape[:3])  # [B, Hq, Sq] of q [B, Hq, Sq, D]


def _kv_lse_shape(q):
    return (q.shape[0], q.shape[2], q.shape[1])  # [B, Hq, Sq] of q [B, Sq, Hq, D]


def _varlen_lse_shape(q):
    return (q.shape[1], q.shape[0])  # [Hq, total_q] of q [total_q, Hq, D]


def _or_none(lse):
    return lse if lse is not None and lse.numel() > 0 else None


# The C calls.

def _dense(fn, q, k, v, out, descales, causal, bottom_right, scale, lse, *extra):
    device = _views.cuda_q(q)
    views = [_views.tensor(n, t) for n, t in (("q", q), ("k", k), ("v", v), ("out", out))]
    options = _views.options(q, causal, bottom_right, scale, lse)
    _views.set_descales(options, q, k, v, *descales, batch=q.shape[0], heads_kv=k.shape[1])  # [B, H, S, D]
    lib = library()
    with torch.cuda.device(device):  # cujit runs on the calling thread's current context
        status = getattr(lib, fn)(*[ctypes.byref(x) for x in views], ctypes.byref(options), *extra)
    check(status)


def _packed_arguments(q, k, v, out, lse, descales, causal, bottom_right, scale, batch):
    """A ragged call's packed views of q, k, v and out, and its options, with the descale factors of `batch`
    sequences."""
    device = _views.cuda_q(q)
    views = [_views.packed(n, t, device) for n, t in (("q", q), ("k", k), ("v", v), ("out", out))]
    options = _views.options(q, causal, bottom_right, scale, lse)
    # Factors per sequence: [B, Hkv] of k [total_k, Hkv, D].
    _views.set_descales(options, q, k, v, *descales, batch=batch, heads_kv=k.shape[1])
    return views, options


def _varlen(fn, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, descales, causal,
            bottom_right, scale, *extra):
    device = _views.cuda_q(q)
    batch = _views.varlen_batch(device, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    views, options = _packed_arguments(q, k, v, out, lse, descales, causal, bottom_right, scale, batch.batch)
    lib = library()
    with torch.cuda.device(device):
        check(getattr(lib, fn)(*[ctypes.byref(x) for x in views], ctypes.byref(batch), ctypes.byref(options),
                               *extra))


def _kvcache(q, k_cache, v_cache, out, lse, cache_seqlens, block_table, k_descale, v_descale, descale_per_page,
             causal, scale, num_splits):
    q_view, cache, out_view = _views.kv_arguments(q, k_cache, v_cache, cache_seqlens, block_table, k_descale,
                                                  v_descale, out, descale_per_page)
    options = _views.kv_options(causal, scale, num_splits)
    run = _views.run_options(q, lse, None)
    lib = library()
    with torch.cuda.device(q.device):
        check(lib.cujit_attention_with_kvcache(ctypes.byref(q_view), ctypes.byref(cache), ctypes.byref(out_view),
                                               ctypes.byref(options), ctypes.byref(run)))


def _kv_plan_run(plan, q, k_cache, v_cache, out, lse, cache_seqlens, block_table, k_descale, v_descale,
                 descale_per_page, workspace):
    q_view, cache, out_view = _views.kv_arguments(q, k_cache, v_cache, cache_seqlens, block_table, k_descale,
                                                  v_descale, out, descale_per_page)
    run = _views.run_options(q, lse, None if workspace is None else workspace.data_ptr())
    lib = library()
    with torch.cuda.device(q.device):
        check(lib.cujit_kv_plan_run(ctypes.c_void_p(plan), ctypes.byref(q_view), ctypes.byref(cache),
                                    ctypes.byref(out_view), ctypes.byref(run)))


def _pointer(workspace):
    return None if workspace is None else ctypes.c_void_p(workspace.data_ptr())


def _varlen_plan_prepare(plan, device, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, workspace):
    batch = _views.varlen_batch(device, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    lib = library()
    with torch.cuda.device(device):
        check(lib.cujit_varlen_plan_prepare_in(ctypes.c_void_p(plan), ctypes.byref(batch), _views.stream(device),
                                               _pointer(workspace)))


def _varlen_plan_run(plan, q, k, v, out, lse, descales, causal, bottom_right, scale, batch, workspace):
    views, options = _packed_arguments(q, k, v, out, lse, descales, causal, bottom_right, scale, batch)
    lib = library()
    with torch.cuda.device(q.device):
        check(lib.cujit_varlen_plan_run_in(ctypes.c_void_p(plan), *[ctypes.byref(x) for x in views],
                                           ctypes.byref(options), _pointer(workspace)))


# Eager calls on plain tensors go straight to the implementation: the
# registered operator's dispatch costs tens of microseconds a call in Python
# (a small attention took 65 us through it, 18 us is cuDNN's). Tracing
# (torch.compile, torch.export), fake tensors and dispatch modes (opcheck,
# FakeTensorMode) always go through the operator.
def _dispatch_mode_active():
    try:
        from torch.utils._python_dispatch import _get_current_dispatch_mode
        return _get_current_dispatch_mode() is not None or torch._C._is_torch_function_mode_enabled()
    except (ImportError, AttributeError):
        return True


def direct(*args):
    if torch.compiler.is_compiling() or _dispatch_mode_active():
        return False
    return all(type(a) is torch.Tensor for a in args if isinstance(a, torch.Tensor))


def call(op, impl, *args):
    """op(*args), or impl(*args) where that is the same and cheaper (see direct)."""
    return impl(*args) if direct(*args) else op(*args)


# The operators. No device_types: one implementation for every device, so a
# CPU tensor reaches the checks above and gets cujit's message rather than
# the dispatcher's "no kernel for CPU".

# q_descale, k_descale, v_descale: FP8 (e4m3) q, k and v's float32 factors, else None.
def _attention_impl(q: Tensor, k: Tensor, v: Tensor, q_descale: Optional[Tensor], k_descale: Optional[Tensor],
                  v_descale: Optional[Tensor], causal: bool, bottom_right: bool, scale: Optional[float],
                  return_lse: bool) -> Tuple[Tensor, Tensor]:
    out, lse = _like_q(q), _lse(q, _dense_lse_shape(q), return_lse)
    _dense("cujit_attention", q, k, v, out, (q_descale, k_descale, v_descale), causal, bottom_right, scale,
           _or_none(lse))
    return out, lse


_attention_op = torch.library.custom_op("cujit::attention", _attention_impl, mutates_args=())


@_attention_op.register_fake
def _(q, k, v, q_descale, k_descale, v_descale, causal, bottom_right, scale, return_lse):
    return _like_q(q), _lse(q, _dense_lse_shape(q), return_lse)


def _attention_out_impl(q: Tensor, k: Tensor, v: Tensor, output: Tensor, lse: Optional[Tensor],
                      q_descale: Optional[Tensor], k_descale: Optional[Tensor], v_descale: Optional[Tensor],
                      causal: bool, bottom_right: bool, scale: Optional[float]) -> None:
    _dense("cujit_attention", q, k, v, output, (q_descale, k_descale, v_descale), causal, bottom_right, scale, lse)


_attention_out_op = torch.library.custom_op("cujit::attention_out", _attention_out_impl,
                                            mutates_args=("output", "lse"))


@_attention_out_op.register_fake
def _(q, k, v, output, lse, q_descale, k_descale, v_descale, causal, bottom_right, scale):
    return None


def _varlen_impl(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int,
               max_seqlen_k: int, q_descale: Optional[Tensor], k_descale: Optional[Tensor],
               v_descale: Optional[Tensor], causal: bool, bottom_right: bool, scale: Optional[float],
               return_lse: bool) -> Tuple[Tensor, Tensor]:
    out, lse = _like_q(q), _lse(q, _varlen_lse_shape(q), return_lse)
    _varlen("cujit_attention_varlen", q, k, v, out, _or_none(lse), cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
            max_seqlen_k, (q_descale, k_descale, v_descale), causal, bottom_right, scale)
    return out, lse


_varlen_op = torch.library.custom_op("cujit::attention_varlen", _varlen_impl, mutates_args=())


@_varlen_op.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, q_descale, k_descale, v_descale, causal,
      bottom_right, scale, return_lse):
    return _like_q(q), _lse(q, _varlen_lse_shape(q), return_lse)


def _varlen_out_impl(q: Tensor, k: Tensor, v: Tensor, output: Tensor, lse: Optional[Tensor], cu_seqlens_q: Tensor,
                   cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int, q_descale: Optional[Tensor],
                   k_descale: Optional[Tensor], v_descale: Optional[Tensor], causal: bool, bottom_right: bool,
                   scale: Optional[float]) -> None:
    _varlen("cujit_attention_varlen", q, k, v, output, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
            (q_descale, k_descale, v_descale), causal, bottom_right, scale)


_varlen_out_op = torch.library.custom_op("cujit::attention_varlen_out", _varlen_out_impl,
                                         mutates_args=("output", "lse"))


@_varlen_out_op.register_fake
def _(q, k, v, output, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, q_descale, k_descale, v_descale,
      causal, bottom_right, scale):
    return None


def _kvcache_impl(q: Tensor, k_cache: Tensor, v_cache: Tensor, cache_seqlens: Optional[Tensor],
                block_table: Optional[Tensor], k_descale: Optional[Tensor], v_descale: Optional[Tensor],
                descale_per_page: bool, causal: bool, scale: Optional[float], num_splits: int,
                return_lse: bool) -> Tuple[Tensor, Tensor]:
    out, lse = _like_q(q), _lse(q, _kv_lse_shape(q), return_lse)
    _kvcache(q, k_cache, v_cache, out, _or_none(lse), cache_seqlens, block_table, k_descale, v_descale,
             descale_per_page, causal, scale, num_splits)
    return out, lse


_kvcache_op = torch.library.custom_op("cujit::attention_with_kvcache", _kvcache_impl, mutates_args=())


@_kvcache_op.register_fake
def _(q, k_cache, v_cache, cache_seqlens, block_table, k_descale, v_descale, descale_per_page, causal, scale,
      num_splits, return_lse):
    return _like_q(q), _lse(q, _kv_lse_shape(q), return_lse)


def _kvcache_out_impl(q: Tensor, k_cache: Tensor, v_cache: Tensor, output: Tensor, lse: Optional[Tensor],
                    cache_seqlens: Optional[Tensor], block_table: Optional[Tensor], k_descale: Optional[Tensor],
                    v_descale: Optional[Tensor], descale_per_page: bool, causal: bool, scale: Optional[float],
                    num_splits: int) -> None:
    _kvcache(q, k_cache, v_cache, output, lse, cache_seqlens, block_table, k_descale, v_descale, descale_per_page,
             causal, scale, num_splits)


_kvcache_out_op = torch.library.custom_op("cujit::attention_with_kvcache_out", _kvcache_out_impl,
                                          mutates_args=("output", "lse"))


@_kvcache_out_op.register_fake
def _(q, k_cache, v_cache, output, lse, cache_seqlens, block_table, k_descale, v_descale, descale_per_page, causal,
      scale, num_splits):
    return None


# plan: the address of a cujit_kv_plan (KvPlan keeps it alive); workspace is
# scratch the run writes.
def _kv_plan_run_impl(plan: int, q: Tensor, k_cache: Tensor, v_cache: Tensor, output: Tensor, lse: Optional[Tensor],
                    cache_seqlens: Optional[Tensor], block_table: Optional[Tensor], k_descale: Optional[Tensor],
                    v_descale: Optional[Tensor], descale_per_page: bool, workspace: Optional[Tensor]) -> None:
    _kv_plan_run(plan, q, k_cache, v_cache, output, lse, cache_seqlens, block_table, k_descale, v_descale,
                 descale_per_page, workspace)


_kv_plan_run_op = torch.library.custom_op("cujit::kv_plan_run", _kv_plan_run_impl,
                                          mutates_args=("output", "lse", "workspace"))


@_kv_plan_run_op.register_fake
def _(plan, q, k_cache, v_cache, output, lse, cache_seqlens, block_table, k_descale, v_descale, descale_per_page,
      workspace):
    return None


# plan: the address of a cujit_varlen_plan (VarlenPlan keeps it alive). Its
# tile list lives in the caller's workspace, a tensor that prepare declares
# mutated and run reads, or else in the plan's own device memory, which torch
# cannot see: then token, a one-element tensor of the plan's whose data
# nothing touches, stands for it (prepare always declares token mutated and
# run reads it). Under torch.compile
# a run then takes the token prepare's functionalized form returns, so it is
# ordered after that prepare, and the prepare, which mutates an input of the
# graph, is never dropped as having no output. Inductor orders an in-place
# mutation after the reads before it, so a later prepare waits for the runs
# of the list before. run only reads the token, so compiled layers that only
# run mutate no input of theirs (torch.compile's CUDA graphs skip those that do).
def _varlen_plan_prepare_impl(plan: int, token: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                              max_seqlen_q: int, max_seqlen_k: int, workspace: Optional[Tensor]) -> None:
    _varlen_plan_prepare(plan, token.device, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, workspace)


_varlen_plan_prepare_op = torch.library.custom_op("cujit::varlen_plan_prepare", _varlen_plan_prepare_impl,
                                                  mutates_args=("token", "workspace"))


@_varlen_plan_prepare_op.register_fake
def _(plan, token, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, workspace):
    return None


# causal, bottom_right and scale: the plan's (the library checks); batch: its
# sequence count, which per-sequence descale factors are laid out by.
def _varlen_plan_run_impl(plan: int, token: Tensor, q: Tensor, k: Tensor, v: Tensor, output: Tensor,
                          lse: Optional[Tensor], q_descale: Optional[Tensor], k_descale: Optional[Tensor],
                          v_descale: Optional[Tensor], causal: bool, bottom_right: bool, scale: Optional[float],
                          batch: int, workspace: Optional[Tensor]) -> None:
    _varlen_plan_run(plan, q, k, v, output, lse, (q_descale, k_descale, v_descale), causal, bottom_right, scale,
                     batch, workspace)


_varlen_plan_run_op = torch.library.custom_op("cujit::varlen_plan_run", _varlen_plan_run_impl,
                                              mutates_args=("output", "lse"))


@_varlen_plan_run_op.register_fake
def _(plan, token, q, k, v, output, lse, q_descale, k_descale, v_descale, causal, bottom_right, scale, batch,
      workspace):
    return None


# The calls.

def attention(q, k, v, *, causal=False, bottom_right=False, scale=None, out=None, return_lse=False,
              q_descale=None, k_descale=None, v_descale=None):
    """softmax(scale * q k^T [+ causal mask]) v; returns out, or (out, lse) with return_lse.

    q: [B, Hq, Sq, D], k and v: [B, Hkv, Sk, D], float16 or bfloat16 CUDA
    tensors with any strides whose last dimension is contiguous (so
    q.transpose(1, 2) of a [B, S, H, D] tensor works without a copy); Hq a
    multiple of Hkv. bottom_right aligns the causal diagonal with the last
    key (FlashAttention) rather than the first (PyTorch's is_causal). scale
    defaults to 1/sqrt(D). lse is float32 [B, Hq, Sq], the natural-log sum
    of exp per query row. Enqueued on the current stream; the first call
    for a new shape class compiles and tunes (CUJIT_* knobs apply).

    FP8: q, k and v all torch.float8_e4m3fn (sm_89 or newer, head dim 64 or
    128, or 256 on sm_90a) with q_descale, k_descale and v_descale, float32
    factors on q's device as FlashAttention-3's: the value attended to is
    the stored e4m3 value times its factor; [B, Hkv] (one per sequence and
    KV head, any strides; a query head takes its KV head's), [Hkv] (one per
    KV head) or one element (one for the tensor), all three of one shape and
    strides. out is bfloat16 unless an out (float16 or bfloat16) is given.
    The scores are exact products of the e4m3 values; the probabilities are
    rounded to e4m3 for the product with v.
    """
    refuse_grad("attention", q, k, v, q_descale, k_descale, v_descale)
    if out is None:
        out, lse = call(torch.ops.cujit.attention, _attention_impl, q, k, v, q_descale, k_descale, v_descale, causal,
                        bottom_right, scale, return_lse)
    else:
        lse = q.new_empty(_dense_lse_shape(q), dtype=torch.float32) if return_lse else None
        call(torch.ops.cujit.attention_out, _attention_out_impl, q, k, v, out, lse, q_descale, k_descale, v_descale,
             causal, bottom_right, scale)
    return (out, lse) if return_lse else out


def plan(q, k, v, *, causal=False, bottom_right=False, scale=None, q_descale=None, k_descale=None, v_descale=None):
    """The "family/variant" attention() would launch for these arguments (tuning it if needed)."""
    out = _like_q(q)
    buffer = ctypes.create_string_buffer(256)
    _dense("cujit_plan", q, k, v, out, (q_descale, k_descale, v_descale), causal, bottom_right, scale, None, buffer,
           ctypes.sizeof(buffer))
    return buffer.value.decode()


def attention_with_kvcache(q, k_cache, v_cache, *, cache_seqlens=None, block_table=None, k_descale=None,
                           v_descale=None, descale_per_page=False, causal=True, scale=None, num_splits=0, out=None,
                           return_lse=False):
    """Attention of q's new rows over a KV cache; returns out, or (out, lse) with return_lse.

    q: [B, Sq, Hq, D] float16/bfloat16. k_cache, v_cache: [B, S_cap, Hkv, D],
    or with block_table (int32 [B, max_pages], page ids in order) page pools
    [num_pages, page_size, Hkv, D]; any strides with a contiguous last
    dimension; in q's dtype, or FP8: torch.float8_e4m3fn (sm_89 or newer)
    or torch.float8_e5m2 (any GPU), head dim 64 or 128, or 256 with at
    most 8 query rows per KV head (query heads per KV head times Sq). k_descale,
    v_descale: an FP8 cache's float32 descale factors on q's device, as
    FlashAttention-3's: the value attended to is the stored FP8 value times
    its factor. [B, Hkv] (one per
    sequence and KV head, any strides), [Hkv] (one per KV head) or one
    element (one for the cache); both of one shape and strides; None for a
    16-bit cache. descale_per_page (a paged FP8 cache): the factors are per
    page instead, [num_pages, Hkv] (the page at pool index p and KV head
    h's), [Hkv] or one element. cache_seqlens: int32 [B], the keys of each sequence with its
    new rows already appended (None: every sequence has S_cap or
    max_pages * page_size keys). causal: query row i of a sequence with L keys
    sees keys j <= i + L - Sq (bottom-right); scale defaults to 1/sqrt(D);
    num_splits: 0 lets cujit choose, 1 makes results batch-invariant. out:
    [B, Sq, Hq, D]; lse: float32 [B, Hq, Sq]. The first call per shape plans
    (and tunes); later calls reuse the plan. Enqueued on the current stream.
    """
    refuse_grad("attention_with_kvcache", q, k_cache, v_cache, k_descale, v_descale)
    if out is None:
        out, lse = call(torch.ops.cujit.attention_with_kvcache, _kvcache_impl, q, k_cache, v_cache, cache_seqlens,
                        block_table, k_descale, v_descale, bool(descale_per_page), causal, scale, num_splits,
                        return_lse)
    else:
        lse = q.new_empty(_kv_lse_shape(q), dtype=torch.float32) if return_lse else None
        call(torch.ops.cujit.attention_with_kvcache_out, _kvcache_out_impl, q, k_cache, v_cache, out, lse,
             cache_seqlens, block_table, k_descale, v_descale, bool(descale_per_page), causal, scale, num_splits)
    return (out, lse) if return_lse else out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, causal=False,
                     bottom_right=False, scale=None, out=None, return_lse=False, q_descale=None, k_descale=None,
                     v_descale=None):
    """Attention within each sequence of a ragged batch; returns out, or (out, lse) with return_lse.

    q: [total_q, Hq, D], k and v: [total_k, Hkv, D], float16/bfloat16 CUDA
    tensors with any strides whose last dimension is contiguous. Sequence b
    has query rows cu_seqlens_q[b]:cu_seqlens_q[b + 1] and keys
    cu_seqlens_k[b]:cu_seqlens_k[b + 1]: int32 [batch + 1] CUDA tensors,
    non-decreasing from 0. max_seqlen_q, max_seqlen_k: the longest
    sequence's rows and keys, as host ints (not read back from the device).
    causal masks within each sequence; bottom_right aligns its diagonal with
    the sequence's last key (FlashAttention) rather than its first (PyTorch's
    is_causal). scale defaults to 1/sqrt(D). out: [total_q, Hq, D]; lse:
    float32 [Hq, total_q]. Rows outside every sequence are not written (of an
    allocated out or lse they hold whatever torch.empty gave). Enqueued on the
    current stream; CUJIT_CHECK=1 checks the prefix sums on the device first.

    FP8: q, k and v all torch.float8_e4m3fn with q_descale, k_descale and
    v_descale as attention()'s, per sequence: [batch, Hkv], [Hkv] or one
    element. out is bfloat16 unless an out (float16 or bfloat16) is given.
    """
    refuse_grad("attention_varlen", q, k, v, q_descale, k_descale, v_descale)
    max_seqlen_q, max_seqlen_k = int(max_seqlen_q), int(max_seqlen_k)
    if out is None:
        out, lse = call(torch.ops.cujit.attention_varlen, _varlen_impl, q, k, v, cu_seqlens_q, cu_seqlens_k,
                        max_seqlen_q, max_seqlen_k, q_descale, k_descale, v_descale, causal, bottom_right, scale,
                        return_lse)
    else:
        lse = q.new_empty(_varlen_lse_shape(q), dtype=torch.float32) if return_lse else None
        call(torch.ops.cujit.attention_varlen_out, _varlen_out_impl, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
             max_seqlen_q, max_seqlen_k, q_descale, k_descale, v_descale, causal, bottom_right, scale)
    return (out, lse) if return_lse else out
