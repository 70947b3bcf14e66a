"""bench/ stands alone: run_compare.sh's default peer script is in the
repository, and compare.py joins a CSV with bench/peers.py's columns
(SDPA backends only) with cujit-bench's. Usage: test_bench_compare.py REPO_ROOT"""
import csv
import os
import re
import subprocess
import sys
import tempfile

PEER_COLUMNS = ["tag", "B", "H", "S", "D", "causal", "dtype", "impl", "us", "tflops", "relerr"]
CUJIT_COLUMNS = ["tag", "B", "H", "S", "D", "causal", "dtype", "impl", "us", "tflops", "first_call_ms", "variant"]


def write(path, columns, rows):
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def main():
    root = sys.argv[1]
    failures = []
    script = open(os.path.join(root, "bench", "run_compare.sh")).read()
    default = re.search(r"peers=\$\{PEERS:-([^}]+)\}", script)
    if not default or not os.path.isfile(os.path.join(root, default.group(1))):
        failures.append("run_compare.sh's default peer script is not in the repository")
    if "../shared" in script or "../shared" in open(os.path.join(root, "bench", "interleaved.py")).read():
        failures.append("bench/ refers to a directory outside the repository")
    peers_source = open(os.path.join(root, "bench", "peers.py")).read()
    for column in PEER_COLUMNS:
        if f"{column}=" not in peers_source:
            failures.append(f"bench/peers.py writes no {column} column")
    with tempfile.TemporaryDirectory() as tmp:
        shape = dict(tag="grid", B=4, H=16, S=4096, D=128, causal="False", dtype="float16")
        write(os.path.join(tmp, "cujit.csv"), CUJIT_COLUMNS,
              [dict(shape, impl="cujit", us=100.0, tflops=500, first_call_ms=10, variant="v")])
        write(os.path.join(tmp, "peers.csv"), PEER_COLUMNS,
              [dict(shape, impl=impl, us=us, tflops=400, relerr=1e-3)
               for impl, us in (("flash", 125.0), ("efficient", 200.0), ("cudnn", 80.0))])
        out = subprocess.run([sys.executable, os.path.join(root, "bench", "compare.py"), os.path.join(tmp, "cujit.csv"),
                              os.path.join(tmp, "peers.csv")], capture_output=True, text=True, check=True).stdout
    if "/triton" in out:
        failures.append("compare.py prints a triton column that the peers CSV does not have")
    for ratio in ("0.800", "0.500", "1.250"):  # cujit / flash, efficient, cudnn
        if ratio not in out:
            failures.append(f"compare.py does not print the ratio {ratio}")
    for f in failures:
        print("FAIL:", f)
    if failures:
        print(out)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
