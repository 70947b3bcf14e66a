"""cujit attention on PyTorch tensors: a thin ctypes binding over libcujit_c.so.

    import cujit_torch
    out = cujit_torch.attention(q, k, v, causal=True)

q: [B, Hq, Sq, D], k and v: [B, Hkv, Sk, D], float16 or bfloat16 CUDA tensors
with any strides whose last dimension is contiguous (so q.transpose(1, 2) of
a [B, S, H, D] tensor works without a copy); Hq a multiple of Hkv. The call
is enqueued on PyTorch's current stream of q's device and does not
synchronize. The first call for a new shape class compiles and tunes
(CUJIT_* environment knobs apply, as in C++).

Attention over a KV cache (docs/serving.md), in FlashAttention's
flash_attn_with_kvcache layout: q [B, Sq, Hq, D], a cache [B, S_cap, Hkv, D]
or pages [num_pages, page_size, Hkv, D] with an int32 block_table:

    out = cujit_torch.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table)
    plan = cujit_torch.KvPlan(batch=B, heads_q=Hq, heads_kv=Hkv, head_dim=D, max_seq_k=L, page_size=16)
    plan.run(q, k_cache, v_cache, cache_seqlens=lens, block_table=table, out=out)   # per layer

A ragged batch (docs/serving.md, "Ragged batches"), in FlashAttention's
flash_attn_varlen_func layout: the sequences' rows packed into q
[total_q, Hq, D] and k, v [total_k, Hkv, D], located by int32 prefix sums:

    out = cujit_torch.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                       causal=True, bottom_right=True)

The library is found at $CUJIT_C_LIBRARY, else in the build tree next to this
file (build/bindings/c/libcujit_c.so), else by the system's loader.
"""
import ctypes
import os

import torch

__all__ = ["attention", "plan", "attention_varlen", "attention_with_kvcache", "KvPlan", "CujitError"]


