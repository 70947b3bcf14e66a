"""The Python interpreter to run a step with: this one, else Debian's
/usr/bin/python3 (where scripts/install-deps installs pip, setuptools, wheel
and matplotlib), whichever first can import what the step needs. A CI
machine's python3 may be another installation without them."""
import os
import subprocess
import sys

CANDIDATES = (sys.executable, "/usr/bin/python3")


def python_with(check_code):
    """The first candidate for which `python -c check_code` exits 0, or None."""
    for python in dict.fromkeys(CANDIDATES):
        if os.path.exists(python) and subprocess.run([python, "-c", check_code], capture_output=True).returncode == 0:
            return python
    return None
