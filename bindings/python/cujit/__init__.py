"""cujit: JIT-compiled attention for NVIDIA GPUs, on PyTorch tensors.

    import cujit
    out = cujit.attention(q, k, v, causal=True)

The calls are PyTorch operators (torch.ops.cujit.*: torch.compile, export,
CUDA graphs, inference mode; cujit.ops says more). `import cujit` needs no
torch: without it the library loading, abi_version() and CujitError work,
and using a torch call says that torch is missing.
"""
import importlib.util

from ._library import CujitError, library_path

__version__ = "0.1.0"  # project(cujit VERSION) in CMakeLists.txt; tests/cpu/test_python_package.py checks it
__all__ = ["attention", "plan", "attention_varlen", "attention_with_kvcache", "KvPlan", "VarlenPlan", "CujitError",
           "abi_version", "library_path", "__version__"]

if importlib.util.find_spec("torch") is not None:
    # Imported here rather than on first use: torch.compile then sees plain
    # module attributes.
    from .kv_plan import KvPlan
    from .ops import attention, attention_varlen, attention_with_kvcache, plan
    from .varlen_plan import VarlenPlan
    _HAS_TORCH = True
else:
    _HAS_TORCH = False


def abi_version():
    """The loaded libcujit_c.so's C ABI version (bindings/c/cujit_c.h), a call that needs no GPU."""
    from ._library import library
    return library().cujit_c_abi_version()


def __getattr__(name):
    """Without torch, the torch calls are missing: say why."""
    if name in __all__ and not _HAS_TORCH:
        raise ImportError(f"cujit.{name} works on PyTorch tensors, and torch is not installed: install PyTorch "
                          "to use it")
    raise AttributeError(f"module 'cujit' has no attribute {name!r}")