class CujitError(RuntimeError):
    """A failed call: `status` is the cujit_status code, the text says what to fix."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32),
                ("shape", ctypes.c_int64 * 4), ("strides", ctypes.c_int64 * 4)]


class _Options(ctypes.Structure):
    _fields_ = [("causal", ctypes.c_int32), ("bottom_right", ctypes.c_int32), ("scale", ctypes.c_float),
                ("stream", ctypes.c_void_p), ("lse", ctypes.c_void_p)]


class _VarlenBatch(ctypes.Structure):
    _fields_ = [("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_k", ctypes.c_void_p), ("batch", ctypes.c_int64),
                ("max_seqlen_q", ctypes.c_int64), ("max_seqlen_k", ctypes.c_int64)]


class _KvCache(ctypes.Structure):
    _fields_ = [("k", _Tensor), ("v", _Tensor), ("block_table", ctypes.c_void_p), ("pages_per_seq", ctypes.c_int64),
                ("block_table_stride", ctypes.c_int64), ("seq_lens", ctypes.c_void_p)]


class _KvShape(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int64), ("heads_q", ctypes.c_int64), ("heads_kv", ctypes.c_int64),
                ("head_dim", ctypes.c_int64), ("dtype", ctypes.c_int32), ("seq_q", ctypes.c_int64),
                ("max_seq_k", ctypes.c_int64), ("page_size", ctypes.c_int64),
                ("per_sequence_lengths", ctypes.c_int32)]


class _KvOptions(ctypes.Structure):
    _fields_ = [("causal", ctypes.c_int32), ("scale", ctypes.c_float), ("num_splits", ctypes.c_int32)]


class _KvRunOptions(ctypes.Structure):
    _fields_ = [("stream", ctypes.c_void_p), ("lse", ctypes.c_void_p), ("workspace", ctypes.c_void_p)]


_ABI_VERSION = 1  # CUJIT_C_ABI_VERSION in bindings/c/cujit_c.h
_DTYPES = {torch.float16: 0, torch.bfloat16: 1}
_lib = None


def _library():
    global _lib
    if _lib is not None:
        return _lib
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("CUJIT_C_LIBRARY"),
                  os.path.join(here, "..", "..", "build", "bindings", "c", "libcujit_c.so"),
                  "libcujit_c.so"]
    tried = []
    for path in filter(None, candidates):
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            tried.append(f"{path}: {e}")
    else:
        raise CujitError(None, "libcujit_c.so not found; build cujit (scripts/build) or set CUJIT_C_LIBRARY. "
                               "Tried: " + "; ".join(tried))
    lib.cujit_c_abi_version.restype = ctypes.c_int
    if lib.cujit_c_abi_version() != _ABI_VERSION:
        raise CujitError(None, f"{path} has C ABI version {lib.cujit_c_abi_version()}, this binding expects "
                               f"{_ABI_VERSION}: rebuild cujit or use the matching cujit_torch.py")
    lib.cujit_last_error.restype = ctypes.c_char_p
    args = [ctypes.POINTER(_Tensor)] * 4 + [ctypes.POINTER(_Options)]
    lib.cujit_attention.argtypes = args
    lib.cujit_attention.restype = ctypes.c_int
    lib.cujit_plan.argtypes = args + [ctypes.c_char_p, ctypes.c_size_t]
    lib.cujit_plan.restype = ctypes.c_int
    lib.cujit_attention_varlen.argtypes = [ctypes.POINTER(_Tensor)] * 4 + [ctypes.POINTER(_VarlenBatch),
                                                                           ctypes.POINTER(_Options)]
    lib.cujit_attention_varlen.restype = ctypes.c_int
    _declare_serving(lib)
    _lib = lib
    return lib


def _declare_serving(lib):
    P = ctypes.POINTER
    signatures = {
        "cujit_attention_with_kvcache": [P(_Tensor), P(_KvCache), P(_Tensor), P(_KvOptions), P(_KvRunOptions)],
        "cujit_kv_plan_create": [P(_KvShape), P(_KvOptions), ctypes.c_void_p, P(ctypes.c_void_p)],
        "cujit_kv_plan_run": [ctypes.c_void_p, P(_Tensor), P(_KvCache), P(_Tensor), P(_KvRunOptions)],
        "cujit_kv_plan_workspace_bytes": [ctypes.c_void_p, P(ctypes.c_size_t)],
        "cujit_kv_plan_num_splits": [ctypes.c_void_p, P(ctypes.c_int)],
        "cujit_kv_plan_describe": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t],
    }
    for name, argtypes in signatures.items():
        getattr(lib, name).argtypes = argtypes
        getattr(lib, name).restype = ctypes.c_int
    lib.cujit_kv_plan_destroy.argtypes = [ctypes.c_void_p]
    lib.cujit_kv_plan_destroy.restype = None


def _check(lib, status):
    if status != 0:
        raise CujitError(status, lib.cujit_last_error().decode(errors="replace"))


def _view(name, t):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
    if t.dtype not in _DTYPES:
        raise CujitError(1, f"{name} is {t.dtype}; cujit takes torch.float16 or torch.bfloat16")
    if t.dim() != 4:
        raise CujitError(1, f"{name} has {t.dim()} dimensions; cujit takes [B, H, S, D]")
    v = _Tensor()
    v.data = t.data_ptr()
    v.dtype = _DTYPES[t.dtype]
    v.shape[:] = list(t.shape)
    v.strides[:] = list(t.stride())
    return v


def _options(q, causal, bottom_right, scale, lse):
    options = _Options()
    options.causal = int(bool(causal))
    options.bottom_right = int(bool(bottom_right))
    options.scale = 0.0 if scale is None else float(scale)
    options.stream = torch.cuda.current_stream(q.device).cuda_stream
    options.lse = None if lse is None else lse.data_ptr()
    return options


def _call(fn, q, k, v, out, causal, bottom_right, scale, lse, *extra):
    lib = _library()
    if not q.is_cuda:
        raise CujitError(1, f"q is on {q.device}; cujit needs CUDA tensors")
    views = [_view(n, t) for n, t in (("q", q), ("k", k), ("v", v), ("out", out))]
    options = _options(q, causal, bottom_right, scale, lse)
    with torch.cuda.device(q.device):  # cujit runs on the calling thread's current context
        status = getattr(lib, fn)(*[ctypes.byref(x) for x in views], ctypes.byref(options), *extra)
    _check(lib, status)


def attention(q, k, v, *, causal=False, bottom_right=False, scale=None, out=None, return_lse=False):
    """softmax(scale * q k^T [+ causal mask]) v; returns out, or (out, lse) with return_lse.

    bottom_right aligns the causal diagonal with the last key (FlashAttention)
    rather than the first (PyTorch's is_causal). scale defaults to 1/sqrt(D).
    lse is float32 [B, Hq, Sq], the natural-log sum of exp per query row.
    """
    if out is None:
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device) if return_lse else None
    _call("cujit_attention", q, k, v, out, causal, bottom_right, scale, lse)
    return (out, lse) if return_lse else out


def plan(q, k, v, *, causal=False, bottom_right=False, scale=None):
    """The "family/variant" attention() would launch for these arguments (tuning it if needed)."""
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    buffer = ctypes.create_string_buffer(256)
    _call("cujit_plan", q, k, v, out, causal, bottom_right, scale, None, buffer, ctypes.sizeof(buffer))
    return buffer.value.decode()


# Attention over a KV cache (jit/serving.h), in FlashAttention's layouts. A
# [B, S, H, D] tensor becomes cujit's [B, H, S, D] view by swapping the
# strides of dimensions 1 and 2 (transpose(1, 2)): no copy. A page pool
# [num_pages, page_size, Hkv, D] is viewed the same way, as
# [num_pages, Hkv, page_size, D].

def _on_device(name, t, device):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
    if not t.is_cuda:
        raise CujitError(1, f"{name} is on {t.device}; cujit needs CUDA tensors")
    if t.device != device:
        raise CujitError(1, f"{name} is on {t.device} but q is on {device}: put every argument on one GPU")


def _bshd(name, t, device, layout):
    """cujit's [B, H, S, D] view of a 4-D tensor stored as `layout` ([B, S, H, D] or pages)."""
    _on_device(name, t, device)
    if t.dim() != 4:
        raise CujitError(1, f"{name} has {t.dim()} dimensions; it must be {layout}")
    return _view(name, t.transpose(1, 2))


def _int32_rows(name, t, device, batch, layout):
    """The address and row stride (0 for one row) of an int32 tensor with one row per sequence:
    [B] (one entry each, adjacent) or [B, N] (rows of adjacent entries, not overlapping)."""
    _on_device(name, t, device)
    if t.dtype != torch.int32:
        raise CujitError(1, f"{name} is {t.dtype}; it must be torch.int32 (use {name}.to(torch.int32))")
    if t.dim() != len(layout.split(",")) or t.shape[0] != batch:
        raise CujitError(1, f"{name} has shape {list(t.shape)}; it must be {layout} with B = {batch} (q's batch)")
    entries = t.shape[1] if t.dim() == 2 else 1
    if (t.dim() == 2 and entries > 1 and t.stride(1) != 1) or (batch > 1 and t.stride(0) < entries) or \
            (t.dim() == 1 and batch > 1 and t.stride(0) != 1):
        raise CujitError(1, f"{name} has strides {list(t.stride())}: its entries must be adjacent and its rows "
                            f"must not overlap; use {name}.contiguous()")
    return t.data_ptr(), (t.stride(0) if batch > 1 else 0)


def _kv_arguments(q, k_cache, v_cache, cache_seqlens, block_table, out):
    """q, the cache and out as the C structs; out allocated like q when None."""
    if not isinstance(q, torch.Tensor):
        raise TypeError(f"q must be a torch.Tensor, not {type(q).__name__}")
    if not q.is_cuda:
        raise CujitError(1, f"q is on {q.device}; cujit needs CUDA tensors")
    device = q.device
    q_view = _bshd("q", q, device, "[B, Sq, Hq, D]")
    batch = q.shape[0]
    cache = _KvCache()
    if block_table is None:
        layout = "[B, S_cap, Hkv, D] (or pass block_table for a paged cache)"
    else:
        layout = "[num_pages, page_size, Hkv, D] (a paged cache, as block_table says)"
        cache.block_table, cache.block_table_stride = _int32_rows("block_table", block_table, device, batch,
                                                                  "[B, max_pages]")
        cache.pages_per_seq = block_table.shape[1]
    cache.k = _bshd("k_cache", k_cache, device, layout)
    cache.v = _bshd("v_cache", v_cache, device, layout)
    if cache_seqlens is not None:
        cache.seq_lens, _ = _int32_rows("cache_seqlens", cache_seqlens, device, batch, "[B]")
    if out is None:
        out = torch.empty(q.shape, dtype=q.dtype, device=device)
    out_view = _bshd("out", out, device, "[B, Sq, Hq, D]")
    return q_view, cache, out_view, out


def _run_options(q, lse, workspace):
    run = _KvRunOptions()
    run.stream = torch.cuda.current_stream(q.device).cuda_stream
    run.lse = None if lse is None else lse.data_ptr()
    run.workspace = workspace
    return run


def _kv_options(causal, scale, num_splits):
    return _KvOptions(int(bool(causal)), 0.0 if scale is None else float(scale), int(num_splits))


def _lse_for(q, return_lse):
    """float32 [B, Hq, Sq] for the log-sum-exp, or None."""
    if not return_lse:
        return None
    return torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)


