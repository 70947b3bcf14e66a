"""`pip install --no-build-isolation --target DIR .` (pyproject.toml) works
offline and installs a `cujit` package that imports without torch, loads
the libcujit_c.so inside it (stripped of debug info) and calls it; the
version is the CMake project's; `cujit_torch` is the same package;
$CUJIT_C_LIBRARY, when set, wins over the bundled library; without torch a
torch call says torch is missing. The build directory given is reused
(CUJIT_BUILD_DIR), so no second build happens.
Usage: test_python_package.py SOURCE_DIR BUILD_DIR"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_with import python_with  # noqa: E402

# pip, and setuptools able to build a wheel (bdist_wheel: in setuptools from 70.1, else the wheel package).
CAN_BUILD = ("import setuptools, pip; v = tuple(int(x) for x in setuptools.__version__.split('.')[:2]); "
             "v >= (70, 1) or __import__('wheel')")

PROBE = """
import json, os, sys
import cujit, cujit_torch
result = {"file": cujit.__file__, "library": cujit.library_path(), "abi": cujit.abi_version(),
          "version": cujit.__version__, "alias": cujit_torch is cujit}
try:
    import torch
    result["torch"] = True
except ImportError:
    result["torch"] = False
    try:
        cujit.attention
    except ImportError as e:
        result["without_torch"] = str(e)
print(json.dumps(result))
"""


def probe(python, target, env_library=None):
    env = {k: v for k, v in os.environ.items() if k not in ("CUJIT_C_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = target
    if env_library:
        env["CUJIT_C_LIBRARY"] = env_library
    with tempfile.TemporaryDirectory() as elsewhere:  # not the source tree, whose bindings/python is not on the path
        out = subprocess.run([python, "-c", PROBE], cwd=elsewhere, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(f"importing the installed package failed:\n{out.stderr}")
    return json.loads(out.stdout.splitlines()[-1])


def has_debug_info(path):
    sections = subprocess.run(["readelf", "-S", "--wide", path], capture_output=True, text=True, check=True).stdout
    return ".debug_info" in sections


def main():
    source, build = (os.path.abspath(p) for p in sys.argv[1:3])
    python = python_with(CAN_BUILD)
    if python is None:
        print("no Python with pip, setuptools and wheel (scripts/install-deps installs python3-pip, "
              "python3-setuptools and python3-wheel)")
        return 1
    with open(os.path.join(source, "CMakeLists.txt")) as fh:
        version = re.search(r"project\(cujit VERSION ([0-9.]+)", fh.read()).group(1)
    with open(os.path.join(source, "bindings", "c", "cujit_c.h")) as fh:
        abi = int(re.search(r"#define CUJIT_C_ABI_VERSION (\d+)", fh.read()).group(1))
    failures = []
    with tempfile.TemporaryDirectory() as target:
        env = dict(os.environ, CUJIT_BUILD_DIR=build)
        subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
                        "--no-cache-dir", "--disable-pip-version-check", "--root-user-action=ignore", "--target", target,
                        source],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        bundled = os.path.join(target, "cujit", "libcujit_c.so")
        got = probe(python, target)
        print(f"{python}: {json.dumps(got)}")
        expect = {"file": os.path.join(target, "cujit", "__init__.py"), "library": bundled, "abi": abi,
                  "version": version, "alias": True}
        failures += [f"{k}: {got.get(k)!r}, expected {v!r}" for k, v in expect.items() if got.get(k) != v]
        if not got["torch"] and "torch is not installed" not in got.get("without_torch", ""):
            failures.append(f"cujit.attention without torch: {got.get('without_torch')!r}")
        if has_debug_info(bundled):
            failures.append(f"{bundled} has debug info")
        chosen = os.path.join(build, "bindings", "c", "libcujit_c.so")
        got = probe(python, target, env_library=chosen)
        if got["library"] != chosen:
            failures.append(f"with CUJIT_C_LIBRARY={chosen} the library is {got['library']}")
    for failure in failures:
        print("FAIL:", failure)
    print("python package: " + ("ok" if not failures else f"{len(failures)} failures"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
