"""VarlenPlan: attention over a ragged batch planned once per batch
composition, its tile list made once per model step and run for every layer
(jit/varlen.h; docs/serving.md, "A plan per step"). prepare and run are the
operators cujit::varlen_plan_prepare and cujit::varlen_plan_run, so they can
be compiled and captured like the others.
"""
import ctypes

import torch

from . import _structs, _views
from ._library import CujitError, check, library
from .ops import (_like_q, _varlen, _varlen_lse_shape, _varlen_plan_prepare_impl, _varlen_plan_run_impl, call,
                  refuse_grad)

__all__ = ["VarlenPlan"]
_BAD = _structs.INVALID_ARGUMENT


class VarlenPlan:
    """A plan for one ragged batch composition: prepare() once per model step, run() for every layer.

    Arguments as in attention_varlen, for the batch given here: q
    [total_q, Hq, D], k and v [total_k, Hkv, D], the int32 prefix sums
    cu_seqlens_q and cu_seqlens_k [batch + 1] and the longest lengths
    max_seqlen_q and max_seqlen_k fix the composition (the sequence count,
    the longest lengths, the packed rows, the heads, head dim and dtypes);
    causal, bottom_right and scale hold for every run. out: a tensor like
    the runs' outputs, which gives their dtype (float16 or bfloat16 for FP8
    q, k and v); it is not written. None: q's dtype, bfloat16 for FP8. FP8
    q, k and v take q_descale, k_descale and v_descale here too: making the
    plan tunes on the first plan per shape class, with these inputs, on the
    current stream, so make plans outside torch.compile'd code and outside a
    capture. prepare() and run() never allocate (run with out given),
    synchronize or tune, so a step's prepare and its layers' runs can be
    captured in a torch.cuda.CUDAGraph; new prefix sums of the same
    composition in the captured tensors take effect at the next replay. A
    run uses the tile list of the last prepare before it in stream order
    into the same workspace: without one (the plan's own memory) keep a
    plan's prepares and runs on one stream; with workspace tensors (of at
    least workspace_bytes bytes, 16-byte aligned) one plan keeps a list in
    each, e.g. one per stream or per batch in flight. The plan (and its tile
    list) is freed when the object is (or by close()): keep it alive while a
    graph that ran it may replay.

        plan = cujit.VarlenPlan(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=True)
        plan.prepare(cu_seqlens_q, cu_seqlens_k)          # once per step
        out = plan.run(q, k, v)                            # once per layer

        ws = torch.empty(plan.workspace_bytes, dtype=torch.uint8, device="cuda")
        plan.prepare(cu_seqlens_q, cu_seqlens_k, workspace=ws)  # a list in the caller's memory
        out = plan.run(q, k, v, workspace=ws)
    """

    def __init__(self, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, causal=False,
                 bottom_right=False, scale=None, q_descale=None, k_descale=None, v_descale=None, out=None):
        self._handle = None
        self.device = _views.cuda_q(q)
        if out is None:
            out = _like_q(q)
        self._lib = library()
        handle = ctypes.c_void_p()
        _varlen("cujit_varlen_plan_create", q, k, v, out, None, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                max_seqlen_k, (q_descale, k_descale, v_descale), causal, bottom_right, scale, ctypes.byref(handle))
        self._handle = handle
        self._address = handle.value  # what the operators take: an int, not a ctypes object
        self.out_dtype = out.dtype
        self.batch = cu_seqlens_q.numel() - 1  # sequences
        self.max_seqlen_q, self.max_seqlen_k = int(max_seqlen_q), int(max_seqlen_k)
        self.causal, self.bottom_right = bool(causal), bool(bottom_right)
        self.scale = None if scale is None else float(scale)
        # Stands for the tile list in torch's dependency tracking (ops.py, cujit::varlen_plan_prepare).
        self._token = torch.zeros(1, dtype=torch.int32, device=self.device)
        bytes_, name = ctypes.c_size_t(), ctypes.create_string_buffer(256)
        check(self._lib.cujit_varlen_plan_workspace_bytes(handle, ctypes.byref(bytes_)))
        check(self._lib.cujit_varlen_plan_describe(handle, name, ctypes.sizeof(name)))
        self.workspace_bytes = bytes_.value  # device memory the plan holds for its tile list
        self.variant = name.value.decode()  # "family/variant" of each run's kernel ("" if nothing is launched)

    def prepare(self, cu_seqlens_q, cu_seqlens_k, *, workspace=None):
        """Lists the tiles of the batch these prefix sums describe (one small kernel on the current stream),
        for the runs after it.

        cu_seqlens_q, cu_seqlens_k: int32 [batch + 1] on the plan's device, of
        the plan's composition: its sequence count, no sequence longer than
        its max_seqlen_q and max_seqlen_k; their data and values may differ
        from the tensors the plan was made with. workspace: None (the plan's
        own memory) or a contiguous tensor on the plan's device of at least
        workspace_bytes bytes, 16-byte aligned, that holds the list for the
        runs given the same workspace.
        """
        self._check_open()
        self._on_plan_device("cu_seqlens_q", cu_seqlens_q)
        self._on_plan_device("cu_seqlens_k", cu_seqlens_k)
        self._check_workspace(workspace)
        call(torch.ops.cujit.varlen_plan_prepare, _varlen_plan_prepare_impl, self._address, self._token, cu_seqlens_q,
             cu_seqlens_k, self.max_seqlen_q, self.max_seqlen_k, workspace)

    def run(self, q, k, v, *, out=None, return_lse=False, q_descale=None, k_descale=None, v_descale=None,
            workspace=None):
        """One layer over the list of the last prepare into the same workspace (None: the plan's own memory),
        on the current stream; returns out, or (out, lse) with return_lse.

        q, k and v of the plan's shapes and dtypes (any data and strides
        with a contiguous last dimension); out likewise, in the plan's
        out_dtype (None: a new one). lse: float32 [Hq, total_q]. FP8 q, k
        and v take their descale factors, per sequence, as attention_varlen.
        Rows outside every sequence are not written.
        """
        self._check_open()
        self._on_plan_device("q", q)
        self._check_workspace(workspace)
        refuse_grad("VarlenPlan.run", q, k, v, q_descale, k_descale, v_descale)
        if out is None:
            out = q.new_empty(q.shape, dtype=self.out_dtype)
        lse = q.new_empty(_varlen_lse_shape(q), dtype=torch.float32) if return_lse else None
        call(torch.ops.cujit.varlen_plan_run, _varlen_plan_run_impl, self._address, self._token, q, k, v, out, lse,
             q_descale, k_descale, v_descale, self.causal, self.bottom_right, self.scale, self.batch, workspace)
        return (out, lse) if return_lse else out

    def close(self):
        """Frees the plan and its tile list now (work already enqueued that uses them must be done)."""
        handle, self._handle, self._address = self._handle, None, None
        if handle is not None:
            self._lib.cujit_varlen_plan_destroy(handle)

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self.close()

    def _check_open(self):
        if self._address is None:
            raise CujitError(_BAD, "this VarlenPlan is closed")

    def _check_workspace(self, workspace):
        if workspace is not None:
            _views.check_workspace(workspace, self.device, self.workspace_bytes, "VarlenPlan")

    def _on_plan_device(self, name, t):
        # Other devices are refused here by name; a tensor's other checks are the calls'.
        if isinstance(t, torch.Tensor) and t.device != self.device:
            raise CujitError(_BAD, f"{name} is on {t.device} but the plan was made on {self.device}")
