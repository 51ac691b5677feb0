"""Tune jaxsearch's kernels for this machine: ``python -m jaxsearch.autotune``.

CPU: times the Cython kernels against each other over N/M skews and picks the
crossover points of the kernel selector (``bisect_ratio``: merge vs. lock-step
binary search for N >> M; ``runs_ratio``: merge vs. run filling for M >> N),
then the thread count (at the largest size) and the size from which threads
pay (``min_parallel``).
Kernels are compared on one thread: threads split the needles of every kernel
alike, so the crossovers carry over.

GPU (only where JAX runs on a GPU and the Pallas kernels import): sweeps
``jaxsearch.pallas_kernels.tuning_space()`` for each kernel, dtype class and
size, skipping configs that spill registers (each is compiled with spills
fatal), fail to compile or give wrong results, and keeps the fastest.

Results go to ``<output>/<device_kind>/searchsorted.json`` (see
:mod:`jaxsearch._tuning` for the format and the lookup order), by default the
user cache, where the library finds them; every measured time is kept beside
the winner.

Usage::

    python -m jaxsearch.autotune [--quick] [--dtypes float32,int32]
        [--sizes 1e5,1e6,1e7] [--output DIR] [--platforms cpu,gpu] [--no-threads]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from . import _bench, _cpu, _gpu, _tuning
from ._api import searchsorted
from .__main__ import parse_counts, parse_dtypes

# A candidate must beat the incumbent by this much to replace it, so that
# noise on a shared machine does not flip a setting that has no effect.
MARGIN = 0.05


@dataclasses.dataclass(frozen=True)
class TuneGrid:
    """What the autotuner sweeps."""

    dtypes: tuple[str, ...]
    sizes: tuple[int, ...]  # the larger of N and M
    ratios: tuple[int, ...]  # N/M (or M/N) skews tried for each crossover
    gpu_sizes: tuple[int, ...]  # N = M for the GPU sweep
    repeats: int = 5
    budget_s: float = 0.5
    threads: bool = True  # tune threads and min_parallel too


QUICK = TuneGrid(dtypes=("float32", "int32"), sizes=(10**5, 10**6, 10**7),
                 ratios=tuple(4**k for k in range(7)), gpu_sizes=(10**6, 10**7),
                 repeats=5, budget_s=0.3)
FULL = TuneGrid(dtypes=("float32", "int32", "float64", "int64"),
                sizes=(10**4, 10**5, 10**6, 10**7), ratios=tuple(2**k for k in range(13)),
                gpu_sizes=(10**5, 10**6, 10**7, 10**8))


# ---------------------------------------------------------------- CPU


def _device_inputs(n: int, m: int, dtype: str) -> tuple[Any, Any]:
    a, v = _bench.make_arrays(_bench.Problem(n, m, dtype, sorted_v=True))
    return jax.numpy.asarray(a), jax.numpy.asarray(v)


def _kernel_call(kernel: str, ja: jax.Array, jv: jax.Array) -> Callable[[], Any]:
    """One Cython kernel on sorted needles, under jit, bypassing the selector."""
    f = jax.jit(functools.partial(_cpu.search, side="left", order="sorted", kernel=kernel,
                                  out_dtype=np.dtype(np.int32)))
    return lambda: f(ja, jv)


def _final_run_start(wins: Sequence[bool]) -> int:
    """Index where the trailing run of wins starts (len(wins) when the last lost)."""
    start = len(wins)
    while start > 0 and wins[start - 1]:
        start -= 1
    return start


def crossover(ratios: Sequence[float], base_s: Sequence[float], alt_s: Sequence[float]) -> float:
    """The ratio above which the alternative kernel wins.

    The alternative must win at every tested ratio from the crossover on; the
    threshold sits halfway (in log space) between the last loss and the first
    win. Never winning puts it one step past the largest ratio tried.
    """
    first_win = _final_run_start([a < b for a, b in zip(alt_s, base_s)])
    step = ratios[1] / ratios[0] if len(ratios) > 1 else 2.0
    if first_win == len(ratios):
        return float(ratios[-1] * step)
    below = ratios[first_win - 1] if first_win > 0 else ratios[0] / step
    return float(math.sqrt(below * ratios[first_win]))


def _sweep_skew(alt: str, size: int, dtype: str, ratios: Sequence[int], *, grid: TuneGrid,
                progress: _bench.Progress) -> dict[str, Any]:
    """Time merge against `alt` ("bisect": N = size, M = size/r; "runs": the
    mirror) for each skew r; return the times and the crossover."""
    merge_s, alt_s = [], []
    for r in ratios:
        progress.show(f"cpu {dtype} size={_bench.fmt_count(size)} merge vs {alt} at 1:{r}")
        small = max(1, size // r)
        ja, jv = _device_inputs(size, small, dtype) if alt == "bisect" else \
            _device_inputs(small, size, dtype)
        timings = _bench.measure_all([_kernel_call("merge", ja, jv), _kernel_call(alt, ja, jv)],
                                     repeats=grid.repeats, budget_s=grid.budget_s)
        for t in timings:
            if t.error is not None:
                raise t.error
        merge_s.append(timings[0].timing.median)
        alt_s.append(timings[1].timing.median)
        progress.step()
    return {"ratios": list(ratios), "merge_s": merge_s, f"{alt}_s": alt_s,
            "threshold": crossover(ratios, merge_s, alt_s)}


def _thread_candidates(cores: int) -> list[int]:
    """0 (all cores), then powers of two below the core count."""
    return [0] + [t for t in (2**k for k in range(8)) if t < cores]


def _sweep_threads(size: int, dtype: str, grid: TuneGrid,
                   progress: _bench.Progress) -> dict[str, float]:
    """Seconds per balanced call (N = M = size) for each thread count."""
    progress.show(f"cpu {dtype} size={_bench.fmt_count(size)} threads")
    ja, jv = _device_inputs(size, size, dtype)
    counts = _thread_candidates(_cpu.available_cores())
    calls = [_bench.call_under_config(
        dataclasses.replace(_tuning.DEFAULT_CPU_CONFIG, threads=t, min_parallel=1), ja, jv,
        sorted_v=True, implementation="cython") for t in counts]
    # Three times the samples: one noisy size here moves min_parallel for the
    # whole dtype (it needs threads to win at every larger size).
    timings = _bench.measure_all(calls, repeats=3 * grid.repeats, budget_s=grid.budget_s)
    progress.step()
    return {str(t): m.timing.median for t, m in zip(counts, timings)}


def _best_threads(times: dict[str, float]) -> int:
    """The fastest thread count, unless it does not beat "all cores" (0) clearly."""
    best = min(times, key=times.get)
    return int(best) if times[best] < (1 - MARGIN) * times["0"] else 0


def _min_parallel(sizes: Sequence[int], threads: Sequence[dict[str, float]]) -> int:
    """Fewest needles from which all cores beat one thread at every larger size.

    Stays at the default when no tested size shows threads paying off (one
    core, or too small sizes to tell).
    """
    if "1" not in threads[0]:  # a single core: nothing to choose
        return _tuning.DEFAULT_CPU_CONFIG.min_parallel
    first = _final_run_start([t["0"] < (1 - MARGIN) * t["1"] for t in threads])
    if first == len(threads):
        return _tuning.DEFAULT_CPU_CONFIG.min_parallel
    return sizes[0] if first == 0 else round(math.sqrt(sizes[first - 1] * sizes[first]))


def cpu_steps(grid: TuneGrid) -> int:
    """Progress steps of :func:`tune_cpu`."""
    per_size = sum(2 * len(_ratios_for(s, grid.ratios)) + grid.threads for s in grid.sizes)
    return len(grid.dtypes) * per_size


def _ratios_for(size: int, ratios: Sequence[int]) -> list[int]:
    return [r for r in ratios if r <= size]


def tune_cpu(grid: TuneGrid, progress: _bench.Progress) -> list[_tuning.CacheEntry]:
    """One CPU config per dtype class and size, with the times that chose it.

    Without ``grid.threads`` the entries hold the kernel thresholds only, so
    the thread settings stay at the library's defaults wherever they are used.
    """
    entries = []
    for dtype in grid.dtypes:
        sizes = sorted(grid.sizes)
        found = []
        for size in sizes:
            ratios = _ratios_for(size, grid.ratios)
            sweep = functools.partial(_sweep_skew, size=size, dtype=dtype, ratios=ratios,
                                      grid=grid, progress=progress)
            found.append({"bisect": sweep("bisect"), "runs": sweep("runs")})
            if grid.threads:
                found[-1]["threads_s"] = _sweep_threads(size, dtype, grid, progress)
        thread_fields = {}
        if grid.threads:
            # Threads pay on large inputs; below min_parallel one thread runs anyway.
            thread_fields = {"threads": _best_threads(found[-1]["threads_s"]),
                             "min_parallel": _min_parallel(sizes,
                                                           [f["threads_s"] for f in found])}
        for size, f in zip(sizes, found):
            config = {"bisect_ratio": f["bisect"]["threshold"],
                      "runs_ratio": f["runs"]["threshold"], **thread_fields}
            entries.append(_tuning.CacheEntry(
                _tuning.CPU_KERNEL, _tuning.dtype_class(dtype), {"size": size}, config, f))
    return entries


def cpu_table(entries: Sequence[_tuning.CacheEntry]) -> str:
    """Summary of the chosen CPU configs."""
    rows = []
    for e in entries:
        t = e.times.get("threads_s", {})
        speedup = t["1"] / t["0"] if "1" in t else None
        rows.append([e.dtype, _bench.fmt_count(e.bucket["size"]),
                     f"{e.config['bisect_ratio']:.3g}", f"{e.config['runs_ratio']:.3g}",
                     str(e.config.get("threads", "default")),
                     _bench.fmt_count(e.config["min_parallel"]) if "min_parallel" in e.config
                     else "default", _bench.fmt_x(speedup)])
    return _bench.format_table(["dtype", "max(N,M)", "bisect_ratio", "runs_ratio", "threads",
                                "min_parallel", "all cores vs 1"], rows)


# ---------------------------------------------------------------- GPU

# Each config kind: its place in ``_gpu.kernels(implementation)`` and whether
# it needs sorted needles; the heuristic default of kind K is
# ``pallas_kernels.default_K_config``.
GPU_KERNELS = {"merge_path": (0, True), "binary_search": (1, False)}


# Compiler options of every GPU config timed: a config whose kernel spills
# registers fails to compile, and is left out, rather than timed.
SPILLS_FATAL = {"xla_gpu_fail_ptx_compilation_on_register_spilling": True}


def _spill_checked(fn: Callable, *args: Any) -> Callable[[], Any]:
    """`fn(*args)` as a call, compiled on its first call with spills fatal."""
    compiled = functools.cache(
        lambda: jax.jit(fn).lower(*args).compile(compiler_options=SPILLS_FATAL))
    return lambda: compiled()(*args)


def _outcome(measured: Any) -> float | str:
    """A config's median seconds, or why it has none."""
    if measured.correct:
        return measured.timing.median
    if measured.error is None:
        return "wrong result"
    if "spill" in str(measured.error):
        return "spills registers"
    return f"failed: {type(measured.error).__name__}: {str(measured.error)[:120]}"


