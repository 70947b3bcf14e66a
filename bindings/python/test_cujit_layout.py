"""What the Python package must agree on with the C interface, checked
without torch or a GPU: every ctypes struct field's offset and size and each
struct's size against the C header (a small program compiled with the
C++ compiler prints offsetof and sizeof), the ABI version and the dtype codes
against cujit_c.h and the loaded library, how an FP8 cache's descale
tensors become cujit_kv_cache.descale_strides, and how FP8 attention's
become cujit_options.descale_strides (and which inputs need them).

    python3 bindings/python/test_cujit_layout.py   ($CXX or c++ compiles the probe; CUJIT_C_LIBRARY: the library)
"""
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "..", "c", "cujit_c.h")
sys.path.insert(0, HERE)
from cujit import _descale, _structs  # noqa: E402  (no torch needed)
from cujit._library import CujitError, library  # noqa: E402

C_NAMES = {_structs.Tensor: "cujit_tensor", _structs.Options: "cujit_options",
           _structs.VarlenBatch: "cujit_varlen_batch", _structs.KvCache: "cujit_kv_cache",
           _structs.KvShape: "cujit_kv_shape", _structs.KvOptions: "cujit_kv_options",
           _structs.KvRunOptions: "cujit_kv_run_options"}


def header_text():
    with open(HEADER) as fh:
        return fh.read()


def c_layout():
    """{(C struct, field or None): (offset, size)} as the C compiler lays out cujit_c.h."""
    compiler = os.environ.get("CXX") or shutil.which("c++")
    if not compiler:
        raise unittest.SkipTest("no C++ compiler ($CXX or c++) to lay out cujit_c.h")
    lines = []
    for struct, c_name in C_NAMES.items():
        lines.append(f'std::printf("{c_name} - 0 %zu\\n", sizeof({c_name}));')
        for field, _ in struct._fields_:
            lines.append(f'std::printf("{c_name} {field} %zu %zu\\n", offsetof({c_name}, {field}), '
                         f'sizeof((({c_name}*)0)->{field}));')
    program = ("#include <cstddef>\n#include <cstdio>\n#include \"cujit_c.h\"\nint main() {\n  " + "\n  ".join(lines) +
               "\n}\n")
    with tempfile.TemporaryDirectory() as work:
        source, binary = os.path.join(work, "layout.cpp"), os.path.join(work, "layout")
        with open(source, "w") as fh:
            fh.write(program)
        subprocess.run([compiler, "-I", os.path.dirname(HEADER), source, "-o", binary], check=True)
        out = subprocess.run([binary], check=True, capture_output=True, text=True).stdout
    layout = {}
    for line in out.splitlines():
        c_name, field, offset, size = line.split()
        layout[(c_name, None if field == "-" else field)] = (int(offset), int(size))
    return layout


class StructsMatchTheHeader(unittest.TestCase):
    def test_every_field_and_struct_size(self):
        layout = c_layout()
        for struct, c_name in C_NAMES.items():
            self.assertEqual(ctypes.sizeof(struct), layout[(c_name, None)][1], f"sizeof({c_name})")
            for field, _ in struct._fields_:
                descriptor = getattr(struct, field)
                self.assertEqual((descriptor.offset, descriptor.size), layout[(c_name, field)], f"{c_name}.{field}")

    def test_abi_version_and_dtype_codes(self):
        text = header_text()
        self.assertEqual(_structs.ABI_VERSION, int(re.search(r"#define CUJIT_C_ABI_VERSION (\d+)", text).group(1)))
        codes = {name: int(code) for name, code in re.findall(r"CUJIT_(F16|BF16|E4M3|E5M2) = (\d+)", text)}
        self.assertEqual(_structs.DTYPE_CODES, {"float16": codes["F16"], "bfloat16": codes["BF16"],
                                                "float8_e4m3fn": codes["E4M3"], "float8_e5m2": codes["E5M2"]})

    def test_the_loaded_library_has_this_abi(self):
        try:
            lib = library()  # refuses a library of another ABI version
        except CujitError as e:
            if "not found" in str(e):
                self.skipTest(str(e))
            raise
        self.assertEqual(lib.cujit_c_abi_version(), _structs.ABI_VERSION)


