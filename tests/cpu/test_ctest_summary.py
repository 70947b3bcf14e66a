"""scripts/ctest_summary.py on a recorded ctest run with GPU tests skipped:
the skips become one line per reason, ctest's result line stays, nothing
else is dropped. Usage: test_ctest_summary.py PATH/TO/ctest_summary.py"""
import os
import subprocess
import sys
import tempfile

CTEST_OUTPUT = """Test project /work/build
      Start  1: CacheDir.Creates
      Start  2: GpuAttention.Small
 1/4 Test  #1: CacheDir.Creates .................   Passed    0.01 sec
 2/4 Test  #2: GpuAttention.Small ...............***Skipped   0.02 sec
      Start  3: GpuAttention.Large
 3/4 Test  #3: GpuAttention.Large ...............***Skipped   0.02 sec
      Start  4: GpuSm90.Occupancy
 4/4 Test  #4: GpuSm90.Occupancy ................***Skipped   0.02 sec

100% tests passed, 0 tests failed out of 4

Total Test time (real) =   0.10 sec

The following tests did not run:
\t  2 - GpuAttention.Small (Skipped)
\t  3 - GpuAttention.Large (Skipped)
\t  4 - GpuSm90.Occupancy (Skipped)
"""


def junit_case(name, reason):
    return f"""<testcase name="{name}" classname="{name}" time="0.02" status="notrun">
<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
<system-out>Note: Google Test filter = {name}
tests/gpu/gpu_test_support.h:36: Skipped
{reason}

[  SKIPPED ] {name} (0 ms)
</system-out></testcase>"""


JUNIT = ('<?xml version="1.0" encoding="UTF-8"?><testsuite name="x" tests="4" skipped="3">'
         '<testcase name="CacheDir.Creates" classname="CacheDir.Creates" time="0.01" status="run">'
         '<system-out></system-out></testcase>'
         + junit_case("GpuAttention.Small", "no GPU: cuInit failed: no CUDA-capable device")
         + junit_case("GpuAttention.Large", "no GPU: cuInit failed: no CUDA-capable device")
         + junit_case("GpuSm90.Occupancy", "the sm90 family needs sm_90a, this GPU is sm_89")
         + "</testsuite>")


def summarize(script, junit_path):
    return subprocess.run([sys.executable, script] + ([junit_path] if junit_path else []), input=CTEST_OUTPUT,
                          capture_output=True, text=True, check=True).stdout


def main():
    script = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        junit = os.path.join(tmp, "ctest.xml")
        with open(junit, "w") as fh:
            fh.write(JUNIT)
        out = summarize(script, junit)
        missing = os.path.join(tmp, "missing.xml")
        without_reasons = summarize(script, missing)
    failures = []

    def check(condition, what):
        if not condition:
            failures.append(what)

    check("100% tests passed, 0 tests failed out of 4" in out, "the result line is kept")
    check("Passed" in out and "CacheDir.Creates" in out, "passing tests are kept")
    check("***Skipped" not in out, "per-test skip lines are summarized")
    check("The following tests did not run" not in out, "the did-not-run list is summarized")
    check("  2 tests skipped: no GPU: cuInit failed: no CUDA-capable device" in out, "skips grouped by reason")
    check("  1 test skipped: the sm90 family needs sm_90a, this GPU is sm_89" in out, "each reason counted")
    check("  3 tests skipped: skipped" in without_reasons, "counted without a JUnit report")
    check("100% tests passed" in without_reasons, "the result line is kept without a JUnit report")
    for f in failures:
        print("FAIL:", f)
    if failures:
        print(out)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