def _config_label(fields: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in fields.items())


def gpu_implementations(interpret: bool = False) -> list[str]:
    """The GPU implementations that can run here (in their interpreters)."""
    return [name for name in _gpu.GPU_IMPLEMENTATIONS
            if _gpu.status(name, interpret=interpret)[0]]


def gpu_steps(grid: TuneGrid, space: Sequence[Any], interpret: bool = False) -> int:
    """Progress steps of :func:`tune_gpu`."""
    kinds = {c.kind for c in space}
    sweeps = len(kinds) * len(gpu_implementations(interpret)) + 1
    return sweeps * len(grid.dtypes) * len(grid.gpu_sizes)


def tune_gpu(grid: TuneGrid, progress: _bench.Progress, *, space: Sequence[Any] | None = None,
             interpret: bool = False) -> list[_tuning.CacheEntry]:
    """The fastest correct config per GPU implementation that runs here
    (Pallas, native Triton), kernel, dtype class and size; then the fastest
    implementation.

    Args:
      grid: dtypes and ``gpu_sizes`` (N = M) to sweep.
      progress: advanced once per (kernel, dtype, size).
      space: configs to try (default ``pallas_kernels.tuning_space()``); the
        kernel's heuristic default is always tried too, to report against.
      interpret: run in the Pallas interpreter (tests on a CPU).
    """
    pk = importlib.import_module("jaxsearch.pallas_kernels")
    space = list(pk.tuning_space() if space is None else space)
    entries = []
    for implementation in gpu_implementations(interpret):
        for kind in dict.fromkeys(c.kind for c in space):
            for dtype in grid.dtypes:
                for size in grid.gpu_sizes:
                    progress.show(f"gpu {implementation} {kind} {dtype} "
                                  f"N=M={_bench.fmt_count(size)}")
                    entry = _sweep_gpu_configs(pk, implementation, kind,
                                               [c for c in space if c.kind == kind], dtype, size,
                                               grid=grid, interpret=interpret)
                    entries += [entry] if entry else []
                    progress.step()
    for dtype in grid.dtypes:
        for size in grid.gpu_sizes:
            progress.show(f"gpu implementations {dtype} N=M={_bench.fmt_count(size)}")
            entry = _race_gpu_implementations(dtype, size, grid=grid, interpret=interpret)
            entries += [entry] if entry else []
            progress.step()
    return entries


