"""Kernel autotuning: ``python bench/autotune.py [--quick] [--output DIR] ...``.

The same as ``python -m jaxsearch.autotune``, which ships with the package.
"""

import sys

from jaxsearch.autotune import main

if __name__ == "__main__":
    sys.exit(main())
