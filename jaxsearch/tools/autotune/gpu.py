"""The GPU half of the autotuner (:mod:`jaxsearch.autotune`).

Only where JAX runs on a GPU and the Pallas kernels import: sweeps
``jaxsearch.pallas_kernels.tuning_space()`` for each GPU implementation,
kernel, dtype class and size, skipping configs that spill registers (each is
compiled with spills fatal), fail to compile or give wrong results, and keeps
the fastest; then races the implementations against each other; then, for
sorted needles, the merge path against binary search over N/M skews, for the
ratio past which binary search serves them (``tuning.gpu_bisect_ratio``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from ... import tuning
from ...core import gpu
from ...core.api import searchsorted
from ...core.implementations import GPU_IMPLEMENTATIONS
from ...pallas_kernels import BACKENDS, KernelKind, kernel_kind, tuning_space
from ..bench.format import fmt_count, fmt_ms, fmt_x, format_table
from ..bench.peers import Inputs, Problem, make_inputs
from ..bench.timing import Measurement, Progress, matches, measure_all
from .grid import TuneGrid, crossover

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
    return [name for name in GPU_IMPLEMENTATIONS
            if gpu.status(name, interpret=interpret)[0]]


def gpu_steps(grid: TuneGrid, space: Sequence[Any], interpret: bool = False) -> int:
    """Progress steps of :func:`tune_gpu`."""
    kinds = {c.kind for c in space}
    implementations = gpu_implementations(interpret)
    sweeps = len(kinds) * len(implementations) + 1
    routes = len(grid.ratios) if implementations else 0
    return (sweeps + routes) * len(grid.dtypes) * len(grid.gpu_sizes)


def tune_gpu(grid: TuneGrid, progress: Progress, *, space: Sequence[Any] | None = None,
             interpret: bool = False) -> list[tuning.CacheEntry]:
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
    space = list(tuning_space() if space is None else space)
    entries = []
    for implementation in gpu_implementations(interpret):
        for kind in dict.fromkeys(c.kind for c in space):
            for dtype in grid.dtypes:
                for size in grid.gpu_sizes:
                    progress.show(f"gpu {implementation} {kind} {dtype} "
                                  f"N=M={fmt_count(size)}")
                    entry = _sweep_gpu_configs(implementation, kernel_kind(kind),
                                               [c for c in space if c.kind == kind], dtype, size,
                                               grid=grid, interpret=interpret)
                    entries += [entry] if entry else []
                    progress.step()
    for dtype in grid.dtypes:
        for size in grid.gpu_sizes:
            progress.show(f"gpu implementations {dtype} N=M={fmt_count(size)}")
            entry = _race_gpu_implementations(dtype, size, grid=grid, interpret=interpret)
            entries += [entry] if entry else []
            progress.step()
            if entry is not None:
                entries.append(_sweep_gpu_route(entry.config["name"], dtype, size, grid=grid,
                                                progress=progress, interpret=interpret))
    return entries


def _measure_against_numpy(calls: Sequence[Callable[[], Any]], x: Inputs,
                           grid: TuneGrid) -> list[Measurement]:
    """Time `calls` side by side, each checked against numpy's answer on `x`."""
    check = functools.partial(matches, np.searchsorted(x.a, x.v))
    return measure_all(calls, repeats=grid.repeats, budget_s=grid.budget_s,
                       checks=[check] * len(calls))


def _race_gpu_implementations(dtype: str, size: int, *, grid: TuneGrid,
                              interpret: bool) -> tuning.CacheEntry | None:
    """Every GPU implementation that runs here (Pallas Triton, Mosaic GPU,
    native Triton) against the others, each with its tuned or default configs,
    on sorted needles at N = M = size: the winner's entry (kernel
    "implementation"), or None when none can run here."""
    names = gpu_implementations(interpret)
    if not names:
        return None
    x = make_inputs(Problem(size, size, dtype, True))
    calls = [functools.partial(jax.jit(functools.partial(
        searchsorted, sorted_v=True, implementation=name)), x.ja, x.jv) for name in names]
    measured = _measure_against_numpy(calls, x, grid)
    good = [(m.timing.median, name) for name, m in zip(names, measured) if m.correct]
    if not good:
        return None
    return tuning.CacheEntry(
        tuning.IMPLEMENTATION_KERNEL, tuning.dtype_class(dtype), {"n": size, "m": size},
        {"name": min(good)[1]},
        {"implementations_s": {name: m.timing.median if m.correct else "failed"
                               for name, m in zip(names, measured)}})


