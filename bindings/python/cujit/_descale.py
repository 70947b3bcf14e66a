"""An FP8 cache's descale factor tensors (k_descale, v_descale) as the
element strides cujit_kv_cache.descale_strides takes: the factor of
sequence b and KV head h is read at [b * strides[0] + h * strides[1]].
Works on shapes and strides alone (no torch), so the CPU tests check it.
"""
import math

from ._library import CujitError
from ._structs import INVALID_ARGUMENT


def _strides_of(name, shape, strides, batch, heads_kv):
    """The (batch, head) strides that read a tensor of `shape` and element `strides` as [B, Hkv]."""
    shape, strides = tuple(shape), tuple(strides)
    if math.prod(shape) == 1:
        return 0, 0  # one factor for the whole cache
    if shape == (batch, heads_kv):
        # A dimension of one is never stepped over: its stride says nothing, so it does not tell layouts apart.
        return (strides[0] if batch > 1 else 0), (strides[1] if heads_kv > 1 else 0)
    if shape == (heads_kv,):
        return 0, strides[0]  # one factor per KV head, the same for every sequence
    raise CujitError(INVALID_ARGUMENT, f"{name} has shape {list(shape)}; it must be [B, Hkv] = [{batch}, {heads_kv}] "
                                       f"(one factor per sequence and KV head), [Hkv] = [{heads_kv}] (one per KV "
                                       "head) or hold one element (one for the cache)")


def descale_strides(batch, heads_kv, k=None, v=None):
    """The strides k_descale and v_descale share, or None when neither is given.

    k, v: the (shape, strides) of k_descale and v_descale, or None. The C
    struct has one pair of strides for both, so both must be read alike.
    """
    found = {name: _strides_of(name, *layout, batch, heads_kv)
             for name, layout in (("k_descale", k), ("v_descale", v)) if layout is not None}
    if len(set(found.values())) > 1:
        raise CujitError(INVALID_ARGUMENT, f"k_descale has shape {list(k[0])} and strides {list(k[1])}, v_descale "
                                           f"shape {list(v[0])} and strides {list(v[1])}: cujit reads both with one "
                                           "layout, so give them the same shape and strides (e.g. .contiguous())")
    return next(iter(found.values()), None)