def attention_with_kvcache(q, k_cache, v_cache, *, cache_seqlens=None, block_table=None, causal=True, scale=None,
                           num_splits=0, out=None, return_lse=False):
    """Attention of q's new rows over a KV cache; returns out, or (out, lse) with return_lse.

    q: [B, Sq, Hq, D] float16/bfloat16. k_cache, v_cache: [B, S_cap, Hkv, D],
    or with block_table (int32 [B, max_pages], page ids in order) page pools
    [num_pages, page_size, Hkv, D]; any strides with a contiguous last
    dimension. cache_seqlens: int32 [B], the keys of each sequence with its
    new rows already appended (None: every sequence has S_cap or
    max_pages * page_size keys). causal: query row i of a sequence with L keys
    sees keys j <= i + L - Sq (bottom-right); scale defaults to 1/sqrt(D);
    num_splits: 0 lets cujit choose, 1 makes results batch-invariant. out:
    [B, Sq, Hq, D]; lse: float32 [B, Hq, Sq]. The first call per shape plans
    (and tunes); later calls reuse the plan. Enqueued on the current stream.
    """
    q_view, cache, out_view, out = _kv_arguments(q, k_cache, v_cache, cache_seqlens, block_table, out)
    lse = _lse_for(q, return_lse)
    lib = _library()
    options = _kv_options(causal, scale, num_splits)
    run = _run_options(q, lse, None)
    with torch.cuda.device(q.device):
        _check(lib, lib.cujit_attention_with_kvcache(ctypes.byref(q_view), ctypes.byref(cache), ctypes.byref(out_view),
                                                     ctypes.byref(options), ctypes.byref(run)))
    return (out, lse) if return_lse else out


