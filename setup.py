"""Builds libcujit_c.so with CMake and puts it inside the cujit package
(pyproject.toml). The Python sources are bindings/python.

CUJIT_BUILD_DIR names a CMake build directory to use (relative to this
file's directory): its cujit_c target is brought up to date there, so a
tree already built (CI's build/) costs no second build. Without it, only
cujit_c is configured and built (Release) under setuptools' build_temp.
CUDA_HOME, as for scripts/build, says where the CUDA toolkit is.
"""
import os
import re
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as fh:
        return re.search(r"project\(cujit VERSION ([0-9.]+)", fh.read()).group(1)


def cmake_build_dir(build_temp):
    """A configured build directory: CUJIT_BUILD_DIR's, or a fresh one for cujit_c alone."""
    given = os.environ.get("CUJIT_BUILD_DIR")
    build_dir = os.path.join(ROOT, given) if given else os.path.join(os.path.abspath(build_temp), "cmake")
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        configure = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release"]
        if not given:  # only what the package ships
            configure += ["-DCUJIT_BUILD_TESTS=OFF", "-DCUJIT_BUILD_TOOLS=OFF", "-DCUJIT_BUILD_EXAMPLES=OFF"]
        if os.environ.get("CUDA_HOME"):
            configure.append("-DCUDAToolkit_ROOT=" + os.environ["CUDA_HOME"])
        subprocess.check_call(configure)
    return build_dir


class BuildPyWithLibrary(build_py):
    """build_py, then libcujit_c.so into the built package, without its debug info."""

    def run(self):
        super().run()
        build_dir = cmake_build_dir(self.get_finalized_command("build").build_temp)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "cujit_c", "-j", str(os.cpu_count() or 1)])
        target = os.path.join(self.build_lib, "cujit", "libcujit_c.so")
        shutil.copyfile(os.path.join(build_dir, "bindings", "c", "libcujit_c.so"), target)
        os.chmod(target, 0o755)
        if shutil.which("strip"):  # most of the library's size is debug info (README.md, Install)
            subprocess.check_call(["strip", "--strip-debug", target])


class BinaryDistribution(Distribution):
    """The wheel holds a native library: tagged for this platform, not pure Python."""

    def has_ext_modules(self):
        return True


setup(
    version=project_version(),
    package_dir={"": "bindings/python"},
    packages=["cujit"],
    py_modules=["cujit_torch"],
    cmdclass={"build_py": BuildPyWithLibrary},
    distclass=BinaryDistribution,
    # Not build/: that is the CMake build directory (scripts/build).
    options={"build": {"build_base": "build-python"}},
)
