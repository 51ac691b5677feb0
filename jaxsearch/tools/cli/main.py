"""Command line: ``python -m jaxsearch [bench | info]``.

* ``python -m jaxsearch``: the main job, a side-by-side comparison of
  jaxsearch with jnp, numpy and the memory floors on this machine (under a
  minute).
* ``python -m jaxsearch bench [--quick] [--output DIR]``: the full benchmark;
  writes ``bench_<device_kind>.json`` and ``.png`` into DIR.
  ``--family resampling``: particle resampling (searchsorted_cumsum against
  a numba callback, jnp and numpy); writes ``resampling_<device_kind>.json``.
* ``python -m jaxsearch info [--n N] [--m M] [--dtype DTYPE]``: platform,
  implementations, the tuning cache in use, and the config that would be
  chosen.

Each command's arguments and runner live in the module that runs it
(:mod:`jaxsearch.tools.cli.bench`, :mod:`jaxsearch.tools.cli.info`); this
module wires them together.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from . import bench, info


def build_parser() -> argparse.ArgumentParser:
    """The command line: the main job's options, and each command's subparser
    (each built by the module that runs it)."""
    parser = argparse.ArgumentParser(
        prog="python -m jaxsearch",
        description="jaxsearch: time it against its peers on this machine (default), "
                    "run the full benchmark (bench), or show the setup (info).")
    bench.add_main_job_arguments(parser)
    sub = parser.add_subparsers(dest="command")
    bench.add_bench_parser(sub)
    info.add_info_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m jaxsearch`` and the ``jaxsearch`` script."""
    args = build_parser().parse_args(argv)
    run = {None: bench.run_main_job, "bench": bench.run_bench,
           "info": info.run_info}[args.command]
    return run(args)
