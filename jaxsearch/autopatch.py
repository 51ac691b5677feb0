"""Run unchanged code with `jaxsearch.patch()` in force from its first import.

    python -m jaxsearch.autopatch [-v] script.py [args...]
    python -m jaxsearch.autopatch [-v] -m module [args...]
    pytest -p jaxsearch.autopatch [pytest's arguments...]

The patch is in force before the script, the module or the test files
import anything, so that names they bind at import (`from jax.numpy import
searchsorted`, a library's wrapper made at import) are jaxsearch's too.
`-v` logs each call site once: served by jaxsearch or passed to jax, and
why. Under pytest, the run's header says that the patch is in force.

(This module is `autopatch`, not `patch`: a submodule named `patch` would
replace the function `jaxsearch.patch` when imported.)
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys

from .core.patching import is_patched, patch, unpatch


def main(argv: list[str] | None = None) -> None:
    """`python -m jaxsearch.autopatch`: run the script or module under the patch."""
    parser = argparse.ArgumentParser(
        prog="python -m jaxsearch.autopatch",
        description="Run a Python script or module with jaxsearch.patch() in force: "
                    "jax's searchsorted, digitize, interp and histograms served by jaxsearch.")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log each call site once: served by jaxsearch or passed to jax, "
                             "and why")
    parser.add_argument("-m", dest="module", metavar="MODULE",
                        help="run library module MODULE as a script, as python -m does")
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="the script (unless -m) and its arguments")
    args = parser.parse_args(argv)
    if args.module is None and not args.args:
        parser.error("name a script, or a module with -m")
    patch(verbose=args.verbose)
    if args.module is not None:
        sys.argv = [args.module, *args.args]
        runpy.run_module(args.module, run_name="__main__", alter_sys=True)
    else:
        script, *rest = args.args
        sys.argv = [script, *rest]
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        runpy.run_path(script, run_name="__main__")


# pytest's plugin hooks: `pytest -p jaxsearch.autopatch`.
def pytest_configure(config) -> None:
    patch(verbose=config.getoption("verbose", 0) > 1)


def pytest_report_header(config) -> str:
    return f"jaxsearch: patch {'in force' if is_patched() else 'NOT in force'}"


def pytest_unconfigure(config) -> None:
    unpatch()


if __name__ == "__main__":
    main()
