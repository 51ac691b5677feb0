"""Tune jaxsearch's kernels for this machine: ``jaxsearch autotune``, also
run as ``jaxsearch-autotune`` and ``python -m jaxsearch.autotune``.

CPU (:mod:`jaxsearch.tools.autotune.cpu`): the kernel selector's crossovers, then
the thread settings. GPU (:mod:`jaxsearch.tools.autotune.gpu`, only where JAX runs
on a GPU and the Pallas kernels import): the fastest config of each kernel of
each GPU implementation, then the fastest implementation. This module is the
command line that runs them and writes what they find.

Results go to ``<output>/<device_kind>/searchsorted.json`` (see
:mod:`jaxsearch.tuning.cache` for the format and the lookup order), by default the
user cache, where the library finds them; every measured time is kept beside
the winner.

Usage::

    jaxsearch autotune [--quick] [--dtypes float32,int32] [--sizes 1e5,1e6,1e7]
        [--output DIR] [--platforms cpu,gpu] [--repeats N] [--no-threads]

The command's options are added in one place (`add_autotune_arguments`), to
the ``autotune`` subcommand and to the alias's own parser alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax

from ... import tuning
from ...core import cpu, gpu
from ...pallas_kernels import tuning_space
from ..autotune.cpu import cpu_steps, cpu_table, tune_cpu
from ..autotune.gpu import gpu_steps, gpu_table, tune_gpu
from ..autotune.grid import GRIDS
from ..bench.suite import needs_x64
from ..bench.timing import Progress, cpu_model, machine_info
from .args import (
    HelpFormatter,
    grid_default,
    parse,
    parse_counts,
    parse_dtypes,
    program_name,
    show_list,
)

# ---------------------------------------------------------------- CLI


def available_platforms() -> list[str]:
    """Platforms this machine can tune: cpu (with the extension), gpu (with Pallas)."""
    platforms = ["cpu"] if cpu.AVAILABLE else []
    if jax.default_backend() == "gpu" and gpu.status("pallas")[0]:
        platforms.append("gpu")
    return platforms


def _where_used(output: Path) -> str:
    """How the library will find a cache written under `output`."""
    if output.resolve() == tuning.SHIPPED_DIR.resolve():
        return ("This is the cache shipped with the package: it answers wherever no user "
                "cache does. `jaxsearch info` shows which one is in use.")
    if output.resolve() == tuning.user_cache_dir().resolve():
        return "`jaxsearch info` shows the config now in use."
    return (f"The library reads it with {tuning.TUNING_DIR_ENV}={output}; "
            "`jaxsearch info` then shows it in use.")


DESCRIPTION = ("Tune jaxsearch's kernels for this machine and write the tuning cache the "
               "library reads: the CPU kernel selector's crossovers and thread settings, "
               "and on a GPU each implementation's kernel configs and the fastest "
               "implementation.")


def add_autotune_arguments(parser: argparse.ArgumentParser) -> None:
    """The autotuner's options, on `parser`: the ``autotune`` subcommand's or
    the ``jaxsearch-autotune`` alias's."""
    parser.add_argument("--quick", action="store_true",
                        help=f"a small grid ({show_list(GRIDS.quick.dtypes)}, sizes "
                             f"{show_list(GRIDS.quick.sizes)}): a minute or two")
    parser.add_argument("--dtypes", type=parse_dtypes,
                        help="key dtypes, e.g. float32,int32,float64,int64 "
                             + grid_default(GRIDS, lambda g: show_list(g.dtypes)))
    parser.add_argument("--sizes", type=parse_counts,
                        help="max(N, M) for the CPU sweeps and N = M for the GPU sweep "
                             + grid_default(GRIDS, lambda g: f"CPU {show_list(g.sizes)}, "
                                                             f"GPU {show_list(g.gpu_sizes)}"))
    parser.add_argument("--output", type=Path, metavar="DIR",
                        help="cache root; the file goes to "
                             "<output>/<device_kind>/searchsorted.json (default: "
                             f"${tuning.TUNING_DIR_ENV}, else the user cache dir, where the "
                             "library looks first)")
    parser.add_argument("--platforms", type=lambda s: s.split(","),
                        help="cpu, gpu or cpu,gpu (default: every one available here)")
    parser.add_argument("--repeats", type=int, dest="tune_repeats", metavar="N",
                        help="timed samples per measurement "
                             + grid_default(GRIDS, lambda g: str(g.repeats)))
    parser.add_argument("--no-threads", dest="threads", action="store_false", default=None,
                        help="tune the kernel thresholds only and leave the thread settings "
                             "at the library's defaults (for a cache meant for other hosts, "
                             "or when this machine is busy)")