def _race_gpu_implementations(dtype: str, size: int, *, grid: TuneGrid,
                              interpret: bool) -> _tuning.CacheEntry | None:
    """Every GPU implementation that runs here (Pallas Triton, Mosaic GPU,
    native Triton) against the others, each with its tuned or default configs,
    on sorted needles at N = M = size: the winner's entry (kernel
    "implementation"), or None when none can run here."""
    names = gpu_implementations(interpret)
    if not names:
        return None
    a, v = _bench.make_arrays(_bench.Problem(size, size, dtype, True))
    ja, jv = jax.numpy.asarray(a), jax.numpy.asarray(v)
    calls = [functools.partial(jax.jit(functools.partial(
        searchsorted, sorted_v=True, implementation=name)), ja, jv) for name in names]
    check = functools.partial(_bench.matches, np.searchsorted(a, v))
    measured = _bench.measure_all(calls, repeats=grid.repeats, budget_s=grid.budget_s,
                                  checks=[check] * len(calls))
    good = [(m.timing.median, name) for name, m in zip(names, measured) if m.correct]
    if not good:
        return None
    return _tuning.CacheEntry(
        "implementation", _tuning.dtype_class(dtype), {"n": size, "m": size},
        {"name": min(good)[1]},
        {"implementations_s": {name: m.timing.median if m.correct else "failed"
                               for name, m in zip(names, measured)}})


