"""The shapes benchmark: the speed contract of the default call, cell by cell.

On a grid of shapes (single rows over N keys and M needles, and batches of
rows under ``jax.vmap``), sorted and unsorted needles, jaxsearch's default
call is timed against jnp's default call side by side in one process
(:func:`jaxsearch.tools.bench.timing.measure_all`), and, where it is cheap
enough to run, against ``method="compare_all"``, jnp's best method on short
rows. Answers must be identical to jnp's in every cell. A cell misses the
contract where jaxsearch takes over 1.05x jnp's time and 3 µs more; where
jnp takes over 1 ms and jaxsearch is not 2x faster; or, on a short-row cell,
where it is slower than jnp's best method by the same measure. A cell
where jaxsearch compiles to jnp's very program (the smallest rows, which
lower to jnp's own search) cannot be slower than jnp but by noise: there
only its answers and the short-row clause count. The table ends with the
cells that miss.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...core import api
from ..grids import Grids
from .format import fmt_count, fmt_ms, fmt_x, format_table
from .timing import Progress, Timing, measure_all, run_each, save_run, timing_from_json, timing_json

# Never slower than jnp: at most this much of its time, or within SLACK_S.
TOLERANCE = 1.05
SLACK_S = 3e-6
# Where jnp takes longer than this, jaxsearch must be at least FASTER x faster.
SLOW_S = 1e-3
FASTER = 2.0
# compare_all materialises rows x n x m compares: timed up to this many.
COMPARE_ALL_LIMIT = 10**8
# Batched cells whose rows are this short, and hold this few needles, are
# short-row cells: there jaxsearch must match jnp's best method.
SHORT_KEYS = 256
SHORT_NEEDLES = 8


@dataclasses.dataclass(frozen=True)
class ShapeProblem:
    """`rows` rows (1: one row, no vmap) of n keys and m needles."""

    n: int
    m: int
    rows: int = 1
    sorted_v: bool = True
    dtype: str = "float32"

    @property
    def label(self) -> str:
        shape = (f"N={fmt_count(self.n)} M={fmt_count(self.m)}" if self.rows == 1 else
                 f"{fmt_count(self.rows)}x{fmt_count(self.n)}x{fmt_count(self.m)} vmap")
        return f"{shape} {'sorted' if self.sorted_v else 'unsorted'} {self.dtype}"

    @property
    def short_rows(self) -> bool:
        return self.rows > 1 and self.n <= SHORT_KEYS and self.m <= SHORT_NEEDLES

    @property
    def times_compare_all(self) -> bool:
        return self.rows * self.n * self.m <= COMPARE_ALL_LIMIT


@dataclasses.dataclass(frozen=True)
class ShapesGrid:
    """Single rows: every n of `sizes_n` with every m of `sizes_m`; batches:
    each (rows, n, m) of `batches`, float32; all with sorted and unsorted
    needles."""

    sizes_n: tuple[int, ...]
    sizes_m: tuple[int, ...]
    batches: tuple[tuple[int, int, int], ...]
    dtypes: tuple[str, ...]
    repeats: int = 7


GRIDS = Grids(
    quick=ShapesGrid(sizes_n=(1, 200), sizes_m=(1, 10**4), batches=((2_000, 9, 1), (200, 64, 8)),
                     dtypes=("float32",), repeats=3),
    full=ShapesGrid(sizes_n=(1, 9, 200, 10**4, 10**6), sizes_m=(1, 100, 10**4, 10**6),
                    batches=((80_000, 9, 1), (100_000, 200, 1), (20_000, 64, 8),
                             (1_000, 1_000, 100), (64, 10**4, 10**4)),
                    dtypes=("float32", "int32")))


def problems(grid: ShapesGrid) -> list[ShapeProblem]:
    singles = [ShapeProblem(n, m, 1, s, d) for d in grid.dtypes for n in grid.sizes_n
               for m in grid.sizes_m for s in (True, False)]
    return singles + [ShapeProblem(n, m, rows, s) for rows, n, m in grid.batches
                      for s in (True, False)]


def inputs(problem: ShapeProblem, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sorted keys, and needles over the same range (sorted along each row
    where the problem says); one row is 1-D."""
    rng = np.random.default_rng(seed)
    shape_a, shape_v = (problem.rows, problem.n), (problem.rows, problem.m)
    if problem.dtype == "int32":
        a = rng.integers(-(2**30), 2**30, shape_a, dtype=np.int32)
        v = rng.integers(-(2**30), 2**30, shape_v, dtype=np.int32)
    else:
        a = rng.random(shape_a, dtype=np.float32).astype(problem.dtype)
        v = rng.random(shape_v, dtype=np.float32).astype(problem.dtype)
    a = np.sort(a, axis=1)
    if problem.sorted_v:
        v = np.sort(v, axis=1)
    return (a[0], v[0]) if problem.rows == 1 else (a, v)


