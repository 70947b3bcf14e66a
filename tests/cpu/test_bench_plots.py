"""bench/plots.py on small synthetic data: the TFLOP/s series (grid float16
rows only, TFLOP/s from the time when the CSV has no tflops column, a peer's
NaN left out), the decode points (paged fractions from the time ratio), the
first-call bars from JSON and from cujit-bench's CSV, and the three PNGs
rendered small; the first-call figure is skipped, with a message, without
its data. Runs under an interpreter with matplotlib (tests/cpu/python_with.py);
exits 77 (skipped) if there is none. Usage: test_bench_plots.py REPO_ROOT"""
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_with import python_with  # noqa: E402


def write_csv(path, rows):
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def interleaved_rows():
    """bench/interleaved.py's columns (no tflops): cujit and two peers over S at D=64/128, causal or not."""
    rows = []
    for d in (64, 128):
        for causal in (0, 1):
            for s in (1024, 4096, 16384):
                for impl, us in (("cujit", 100.0), ("cudnn", 110.0), ("flash", float("nan") if s == 16384 else 120.0)):
                    rows.append(dict(tag="grid", B=16384 // s, H=2048 // d, S=s, D=d, causal=causal, dtype="fp16",
                                     impl=impl, us=us * s / 1024, us_rounds="", relerr=1e-3, variant=""))
    rows.append(dict(rows[0], tag="small", S=256))  # not a grid shape: left out
    rows.append(dict(rows[0], dtype="bf16"))        # not float16: left out
    rows.append(dict(rows[0], impl="matmul"))       # a GEMM's reference rate: left out
    return rows


def serving_rows():
    rows = []
    for shape, us, fraction in (("B=8 Hq=32 Hkv=8 Sk=8192 D=128", 100.0, 0.9), ("B=1 Hq=32 Hkv=8 Sk=4096 D=128", 20.0, 0.4),
                                ("B=8 Hq=32 Hkv=8 Sk=8192 D=128 fp8 KV", 60.0, 0.75)):
        rows.append(dict(part="decode", shape=shape, dtype="f16", page_size=0, metric="time_us", value=us, bar="",
                         verdict="", variant="v"))
        rows.append(dict(part="decode", shape=shape, dtype="f16", page_size=0, metric="fraction_of_copy",
                         value=fraction, bar=">= 0.85", verdict="PASS", variant="v"))
        rows.append(dict(part="paged", shape=shape, dtype="f16", page_size=16, metric="time_us", value=us * 1.25,
                         bar="", verdict="", variant="v"))
        rows.append(dict(part="paged", shape=shape, dtype="f16", page_size=16, metric="paged_over_contiguous",
                         value=1.25, bar="<= 1.05", verdict="MISS", variant="v"))
    rows.append(dict(part="copy", shape="1 GiB", dtype="", page_size=0, metric="tb_per_s", value=3.0, bar="",
                     verdict="", variant=""))
    return rows


FIRST_CALL = [{"label": "B=1 H=16 S=1k D=64", "cold_ms": 2700.0, "background_ms": 310.0, "tuned_ready_ms": 2900.0},
              {"B": 4, "H": 16, "S": 4096, "D": 128, "causal": 1, "cold_ms": 4600.0, "background_ms": 420.0}]