def _sweep_gpu_configs(pk: Any, implementation: str, kind: str, space: Sequence[Any],
                       dtype: str, size: int, *, grid: TuneGrid,
                       interpret: bool) -> _tuning.CacheEntry | None:
    """Time every config of one kernel of one implementation at N = M = size;
    the winner's entry, or None when no config compiled without spilling and
    gave numpy's answer."""
    position, needs_sorted = GPU_KERNELS[kind]
    kernel = _gpu.kernels(implementation)[position]
    a, v = _bench.make_arrays(_bench.Problem(size, size, dtype, needs_sorted))
    ja, jv = jax.numpy.asarray(a), jax.numpy.asarray(v)
    default = getattr(pk, f"default_{kind}_config")(size, size, np.dtype(dtype))
    configs = list(dict.fromkeys([default, *space]))
    calls = [_spill_checked(functools.partial(kernel, side="left",
                                              out_dtype=np.dtype(np.int32), config=c,
                                              interpret=interpret), ja, jv)
             for c in configs]
    check = functools.partial(_bench.matches, np.searchsorted(a, v))
    measured = _bench.measure_all(calls, repeats=grid.repeats, budget_s=grid.budget_s,
                                  checks=[check] * len(calls))
    seconds = {_config_label(dataclasses.asdict(c)): _outcome(m)
               for c, m in zip(configs, measured)}
    good = [(m.timing.median, i) for i, m in enumerate(measured) if m.correct]
    if not good:
        return None
    best = configs[min(good)[1]]
    return _tuning.CacheEntry(_tuning.gpu_kernel_key(implementation, kind),
                              _tuning.dtype_class(dtype), {"n": size, "m": size},
                              dataclasses.asdict(best),
                              {"configs_s": seconds,
                               "default": _config_label(dataclasses.asdict(default))})


def gpu_table(entries: Sequence[_tuning.CacheEntry]) -> str:
    """Summary of the chosen GPU configs against each kernel's heuristic default."""
    rows = []
    for e in entries:
        if e.kernel == "implementation":
            best = e.times["implementations_s"][e.config["name"]]
            rows.append([e.kernel, e.dtype, _bench.fmt_count(e.bucket["n"]),
                         e.config["name"], _bench.fmt_ms(best), "-", "-"])
            continue
        best = e.times["configs_s"][_config_label(e.config)]
        default = e.times["configs_s"].get(e.times["default"])
        rows.append([e.kernel, e.dtype, _bench.fmt_count(e.bucket["n"]),
                     _config_label(e.config), _bench.fmt_ms(best),
                     _bench.fmt_ms(default if isinstance(default, float) else None),
                     _bench.fmt_x(default / best if isinstance(default, float) else None)])
    return _bench.format_table(["kernel", "dtype", "N=M", "best config", "best ms",
                                "default ms", "vs default"], rows)


# ---------------------------------------------------------------- CLI


def available_platforms() -> list[str]:
    """Platforms this machine can tune: cpu (with the extension), gpu (with Pallas)."""
    platforms = ["cpu"] if _cpu.AVAILABLE else []
    if jax.default_backend() == "gpu" and _gpu.PALLAS_AVAILABLE:
        platforms.append("gpu")
    return platforms


