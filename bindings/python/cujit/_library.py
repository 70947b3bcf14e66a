"""Finding and loading libcujit_c.so, declaring its functions, and turning a
failed status into CujitError. Needs nothing but the standard library.

The library is the first of: $CUJIT_C_LIBRARY (an explicit choice wins), the
copy installed inside this package (pip install), the build tree's when
running from a checkout (build/bindings/c/libcujit_c.so), the system
loader's.
"""
import ctypes
import os

from . import _structs as s

_lib = None
_path = None


class CujitError(RuntimeError):
    """A failed call: `status` is the cujit_status code, the text says what to fix."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def candidates():
    """Where the library is looked for, in order."""
    here = os.path.dirname(os.path.abspath(__file__))
    build_tree = os.path.normpath(os.path.join(here, "..", "..", "..", "build", "bindings", "c", "libcujit_c.so"))
    return [p for p in (os.environ.get("CUJIT_C_LIBRARY"), os.path.join(here, "libcujit_c.so"), build_tree,
                        "libcujit_c.so") if p]


def library():
    """The loaded library with its functions declared; loads it on first use."""
    global _lib, _path
    if _lib is not None:
        return _lib
    tried = []
    for path in candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path}: no such file")
            continue
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            tried.append(f"{path}: {e}")
    else:
        raise CujitError(None, "libcujit_c.so not found; pip install cujit's source tree, build it (scripts/build) "
                               "or set CUJIT_C_LIBRARY. Tried: " + "; ".join(tried))
    lib.cujit_c_abi_version.restype = ctypes.c_int
    if lib.cujit_c_abi_version() != s.ABI_VERSION:
        raise CujitError(None, f"{path} has C ABI version {lib.cujit_c_abi_version()}, this package expects "
                               f"{s.ABI_VERSION}: rebuild cujit or install the matching package")
    _declare(lib)
    _lib, _path = lib, path
    return lib


def library_path():
    """The path the library was loaded from (loading it if needed)."""
    library()
    return _path


def _declare(lib):
    P = ctypes.POINTER
    lib.cujit_last_error.restype = ctypes.c_char_p
    dense = [P(s.Tensor)] * 4 + [P(s.Options)]
    signatures = {
        "cujit_attention": dense,
        "cujit_plan": dense + [ctypes.c_char_p, ctypes.c_size_t],
        "cujit_attention_varlen": [P(s.Tensor)] * 4 + [P(s.VarlenBatch), P(s.Options)],
        "cujit_varlen_plan_create": [P(s.Tensor)] * 4 + [P(s.VarlenBatch), P(s.Options), P(ctypes.c_void_p)],
        "cujit_varlen_plan_prepare_in": [ctypes.c_void_p, P(s.VarlenBatch), ctypes.c_void_p, ctypes.c_void_p],
        "cujit_varlen_plan_run_in": [ctypes.c_void_p] + [P(s.Tensor)] * 4 + [P(s.Options), ctypes.c_void_p],
        "cujit_varlen_plan_workspace_bytes": [ctypes.c_void_p, P(ctypes.c_size_t)],
        "cujit_varlen_plan_describe": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t],
        "cujit_attention_with_kvcache": [P(s.Tensor), P(s.KvCache), P(s.Tensor), P(s.KvOptions), P(s.KvRunOptions)],
        "cujit_kv_plan_create": [P(s.KvShape), P(s.KvOptions), ctypes.c_void_p, P(ctypes.c_void_p)],
        "cujit_kv_plan_run": [ctypes.c_void_p, P(s.Tensor), P(s.KvCache), P(s.Tensor), P(s.KvRunOptions)],
        "cujit_kv_plan_workspace_bytes": [ctypes.c_void_p, P(ctypes.c_size_t)],
        "cujit_kv_plan_num_splits": [ctypes.c_void_p, P(ctypes.c_int)],
        "cujit_kv_plan_describe": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t],
    }
    for name, argtypes in signatures.items():
        getattr(lib, name).argtypes = argtypes
        getattr(lib, name).restype = ctypes.c_int
    for name in ("cujit_kv_plan_destroy", "cujit_varlen_plan_destroy"):
        getattr(lib, name).argtypes = [ctypes.c_void_p]
        getattr(lib, name).restype = None


def check(status):
    """Raises CujitError with the library's message for a failed status."""
    if status != 0:
        raise CujitError(status, library().cujit_last_error().decode(errors="replace"))
