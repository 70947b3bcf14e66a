"""cujit: JIT-compiled attention for NVIDIA GPUs, on PyTorch tensors.

    import cujit
    out = cujit.attention(q, k, v, causal=True)

The calls are PyTorch operators (torch.ops.cujit.*: torch.compile, export,
CUDA graphs, inference mode; cujit.ops says more). `import cujit` needs no
torch: the library loading, abi_version() and CujitError work without it,
and the torch calls import torch when first used.
"""
from ._library import CujitError, library_path

__version__ = "0.1.0"  # project(cujit VERSION) in CMakeLists.txt; tests/cpu/test_python_package.py checks it
__all__ = ["attention", "plan", "attention_varlen", "attention_with_kvcache", "KvPlan", "CujitError",
           "abi_version", "library_path", "__version__"]

_TORCH_CALLS = {"attention": "ops", "plan": "ops", "attention_varlen": "ops", "attention_with_kvcache": "ops",
                "KvPlan": "kv_plan"}


def abi_version():
    """The loaded libcujit_c.so's C ABI version (bindings/c/cujit_c.h), a call that needs no GPU."""
    from ._library import library
    return library().cujit_c_abi_version()


def __getattr__(name):
    """The torch calls, imported on first use so that `import cujit` works without torch."""
    if name not in _TORCH_CALLS:
        raise AttributeError(f"module 'cujit' has no attribute {name!r}")
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise ImportError(f"cujit.{name} works on PyTorch tensors, and torch is not installed ({e}); "
                          "install PyTorch to use it") from e
    import importlib
    value = getattr(importlib.import_module(f"{__name__}.{_TORCH_CALLS[name]}"), name)
    globals()[name] = value
    return value
