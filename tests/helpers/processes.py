"""Running Python in a subprocess the way a user would."""

import os
import subprocess
import sys
import tempfile


def run_python(*args, env=None, cwd=None, timeout=180):
    """`python *args` in a folder outside the source tree (default: a fresh
    temporary one), so that `python -m`/`-c` import the installed jaxsearch
    rather than the source tree's uncompiled one."""
    with tempfile.TemporaryDirectory() as scratch:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **(env or {})},
                              cwd=cwd or scratch)
