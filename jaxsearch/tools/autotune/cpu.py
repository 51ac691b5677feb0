"""The CPU half of the autotuner (:mod:`jaxsearch.autotune`).

Times the Cython kernels against each other over N/M skews and picks the
crossover points of the kernel selector (``bisect_ratio``: merge vs. lock-step
binary search for N >> M; ``runs_ratio``: merge vs. run filling for M >> N),
then the thread count (at the largest size) and the size from which threads
pay (``min_parallel``), the bytes of keys from which needles in any
order are searched by buckets (``bucket_min_bytes``) and the keys per
needle up to which the buckets pay (``bucket_keys_per_needle``), and the
keys per needle up to which they take their row's bin table where SIMD
gathers would search it alone (``table_check_ratio``), the keys of a
short row up to which its needles are counted rather than searched
(``count_keys``), and the needles per row below which a batch of rows is
searched across rows (``short_row_needles``).
Kernels are compared on one thread: threads split the needles of every kernel
alike, so the crossovers carry over.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ... import tuning
from ...core import cpu
from ...core.api import searchsorted
from ..bench.format import fmt_count, fmt_x, format_table
from ..bench.peers import Problem, make_arrays, make_inputs
from ..bench.timing import Progress, measure_all
from .grid import TuneGrid, crossover, final_run_start

# A candidate must beat the incumbent by this much to replace it, so that
# noise on a shared machine does not flip a setting that has no effect.
MARGIN = 0.05
# Bytes of keys from which the bucket search is timed: below a core's L2
# the route has too few buckets to differ from the table search it falls
# back to.
BUCKET_SWEEP_MIN_BYTES = 1 << 20
# A bucket_min_bytes no call reaches: the buckets off.
NO_BUCKETS = 2**31 - 1
# Needles per key at which the bin table is timed against the gathers
# (a ladder of one step, as `crossover` takes): from one needle per 64 keys,
# where the table still paid on rows of 40-120 MB (AMD EPYC, 2 cores).
TABLE_NEEDLES_PER_KEY = tuple(2.0**k for k in range(-6, 3))
# Needles per key at which the buckets are timed against the bin table, at
# the largest size the buckets are timed at (one needle per 64 keys to one
# per 2).
BUCKET_NEEDLES_PER_KEY = tuple(2.0**k for k in range(-6, 0))
# Keys of one row at which its unsorted needles are timed counted and
# searched (a ladder of one step, as `crossover` takes), and the most
# needles they are timed with (fewer where the grid's sizes are smaller).
COUNT_ROW_KEYS = (8, 16, 32, 64, 128)
COUNT_SWEEP_NEEDLES = 10**6
# Needles per row at which a batch of rows of SHORT_SWEEP_KEYS keys is timed
# searched across rows and row by row (a ladder of one step), and the most
# needles in all (fewer where the grid's sizes are smaller).
SHORT_ROW_NEEDLES = (8, 16, 32, 64, 128, 256)
SHORT_SWEEP_KEYS = 200
SHORT_SWEEP_NEEDLES = 2**16


def call_under_config(config: tuning.CpuConfig, ja: jax.Array, jv: jax.Array, *,
                      vmapped: bool = False, **kwargs: Any) -> Callable[[], Any]:
    """``jaxsearch.searchsorted(ja, jv, **kwargs)`` under jit with `config` in
    force (`vmapped`: under vmap over rows of `ja` and `jv`).

    Compiled ahead of time inside :func:`tuning.use_cpu_config`, so that calls
    made later, interleaved with calls compiled under other configs, still run
    with it.
    """
    search = functools.partial(searchsorted, **kwargs)
    with tuning.use_cpu_config(config):
        compiled = jax.jit(jax.vmap(search) if vmapped else search).lower(ja, jv).compile()
    return lambda: compiled(ja, jv)


def _kernel_call(kernel: str, ja: jax.Array, jv: jax.Array) -> Callable[[], Any]:
    """One Cython kernel on sorted needles, under jit, bypassing the selector."""
    f = jax.jit(functools.partial(cpu.search, side="left", order="sorted", kernel=kernel,
                                  out_dtype=np.dtype(np.int32), threads=1,
                                  min_parallel=tuning.DEFAULT_CPU_CONFIG.min_parallel))
    return lambda: f(ja, jv)


def _sweep_skew(alt: str, size: int, dtype: str, ratios: Sequence[int], *, grid: TuneGrid,
                progress: Progress) -> dict[str, Any]:
    """Time merge against `alt` ("bisect": N = size, M = size/r; "runs": the
    mirror) for each skew r; return the times and the crossover."""
    merge_s, alt_s = [], []
    for r in ratios:
        progress.show(f"cpu {dtype} size={fmt_count(size)} merge vs {alt} at 1:{r}")
        small = max(1, size // r)
        x = make_inputs(Problem(size, small, dtype) if alt == "bisect" else
                        Problem(small, size, dtype))
        timings = measure_all([_kernel_call("merge", x.ja, x.jv), _kernel_call(alt, x.ja, x.jv)],
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
                   progress: Progress) -> dict[str, float]:
    """Seconds per balanced call (N = M = size) for each thread count."""
    progress.show(f"cpu {dtype} size={fmt_count(size)} threads")
    x = make_inputs(Problem(size, size, dtype))
    counts = _thread_candidates(cpu.available_cores())
    calls = [call_under_config(
        dataclasses.replace(tuning.DEFAULT_CPU_CONFIG, threads=t, min_parallel=1), x.ja, x.jv,
        sorted_v=True, implementation="cython") for t in counts]
    # Three times the samples: one noisy size here moves min_parallel for the
    # whole dtype (it needs threads to win at every larger size).
    timings = measure_all(calls, repeats=3 * grid.repeats, budget_s=grid.budget_s)
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
        return tuning.DEFAULT_CPU_CONFIG.min_parallel
    first = final_run_start([t["0"] < (1 - MARGIN) * t["1"] for t in threads])
    if first == len(threads):
        return tuning.DEFAULT_CPU_CONFIG.min_parallel
    return sizes[0] if first == 0 else round(math.sqrt(sizes[first - 1] * sizes[first]))


def _bucket_sizes(sizes: Sequence[int], dtype: str) -> list[int]:
    """The sizes at which the bucket search is timed (BUCKET_SWEEP_MIN_BYTES)."""
    return [s for s in sorted(sizes) if s * np.dtype(dtype).itemsize >= BUCKET_SWEEP_MIN_BYTES]


def _time_configs(ja: jax.Array, jv: jax.Array, grid: TuneGrid, *fields: dict[str, Any],
                  **kwargs: Any) -> list[float]:
    """Median seconds per call of the Cython search of (ja, jv) (with
    call_under_config's `kwargs`), the calls interleaved, under the default
    config with each of `fields` replaced."""
    calls = [call_under_config(dataclasses.replace(tuning.DEFAULT_CPU_CONFIG, **f), ja, jv,
                               implementation="cython", **kwargs)
             for f in fields]
    return [t.timing.median for t in measure_all(calls, repeats=grid.repeats,
                                                  budget_s=grid.budget_s)]


def _time_unsorted(n: int, m: int, dtype: str, grid: TuneGrid,
                   *fields: dict[str, Any]) -> list[float]:
    """_time_configs on m unsorted needles in n keys, promised in no order."""
    inputs = make_inputs(Problem(n, m, dtype, sorted_v=False))
    return _time_configs(inputs.ja, inputs.jv, grid, *fields, sorted_v=False)


def _sweep_buckets(sizes: Sequence[int], dtype: str, grid: TuneGrid,
                   progress: Progress) -> dict[str, Any]:
    """Seconds per call of N = M = size unsorted needles, by buckets and by
    the table search alone, at each size; and the bucket_min_bytes they
    give."""
    on_s, off_s = [], []
    for size in sizes:
        progress.show(f"cpu {dtype} size={fmt_count(size)} buckets")
        on, off = _time_unsorted(size, size, dtype, grid, {"bucket_min_bytes": 0},
                                 {"bucket_min_bytes": NO_BUCKETS})
        on_s.append(on)
        off_s.append(off)
        progress.step()
    nbytes = [s * np.dtype(dtype).itemsize for s in sizes]
    return {"sizes": list(sizes), "buckets_s": on_s, "table_s": off_s,
            "threshold": _bucket_min_bytes(nbytes, [a < (1 - MARGIN) * b
                                                    for a, b in zip(on_s, off_s)])}


def _sweep_bucket_density(size: int, dtype: str, grid: TuneGrid,
                          progress: Progress) -> dict[str, Any]:
    """Seconds per call of N = size keys with fewer unsorted needles, one
    per 2 to 64 keys, by buckets and by the table search alone; and the
    bucket_keys_per_needle they give (keys per needle up to which the
    buckets won at every rung with more needles)."""
    buckets_s, table_s = [], []
    for x in BUCKET_NEEDLES_PER_KEY:
        m = max(round(size * x), 1)
        progress.show(f"cpu {dtype} size={fmt_count(size)} buckets at M={fmt_count(m)}")
        on, off = _time_unsorted(size, m, dtype, grid,
                                 {"bucket_min_bytes": 0, "bucket_keys_per_needle": math.inf},
                                 {"bucket_min_bytes": NO_BUCKETS})
        buckets_s.append(on)
        table_s.append(off)
        progress.step()
    rungs = list(BUCKET_NEEDLES_PER_KEY)
    return {"size": size, "needles_per_key": rungs, "buckets_s": buckets_s, "table_s": table_s,
            "threshold": _keys_per_needle_limit(rungs, buckets_s, table_s)}


def _sweep_count_keys(needles: int, dtype: str, grid: TuneGrid,
                      progress: Progress) -> dict[str, Any]:
    """Seconds per call of `needles` unsorted needles in one row of 8 to
    128 keys, counted and searched; and the count_keys they give (the keys
    up to which counting won at every shorter row)."""
    counted_s, searched_s = [], []
    for n in COUNT_ROW_KEYS:
        progress.show(f"cpu {dtype} N={n} counted, M={fmt_count(needles)}")
        counted, searched = _time_unsorted(n, needles, dtype, grid, {"count_keys": n},
                                           {"count_keys": 0})
        counted_s.append(counted)
        searched_s.append(searched)
        progress.step()
    return {"needles": needles, "keys": list(COUNT_ROW_KEYS), "counted_s": counted_s,
            "searched_s": searched_s,
            "threshold": _ladder_limit(COUNT_ROW_KEYS, counted_s, searched_s)}


def _sweep_short_rows(needles: int, dtype: str, grid: TuneGrid,
                      progress: Progress) -> dict[str, Any]:
    """Seconds per call of `needles` unsorted needles under vmap, in rows
    of 8 to 256 needles and SHORT_SWEEP_KEYS keys each, searched across
    rows and row by row; and the short_row_needles they give (the needles
    per row below which across rows won at every row of fewer)."""
    across_s, by_row_s = [], []
    for m in SHORT_ROW_NEEDLES:
        rows = max(needles // m, 2)
        progress.show(f"cpu {dtype} {fmt_count(rows)} rows x {m} needles")
        a, v = make_arrays(Problem(SHORT_SWEEP_KEYS, rows * m, dtype, sorted_v=False))
        ja, jv = jnp.tile(a, (rows, 1)), jnp.asarray(v.reshape(rows, m))
        across, by_row = _time_configs(ja, jv, grid, {"short_row_needles": m + 1},
                                       {"short_row_needles": 0}, vmapped=True)
        across_s.append(across)
        by_row_s.append(by_row)
        progress.step()
    return {"needles": needles, "keys": SHORT_SWEEP_KEYS,
            "needles_per_row": list(SHORT_ROW_NEEDLES), "across_s": across_s, "by_row_s": by_row_s,
            "threshold": _ladder_limit(SHORT_ROW_NEEDLES, across_s, by_row_s)}


def _ladder_limit(ladder: Sequence[int], route_s: Sequence[float],
                  other_s: Sequence[float]) -> int:
    """The rung up to which a route beat the other at every lower rung,
    the other having to win clearly (MARGIN) to take a rung: `crossover`'s
    point, rounded down (past the ladder's ends where the other won at
    every rung, or at none)."""
    return int(crossover(ladder, route_s, [t / (1 - MARGIN) for t in other_s]))


def _bucket_min_bytes(nbytes: Sequence[int], wins: Sequence[bool]) -> int:
    """The bytes of keys from which the buckets won at every larger size:
    halfway (in log space) between the last loss and the first win; from
    the smallest tried where they always won, and past the largest (ten
    times it) where they never did."""
    first = final_run_start(wins)
    if first == len(wins):
        return min(10 * nbytes[-1], NO_BUCKETS)
    return nbytes[0] if first == 0 else round(math.sqrt(nbytes[first - 1] * nbytes[first]))


def _table_cells(size: int, dtype: str) -> list[tuple[float, int, int]]:
    """(needles per key, N, M) of the table sweep at max(N, M) = size: the
    ladder's rungs whose row of keys can take a table and is searched by
    the gathers (4-byte keys in the x86-64-v3 build; elsewhere none)."""
    itemsize = np.dtype(dtype).itemsize
    cells = [(x, size if x <= 1 else round(size / x), round(size * x) if x <= 1 else size)
             for x in TABLE_NEEDLES_PER_KEY]
    return [(x, n, m) for x, n, m in cells if n * itemsize >= cpu.TABLE_ROW_MIN_BYTES
            and m >= 1 and cpu.gathers_search(dtype, n)]


def _sweep_table(size: int, dtype: str, grid: TuneGrid,
                 progress: Progress) -> dict[str, Any] | None:
    """Seconds per call of unsorted needles through the bin table (the
    check of `a` always on) and through the gathers alone (never), at each
    rung of needles per key; and the table_check_ratio they give (keys per
    needle up to which the table won at every rung with more needles).
    None where no rung applies."""
    cells = _table_cells(size, dtype)
    if len(cells) < 2:
        return None
    table_s, gathers_s = [], []
    for x, n, m in cells:
        progress.show(f"cpu {dtype} size={fmt_count(size)} table vs gathers at "
                      f"N={fmt_count(n)} M={fmt_count(m)}")
        table, gathers = _time_unsorted(n, m, dtype, grid, {"table_check_ratio": math.inf},
                                        {"table_check_ratio": 0.0})
        table_s.append(table)
        gathers_s.append(gathers)
        progress.step()
    rungs = [x for x, _, _ in cells]
    return {"needles_per_key": rungs, "table_s": table_s, "gathers_s": gathers_s,
            "threshold": _keys_per_needle_limit(rungs, table_s, gathers_s)}


def _keys_per_needle_limit(needles_per_key: Sequence[float], route_s: Sequence[float],
                           other_s: Sequence[float]) -> float:
    """Keys per needle up to which a route beat the other clearly (MARGIN)
    at every rung with more needles per key: the inverse of `crossover`'s
    point on the ladder, past its ends where the route won everywhere (a
    step above) or nowhere (a step below)."""
    return 1 / crossover(needles_per_key, other_s, [t / (1 - MARGIN) for t in route_s])


def cpu_steps(grid: TuneGrid) -> int:
    """Progress steps of :func:`tune_cpu`."""
    per_size = sum(2 * len(_ratios_for(s, grid.ratios)) + grid.threads for s in grid.sizes)
    tables = sum(len(c) for d in grid.dtypes for s in grid.sizes
                 if len(c := _table_cells(s, d)) >= 2)
    buckets = sum(len(b) + len(BUCKET_NEEDLES_PER_KEY) for d in grid.dtypes
                  if (b := _bucket_sizes(grid.sizes, d)))
    short = (len(COUNT_ROW_KEYS) + len(SHORT_ROW_NEEDLES)) * len(grid.dtypes)
    return per_size * len(grid.dtypes) + buckets + tables + short


def _ratios_for(size: int, ratios: Sequence[int]) -> list[int]:
    return [r for r in ratios if r <= size]


def tune_cpu(grid: TuneGrid, progress: Progress) -> list[tuning.CacheEntry]:
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
            table = _sweep_table(size, dtype, grid, progress)
            if table is not None:
                found[-1]["table"] = table
        # The short rows' limits, for the dtype: a row's keys and needles,
        # not the call's size.
        counts = _sweep_count_keys(min(sizes[-1], COUNT_SWEEP_NEEDLES), dtype, grid, progress)
        short = _sweep_short_rows(min(sizes[-1], SHORT_SWEEP_NEEDLES), dtype, grid, progress)
        shared_fields = {"count_keys": counts["threshold"],
                         "short_row_needles": short["threshold"]}
        buckets = _bucket_sizes(sizes, dtype)
        if buckets:
            # One threshold for the dtype, in bytes, from every size tried.
            swept = _sweep_buckets(buckets, dtype, grid, progress)
            shared_fields["bucket_min_bytes"] = swept["threshold"]
            # Their density at the largest size: where they pay most.
            swept["density"] = _sweep_bucket_density(buckets[-1], dtype, grid, progress)
            shared_fields["bucket_keys_per_needle"] = swept["density"]["threshold"]
            for f in found:
                f["buckets"] = swept
        for f in found:
            f["counts"], f["short_rows"] = counts, short
        if grid.threads:
            # Threads pay on large inputs; below min_parallel one thread runs anyway.
            shared_fields |= {"threads": _best_threads(found[-1]["threads_s"]),
                              "min_parallel": _min_parallel(sizes,
                                                            [f["threads_s"] for f in found])}
        for size, f in zip(sizes, found):
            config = {"bisect_ratio": f["bisect"]["threshold"],
                      "runs_ratio": f["runs"]["threshold"], **shared_fields}
            if "table" in f:
                config["table_check_ratio"] = f["table"]["threshold"]
            entries.append(tuning.CacheEntry(
                tuning.CPU_KERNEL, tuning.dtype_class(dtype), {"size": size}, config, f))
    return entries


def cpu_table(entries: Sequence[tuning.CacheEntry]) -> str:
    """Summary of the chosen CPU configs."""
    rows = []
    for e in entries:
        t = e.times.get("threads_s", {})
        speedup = t["1"] / t["0"] if "1" in t else None
        rows.append([e.dtype, fmt_count(e.bucket["size"]),
                     f"{e.config['bisect_ratio']:.3g}", f"{e.config['runs_ratio']:.3g}",
                     str(e.config.get("threads", "default")),
                     fmt_count(e.config["min_parallel"]) if "min_parallel" in e.config
                     else "default", fmt_x(speedup),
                     fmt_count(e.config["bucket_min_bytes"]) if "bucket_min_bytes" in e.config
                     else "default",
                     f"{e.config['bucket_keys_per_needle']:.3g}"
                     if "bucket_keys_per_needle" in e.config else "default",
                     f"{e.config['table_check_ratio']:.3g}" if "table_check_ratio" in e.config
                     else "default", str(e.config.get("count_keys", "default")),
                     str(e.config.get("short_row_needles", "default"))])
    return format_table(["dtype", "max(N,M)", "bisect_ratio", "runs_ratio", "threads",
                         "min_parallel", "all cores vs 1", "bucket_min_bytes",
                         "bucket_keys_per_needle", "table_check_ratio", "count_keys",
                         "short_row_needles"], rows)

