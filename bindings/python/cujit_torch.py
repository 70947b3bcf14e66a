"""The binding's first name: `import cujit_torch` gives the `cujit` package
(bindings/python/cujit; `pip install .` installs both names).
"""
import sys

import cujit

sys.modules[__name__] = cujit