class KvPlan:
    """A plan for one batch composition, made once and run for every layer.

    Arguments as in attention_with_kvcache, for the shape given here:
    max_seq_k is the longest sequence's key count, page_size 0 means a
    contiguous cache, per_sequence_lengths says whether runs pass
    cache_seqlens. Making it tunes on the first plan per shape class (on the
    current stream); run() never allocates (with out given), synchronizes or
    tunes, so it can be captured in a torch.cuda.CUDAGraph. Without a
    workspace tensor, runs use the plan's own: then they must not overlap on
    different streams. The plan (and its workspace) is freed when the object
    is (or by close()): keep it alive while a graph that ran it may replay.
    """

    def __init__(self, *, batch, heads_q, heads_kv, head_dim, max_seq_k, seq_q=1, page_size=0,
                 dtype=torch.float16, per_sequence_lengths=True, causal=True, scale=None, num_splits=0, device=None):
        self._handle = None
        if dtype not in _DTYPES:
            raise CujitError(1, f"dtype is {dtype}; cujit takes torch.float16 or torch.bfloat16")
        device = torch.device("cuda") if device is None else torch.device(device)
        if device.type != "cuda":
            raise CujitError(1, f"device is {device}; a KvPlan is made for a CUDA device")
        self.device = torch.device("cuda", torch.cuda.current_device() if device.index is None else device.index)
        self.dtype = dtype
        self.page_size = int(page_size)
        self.per_sequence_lengths = bool(per_sequence_lengths)
        self._lib = _library()
        shape = _KvShape(batch, heads_q, heads_kv, head_dim, _DTYPES[dtype], seq_q, max_seq_k, self.page_size,
                         int(self.per_sequence_lengths))
        options = _kv_options(causal, scale, num_splits)
        handle = ctypes.c_void_p()
        with torch.cuda.device(self.device):
            stream = torch.cuda.current_stream(self.device).cuda_stream
            _check(self._lib, self._lib.cujit_kv_plan_create(ctypes.byref(shape), ctypes.byref(options), stream,
                                                             ctypes.byref(handle)))
        self._handle = handle
        bytes_, splits, name = ctypes.c_size_t(), ctypes.c_int(), ctypes.create_string_buffer(256)
        _check(self._lib, self._lib.cujit_kv_plan_workspace_bytes(handle, ctypes.byref(bytes_)))
        _check(self._lib, self._lib.cujit_kv_plan_num_splits(handle, ctypes.byref(splits)))
        _check(self._lib, self._lib.cujit_kv_plan_describe(handle, name, ctypes.sizeof(name)))
        self.workspace_bytes = bytes_.value  # device memory a run needs (0 when nothing is split)
        self.num_splits = splits.value
        self.variant = name.value.decode()  # "family/variant"

    def run(self, q, k_cache, v_cache, *, cache_seqlens=None, block_table=None, out=None, workspace=None,
            return_lse=False):
        """Enqueues the plan on the current stream; returns out, or (out, lse) with return_lse.

        workspace: None (the plan's own), or a CUDA tensor of at least
        workspace_bytes bytes whose address is 16-byte aligned.
        """
        if self._handle is None:
            raise CujitError(1, "this KvPlan is closed")
        if self.per_sequence_lengths != (cache_seqlens is not None):
            raise CujitError(1, "cache_seqlens is " + ("None but the plan was made with per_sequence_lengths=True"
                                                       if cache_seqlens is None else
                                                       "given but the plan was made with per_sequence_lengths=False"))
        if (self.page_size > 0) != (block_table is not None):
            raise CujitError(1, f"block_table is None but the plan was made for pages of {self.page_size} keys"
                                if block_table is None else
                                "block_table is given but the plan was made for a contiguous cache (page_size=0)")
        q_view, cache, out_view, out = _kv_arguments(q, k_cache, v_cache, cache_seqlens, block_table, out)
        if q.device != self.device:
            raise CujitError(1, f"q is on {q.device} but the plan was made on {self.device}")
        workspace_ptr = None
        if workspace is not None:
            _on_device("workspace", workspace, q.device)
            size = workspace.numel() * workspace.element_size()
            if not workspace.is_contiguous() or size < self.workspace_bytes:
                raise CujitError(1, f"workspace must be a contiguous tensor of at least {self.workspace_bytes} bytes "
                                    f"(KvPlan.workspace_bytes); it has {size}")
            workspace_ptr = workspace.data_ptr()
        lse = _lse_for(q, return_lse)
        run = _run_options(q, lse, workspace_ptr)
        with torch.cuda.device(q.device):
            _check(self._lib, self._lib.cujit_kv_plan_run(self._handle, ctypes.byref(q_view), ctypes.byref(cache),
                                                          ctypes.byref(out_view), ctypes.byref(run)))
        return (out, lse) if return_lse else out

    def close(self):
        """Frees the plan and its workspace now (work already enqueued that uses them must be done)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self._lib.cujit_kv_plan_destroy(handle)

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self.close()


# A ragged batch (jit/varlen.h): packed [total, H, D] tensors are cujit's
# [1, H, total, D] views (unsqueeze(0).transpose(1, 2): no copy).

def _packed(name, t, device):
    """cujit's [1, H, total, D] view of a [total, H, D] tensor."""
    _on_device(name, t, device)
    if t.dim() != 3:
        raise CujitError(1, f"{name} has {t.dim()} dimensions; it must be packed [total, H, D]")
    return _view(name, t.unsqueeze(0).transpose(1, 2))