def _jitted(search: Callable[..., Any], rows: int) -> Callable[..., Any]:
    return jax.jit(search if rows == 1 else jax.vmap(search))


@dataclasses.dataclass
class ShapeResult:
    """One cell: the three timings (compare_all None where not timed) and
    whether every answer was jnp's."""

    problem: ShapeProblem
    jnp: Timing | None = None
    jaxsearch: Timing | None = None
    compare_all: Timing | None = None
    identical: bool = False
    error: str | None = None
    same_program: bool = False  # jaxsearch compiled to jnp's program

    @property
    def speedup(self) -> float | None:
        if self.jnp is None or self.jaxsearch is None:
            return None
        return self.jnp.median / self.jaxsearch.median

    def misses(self) -> list[str]:
        """The clauses of the contract this cell breaks."""
        if self.error or self.jnp is None or self.jaxsearch is None:
            return [self.error or "not measured"]
        found = [] if self.identical else ["answers differ from jnp's"]
        ours, theirs = self.jaxsearch.median, self.jnp.median
        if _slower(ours, theirs) and not self.same_program:
            found.append(f"slower than jnp ({fmt_x(ours / theirs)} its time)")
        if theirs > SLOW_S and ours * FASTER > theirs and not self.same_program:
            found.append(f"under {FASTER:g}x where jnp takes over {SLOW_S * 1e3:g} ms")
        if self.problem.short_rows and self.compare_all is not None \
                and _slower(ours, self.compare_all.median):
            found.append(f"slower than compare_all ({fmt_x(ours / self.compare_all.median)})")
        return found


def _slower(ours: float, theirs: float) -> bool:
    return ours > TOLERANCE * theirs and ours - theirs > SLACK_S


def compiled(search: Callable[..., Any], rows: int, a: Any, v: Any) -> jax.stages.Compiled:
    """`search` (vmapped over rows where rows > 1) compiled for (a, v)."""
    return _jitted(search, rows).lower(a, v).compile()


def program_text(executable: jax.stages.Compiled) -> str:
    """The program of `executable` as text without what names the source
    (its metadata, the tables of files and frames) or numbers instructions
    (the suffix of each %name): two searches that compile alike give one
    text."""
    body = [line for line in executable.as_text().splitlines()
            if line.lstrip().startswith(("%", "ENTRY", "ROOT", "}"))]
    return re.sub(r", metadata=\{[^}]*\}|(?<=%)([\w-]+?)(?:\.\d+)+\b", r"\1",
                  "\n".join(body))


