"""bench/ab_ratios.py over synthetic gpu-ab rounds: cujit-serving-bench's CSV
(times, each round's fraction of copy, variants that differ between the
trees) and cujit-bench's (its values, the 16-bit time of --dtype fp8 among
them, out of the row's key); a round with one tree only is left out; no rounds,
or a CSV of neither shape, fail. Usage: test_ab_ratios.py REPO_ROOT"""
import os
import subprocess
import sys
import tempfile

SERVING = "part,shape,dtype,page_size,metric,value,bar,verdict,variant\n"
BENCH = "tag,B,H,S,D,causal,dtype,impl,us,tflops,first_call_ms,variant,sixteen_bit_us\n"  # --dtype fp8's


def serving_rows(decode_us, fraction, paged_variant):
    return (SERVING + f"copy,,,0,time_us,250.0,,,\n"
            f"decode,B=8 Sk=8k fp8 KV,f16,0,time_us,{decode_us},,,attn_decode_a\n"
            f"decode,B=8 Sk=8k fp8 KV,f16,0,fraction_of_copy,{fraction},>= 0.85,PASS,attn_decode_a\n"
            f"paged,B=8 Sk=8k fp8 KV,f16,16,time_us,40.0,,,{paged_variant}\n")


def run(root, folder):
    return subprocess.run([sys.executable, os.path.join(root, "bench", "ab_ratios.py"), folder],
                          capture_output=True, text=True)


def main():
    root = os.path.realpath(sys.argv[1])
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        files = {"ab-1-new.csv": serving_rows(36.0, 0.87, "attn_decode_b"),
                 "ab-1-old.csv": serving_rows(40.0, 0.80, "attn_decode_c"),
                 "ab-2-new.csv": serving_rows(44.0, 0.84, "attn_decode_b"),
                 "ab-2-old.csv": serving_rows(40.0, 0.81, "attn_decode_c"),
                 "ab-3-new.csv": serving_rows(1.0, 0.99, "attn_decode_b")}  # no old tree: left out
        for name, text in files.items():
            with open(os.path.join(tmp, name), "w") as fh:
                fh.write(text)
        result = run(root, tmp)
        out = result.stdout
        # sqrt(36/40 * 44/40) = 0.995
        expected = ["2 rounds", "decode B=8 Sk=8k fp8 KV f16: 0.995, faster in 1 of 2; new us 36.0 44.0; old us 40.0 40.0",
                    "fraction of copy: new 0.870 0.840; old 0.800 0.810",
                    "paged B=8 Sk=8k fp8 KV f16 page 16: 1.000, faster in 0 of 2",
                    "variants differ: new attn_decode_b; old attn_decode_c", "copy: 1.000"]
        if result.returncode != 0 or any(e not in out for e in expected):
            failures.append(f"serving CSV: exit status {result.returncode}, output:\n{out}{result.stderr}")
        if out.count("variants differ") != 1:
            failures.append(f"only the paged row ran different variants:\n{out}")

    with tempfile.TemporaryDirectory() as tmp:
        for side, us in (("new", 900.0), ("old", 1000.0)):
            with open(os.path.join(tmp, f"ab-1-{side}.csv"), "w") as fh:
                fh.write(BENCH + f"grid,1,16,16384,128,False,bf16,cujit,{us},700,10,attn_fwd_sm90_x,{us * 1.4}\n")
        result = run(root, tmp)
        if result.returncode != 0 or "grid 1 16 16384 128 False bf16 cujit: 0.900, faster in 1 of 1" not in result.stdout:
            failures.append(f"cujit-bench CSV: exit status {result.returncode}, {result.stdout}{result.stderr}")

    with tempfile.TemporaryDirectory() as tmp:
        result = run(root, tmp)
        if result.returncode != 1 or "ab_ratios: " not in result.stderr:
            failures.append(f"no rounds: exit status {result.returncode}, {result.stderr!r}")
        for side in ("new", "old"):
            with open(os.path.join(tmp, f"ab-1-{side}.csv"), "w") as fh:
                fh.write("a,b\n1,2\n")
        result = run(root, tmp)
        if result.returncode != 1 or "neither" not in result.stderr:
            failures.append(f"a CSV of neither shape: exit status {result.returncode}, {result.stderr!r}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
