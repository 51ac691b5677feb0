"""The full benchmark: ``python bench/bench.py [--quick] [--output DIR]``.

The same as ``python -m jaxsearch bench``; the harness lives in the package
(``jaxsearch._bench_*``) so that it ships with it.
"""

import sys

from jaxsearch.__main__ import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
