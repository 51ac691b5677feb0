"""Command line: ``jaxsearch [bench | info | autotune]`` (or ``python -m
jaxsearch``).

* ``jaxsearch``: the main job, a side-by-side comparison of jaxsearch with
  jnp, numpy and the memory floors on this machine (under a minute).
* ``jaxsearch bench [--quick] [--output DIR]``: the full benchmark; writes
  ``bench_<device_kind>.json`` and ``.png`` into DIR. ``--family
  resampling``: particle resampling (searchsorted_cumsum against a numba
  callback, jnp and numpy); writes ``resampling_<device_kind>.json``.
* ``jaxsearch info [--n N] [--m M] [--dtype DTYPE]``: platform,
  implementations, the tuning cache in use, and the config that would be
  chosen.
* ``jaxsearch autotune [--quick]``: tune the kernels for this machine and
  write the tuning cache (also run as ``jaxsearch-autotune``).

Each command's arguments and runner live in the module that runs it
(:mod:`jaxsearch.tools.cli.bench`, :mod:`jaxsearch.tools.cli.info`,
:mod:`jaxsearch.tools.cli.autotune`); this module wires them together.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..._version import __version__
from . import autotune, bench, info
from .args import HelpFormatter, parse, program_name


def build_parser() -> argparse.ArgumentParser:
    """The command line, named as it was run: the main job's options, and each
    command's subparser (each built by the module that runs it)."""
    parser = argparse.ArgumentParser(
        prog=program_name(), formatter_class=HelpFormatter,
        description="A faster jax.numpy.searchsorted. Without a command, runs the main job "
                    "(below): jaxsearch timed against jnp and numpy on this machine. The "
                    "commands run the full benchmark (bench), show the setup (info) or tune "
                    "the kernels for this machine (autotune).")
    parser.add_argument("--version", action="version", version=f"jaxsearch {__version__}",
                        help="print jaxsearch's version and exit")
    bench.add_main_job_arguments(parser)
    sub = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    bench.add_bench_parser(sub)
    info.add_info_parser(sub)
    autotune.add_autotune_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m jaxsearch`` and the ``jaxsearch`` script."""
    args = parse(build_parser(), argv)
    run = {None: bench.run_main_job, "bench": bench.run_bench,
           "info": info.run_info, "autotune": autotune.run_autotune}[args.command]
    return run(args)