def run_one(problem: ShapeProblem, *, repeats: int = 7, budget_s: float = 1.0) -> ShapeResult:
    """Time jnp, jaxsearch and (where cheap) compare_all on one cell, jnp's
    answers checked against the others', and whether jaxsearch compiles to
    jnp's program. Each is compiled once, and that executable is both read
    and timed."""
    a, v = jax.device_put(inputs(problem))
    searches = [jnp.searchsorted, api.searchsorted]
    if problem.times_compare_all:
        searches.append(functools.partial(jnp.searchsorted, method="compare_all"))
    executables = [compiled(search, problem.rows, a, v) for search in searches]
    same_program = program_text(executables[0]) == program_text(executables[1])
    calls = [functools.partial(executable, a, v) for executable in executables]
    expected: dict[str, np.ndarray] = {}

    def keep(out: Any) -> bool:
        expected["jnp"] = np.asarray(out)
        return True

    def same(out: Any) -> bool:
        return bool(np.array_equal(np.asarray(out), expected["jnp"]))

    measured = measure_all(calls, repeats=repeats, budget_s=budget_s,
                           checks=[keep, same, same][:len(calls)])
    result = ShapeResult(problem, *(m.timing for m in measured), same_program=same_program)
    result.identical = all(m.correct for m in measured[1:])
    result.error = next((m.failure for m in measured if m.failure), None)
    return result


def run(probs: Sequence[ShapeProblem], *, repeats: int = 7,
        progress: Progress | None = None) -> list[ShapeResult]:
    return run_each(probs, functools.partial(run_one, repeats=repeats), progress)


def table(results: Sequence[ShapeResult]) -> str:
    """The cells, then the ones that miss and why."""
    rows = [[r.problem.label, fmt_ms(r.jnp and r.jnp.median),
             fmt_ms(r.jaxsearch and r.jaxsearch.median), fmt_x(r.speedup),
             fmt_ms(r.compare_all and r.compare_all.median),
             "yes" if r.identical else "NO", "jnp's" if r.same_program else "",
             "miss" if r.misses() else ""] for r in results]
    out = ["Shapes: median ms per call, the default call of each (jnp default method)",
           format_table(["cell", "jnp", "jaxsearch", "speed-up", "compare_all", "same answers",
                         "program", "contract"], rows)]
    same = sum(r.same_program for r in results)
    if same:
        out.append(f"{same} cells compile to jnp's very program (\"program\": jnp's): their "
                   "times differ by noise alone, and only their answers are judged against "
                   "jnp's")
    missed = [(r.problem.label, r.misses()) for r in results if r.misses()]
    out.append(f"{len(missed)} of {len(results)} cells miss the contract"
               + (":" if missed else "."))
    out += [f"  {label}: {'; '.join(why)}" for label, why in missed]
    return "\n".join(out)


def results_json(results: Sequence[ShapeResult], meta: dict[str, Any]) -> dict[str, Any]:
    return {"meta": meta, "results": [
        {"problem": dataclasses.asdict(r.problem), "identical": r.identical, "error": r.error,
         "same_program": r.same_program, "misses": r.misses(),
         **{name: timing_json(getattr(r, name)) for name in ("jnp", "jaxsearch", "compare_all")}}
        for r in results]}


def results_from_json(data: dict[str, Any]) -> list[ShapeResult]:
    return [ShapeResult(ShapeProblem(**row["problem"]),
                        *(timing_from_json(row[name]) for name in ("jnp", "jaxsearch",
                                                                   "compare_all")),
                        identical=row["identical"], error=row["error"],
                        same_program=row.get("same_program", False))
            for row in data["results"]]


def bench(*, quick: bool, output: Path, repeats: int | None = None) -> tuple[str, Path, bool]:
    """Run the shapes family; write shapes_<device kind>.json into `output`.

    Returns:
      (table, path of the JSON, whether every cell gave jnp's answers).
    """
    grid = GRIDS.pick(quick)
    if repeats:
        grid = dataclasses.replace(grid, repeats=repeats)
    probs = problems(grid)
    results = run(probs, repeats=grid.repeats, progress=Progress(len(probs), "shapes"))
    path = save_run(functools.partial(results_json, results), "shapes", grid, output)
    return table(results), path, all(r.identical and not r.error for r in results)
