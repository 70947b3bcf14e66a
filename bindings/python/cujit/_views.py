"""PyTorch tensors as the C interface's structs: cujit's [B, H, S, D] views
of the layouts the calls take (no copies), and the options structs with
PyTorch's current stream. The checks here are the ones the C side cannot
make (it sees addresses, not torch dtypes or devices); the rest is the
library's.
"""
import torch

from . import _descale
from . import _structs as s
from ._library import CujitError

# float8_e4m3fn is taken for attention's q, k and v and for KV caches,
# float8_e5m2 for KV caches; the library refuses them elsewhere, saying so.
_DTYPES = {getattr(torch, name): code for name, code in s.DTYPE_CODES.items()}
_TAKEN = ("torch.float16 or torch.bfloat16 (torch.float8_e4m3fn for attention's q, k and v, or a KV cache; "
          "torch.float8_e5m2 for a KV cache)")
_BAD = s.INVALID_ARGUMENT


def dtype_code(dtype):
    if dtype not in _DTYPES:
        raise CujitError(_BAD, f"dtype is {dtype}; cujit takes {_TAKEN}")
    return _DTYPES[dtype]


def tensor(name, t):
    """A 4-D [B, H, S, D] view as a cujit_tensor."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
    if t.dtype not in _DTYPES:
        raise CujitError(_BAD, f"{name} is {t.dtype}; cujit takes {_TAKEN}")
    if t.dim() != 4:
        raise CujitError(_BAD, f"{name} has {t.dim()} dimensions; cujit takes [B, H, S, D]")
    v = s.Tensor()
    v.data = t.data_ptr()
    v.dtype = _DTYPES[t.dtype]
    v.shape[:] = list(t.shape)
    v.strides[:] = list(t.stride())
    return v


def on_device(name, t, device):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
    if not t.is_cuda:
        raise CujitError(_BAD, f"{name} is on {t.device}; cujit needs CUDA tensors")
    if t.device != device:
        raise CujitError(_BAD, f"{name} is on {t.device} but q is on {device}: put every argument on one GPU")


def check_workspace(workspace, device, need, owner):
    """A caller's workspace: a contiguous CUDA tensor on device of at least need bytes (owner.workspace_bytes)."""
    on_device("workspace", workspace, device)
    size = workspace.numel() * workspace.element_size()
    if not workspace.is_contiguous() or size < need:
        raise CujitError(_BAD, f"workspace must be a contiguous tensor of at least {need} bytes "
                               f"({owner}.workspace_bytes); it has {size}")


def cuda_q(q):
    """q's device, after checking q is a CUDA tensor."""
    if not isinstance(q, torch.Tensor):
        raise TypeError(f"q must be a torch.Tensor, not {type(q).__name__}")
    if not q.is_cuda:
        raise CujitError(_BAD, f"q is on {q.device}; cujit needs CUDA tensors")
    return q.device


def stream(device):
    """PyTorch's current stream on `device` (under torch.cuda.graph, the capturing stream)."""
    return torch.cuda.current_stream(device).cuda_stream


def options(q, causal, bottom_right, scale, lse):
    o = s.Options()
    o.causal = int(bool(causal))
    o.bottom_right = int(bool(bottom_right))
    o.scale = 0.0 if scale is None else float(scale)
    o.stream = stream(q.device)
    o.lse = None if lse is None else lse.data_ptr()
    return o


def set_descales(o, q, k, v, q_descale, k_descale, v_descale, batch, heads_kv):
    """FP8 attention's descale factors into cujit_options o, after checking that e4m3 q, k and v have all
    three (float32, on q's device; [batch, heads_kv], [heads_kv] or one element) and 16-bit ones none."""
    factors = {"q_descale": q_descale, "k_descale": k_descale, "v_descale": v_descale}
    for name, t in factors.items():
        if t is not None and not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor or None, not {type(t).__name__}")
    strides = _descale.attention_descale_strides(
        tuple(str(t.dtype) for t in (q, k, v)), batch, heads_kv,
        **{name: None if t is None else (t.shape, t.stride()) for name, t in factors.items()})
    for name, t in factors.items():
        if t is not None:
            setattr(o, name, descale_factors(name, t, q.device))
    if strides is not None:
        o.descale_strides[:] = strides
        o.has_descale_strides = 1


# Attention over a KV cache (jit/serving.h), in FlashAttention's layouts. A
# [B, S, H, D] tensor becomes cujit's [B, H, S, D] view by swapping the
# strides of dimensions 1 and 2 (transpose(1, 2)): no copy. A page pool
# [num_pages, page_size, Hkv, D] is viewed the same way, as
# [num_pages, Hkv, page_size, D].

def bshd(name, t, device, layout):
    """cujit's [B, H, S, D] view of a 4-D tensor stored as `layout` ([B, S, H, D] or pages)."""
    on_device(name, t, device)
    if t.dim() != 4:
        raise CujitError(_BAD, f"{name} has {t.dim()} dimensions; it must be {layout}")
    return tensor(name, t.transpose(1, 2))