def _prefix_sums(name, t, device, batch=None):
    """The address of an int32 [batch + 1] tensor of adjacent entries, and its batch."""
    _on_device(name, t, device)
    if t.dtype != torch.int32:
        raise CujitError(1, f"{name} is {t.dtype}; it must be torch.int32 (use {name}.to(torch.int32))")
    if t.dim() != 1 or t.numel() < 1 or (batch is not None and t.numel() != batch + 1):
        want = "[batch + 1]" if batch is None else f"[{batch + 1}] (cu_seqlens_q's batch {batch}, plus 1)"
        raise CujitError(1, f"{name} has shape {list(t.shape)}; it must be {want}")
    if t.numel() > 1 and t.stride(0) != 1:
        raise CujitError(1, f"{name} has strides {list(t.stride())}: its entries must be adjacent; "
                            f"use {name}.contiguous()")
    return t.data_ptr(), t.numel() - 1


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, causal=False,
                     bottom_right=False, scale=None, out=None, return_lse=False):
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
    """
    if not isinstance(q, torch.Tensor):
        raise TypeError(f"q must be a torch.Tensor, not {type(q).__name__}")
    if not q.is_cuda:
        raise CujitError(1, f"q is on {q.device}; cujit needs CUDA tensors")
    device = q.device
    batch = _VarlenBatch()
    batch.cu_seqlens_q, batch.batch = _prefix_sums("cu_seqlens_q", cu_seqlens_q, device)
    batch.cu_seqlens_k, _ = _prefix_sums("cu_seqlens_k", cu_seqlens_k, device, batch.batch)
    batch.max_seqlen_q = int(max_seqlen_q)
    batch.max_seqlen_k = int(max_seqlen_k)
    if out is None:
        out = torch.empty(q.shape, dtype=q.dtype, device=device)
    views = [_packed(n, t, device) for n, t in (("q", q), ("k", k), ("v", v), ("out", out))]
    lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=device) if return_lse else None
    lib = _library()
    options = _options(q, causal, bottom_right, scale, lse)
    with torch.cuda.device(device):
        _check(lib, lib.cujit_attention_varlen(*[ctypes.byref(x) for x in views], ctypes.byref(batch),
                                               ctypes.byref(options)))
    return (out, lse) if return_lse else out
