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
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from . import _bench, _bench_resampling, _cpu, _gpu, _tuning


def parse_count(text: str) -> int:
    """An element count written as 1000, 1e6 or 2.5e5."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"not a positive whole count: {text!r}")
    return int(value)


def parse_counts(text: str) -> tuple[int, ...]:
    """A comma-separated list of counts: "1e3,1e4"."""
    return tuple(parse_count(t) for t in text.split(",") if t.strip())


def parse_ratios(text: str) -> tuple[float, ...]:
    """A comma-separated list of positive ratios: "1e-2,100"."""
    try:
        ratios = tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if any(r <= 0 for r in ratios):
        raise argparse.ArgumentTypeError(f"ratios must be positive: {text!r}")
    return ratios


def parse_dtypes(text: str) -> tuple[str, ...]:
    """A comma-separated list of numpy dtype names: "float32,int64"."""
    try:
        return tuple(np.dtype(t.strip()).name for t in text.split(",") if t.strip())
    except TypeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jaxsearch",
        description="jaxsearch: time it against its peers on this machine (default), "
                    "run the full benchmark (bench), or show the setup (info).")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every problem size (default 1: N, M up to 1e7)")
    parser.add_argument("--repeats", type=int, default=5, help="timed samples per call")
    sub = parser.add_subparsers(dest="command")

    b = sub.add_parser("bench", help="the full benchmark: JSON, PNG and a table")
    b.add_argument("--family", choices=("searchsorted", "resampling"), default="searchsorted",
                   help="searchsorted (default): the search against its peers; resampling: "
                        "particle-filter ancestors, searchsorted_cumsum against a numba "
                        "callback, jnp and numpy")
    b.add_argument("--quick", action="store_true",
                   help="a small grid (sizes 1e3..1e6, float32/int32; resampling: 1e4, 1e5 "
                        "and 16x1e3 under vmap): a minute or two")
    b.add_argument("--output", type=Path, default=Path("."),
                   help="folder for bench_<device>.json and .png (default: .)")
    b.add_argument("--sizes", type=parse_counts, help="N = M sizes, e.g. 1e3,1e5,1e7")
    b.add_argument("--dtypes", type=parse_dtypes, help="e.g. float32,int32,float64,int64")
    b.add_argument("--skew-size", type=parse_count, help="max(N, M) of the skewed problems")
    b.add_argument("--skew-ratios", type=parse_ratios,
                   help="N/M of the skewed problems (default 1e-4,1e-3,...,1e4)")
    b.add_argument("--repeats", type=int, dest="bench_repeats", help="timed samples per call")
    b.add_argument("--max-call-s", type=float,
                   help="skip peers estimated to take longer than this per call")
    b.add_argument("--replot", type=Path, metavar="JSON",
                   help="measure nothing: print the table and write the PNG of a saved run")

    i = sub.add_parser("info", help="platform, implementations, tuning cache, chosen config")
    i.add_argument("--n", type=parse_count, default=10**7, help="len(a) (default 1e7)")
    i.add_argument("--m", type=parse_count, default=10**7, help="len(v) (default 1e7)")
    i.add_argument("--dtype", type=parse_dtypes, default=("float32",), help="key dtype")
    return parser


def run_main_job(args: argparse.Namespace) -> int:
    table, results = _bench.main_job(scale=args.scale, repeats=args.repeats)
    meta = _bench.machine_info()
    print(f"jaxsearch {meta['jaxsearch']} on {meta['backend']} ({meta['cpu_model']}, "
          f"{meta['cores']} cores), jax {meta['jax']}, numpy {meta['numpy']}; "
          f"medians of up to {args.repeats} calls under jax.jit\n")
    print(table)
    wrong = [r for r in results if r.correct is False]
    if wrong:
        print(f"\nWRONG RESULTS from: {', '.join(sorted({r.impl for r in wrong}))}")
    return 1 if wrong else 0


def run_bench(args: argparse.Namespace) -> int:
    if args.replot:
        results = _bench.results_from_json(json.loads(args.replot.read_text()))
        print(_bench.bench_table(results))
        png = _bench.plot_results(results, args.output / args.replot.with_suffix(".png").name)
        print(f"wrote png: {png}")
        return 0
    if args.family == "resampling":
        table, path = _bench_resampling.bench(
            quick=args.quick, output=args.output, repeats=args.bench_repeats or 5,
            max_call_s=args.max_call_s or 5.0)
        print(table)
        print(f"wrote json: {path}")
        return 0
    grid = _bench.QUICK_GRID if args.quick else _bench.FULL_GRID
    overrides = {"sizes": args.sizes, "dtypes": args.dtypes, "skew_size": args.skew_size,
                 "skew_ratios": args.skew_ratios, "repeats": args.bench_repeats,
                 "max_call_s": args.max_call_s}
    grid = dataclasses.replace(grid, **{k: v for k, v in overrides.items() if v is not None})
    table, paths = _bench.bench(grid, args.output)
    print(table)
    for what, path in paths.items():
        print(f"wrote {what}: {path}")
    return 0


def _implementations() -> list[tuple[str, str]]:
    """Each implementation with whether it can run here, and why not."""
    on_cpu = jax.default_backend() == "cpu"
    rows = [("cython", "available" if _cpu.AVAILABLE
             else f"unavailable: {_cpu.UNAVAILABLE_REASON}")]
    for name in _gpu.GPU_IMPLEMENTATIONS:
        ok, reason = _gpu.status(name, interpret=on_cpu)
        state = "available" if ok else f"unavailable: {reason}"
        if ok and on_cpu:
            state += " (interpret mode on this CPU backend: for tests)"
        if on_cpu:  # and compiled for a GPU (lowering for one, or a GPU added)
            ok, reason = _gpu.status(name)
            state += f"; compiled for a GPU: {'works' if ok else f'unavailable: {reason}'}"
        rows.append((name, state))
    return rows + [("xla", "available (jnp.searchsorted)")]


def _default_implementation(n: int, m: int, dtype) -> str:
    from . import _api  # the dispatch's own answer

    return _api.default_implementation(n, m, dtype)


def _describe_cache(path: Path) -> str:
    if not path.exists():
        return "not present"
    entries = _tuning.load_entries(path)
    meta = _tuning.read_meta(path)
    host = ", ".join(str(meta[k]) for k in ("cpu_model", "device_kind", "date") if k in meta)
    return f"{len(entries)} entries" + (f"; measured on {host}" if host else "")


def readable(value: Any) -> str:
    """A config value as a person reads it: floats to 3 significant digits."""
    return f"{value:.3g}" if isinstance(value, float) else str(value)


# What each CpuConfig field does, from its value and the config (for `info`).
_CPU_FIELD_MEANINGS: dict[str, Callable[[Any, _tuning.CpuConfig], str]] = {
    "bisect_ratio": lambda x, c: f"lock-step binary search (bisect) of sorted needles when "
                                 f"N/M > {readable(x)}",
    "runs_ratio": lambda x, c: f"fill runs of needles per key (runs) when M/N > {readable(x)}; "
                               "merge in between",
    # What 0 comes to here: the most threads a call may run on.
    "threads": lambda x, c: (f"at most {x} threads per call" if x else "all available cores "
                             f"({c.max_threads(_cpu.available_cores())} here)"),
    "min_parallel": lambda x, c: f"one thread for a row of fewer than {x} needles",
}


def describe_cpu_config(config: _tuning.CpuConfig) -> str:
    """Each field of `config` on its own line: name, rounded value, meaning."""
    rows = [[f.name, readable(getattr(config, f.name)),
             _CPU_FIELD_MEANINGS.get(f.name, lambda x, c: "")(getattr(config, f.name), config)]
            for f in dataclasses.fields(config)]
    return _bench.format_table(["field", "value", "meaning"], rows, align="lll")


def info_report(n: int, m: int, dtype: str) -> str:
    """What ``python -m jaxsearch info`` prints."""
    meta = _bench.machine_info()
    kind = _tuning.device_kind()
    lines = [
        f"jaxsearch {meta['jaxsearch']}: jax {meta['jax']}, jaxlib {meta['jaxlib']}, "
        f"numpy {meta['numpy']}, Python {meta['python']}",
        f"platform:        {meta['backend']} (device kind {meta['device_kind']!r}, "
        f"cache key {kind!r})",
        f"host:            {meta['cpu_model']}, {meta['cores']} cores available",
        "implementations:",
        *(f"  {name:<8} {state}" for name, state in _implementations()),
        f"default here:    {_default_implementation(n, m, dtype)} (for the search below)",
        "",
    ]
    kinds = ["cpu"] + ([kind] if kind != "cpu" else [])
    for k in kinds:
        lines.append(f"tuning caches for {k!r}, in lookup order "
                     f"(user dir from ${_tuning.TUNING_DIR_ENV} or the user cache dir):")
        for label, path in zip(("user", "shipped"), _tuning.cache_files(k)):
            lines.append(f"  {label:<8} {path}  [{_describe_cache(path)}]")
    config, source = _tuning.resolve_cpu_config(n, m, dtype)
    label = f"N={_bench.fmt_count(n)}, M={_bench.fmt_count(m)}, {dtype}"
    lines += [
        "",
        f"for {label}:",
        f"  CPU config:    from {source}",
        textwrap.indent(describe_cpu_config(config), " " * 4),
        f"  CPU kernel:    {_tuning.choose_cpu_kernel(n, m, config)} for sorted needles "
        "(sorted_v=True; sorted_v=None runs it checking the order as it goes, and "
        "binary-searches a part of the needles found out of order); binary search otherwise",
        f"  CPU threads:   {config.threads_for(m, _cpu.available_cores())} for one call of "
        f"M={_bench.fmt_count(m)} needles (see threads and min_parallel)",
    ]
    if kind != "cpu":
        for kernel in ("merge_path", "binary_search"):
            entry = _tuning.lookup(kernel, dtype, {"n": n, "m": m}, kind)
            lines.append(f"  GPU {kernel}: " + (
                ", ".join(f"{k}={readable(v)}" for k, v in entry.config.items())
                + f"\n                 from {entry.source}" if entry
                else "the kernel's heuristic default (no tuned entry)"))
    return "\n".join(lines)


def run_info(args: argparse.Namespace) -> int:
    print(info_report(args.n, args.m, args.dtype[0]))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m jaxsearch`` and the ``jaxsearch`` script."""
    args = build_parser().parse_args(argv)
    run = {None: run_main_job, "bench": run_bench, "info": run_info}[args.command]
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