def _where_used(output: Path) -> str:
    """How the library will find a cache written under `output`."""
    if output.resolve() == _tuning.SHIPPED_DIR.resolve():
        return ("This is the cache shipped with the package: it answers wherever no user "
                "cache does. `python -m jaxsearch info` shows which one is in use.")
    if output.resolve() == _tuning.user_cache_dir().resolve():
        return "`python -m jaxsearch info` shows the config now in use."
    return (f"The library reads it with {_tuning.TUNING_DIR_ENV}={output}; "
            "`python -m jaxsearch info` then shows it in use.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jaxsearch.autotune",
        description="Tune jaxsearch's kernels for this machine and write the tuning cache.")
    parser.add_argument("--quick", action="store_true",
                        help="a small grid (float32/int32, sizes 1e5..1e7): a minute or two")
    parser.add_argument("--dtypes", type=parse_dtypes, help="e.g. float32,int32,float64,int64")
    parser.add_argument("--sizes", type=parse_counts,
                        help="max(N, M) for the CPU sweeps and N = M for the GPU sweep")
    parser.add_argument("--output", type=Path, default=None,
                        help="cache root (default: $JAXSEARCH_TUNING_DIR or the user cache "
                             "dir); the file goes to <output>/<device_kind>/searchsorted.json")
    parser.add_argument("--platforms", type=lambda s: s.split(","), default=None,
                        help="cpu, gpu or cpu,gpu (default: every one available)")
    parser.add_argument("--repeats", type=int, help="timed samples per measurement")
    parser.add_argument("--no-threads", dest="threads", action="store_false", default=None,
                        help="tune the kernel thresholds only and leave the thread settings "
                             "at the library's defaults (for a cache meant for other hosts, "
                             "or when this machine is busy)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sweeps, write the caches, print a summary."""
    args = build_parser().parse_args(argv)
    grid = QUICK if args.quick else FULL
    overrides = {"dtypes": args.dtypes, "sizes": args.sizes, "repeats": args.repeats,
                 "gpu_sizes": args.sizes, "threads": args.threads}
    grid = dataclasses.replace(grid, **{k: v for k, v in overrides.items() if v is not None})
    # Entries are keyed by dtype class: tune each class once, on its own dtype.
    grid = dataclasses.replace(grid, dtypes=tuple(dict.fromkeys(
        _tuning.dtype_class(d) for d in grid.dtypes)))
    if _bench.needs_x64(grid.dtypes):
        jax.config.update("jax_enable_x64", True)
    platforms = args.platforms or available_platforms()
    unknown = set(platforms) - set(available_platforms())
    if unknown:
        print(f"cannot tune {', '.join(sorted(unknown))} here (available: "
              f"{', '.join(available_platforms()) or 'none'})", file=sys.stderr)
        return 2
    output = args.output or _tuning.user_cache_dir()
    space = importlib.import_module("jaxsearch.pallas_kernels").tuning_space() \
        if "gpu" in platforms else []
    steps = (cpu_steps(grid) if "cpu" in platforms else 0) + \
        (gpu_steps(grid, space) if "gpu" in platforms else 0)
    load = _bench.machine_info()["load_avg_1m"]
    if grid.threads and load is not None and load > 0.5 * _cpu.available_cores():
        print(f"warning: this machine is busy (load average {load:.1f} on "
              f"{_cpu.available_cores()} cores): timings, thread counts above all, "
              "will be noisy: tune an idle machine, or pass --no-threads", file=sys.stderr)
    progress = _bench.Progress(steps, "autotune")
    meta = _bench.machine_info() | {"grid": dataclasses.asdict(grid),
                                    "command": "python -m jaxsearch.autotune "
                                               + " ".join(argv if argv is not None
                                                          else sys.argv[1:])}
    if "cpu" in platforms:
        entries = tune_cpu(grid, progress)
        path = _tuning.write_cache(output, "cpu", entries, meta)
        print(f"CPU ({_bench.cpu_model()}, {_cpu.available_cores()} cores):\n"
              f"{cpu_table(entries)}\nwrote {path}\n")
    if "gpu" in platforms:
        entries = tune_gpu(grid, progress, space=space)
        path = _tuning.write_cache(output, _tuning.device_kind(), entries, meta)
        print(f"GPU ({jax.devices()[0].device_kind}):\n{gpu_table(entries)}\nwrote {path}\n")
    print(_where_used(output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
