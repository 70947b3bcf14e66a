"""The C interface's structs (bindings/c/cujit_c.h) as ctypes structures.

Their sizes and offsets are asserted in bindings/c and checked against
these in bindings/python/test_cujit_layout.py (no torch or GPU needed).
"""
import ctypes

ABI_VERSION = 6  # CUJIT_C_ABI_VERSION in bindings/c/cujit_c.h
DTYPE_CODES = {"float16": 0, "bfloat16": 1, "float8_e4m3fn": 2, "float8_e5m2": 3}  # cujit_dtype, by torch dtype name
INVALID_ARGUMENT, UNSUPPORTED = 1, 2  # cujit_status


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32),
                ("shape", ctypes.c_int64 * 4), ("strides", ctypes.c_int64 * 4)]


class Options(ctypes.Structure):
    _fields_ = [("causal", ctypes.c_int32), ("bottom_right", ctypes.c_int32), ("scale", ctypes.c_float),
                ("stream", ctypes.c_void_p), ("lse", ctypes.c_void_p),
                ("q_descale", ctypes.c_void_p), ("k_descale", ctypes.c_void_p), ("v_descale", ctypes.c_void_p),
                ("descale_strides", ctypes.c_int64 * 2), ("has_descale_strides", ctypes.c_int32)]


class VarlenBatch(ctypes.Structure):
    _fields_ = [("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_k", ctypes.c_void_p), ("batch", ctypes.c_int64),
                ("max_seqlen_q", ctypes.c_int64), ("max_seqlen_k", ctypes.c_int64)]


class KvCache(ctypes.Structure):
    _fields_ = [("k", Tensor), ("v", Tensor), ("block_table", ctypes.c_void_p), ("pages_per_seq", ctypes.c_int64),
                ("block_table_stride", ctypes.c_int64), ("seq_lens", ctypes.c_void_p),
                ("k_descale", ctypes.c_void_p), ("v_descale", ctypes.c_void_p),
                ("descale_strides", ctypes.c_int64 * 2), ("has_descale_strides", ctypes.c_int32),
                ("descale_per_page", ctypes.c_int32)]


class KvShape(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int64), ("heads_q", ctypes.c_int64), ("heads_kv", ctypes.c_int64),
                ("head_dim", ctypes.c_int64), ("dtype", ctypes.c_int32), ("seq_q", ctypes.c_int64),
                ("max_seq_k", ctypes.c_int64), ("page_size", ctypes.c_int64),
                ("per_sequence_lengths", ctypes.c_int32), ("kv_dtype", ctypes.c_int32), ("head_major", ctypes.c_int32),
                ("descale_per_page", ctypes.c_int32)]


class KvOptions(ctypes.Structure):
    _fields_ = [("causal", ctypes.c_int32), ("scale", ctypes.c_float), ("num_splits", ctypes.c_int32)]


class KvRunOptions(ctypes.Structure):
    _fields_ = [("stream", ctypes.c_void_p), ("lse", ctypes.c_void_p), ("workspace", ctypes.c_void_p)]
