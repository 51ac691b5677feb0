"""The searchsorted family's two jobs: the main job (``python -m jaxsearch``),
a side-by-side look at a few problems, and the full benchmark
(``python -m jaxsearch bench``), a sweep written to JSON and a PNG."""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..grids import Grids
from .other_numpy import numpy_process_impl
from .peers import (
    Problem,
    copy_impl,
    jax_floor_impl,
    jaxsearch_impl,
    jnp_impl,
    numpy_impl,
    peer_impls,
)
from .plot import plot_results
from .report import bench_table, main_job_table, results_from_json, results_json
from .suite import Result, memory_bytes, run_suite
from .timing import Progress, save_run


def main_job_problems(scale: float = 1.0) -> list[Problem]:
    """The main job's problems: balanced, both skews, unsorted, tiny."""
    def s(x: float) -> int:
        return max(1, round(x * scale))

    return [Problem(s(1e7), s(1e7)), Problem(s(1e7), s(1e3)), Problem(s(1e3), s(1e7)),
            Problem(s(1e6), s(1e6), sorted_v=False), Problem(s(1e4), s(1e4))]


def main_job(*, scale: float = 1.0, repeats: int = 5, budget_s: float = 1.0,
             max_call_s: float = 2.0) -> tuple[str, list[Result]]:
    """Time jaxsearch against jnp, numpy and the floors on a few problems.

    Returns:
      (table, results).
    """
    problems = main_job_problems(scale)
    impls = [jaxsearch_impl(True), jaxsearch_impl(None), jaxsearch_impl(False),
             jnp_impl("scan"), jnp_impl("sort"), jnp_impl("compare_all"), numpy_impl(),
             copy_impl(), jax_floor_impl()]
    # sorted_v=False is for unsorted needles: on sorted ones it says nothing new.
    impls[2] = dataclasses.replace(impls[2], applies=lambda p: not p.sorted_v,
                                   needs="unsorted needles")
    progress = Progress(len(problems), "jaxsearch")
    results = run_suite(problems, impls, repeats=repeats, budget_s=budget_s,
                        max_call_s=max_call_s, progress=progress)
    return main_job_table(results), results


@dataclasses.dataclass(frozen=True)
class BenchGrid:
    """What the full benchmark sweeps."""

    sizes: tuple[int, ...]  # N = M for the balanced problems
    dtypes: tuple[str, ...]
    skew_size: int  # max(N, M) of the skewed problems
    skew_ratios: tuple[float, ...]  # N / M
    repeats: int = 5
    budget_s: float = 1.0
    max_call_s: float = 30.0

    def problems(self) -> list[Problem]:
        """Balanced sizes x dtypes x sorted/unsorted, then skews (float32, sorted)."""
        out = [Problem(n, n, dt, s) for dt in self.dtypes for s in (True, False)
               for n in self.sizes]
        for r in self.skew_ratios:
            n, m = (self.skew_size, round(self.skew_size / r)) if r >= 1 else \
                (round(self.skew_size * r), self.skew_size)
            p = Problem(max(n, 1), max(m, 1))
            if p not in out:
                out.append(p)
        return out


SKEW_RATIOS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3, 1e4)
GRIDS = Grids(
    quick=BenchGrid(sizes=tuple(10**k for k in range(3, 7)), dtypes=("float32", "int32"),
                    skew_size=10**6, skew_ratios=SKEW_RATIOS, repeats=5,
                    budget_s=0.25, max_call_s=1.0),
    full=BenchGrid(sizes=tuple(10**k for k in range(3, 9)),
                   dtypes=("float32", "int32", "float64", "int64"),
                   skew_size=10**7, skew_ratios=SKEW_RATIOS))


def fit_to_memory(grid: BenchGrid) -> BenchGrid:
    """Drop sizes whose arrays (keys, needles, copies, outputs) would not fit."""
    memory = memory_bytes()
    width = max(np.dtype(d).itemsize for d in grid.dtypes)
    sizes = tuple(n for n in grid.sizes if 8 * n * width < memory / 2)
    return dataclasses.replace(grid, sizes=sizes)


def bench(grid: BenchGrid, output: Path,
          numpy_python: str | None = None) -> tuple[str, dict[str, Path]]:
    """Run the full benchmark over `grid`; write JSON and PNG into `output`.
    With `numpy_python`, the numpy of that Python is a peer too, beside this
    one's (other_numpy.py).

    Returns:
      (table, {"json": path, "png": path}); "png" is missing when matplotlib
      is not installed (a message says so on stderr).
    """
    grid = fit_to_memory(grid)
    problems, impls = grid.problems(), peer_impls()
    if numpy_python:
        after = next(k for k, i in enumerate(impls) if i.group == "numpy") + 1
        impls.insert(after, numpy_process_impl(numpy_python))
    progress = Progress(len(problems), "bench")
    results = run_suite(problems, impls, repeats=grid.repeats, budget_s=grid.budget_s,
                        max_call_s=grid.max_call_s, progress=progress)
    paths = {"json": save_run(functools.partial(results_json, results), "searchsorted", grid,
                              output, stem="bench")}
    try:
        paths["png"] = plot_results(results, paths["json"].with_suffix(".png"))
    except ImportError:
        print("matplotlib is not installed, so no plot was written; install it with "
              "`pip install 'jaxsearch[bench]'` (or `pip install matplotlib`).",
              file=sys.stderr)
    return bench_table(results), paths


def replot(data: dict[str, Any], png: Path) -> tuple[str, dict[str, Path]]:
    """The table of a run that :func:`bench` saved as `data`, and its plot
    written to `png`; nothing is measured.

    Returns:
      (table, {"png": path}).

    Raises:
      ImportError: matplotlib is missing (the `bench` extra).
    """
    results = results_from_json(data)
    return bench_table(results), {"png": plot_results(results, png)}
