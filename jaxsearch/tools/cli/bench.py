"""The benchmark commands: the main job (``jaxsearch``) and ``jaxsearch
bench``, their arguments and what they run."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from ..bench import patched, resampling, searchsorted, shapes
from ..bench.timing import machine_info
from .args import (
    HelpFormatter,
    grid_default,
    parse_count,
    parse_counts,
    parse_dtypes,
    parse_ratios,
    show_list,
    show_number,
)

FAMILIES = ("searchsorted", "resampling", "patched", "shapes")
# What the resampling family allows a call when --max-call-s is not given.
RESAMPLING_MAX_CALL_S = 5.0


def add_main_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The main job's options, on the top-level parser (it runs without a command)."""
    job = parser.add_argument_group(
        "the main job (no command)",
        "jaxsearch.searchsorted (sorted_v True, None and False) timed side by side with "
        "jnp.searchsorted's methods, numpy and the memory floors on five problems on this "
        "machine: under a minute")
    job.add_argument("--scale", type=float, default=1.0,
                     help="multiply every problem size (default: 1, where N and M reach 1e7)")
    job.add_argument("--repeats", type=int, default=5, metavar="N",
                     help="timed samples per call")


def run_main_job(args: argparse.Namespace) -> int:
    """Print the main job's table; exit status 1 if any result was wrong."""
    table, results = searchsorted.main_job(scale=args.scale, repeats=args.repeats)
    meta = machine_info()
    print(f"jaxsearch {meta['jaxsearch']} on {meta['backend']} ({meta['cpu_model']}, "
          f"{meta['cores']} cores), jax {meta['jax']}, numpy {meta['numpy']}; "
          f"medians of up to {args.repeats} calls under jax.jit\n")
    print(table)
    wrong = [r for r in results if r.correct is False]
    if wrong:
        print(f"\nWRONG RESULTS from: {', '.join(sorted({r.impl for r in wrong}))}")
    return 1 if wrong else 0


def add_bench_parser(sub: Any) -> None:
    """The ``bench`` command, added to the top-level parser's subparsers `sub`."""
    grids = searchsorted.GRIDS
    b = sub.add_parser(
        "bench", help="the full benchmark: JSON, PNG and a table",
        description="The full benchmark of one family against its peers on this machine: "
                    "prints a table and writes the results into --output: "
                    "bench_<device kind>.json and .png (searchsorted), "
                    "resampling_<device kind>.json, patched_<device kind>.json or "
                    "shapes_<device kind>.json.",
        formatter_class=HelpFormatter)
    b.add_argument("--family", choices=FAMILIES, default="searchsorted",
                   help="searchsorted: the search against its peers; resampling: "
                        "particle-filter ancestors, searchsorted_cumsum against a numba "
                        "callback, jnp and numpy; patched: unchanged jnp code (histogram, "
                        "random.choice, interp...), stock against jaxsearch.patch(); "
                        "shapes: the default call against jnp's on a grid of shapes, single "
                        "rows and vmapped batches, printing the cells that miss its contract")
    b.add_argument("--quick", action="store_true",
                   help=f"a small grid (sizes {show_list(grids.quick.sizes)}, "
                        f"{show_list(grids.quick.dtypes)}; resampling: 1e4, 1e5 and 16x1e3 "
                        "under vmap; patched: 1e4 and 4x1e3 under vmap; shapes: N in 1, 200 "
                        "and M in 1, 1e4, and two small batches): a minute or two")
    b.add_argument("--output", type=Path, default=Path("."), metavar="DIR",
                   help="folder for the JSON (and PNG)")
    b.add_argument("--sizes", type=parse_counts,
                   help="searchsorted's N = M sizes, e.g. 1e3,1e5,1e7; patched: its "
                        "workloads' sizes "
                        + grid_default(grids, lambda g: show_list(g.sizes)))
    b.add_argument("--dtypes", type=parse_dtypes,
                   help="searchsorted's key dtypes, e.g. float32,int64 "
                        + grid_default(grids, lambda g: show_list(g.dtypes)))
    b.add_argument("--skew-size", type=parse_count, metavar="SIZE",
                   help="max(N, M) of the skewed problems "
                        + grid_default(grids, lambda g: show_number(g.skew_size)))
    b.add_argument("--skew-ratios", type=parse_ratios, metavar="RATIOS",
                   help="N/M of the skewed problems "
                        + grid_default(grids, lambda g: show_list(g.skew_ratios)))
    b.add_argument("--repeats", type=int, dest="bench_repeats", metavar="N",
                   help="timed samples per call "
                        + grid_default(grids, lambda g: str(g.repeats)))
    b.add_argument("--max-call-s", type=float, metavar="SECONDS",
                   help="skip peers estimated to take longer than this per call; "
                        "searchsorted " + grid_default(grids, lambda g: f"{g.max_call_s:g}")
                        + f", resampling (default: {RESAMPLING_MAX_CALL_S:g})")
    b.add_argument("--numpy-python", metavar="PYTHON",
                   help="searchsorted: also time the numpy of this Python interpreter "
                        "beside this one's; numpy 2.5 needs Python 3.12, so a python3.12 "
                        "with numpy installed (default: none)")
    b.add_argument("--replot", type=Path, metavar="JSON",
                   help="measure nothing: print the table and write the PNG of a saved run "
                        "(default: none: measure a new run)")


def run_bench(args: argparse.Namespace) -> int:
    """Run the family's benchmark, or with --replot report a saved run of it;
    print the table and the files written. Exit status 1 where a patched run
    was not served by jaxsearch or differed from stock's answer, or a shapes
    cell's answers differed from jnp's."""
    ok = True
    if args.replot:
        data = json.loads(args.replot.read_text())
        saved = data["meta"].get("family", args.family)
        if saved != args.family:
            print(f"{args.replot} holds a {saved} run: replot it with --family {saved}",
                  file=sys.stderr)
            return 2
        if args.family == "resampling":
            table, paths = resampling.table(resampling.results_from_json(data)), {}
        elif args.family == "patched":
            table, paths = patched.table(patched.results_from_json(data)), {}
        elif args.family == "shapes":
            table, paths = shapes.table(shapes.results_from_json(data)), {}
        else:
            table, paths = searchsorted.replot(
                data, args.output / args.replot.with_suffix(".png").name)
    elif args.family == "resampling":
        table, path = resampling.bench(
            quick=args.quick, output=args.output, repeats=args.bench_repeats or 5,
            max_call_s=args.max_call_s or RESAMPLING_MAX_CALL_S)
        paths = {"json": path}
    elif args.family == "patched":
        table, path, ok = patched.bench(quick=args.quick, output=args.output,
                                        repeats=args.bench_repeats or 5, sizes=args.sizes)
        paths = {"json": path}
    elif args.family == "shapes":
        table, path, ok = shapes.bench(quick=args.quick, output=args.output,
                                       repeats=args.bench_repeats)
        paths = {"json": path}
    else:
        grid = searchsorted.GRIDS.pick(args.quick)
        overrides = {"sizes": args.sizes, "dtypes": args.dtypes, "skew_size": args.skew_size,
                     "skew_ratios": args.skew_ratios, "repeats": args.bench_repeats,
                     "max_call_s": args.max_call_s}
        grid = dataclasses.replace(grid, **{k: v for k, v in overrides.items() if v is not None})
        table, paths = searchsorted.bench(grid, args.output, args.numpy_python)
    print(table)
    for what, path in paths.items():
        print(f"wrote {what}: {path}")
    return 0 if ok else 1
