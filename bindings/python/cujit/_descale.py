"""FP8 descale factor tensors as the element strides the C structs take
(cujit_kv_cache.descale_strides for a cache's k_descale and v_descale,
cujit_options.descale_strides for attention's q_descale, k_descale and
v_descale): the factor of sequence b and KV head h is read at
[b * strides[0] + h * strides[1]] (for a paged cache's factors per page,
of the page at pool index b). Also which inputs need factors at all.
Works on dtype names, shapes and strides alone (no torch), so the CPU tests
check it.
"""
import math

from ._library import CujitError
from ._structs import INVALID_ARGUMENT

FP8 = "torch.float8_e4m3fn"  # str() of the torch dtype that takes descale factors


def _strides_of(name, shape, strides, batch, heads_kv, outer):
    """The (batch, head) strides that read a tensor of `shape` and element `strides` as [B, Hkv].

    outer: the first dimension's name in messages ("B", or "num_pages" for factors per page).
    """
    shape, strides = tuple(shape), tuple(strides)
    if math.prod(shape) == 1:
        return 0, 0  # one factor for the whole tensor
    if shape == (batch, heads_kv):
        # A dimension of one is never stepped over: its stride says nothing, so it does not tell layouts apart.
        return (strides[0] if batch > 1 else 0), (strides[1] if heads_kv > 1 else 0)
    if shape == (heads_kv,):
        return 0, strides[0]  # one factor per KV head, the same for every sequence
    per = "page" if outer == "num_pages" else "sequence"
    raise CujitError(INVALID_ARGUMENT, f"{name} has shape {list(shape)}; it must be [{outer}, Hkv] = [{batch}, "
                                       f"{heads_kv}] (one factor per {per} and KV head), [Hkv] = [{heads_kv}] (one "
                                       "per KV head) or hold one element (one for the whole tensor)")


def descale_strides(batch, heads_kv, outer="B", **layouts):
    """The strides the given descale tensors share, or None when none is given.

    batch: the first dimension's size (sequences, or the pool's pages for a
    cache's factors per page, outer="num_pages"). layouts: each descale
    argument by name (k_descale=...) with its (shape, strides), or None. The
    C structs have one pair of strides for all of them, so all must be read
    alike.
    """
    found = {name: _strides_of(name, *layout, batch, heads_kv, outer) for name, layout in layouts.items()
             if layout is not None}
    if len(set(found.values())) > 1:
        described = [f"{name} {'has ' if i == 0 else ''}shape {list(layouts[name][0])} and strides "
                     f"{list(layouts[name][1])}" for i, name in enumerate(found)]
        raise CujitError(INVALID_ARGUMENT, f"{', '.join(described)}: cujit reads all of them with one layout, so "
                                           "give them the same shape and strides (e.g. .contiguous())")
    return next(iter(found.values()), None)


def attention_descale_strides(dtypes, batch, heads_kv, **layouts):
    """attention()'s descale strides: None for 16-bit q, k and v (which take no factors).

    dtypes: q's, k's and v's dtypes as str() gives them; layouts: q_descale,
    k_descale and v_descale as in descale_strides. FP8 is all three inputs
    in e4m3 with all three factors, or none of either.
    """
    q, k, v = dtypes
    fp8 = [d == FP8 for d in dtypes]
    if any(fp8) and not all(fp8):
        raise CujitError(INVALID_ARGUMENT, f"q is {q}, k {k} and v {v}: FP8 attention takes q, k and v all in {FP8} "
                                           "(with q_descale, k_descale and v_descale); else all torch.float16 or "
                                           "all torch.bfloat16")
    given = [name for name, layout in layouts.items() if layout is not None]
    if not all(fp8):
        if given:
            raise CujitError(INVALID_ARGUMENT, f"{given[0]} is given but q, k and v are {q}: descale factors are "
                                               f"for {FP8} inputs; pass none")
        return None
    missing = [name for name, layout in layouts.items() if layout is None]
    if missing:
        names = " and ".join(filter(None, (", ".join(missing[:-1]), missing[-1])))
        raise CujitError(INVALID_ARGUMENT, f"{names} {'is' if len(missing) == 1 else 'are'} None: "
                                           f"q, k and v are {FP8}, whose values need their float32 descale factors "
                                           f"on q's device ([B, Hkv] = [{batch}, {heads_kv}], [Hkv] or one element)")
    return descale_strides(batch, heads_kv, **layouts)
