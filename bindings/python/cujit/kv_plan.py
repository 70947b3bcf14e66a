"""KvPlan: attention over a KV cache planned once per batch composition and
run for every layer (jit/serving.h; docs/serving.md). A run is the operator
cujit::kv_plan_run, so it can be compiled and captured like the others.
"""
import ctypes

import torch

from . import _structs, _views
from ._library import CujitError, check, library
from .ops import _kv_lse_shape, _kv_plan_run_impl, call, refuse_grad

__all__ = ["KvPlan"]
_BAD = _structs.INVALID_ARGUMENT


class KvPlan:
    """A plan for one batch composition, made once and run for every layer.

    Arguments as in attention_with_kvcache, for the shape given here:
    max_seq_k is the longest sequence's key count, page_size 0 means a
    contiguous cache, per_sequence_lengths says whether runs pass
    cache_seqlens, kv_dtype is the cache's dtype (None: dtype;
    torch.float8_e4m3fn or torch.float8_e5m2 for an FP8 cache, whose runs
    pass k_descale and v_descale), head_major says the runs' caches are
    [B, Hkv, S, D] or [pages, Hkv, page_size, D] rather than token-major (a
    hint for speed only: either layout runs under either value),
    descale_per_page that a paged FP8 cache's factors are per (page, KV
    head), [num_pages, Hkv]. Making it tunes on the first plan per shape class (on the
    current stream), so make plans outside torch.compile'd code and outside
    a capture; run() never allocates (with out given), synchronizes or
    tunes, so it can be captured in a torch.cuda.CUDAGraph. Without a
    workspace tensor, runs use the plan's own: then they must not overlap on
    different streams. The plan (and its workspace) is freed when the object
    is (or by close()): keep it alive while a graph that ran it may replay.
    """

    def __init__(self, *, batch, heads_q, heads_kv, head_dim, max_seq_k, seq_q=1, page_size=0,
                 dtype=torch.float16, kv_dtype=None, per_sequence_lengths=True, causal=True, scale=None, num_splits=0,
                 head_major=False, descale_per_page=False, device=None):
        self._handle = None
        code = _views.dtype_code(dtype)
        # The C struct reads kv_dtype 0 (CUJIT_F16) as "dtype", so a float16 cache under a bfloat16 plan would
        # pass unseen there: the two kinds of cache a plan takes are checked here.
        if kv_dtype not in (None, dtype, torch.float8_e4m3fn, torch.float8_e5m2):
            raise CujitError(_BAD, f"kv_dtype is {kv_dtype} and dtype {dtype}: the cache is in q's dtype "
                                   "(kv_dtype=None), torch.float8_e4m3fn or torch.float8_e5m2 (FP8)")
        kv_code = 0 if kv_dtype is None else _views.dtype_code(kv_dtype)
        device = torch.device("cuda") if device is None else torch.device(device)
        if device.type != "cuda":
            raise CujitError(_BAD, f"device is {device}; a KvPlan is made for a CUDA device")
        self.device = torch.device("cuda", torch.cuda.current_device() if device.index is None else device.index)
        self.dtype = dtype
        self.kv_dtype = dtype if kv_dtype is None else kv_dtype
        self.page_size = int(page_size)
        self.per_sequence_lengths = bool(per_sequence_lengths)
        self.descale_per_page = bool(descale_per_page)
        self._lib = library()
        shape = _structs.KvShape(batch, heads_q, heads_kv, head_dim, code, seq_q, max_seq_k, self.page_size,
                                 int(self.per_sequence_lengths), kv_code, int(bool(head_major)),
                                 int(self.descale_per_page))
        options = _views.kv_options(causal, scale, num_splits)
        handle = ctypes.c_void_p()
        with torch.cuda.device(self.device):
            check(self._lib.cujit_kv_plan_create(ctypes.byref(shape), ctypes.byref(options),
                                                 _views.stream(self.device), ctypes.byref(handle)))
        self._handle = handle
        self._address = handle.value  # what cujit::kv_plan_run takes: an int, not a ctypes object
        bytes_, splits, name = ctypes.c_size_t(), ctypes.c_int(), ctypes.create_string_buffer(256)
        check(self._lib.cujit_kv_plan_workspace_bytes(handle, ctypes.byref(bytes_)))
        check(self._lib.cujit_kv_plan_num_splits(handle, ctypes.byref(splits)))
        check(self._lib.cujit_kv_plan_describe(handle, name, ctypes.sizeof(name)))
        self.workspace_bytes = bytes_.value  # device memory a run needs (0 unless a combine pass merges splits)
        self.num_splits = splits.value
        self.variant = name.value.decode()  # "family/variant"

    def run(self, q, k_cache, v_cache, *, cache_seqlens=None, block_table=None, k_descale=None, v_descale=None,
            out=None, workspace=None, return_lse=False):
        """Enqueues the plan on the current stream; returns out, or (out, lse) with return_lse.

        k_descale, v_descale: an FP8 cache's descale factors, as in
        attention_with_kvcache (None for a 16-bit cache; [num_pages, Hkv]
        for a plan made with descale_per_page). workspace: None
        (the plan's own), or a CUDA tensor of at least workspace_bytes bytes
        whose address is 16-byte aligned.
        """
        if self._address is None:
            raise CujitError(_BAD, "this KvPlan is closed")
        if self.per_sequence_lengths != (cache_seqlens is not None):
            raise CujitError(_BAD, "cache_seqlens is " + ("None but the plan was made with per_sequence_lengths=True"
                                                          if cache_seqlens is None else
                                                          "given but the plan was made with per_sequence_lengths=False"))
        if (self.page_size > 0) != (block_table is not None):
            raise CujitError(_BAD, f"block_table is None but the plan was made for pages of {self.page_size} keys"
                                   if block_table is None else
                                   "block_table is given but the plan was made for a contiguous cache (page_size=0)")
        if q.device != self.device:
            raise CujitError(_BAD, f"q is on {q.device} but the plan was made on {self.device}")
        if workspace is not None:
            _views.check_workspace(workspace, q.device, self.workspace_bytes, "KvPlan")
        refuse_grad("KvPlan.run", q, k_cache, v_cache, k_descale, v_descale)
        if out is None:
            out = q.new_empty(q.shape)
        lse = q.new_empty(_kv_lse_shape(q), dtype=torch.float32) if return_lse else None
        call(torch.ops.cujit.kv_plan_run, _kv_plan_run_impl, self._address, q, k_cache, v_cache, out, lse,
             cache_seqlens, block_table, k_descale, v_descale, self.descale_per_page, workspace)
        return (out, lse) if return_lse else out

    def close(self):
        """Frees the plan and its workspace now (work already enqueued that uses them must be done)."""
        handle, self._handle, self._address = self._handle, None, None
        if handle is not None:
            self._lib.cujit_kv_plan_destroy(handle)

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self.close()