def add_autotune_parser(sub: Any) -> None:
    """The ``autotune`` command, added to the top-level parser's subparsers `sub`."""
    a = sub.add_parser("autotune", help="tune the kernels for this machine",
                       description=DESCRIPTION, formatter_class=HelpFormatter)
    add_autotune_arguments(a)


def build_parser() -> argparse.ArgumentParser:
    """The alias's command line (``jaxsearch-autotune``, ``python -m
    jaxsearch.autotune``): the ``autotune`` command's options."""
    parser = argparse.ArgumentParser(prog=program_name(), description=DESCRIPTION,
                                     formatter_class=HelpFormatter)
    add_autotune_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``jaxsearch-autotune`` alias and ``python -m
    jaxsearch.autotune``."""
    return run_autotune(parse(build_parser(), argv))


def run_autotune(args: argparse.Namespace) -> int:
    """Run the sweeps, write the caches, print a summary."""
    grid = GRIDS.pick(args.quick)
    overrides = {"dtypes": args.dtypes, "sizes": args.sizes, "repeats": args.tune_repeats,
                 "gpu_sizes": args.sizes, "threads": args.threads}
    grid = dataclasses.replace(grid, **{k: v for k, v in overrides.items() if v is not None})
    # Entries are keyed by dtype class: tune each class once, on its own dtype.
    grid = dataclasses.replace(grid, dtypes=tuple(dict.fromkeys(
        tuning.dtype_class(d) for d in grid.dtypes)))
    if needs_x64(grid.dtypes):
        jax.config.update("jax_enable_x64", True)
    platforms = args.platforms or available_platforms()
    unknown = set(platforms) - set(available_platforms())
    if unknown:
        print(f"cannot tune {', '.join(sorted(unknown))} here (available: "
              f"{', '.join(available_platforms()) or 'none'})", file=sys.stderr)
        return 2
    output = args.output or tuning.user_cache_dir()
    space = tuning_space() if "gpu" in platforms else []
    steps = (cpu_steps(grid) if "cpu" in platforms else 0) + \
        (gpu_steps(grid, space) if "gpu" in platforms else 0)
    load = machine_info()["load_avg_1m"]
    if grid.threads and load is not None and load > 0.5 * cpu.available_cores():
        print(f"warning: this machine is busy (load average {load:.1f} on "
              f"{cpu.available_cores()} cores): timings, thread counts above all, "
              "will be noisy: tune an idle machine, or pass --no-threads", file=sys.stderr)
    progress = Progress(steps, "autotune")
    meta = machine_info() | {"grid": dataclasses.asdict(grid), "command": args.invocation}
    if "cpu" in platforms:
        entries = tune_cpu(grid, progress)
        path = tuning.write_cache(output, "cpu", entries, meta)
        print(f"CPU ({cpu_model()}, {cpu.available_cores()} cores):\n"
              f"{cpu_table(entries)}\nwrote {path}\n")
    if "gpu" in platforms:
        entries = tune_gpu(grid, progress, space=space)
        path = tuning.write_cache(output, tuning.device_kind(), entries, meta)
        print(f"GPU ({jax.devices()[0].device_kind}):\n{gpu_table(entries)}\nwrote {path}\n")
    print(_where_used(output))
    return 0