def _sweep_gpu_route(implementation: str, dtype: str, size: int, *, grid: TuneGrid,
                     progress: Progress, interpret: bool) -> tuning.CacheEntry:
    """`implementation`'s merge path against its binary search on sorted
    needles, N = size and M = size / r for each skew r of the grid, each with
    the configs the dispatch would give it: the crossover's entry (kernel
    "route", config {"bisect_ratio": r}: the key caches have always had)."""
    merge_s, binary_search_s = [], []
    for r in grid.ratios:
        progress.show(f"gpu route {implementation} {dtype} N={fmt_count(size)} 1:{r}")
        x = make_inputs(Problem(size, max(1, size // r), dtype, True))
        calls = [functools.partial(jax.jit(functools.partial(
            gpu.search_rows, side="left", order=order, out_dtype=np.dtype(np.int32),
            implementation=implementation, interpret=interpret)), x.ja, x.jv)
            for order in ("sorted", "any")]
        merge, binary_search = _measure_against_numpy(calls, x, grid)
        merge_s.append(_outcome(merge))
        binary_search_s.append(_outcome(binary_search))
        progress.step()

    def seconds(outcomes):  # a kernel that failed at a skew loses there
        return [t if isinstance(t, float) else float("inf") for t in outcomes]

    return tuning.CacheEntry(
        tuning.GPU_ROUTE_KERNEL, tuning.dtype_class(dtype), {"n": size, "m": size},
        {"bisect_ratio": crossover(grid.ratios, seconds(merge_s), seconds(binary_search_s))},
        {"ratios": list(grid.ratios), "merge_s": merge_s, "bisect_s": binary_search_s,
         "implementation": implementation})


def _sweep_gpu_configs(implementation: str, kind: KernelKind, space: Sequence[Any],
                       dtype: str, size: int, *, grid: TuneGrid,
                       interpret: bool) -> tuning.CacheEntry | None:
    """Time every config of one kernel of one implementation at N = M = size;
    the winner's entry, or None when no config compiled without spilling and
    gave numpy's answer."""
    kernel = BACKENDS[implementation].kernel(kind)
    x = make_inputs(Problem(size, size, dtype, kind.sorted_needles))
    default = kind.default_config(size, size, np.dtype(dtype))
    configs = list(dict.fromkeys([default, *space]))
    calls = [_spill_checked(functools.partial(kernel, side="left",
                                              out_dtype=np.dtype(np.int32), config=c,
                                              interpret=interpret), x.ja, x.jv)
             for c in configs]
    measured = _measure_against_numpy(calls, x, grid)
    seconds = {_config_label(dataclasses.asdict(c)): _outcome(m)
               for c, m in zip(configs, measured)}
    good = [(m.timing.median, i) for i, m in enumerate(measured) if m.correct]
    if not good:
        return None
    best = configs[min(good)[1]]
    return tuning.CacheEntry(tuning.gpu_kernel_key(implementation, kind.name),
                              tuning.dtype_class(dtype), {"n": size, "m": size},
                              dataclasses.asdict(best),
                              {"configs_s": seconds,
                               "default": _config_label(dataclasses.asdict(default))})


def gpu_table(entries: Sequence[tuning.CacheEntry]) -> str:
    """Summary of the chosen GPU configs against each kernel's heuristic default."""
    rows = []
    for e in entries:
        if e.kernel == tuning.GPU_ROUTE_KERNEL:
            rows.append([e.kernel, e.dtype, fmt_count(e.bucket["n"]),
                         f"bisect_ratio={e.config['bisect_ratio']:.3g}", "-", "-", "-"])
            continue
        if e.kernel == tuning.IMPLEMENTATION_KERNEL:
            best = e.times["implementations_s"][e.config["name"]]
            rows.append([e.kernel, e.dtype, fmt_count(e.bucket["n"]),
                         e.config["name"], fmt_ms(best), "-", "-"])
            continue
        best = e.times["configs_s"][_config_label(e.config)]
        default = e.times["configs_s"].get(e.times["default"])
        rows.append([e.kernel, e.dtype, fmt_count(e.bucket["n"]),
                     _config_label(e.config), fmt_ms(best),
                     fmt_ms(default if isinstance(default, float) else None),
                     fmt_x(default / best if isinstance(default, float) else None)])
    return format_table(["kernel", "dtype", "N=M", "best config", "best ms",
                         "default ms", "vs default"], rows)

