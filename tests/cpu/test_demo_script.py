"""scripts/demo with cmake and cujit-demo replaced by stubs that record what
they were asked: it builds only the tools it uses (not the tests), says so
before the build starts, passes its arguments to cujit-demo, and ends by
saying what to run next. Usage: test_demo_script.py REPO_ROOT"""
import os
import stat
import subprocess
import sys
import tempfile


def write_executable(path, text):
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def main():
    root = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        stubs, build = os.path.join(tmp, "bin"), os.path.join(tmp, "build")
        os.makedirs(stubs)
        os.makedirs(os.path.join(build, "tools"))
        log = os.path.join(tmp, "calls")
        write_executable(os.path.join(stubs, "cmake"), f'#!/bin/sh\necho "cmake $*" >> {log}\n')
        write_executable(os.path.join(build, "tools", "cujit-demo"), f'#!/bin/sh\necho "cujit-demo $*" >> {log}\n')
        env = dict(os.environ, PATH=stubs + os.pathsep + os.environ["PATH"], CUJIT_BUILD_DIR=build)
        result = subprocess.run([os.path.join(root, "scripts", "demo"), "--arch", "sm_80"], env=env,
                                capture_output=True, text=True)
        calls = open(log).read().splitlines() if os.path.exists(log) else []
    out = result.stdout
    failures = []
    if result.returncode != 0:
        failures.append(f"exit status {result.returncode}: {result.stderr}")
    builds = [c for c in calls if c.startswith("cmake --build")]
    if len(builds) != 1 or "--target cujit-demo cujit-warmup cujit-cache" not in builds[0]:
        failures.append(f"the build is not limited to the demo's tools: {builds}")
    if not out.startswith("demo: building cujit-demo"):
        failures.append("nothing is said before the build starts")
    if "cujit-demo --arch sm_80" not in calls:
        failures.append(f"cujit-demo did not get the arguments: {calls}")
    for hint in ("Next:", f"{build}/tools/cujit-warmup --arch", f"{build}/tools/cujit-cache", "./scripts/test"):
        if hint not in out:
            failures.append(f"the closing advice lacks {hint!r}")
    for f in failures:
        print("FAIL:", f)
    if failures:
        print(out)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