class DescaleStrides(unittest.TestCase):
    """k_descale / v_descale (shape, element strides) -> cujit_kv_cache.descale_strides, for B = 3, Hkv = 2."""

    def strides(self, k=None, v=None):
        return _descale.descale_strides(3, 2, k_descale=k, v_descale=v)

    def test_batch_by_heads_keeps_its_strides(self):
        self.assertEqual(self.strides(((3, 2), (2, 1)), ((3, 2), (2, 1))), (2, 1))
        self.assertEqual(self.strides(((3, 2), (1, 3))), (1, 3))  # a transposed [Hkv, B] tensor, read in place
        self.assertEqual(self.strides(v=((3, 2), (0, 1))), (0, 1))  # expanded over the batch

    def test_one_factor_per_kv_head(self):
        self.assertEqual(self.strides(((2,), (1,)), ((2,), (1,))), (0, 1))
        self.assertEqual(self.strides(((2,), (4,))), (0, 4))  # every fourth element of a larger tensor

    def test_one_element_is_one_factor_for_the_cache(self):
        for shape in ((), (1,), (1, 1), (1, 1, 1)):
            self.assertEqual(self.strides((shape, (1,) * len(shape))), (0, 0), shape)

    def test_neither_given_leaves_the_default(self):
        self.assertIsNone(self.strides())

    def test_a_dimension_of_one_does_not_tell_layouts_apart(self):
        one_sequence = _descale.descale_strides(1, 2, k_descale=((1, 2), (2, 1)), v_descale=((2,), (1,)))
        self.assertEqual(one_sequence, (0, 1))
        self.assertEqual(_descale.descale_strides(3, 1, k_descale=((3, 1), (1, 1)), v_descale=((3, 1), (1, 5))),
                         (1, 0))

    def test_other_shapes_name_the_argument_and_the_shapes_taken(self):
        for shape in ((3,), (2, 3), (3, 2, 1), (6,)):
            with self.assertRaisesRegex(CujitError, rf"k_descale has shape \[{', '.join(map(str, shape))}\]; "
                                                    r"it must be \[B, Hkv\] = \[3, 2\].*\[Hkv\] = \[2\].*one element"):
                self.strides((shape, (1,) * len(shape)))
        with self.assertRaises(CujitError) as caught:
            self.strides(v=((4, 2), (2, 1)))
        self.assertEqual(caught.exception.status, _structs.INVALID_ARGUMENT)
        self.assertIn("v_descale has shape [4, 2]", str(caught.exception))

    def test_k_and_v_read_with_one_layout(self):
        with self.assertRaisesRegex(CujitError, r"k_descale has shape \[3, 2\] and strides \[2, 1\], v_descale "
                                                r"shape \[2\] and strides \[1\].*same shape and strides"):
            self.strides(((3, 2), (2, 1)), ((2,), (1,)))
        with self.assertRaisesRegex(CujitError, "same shape and strides"):
            self.strides(((3, 2), (2, 1)), ((3, 2), (1, 3)))


FP8, F16, BF16 = "torch.float8_e4m3fn", "torch.float16", "torch.bfloat16"


class AttentionDescales(unittest.TestCase):
    """attention()'s q_descale, k_descale, v_descale -> cujit_options.descale_strides, for B = 3, Hkv = 2."""

    def strides(self, dtypes=(FP8, FP8, FP8), q=None, k=None, v=None):
        return _descale.attention_descale_strides(dtypes, 3, 2, q_descale=q, k_descale=k, v_descale=v)

    def test_fp8_inputs_take_each_layout(self):
        per_sequence = ((3, 2), (2, 1))
        self.assertEqual(self.strides(q=per_sequence, k=per_sequence, v=per_sequence), (2, 1))
        per_head = ((2,), (1,))
        self.assertEqual(self.strides(q=per_head, k=per_head, v=per_head), (0, 1))
        one = ((1,), (1,))
        self.assertEqual(self.strides(q=((), ()), k=one, v=one), (0, 0))  # a 0-dim tensor is one element too

    def test_16_bit_inputs_take_none(self):
        for dtype in (F16, BF16):
            self.assertIsNone(self.strides((dtype,) * 3))
            with self.assertRaisesRegex(CujitError, rf"k_descale is given but q, k and v are {dtype}: descale "
                                                    "factors are for torch.float8_e4m3fn inputs"):
                self.strides((dtype,) * 3, k=((2,), (1,)))

    def test_a_missing_factor_is_named(self):
        one = ((1,), (1,))
        with self.assertRaisesRegex(CujitError, r"v_descale is None: q, k and v are torch.float8_e4m3fn.*"
                                                r"\[B, Hkv\] = \[3, 2\]") as caught:
            self.strides(q=one, k=one)
        self.assertEqual(caught.exception.status, _structs.INVALID_ARGUMENT)
        with self.assertRaisesRegex(CujitError, "q_descale, k_descale and v_descale are None"):
            self.strides()

    def test_mixed_fp8_and_16_bit_inputs_are_refused(self):
        one = ((1,), (1,))
        for dtypes in ((FP8, FP8, F16), (F16, FP8, FP8), (BF16, F16, FP8)):
            with self.assertRaisesRegex(CujitError, rf"q is {dtypes[0]}, k {dtypes[1]} and v {dtypes[2]}: FP8 "
                                                    "attention takes q, k and v all in torch.float8_e4m3fn"):
                self.strides(dtypes, q=one, k=one, v=one)

    def test_shapes_and_one_layout_for_all_three(self):
        with self.assertRaisesRegex(CujitError, r"q_descale has shape \[2, 3\]; it must be \[B, Hkv\]"):
            self.strides(q=((2, 3), (3, 1)), k=((2,), (1,)), v=((2,), (1,)))
        with self.assertRaisesRegex(CujitError, r"q_descale has shape \[3, 2\] and strides \[2, 1\], k_descale "
                                                r"shape \[2\] and strides \[1\], v_descale shape \[2\].*same shape "
                                                "and strides"):
            self.strides(q=((3, 2), (2, 1)), k=((2,), (1,)), v=((2,), (1,)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