def int32_rows(name, t, device, batch, layout):
    """The address and row stride (0 for one row) of an int32 tensor with one row per sequence:
    [B] (one entry each, adjacent) or [B, N] (rows of adjacent entries, not overlapping)."""
    on_device(name, t, device)
    if t.dtype != torch.int32:
        raise CujitError(_BAD, f"{name} is {t.dtype}; it must be torch.int32 (use {name}.to(torch.int32))")
    if t.dim() != len(layout.split(",")) or t.shape[0] != batch:
        raise CujitError(_BAD, f"{name} has shape {list(t.shape)}; it must be {layout} with B = {batch} (q's batch)")
    entries = t.shape[1] if t.dim() == 2 else 1
    if (t.dim() == 2 and entries > 1 and t.stride(1) != 1) or (batch > 1 and t.stride(0) < entries) or \
            (t.dim() == 1 and batch > 1 and t.stride(0) != 1):
        raise CujitError(_BAD, f"{name} has strides {list(t.stride())}: its entries must be adjacent and its rows "
                               f"must not overlap; use {name}.contiguous()")
    return t.data_ptr(), (t.stride(0) if batch > 1 else 0)


def descale_factors(name, t, device):
    """The address of a float32 descale tensor on q's device (its shape is read by _descale)."""
    on_device(name, t, device)
    if t.dtype != torch.float32:
        raise CujitError(_BAD, f"{name} is {t.dtype}; it must be torch.float32 (use {name}.float())")
    return t.data_ptr()


def kv_arguments(q, k_cache, v_cache, cache_seqlens, block_table, k_descale, v_descale, out, descale_per_page=False):
    """q, the cache and out as the C structs (descale_per_page: the factors are [num_pages, Hkv])."""
    device = cuda_q(q)
    q_view = bshd("q", q, device, "[B, Sq, Hq, D]")
    batch = q.shape[0]
    cache = s.KvCache()
    if block_table is None:
        layout = "[B, S_cap, Hkv, D] (or pass block_table for a paged cache)"
    else:
        layout = "[num_pages, page_size, Hkv, D] (a paged cache, as block_table says)"
        cache.block_table, cache.block_table_stride = int32_rows("block_table", block_table, device, batch,
                                                                 "[B, max_pages]")
        cache.pages_per_seq = block_table.shape[1]
    cache.k = bshd("k_cache", k_cache, device, layout)
    cache.v = bshd("v_cache", v_cache, device, layout)
    if cache_seqlens is not None:
        cache.seq_lens, _ = int32_rows("cache_seqlens", cache_seqlens, device, batch, "[B]")
    # Whether an FP8 cache has its factors (and a 16-bit one none) is the library's check.
    if k_descale is not None:
        cache.k_descale = descale_factors("k_descale", k_descale, device)
    if v_descale is not None:
        cache.v_descale = descale_factors("v_descale", v_descale, device)
    cache.descale_per_page = int(bool(descale_per_page))
    strides = _descale.descale_strides(k_cache.shape[0] if descale_per_page else batch, k_cache.shape[2],
                                       "num_pages" if descale_per_page else "B",
                                       **{name: None if t is None else (t.shape, t.stride())
                                          for name, t in (("k_descale", k_descale), ("v_descale", v_descale))})
    if strides is not None:
        cache.descale_strides[:] = strides
        cache.has_descale_strides = 1
    return q_view, cache, bshd("out", out, device, "[B, Sq, Hq, D]")


def kv_options(causal, scale, num_splits):
    return s.KvOptions(int(bool(causal)), 0.0 if scale is None else float(scale), int(num_splits))


def run_options(q, lse, workspace):
    run = s.KvRunOptions()
    run.stream = stream(q.device)
    run.lse = None if lse is None else lse.data_ptr()
    run.workspace = workspace
    return run


# A ragged batch (jit/varlen.h): packed [total, H, D] tensors are cujit's
# [1, H, total, D] views (unsqueeze(0).transpose(1, 2): no copy).

def packed(name, t, device):
    """cujit's [1, H, total, D] view of a [total, H, D] tensor."""
    on_device(name, t, device)
    if t.dim() != 3:
        raise CujitError(_BAD, f"{name} has {t.dim()} dimensions; it must be packed [total, H, D]")
    return tensor(name, t.unsqueeze(0).transpose(1, 2))


def prefix_sums(name, t, device, batch=None):
    """The address of an int32 [batch + 1] tensor of adjacent entries, and its batch."""
    on_device(name, t, device)
    if t.dtype != torch.int32:
        raise CujitError(_BAD, f"{name} is {t.dtype}; it must be torch.int32 (use {name}.to(torch.int32))")
    if t.dim() != 1 or t.numel() < 1 or (batch is not None and t.numel() != batch + 1):
        want = "[batch + 1]" if batch is None else f"[{batch + 1}] (cu_seqlens_q's batch {batch}, plus 1)"
        raise CujitError(_BAD, f"{name} has shape {list(t.shape)}; it must be {want}")
    if t.numel() > 1 and t.stride(0) != 1:
        raise CujitError(_BAD, f"{name} has strides {list(t.stride())}: its entries must be adjacent; "
                               f"use {name}.contiguous()")
    return t.data_ptr(), t.numel() - 1


def varlen_batch(device, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
    """The prefix sums on `device` (q's, or a ragged plan's) as a cujit_varlen_batch."""
    batch = s.VarlenBatch()
    batch.cu_seqlens_q, batch.batch = prefix_sums("cu_seqlens_q", cu_seqlens_q, device)
    batch.cu_seqlens_k, _ = prefix_sums("cu_seqlens_k", cu_seqlens_k, device, batch.batch)
    batch.max_seqlen_q = int(max_seqlen_q)
    batch.max_seqlen_k = int(max_seqlen_k)
    return batch
