"""cujit attention on PyTorch tensors: a thin ctypes binding over libcujit_c.so.

    import cujit_torch
    out = cujit_torch.attention(q, k, v, causal=True)

q: [B, Hq, Sq, D], k and v: [B, Hkv, Sk, D], float16 or bfloat16 CUDA tensors
with any strides whose last dimension is contiguous (so q.transpose(1, 2) of
a [B, S, H, D] tensor works without a copy); Hq a multiple of Hkv. The call
is enqueued on PyTorch's current stream of q's device and does not
synchronize. The first call for a new shape class compiles and tunes
(CUJIT_* environment knobs apply, as in C++).

The library is found at $CUJIT_C_LIBRARY, else in the build tree next to this
file (build/bindings/c/libcujit_c.so), else by the system's loader.
"""
import ctypes
import os

import torch

__all__ = ["attention", "plan", "CujitError"]


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
    _lib = lib
    return lib


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


def _call(fn, q, k, v, out, causal, bottom_right, scale, lse, *extra):
    lib = _library()
    if not q.is_cuda:
        raise CujitError(1, f"q is on {q.device}; cujit needs CUDA tensors")
    views = [_view(n, t) for n, t in (("q", q), ("k", k), ("v", v), ("out", out))]
    options = _Options()
    options.causal = int(bool(causal))
    options.bottom_right = int(bool(bottom_right))
    options.scale = 0.0 if scale is None else float(scale)
    options.stream = torch.cuda.current_stream(q.device).cuda_stream
    options.lse = None if lse is None else lse.data_ptr()
    with torch.cuda.device(q.device):  # cujit runs on the calling thread's current context
        status = getattr(lib, fn)(*[ctypes.byref(x) for x in views], ctypes.byref(options), *extra)
    if status != 0:
        raise CujitError(status, lib.cujit_last_error().decode(errors="replace"))


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
