"""`cmake --install` of a build with debug info installs libraries and tools
without it (CUJIT_INSTALL_DEBUG_INFO is OFF by default), and still a complete
prefix. Usage: test_install.py CMAKE BUILD_DIR"""
import os
import subprocess
import sys
import tempfile


def has_debug_info(path):
    sections = subprocess.run(["readelf", "-S", "--wide", path], capture_output=True, text=True, check=True).stdout
    return ".debug_info" in sections


def main():
    cmake, build = sys.argv[1:3]
    failures = []
    with tempfile.TemporaryDirectory() as prefix:
        subprocess.run([cmake, "--install", build, "--prefix", prefix], check=True, stdout=subprocess.DEVNULL)
        lib = os.path.join(prefix, "lib")
        installed = [os.path.join(lib, name) for name in os.listdir(lib) if name.startswith("libcujit")]
        bin_dir = os.path.join(prefix, "bin")  # absent where the tools are not built (the sanitizer builds)
        if os.path.isdir(bin_dir):
            installed += [os.path.join(bin_dir, name) for name in os.listdir(bin_dir)]
        for library in ("libcujit_runtime.a", "libcujit_attention.a"):
            if not any(p.endswith(library) for p in installed):
                failures.append(f"{library} is not installed")
        if not os.path.isfile(os.path.join(prefix, "include", "jit", "cujit.h")):
            failures.append("jit/cujit.h is not installed")
        for path in installed:
            if os.path.isfile(path) and not os.path.islink(path) and has_debug_info(path):
                failures.append(f"{os.path.relpath(path, prefix)} has debug info")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