def check(root, failures):
    sys.path.insert(0, os.path.join(root, "bench"))
    import plots

    series = plots.tflops_series(interleaved_rows())
    if sorted(series) != [(64, False), (64, True), (128, False), (128, True)]:
        failures.append(f"panels {sorted(series)}")
    if sorted(series[(64, False)]) != ["cudnn", "cujit", "flash"]:
        failures.append(f"series at D=64 non-causal: {sorted(series[(64, False)])}")
    cujit = series[(128, True)]["cujit"]
    if [s for s, _ in cujit] != [1024, 4096, 16384]:
        failures.append(f"cujit's S at D=128 causal: {cujit}")
    want = 4 * 16 * 16 * 1024 ** 2 * 128 / 2 / 100e-6 / 1e12  # B=16 H=16 S=1k D=128 causal in 100 us
    if not math.isclose(cujit[0][1], want, rel_tol=1e-9):
        failures.append(f"TFLOP/s from the time: {cujit[0][1]}, expected {want}")
    if [s for s, _ in series[(64, False)]["flash"]] != [1024, 4096]:
        failures.append(f"flash's NaN at 16k is drawn: {series[(64, False)]['flash']}")

    points = plots.decode_points(serving_rows())
    if sorted(points) != ["FP8 cache, contiguous", "contiguous", "paged, 16 keys a page"]:
        failures.append(f"decode series {sorted(points)}")
    if points.get("FP8 cache, contiguous") != [(8192, 0.75, "B=8 Hq=32 Hkv=8 Sk=8192 D=128 fp8 KV")]:
        failures.append(f"FP8 series {points.get('FP8 cache, contiguous')}")
    paged = {x: y for x, y, _ in points["paged, 16 keys a page"]}
    if not (math.isclose(paged[8192], 0.9 / 1.25) and math.isclose(paged[4096], 0.4 / 1.25)):
        failures.append(f"paged fractions {paged}")

    with tempfile.TemporaryDirectory() as tmp:
        tflops_csv, serving_csv = os.path.join(tmp, "interleaved.csv"), os.path.join(tmp, "serving.csv")
        first_json, bench_csv = os.path.join(tmp, "first.json"), os.path.join(tmp, "cujit.csv")
        write_csv(tflops_csv, interleaved_rows())
        write_csv(serving_csv, serving_rows())
        with open(first_json, "w") as fh:
            json.dump(FIRST_CALL, fh)
        write_csv(bench_csv, [dict(tag="grid", B=4, H=16, S=4096, D=128, causal="True", dtype="float16", impl="cujit",
                                   us=100, tflops=500, first_call_ms=2700.5, variant="v")])
        labels, groups = plots.first_call_groups(first_json)
        if labels != ["B=1 H=16 S=1k D=64", "B=4 H=16 S=4096 D=128 causal"] or \
                list(groups) != ["cold_ms", "background_ms", "tuned_ready_ms"] or not math.isnan(groups["tuned_ready_ms"][1]):
            failures.append(f"first-call JSON: {labels} {groups}")
        labels, groups = plots.first_call_groups(bench_csv)
        if groups != {"cujit_bench_first_call_ms": [2700.5]}:
            failures.append(f"first-call CSV: {labels} {groups}")
        table = os.path.join(tmp, "first_call.txt")
        with open(table, "w") as fh:
            fh.write("mode       shape                    |  first call ms compiles by then |  tuned serves ms | variant\n"
                     "full       1,16,1024,64,f16,0       |           2700              40 |             2701 | a -> a\n"
                     "background 1,16,1024,64,f16,0       |            310               1 |             2900 | d -> a\n")
        labels, groups = plots.first_call_groups(table)
        if labels != ["B=1 H=16 S=1024 D=64"] or groups != {"full_first_call_ms": [2700.0],
                                                            "background_first_call_ms": [310.0],
                                                            "background_tuned_serves_ms": [2900.0]}:
            failures.append(f"first-call table: {labels} {groups}")

        out = os.path.join(tmp, "img")
        run = subprocess.run([sys.executable, os.path.join(root, "bench", "plots.py"), "--tflops", tflops_csv,
                              "--serving", serving_csv, "--first-call", first_json, "--out", out],
                             capture_output=True, text=True)
        if run.returncode != 0:
            failures.append(f"plots.py failed: {run.stderr}")
        for name in ("tflops.png", "decode_bandwidth.png", "first_call.png"):
            path = os.path.join(out, name)
            if not os.path.isfile(path):
                failures.append(f"{name} not written")
                continue
            with open(path, "rb") as fh:
                if fh.read(8) != b"\x89PNG\r\n\x1a\n":
                    failures.append(f"{name} is not a PNG")
            if os.path.getsize(path) > 150 * 1024:
                failures.append(f"{name} is {os.path.getsize(path)} bytes (small PNGs: at most 150 KB)")
        run = subprocess.run([sys.executable, os.path.join(root, "bench", "plots.py"), "--tflops", tflops_csv,
                              "--out", os.path.join(tmp, "two")], capture_output=True, text=True)
        if run.returncode != 0 or "first-call figure skipped" not in run.stdout or \
                os.path.exists(os.path.join(tmp, "two", "first_call.png")):
            failures.append(f"without --first-call: rc {run.returncode}, {run.stdout!r}")


def main():
    root = os.path.abspath(sys.argv[1])
    python = python_with("import matplotlib")
    if python is None:
        print("test_bench_plots.py: Skipped\nno Python with matplotlib (scripts/install-deps installs python3-matplotlib)")
        return 77
    if python != sys.executable:
        os.execv(python, [python, os.path.abspath(__file__), root])
    failures = []
    check(root, failures)
    for failure in failures:
        print("FAIL:", failure)
    print("bench plots: " + ("ok" if not failures else f"{len(failures)} failures"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
