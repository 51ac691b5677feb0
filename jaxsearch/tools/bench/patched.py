"""The patched benchmark: unchanged jnp code, stock jax against
``jaxsearch.patch()``, in one process.

Each workload is a Python function as a user writes it (``jnp.histogram(x,
bins=100)``, ``jax.random.choice(key, n, (n,), p=p)``, ``jnp.interp``,
``RegularGridInterpolator``, an SMC resampling step), jitted twice: once
with jax's own functions, once traced inside ``patched()``. Each is
compiled ahead of time under its own state (the patch clears jax's caches
on entry and exit, and a jit traced again outside the patch would be stock
again; a compiled executable keeps what it traced). The two then run
interleaved through :func:`jaxsearch.tools.bench.timing.measure_all`, and
their outputs are compared bit for bit. The patched program's lowering must
hold a jaxsearch kernel, whichever of jax's functions the patch serves it
through, or the row says it was not served. numpy's histogram is timed next
to the histograms: the peer to beat there.
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
import jax.scipy.interpolate
import numpy as np

from ... import tuning
from ...core.patching import is_patched, patched
from ...pallas_kernels import BACKENDS
from ..grids import Grids
from .format import (
    MARKER_TEXT,
    MEDIAN_TEXT,
    Footnotes,
    fmt_count,
    fmt_ms,
    fmt_x,
    format_legend,
    format_table,
    write_json,
)
from .resampling import ResamplingProblem, make_inputs
from .timing import (
    Progress,
    Timing,
    machine_info,
    measure_all,
    timing_from_json,
    timing_json,
)

# jaxsearch's CPU kernels are XLA custom calls whose targets start with
# "jaxsearch" (the search's, the fused cumsum search's, and any later one);
# its GPU kernels leave each wrapper's jit name in the debug locations.
_CPU_CALL = re.compile(r"stablehlo\.custom_call @jaxsearch\w*")
_GPU_WRAPPER = re.compile(r"\bjit\((" + "|".join(
    re.escape(fn.__name__) for backend in BACKENDS.values()
    for fn in backend.kernels.values()) + r")\)")


def served_by_jaxsearch(lowered: jax.stages.Lowered) -> bool:
    """Whether a lowered program runs one of jaxsearch's kernels."""
    text = lowered.as_text(debug_info=True)
    return bool(_CPU_CALL.search(text) or _GPU_WRAPPER.search(text))


# ---------------------------------------------------------------- workloads


@dataclasses.dataclass(frozen=True)
class Workload:
    """One piece of unchanged jax code.

    `make(n, rng)` gives the function as a user writes it (not jitted) and its
    host arguments for one problem of size n; under vmap the family stacks
    the arguments of `rows` such problems and maps the function over them.
    `numpy` is a host peer on the same arguments, timed next to it.
    """

    name: str
    code: str  # what the legend shows
    make: Callable[[int, np.random.Generator], tuple[Callable[..., Any], tuple[Any, ...]]]
    target: float | None = None  # the speed-up the patch should reach here
    vmapped: bool = False  # also run as `rows` rows under jax.vmap
    numpy: Callable[..., Any] | None = None


def _histogram(sort: bool) -> Callable[[int, np.random.Generator], tuple[Callable, tuple]]:
    def make(n: int, rng: np.random.Generator) -> tuple[Callable, tuple]:
        x = rng.standard_normal(n, dtype=np.float32)
        return (lambda x: jnp.histogram(x, bins=100)), (np.sort(x) if sort else x,)
    return make


def _choice(n: int, rng: np.random.Generator) -> tuple[Callable, tuple]:
    p, _ = _softmax_and_systematic(n, rng)
    return (lambda key, p: jax.random.choice(key, n, (n,), p=p)), (
        jax.random.key(int(rng.integers(2**31))), p)


def _interp_inputs(n: int, rng: np.random.Generator, sort: bool) -> tuple[np.ndarray, ...]:
    """Needles x (a tenth of them outside xp's range), sorted xp, and fp."""
    x = (rng.random(n, dtype=np.float32) * 1.2 - 0.1).astype(np.float32)
    xp = np.sort(rng.random(n, dtype=np.float32))
    return np.sort(x) if sort else x, xp, rng.standard_normal(n, dtype=np.float32)


def _interp(sort: bool) -> Callable[[int, np.random.Generator], tuple[Callable, tuple]]:
    def make(n: int, rng: np.random.Generator) -> tuple[Callable, tuple]:
        return jnp.interp, _interp_inputs(n, rng, sort)
    return make


def _grid_interpolator(ndim: int) -> Callable[[int, np.random.Generator],
                                              tuple[Callable, tuple]]:
    """n query points on a grid of about n values (n ** (1 / ndim) a side)."""
    def make(n: int, rng: np.random.Generator) -> tuple[Callable, tuple]:
        side = round(n ** (1 / ndim))
        points = tuple(np.sort(rng.random(side, dtype=np.float32)) for _ in range(ndim))
        values = rng.standard_normal((side,) * ndim, dtype=np.float32)
        xi = rng.random((n, ndim), dtype=np.float32)

        def interpolate(points, values, xi):
            return jax.scipy.interpolate.RegularGridInterpolator(points, values)(xi)

        return interpolate, (points, values, xi)
    return make


def _softmax_and_systematic(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Softmax weights and systematic uniforms (i + U) / n, from the
    resampling family's inputs."""
    w, u = make_inputs(ResamplingProblem("systematic", n), seed=int(rng.integers(2**31)))
    return w[0], u[0]


def _resampling_step(n: int, rng: np.random.Generator) -> tuple[Callable, tuple]:
    def step(w, u):
        idx = jnp.searchsorted(jnp.cumsum(w), u)
        return jnp.clip(idx, 0, n - 1)

    return step, _softmax_and_systematic(n, rng)


WORKLOADS = (
    Workload("histogram unsorted", "jnp.histogram(x, bins=100), x float32 normal",
             _histogram(False), 5.0, numpy=lambda x: np.histogram(x, bins=100)),
    Workload("histogram sorted", "the same on x sorted", _histogram(True), 20.0,
             numpy=lambda x: np.histogram(x, bins=100)),
    Workload("random.choice", "jax.random.choice(key, n, (n,), p=p), p softmax weights",
             _choice, 3.0),
    Workload("interp unsorted x", "jnp.interp(x, xp, fp): n sorted xp, n float32 x (a tenth "
             "outside xp's range)", _interp(False), 5.0, vmapped=True),
    Workload("interp sorted x", "the same on x sorted", _interp(True), 5.0),
    Workload("RegularGridInterpolator 1-D", "jax.scipy.interpolate.RegularGridInterpolator("
             "points, values)(xi): n grid values, n points", _grid_interpolator(1)),
    Workload("RegularGridInterpolator 2-D", "the same on a sqrt(n) x sqrt(n) grid, n points",
             _grid_interpolator(2)),
    Workload("resampling step", "idx = jnp.searchsorted(jnp.cumsum(w), u); jnp.clip(idx, 0, "
             "n - 1): w softmax weights, u systematic uniforms (i + U) / n",
             _resampling_step, 3.0, vmapped=True),
)
_BY_NAME = {w.name: w for w in WORKLOADS}


@dataclasses.dataclass(frozen=True)
class PatchedProblem:
    """A workload at size n (rows > 1: that many rows of n under jax.vmap)."""

    workload: str
    n: int
    rows: int = 1

    @property
    def label(self) -> str:
        size = fmt_count(self.n)
        return f"{self.workload} {size}" if self.rows == 1 else \
            f"{self.workload} {self.rows}x{size} vmap"


def build(problem: PatchedProblem, seed: int = 0) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """The problem's function (vmapped over rows where rows > 1, not jitted)
    and its host arguments."""
    make = _BY_NAME[problem.workload].make
    rng = np.random.default_rng(seed)
    if problem.rows == 1:
        return make(problem.n, rng)
    made = [make(problem.n, rng) for _ in range(problem.rows)]
    stacked = jax.tree.map(lambda *rows: np.stack(rows), *(args for _, args in made))
    return jax.vmap(made[0][0]), stacked


# ---------------------------------------------------------------- comparing


@dataclasses.dataclass(frozen=True)
class Difference:
    """How the patched output differs from stock's: elements whose bits
    differ, of how many, and the largest |difference| among float ones."""

    differing: int
    elements: int
    max_abs: float | None = None

    @property
    def identical(self) -> bool:
        return self.differing == 0


def compare(stock: Any, patched_out: Any) -> Difference:
    """Bit-for-bit comparison of two outputs (pytrees of arrays); a leaf of
    another shape or dtype differs in all its elements."""
    differing = elements = 0
    worst = None
    for a, b in zip(jax.tree.leaves(stock), jax.tree.leaves(patched_out), strict=True):
        a, b = np.asarray(a), np.asarray(b)
        elements += a.size
        if a.shape != b.shape or a.dtype != b.dtype:
            differing += a.size
            continue
        bits = np.dtype(f"u{a.dtype.itemsize}") if a.dtype.kind in "fc" else a.dtype
        diff = a.view(bits) != b.view(bits)
        differing += int(diff.sum())
        if diff.any() and a.dtype.kind == "f":
            gap = float(np.nanmax(np.abs(a[diff].astype(np.float64) - b[diff])))
            worst = gap if worst is None else max(worst, gap)
    return Difference(differing, elements, worst)


# ---------------------------------------------------------------- running


@dataclasses.dataclass
class PatchedResult:
    """One problem: stock's, the patched and numpy's times, whether the
    patched program ran jaxsearch, and how its output compares."""

    problem: PatchedProblem
    stock: Timing | None = None
    patched: Timing | None = None
    numpy: Timing | None = None
    served: bool | None = None
    difference: Difference | None = None
    error: str | None = None  # why a time is missing

    @property
    def speedup(self) -> float | None:
        if self.stock is None or self.patched is None:
            return None
        return self.stock.median / self.patched.median

    @property
    def ok(self) -> bool:
        """Served by jaxsearch, with stock's very answer."""
        return bool(self.served and self.difference and self.difference.identical
                    and self.error is None)


def _compiled(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, jax.stages.Lowered]:
    lowered = jax.jit(fn).lower(*args)
    return lowered.compile(), lowered


def run_one(problem: PatchedProblem, *, repeats: int = 5, budget_s: float = 1.0
            ) -> PatchedResult:
    """Compile the problem stock and patched, time both (and numpy's peer)
    side by side, and compare their outputs."""
    fn, host_args = build(problem)
    args = jax.device_put(host_args)
    stock, _ = _compiled(fn, args)
    with patched():
        fast, lowered = _compiled(fn, args)
    result = PatchedResult(problem, served=served_by_jaxsearch(lowered))
    outputs: dict[str, Any] = {}

    def keep(out: Any) -> bool:
        outputs["stock"] = out
        return True

    def check(out: Any) -> bool:
        # measure_all warms up its callables in order: stock's output is in.
        result.difference = compare(outputs.pop("stock"), out)
        return result.difference.identical

    calls = [functools.partial(stock, *args), functools.partial(fast, *args)]
    peer = _BY_NAME[problem.workload].numpy
    if peer is not None and problem.rows == 1:
        calls.append(functools.partial(peer, *host_args))
    measured = measure_all(calls, repeats=repeats, budget_s=budget_s,
                           checks=[keep, check, None][:len(calls)])
    result.stock, result.patched = measured[0].timing, measured[1].timing
    if len(measured) > 2:
        result.numpy = measured[2].timing
    result.error = next((m.failure for m in measured if m.failure), None)
    return result


@dataclasses.dataclass(frozen=True)
class PatchedGrid:
    """Every workload at each of `sizes`, then those that run under vmap as
    `batch` = (rows, n)."""

    sizes: tuple[int, ...]
    batch: tuple[int, int]


GRIDS = Grids(quick=PatchedGrid(sizes=(10**4,), batch=(4, 10**3)),
              full=PatchedGrid(sizes=(10**6, 10**7), batch=(64, 10**4)))


def problems(grid: PatchedGrid) -> list[PatchedProblem]:
    """Each workload at each size, then the vmapped ones at the batch."""
    rows, n = grid.batch
    return [PatchedProblem(w.name, size) for size in grid.sizes for w in WORKLOADS] + [
        PatchedProblem(w.name, n, rows) for w in WORKLOADS if w.vmapped]


def run(probs: Sequence[PatchedProblem], *, repeats: int = 5, budget_s: float = 1.0,
        progress: Progress | None = None) -> list[PatchedResult]:
    """:func:`run_one` on every problem. Refuses to run with the patch
    already in force (under ``jaxsearch.autopatch``): stock would not be jax's."""
    if is_patched():
        raise RuntimeError("the patch is in force: stock runs need jax's own functions "
                           "(run without jaxsearch.autopatch)")
    results = []
    for problem in probs:
        if progress:
            progress.show(problem.label)
        results.append(run_one(problem, repeats=repeats, budget_s=budget_s))
        if progress:
            progress.step()
    return results


# ---------------------------------------------------------------- reports


def _fmt_identical(d: Difference) -> str:
    if d.identical:
        return "yes"
    gap = "" if d.max_abs is None else f", max |diff| {d.max_abs:.3g}"
    return f"NO ({d.differing} of {d.elements} differ{gap})"


def table(results: Sequence[PatchedResult]) -> str:
    """One row per problem: stock's and the patched median ms, the speed-up
    against its target, whether the answers are identical and the patched
    program ran jaxsearch; numpy's time and the patched speed-up over it
    where numpy has a peer."""
    notes = Footnotes()
    rows = []
    for r in results:
        target = _BY_NAME[r.problem.workload].target
        untimed = r.error or "not run"
        speedup = r.speedup
        rows.append([
            r.problem.label,
            notes.cell(r.stock and r.stock.median, fmt_ms, untimed),
            notes.cell(r.patched and r.patched.median, fmt_ms, untimed),
            notes.cell(speedup, fmt_x, untimed),
            notes.cell(target, lambda t: f">= {t:g}x", "no target set"),
            notes.cell(target if speedup is not None else None,
                       lambda t: "yes" if speedup >= t else "NO",
                       "no target set" if target is None else untimed),
            notes.cell(r.difference, _fmt_identical, untimed),
            {None: "-", True: "yes", False: "NO"}[r.served],
            notes.cell(r.numpy and r.numpy.median, fmt_ms, "numpy peer: histograms only, "
                                                           "not under vmap"),
            notes.cell(r.numpy and r.patched and r.numpy.median / r.patched.median, fmt_x,
                       "numpy peer: histograms only, not under vmap"),
        ])
    legend = format_legend(
        [("case", "the workload and its size n (rows x n under jax.vmap); each is a Python "
                  "function jitted as written, once as jax traces it and once traced inside "
                  "jaxsearch.patched()"),
         ("stock / patched", MEDIAN_TEXT + "; the two interleaved"),
         ("speed-up", "stock's median / the patched one's"),
         ("target", "the speed-up the patch should reach on this workload"),
         ("identical", "the patched output equals stock's bit for bit (counts, indices and "
                       "floats alike)"),
         ("served", "the patched program's lowering holds a jaxsearch kernel"),
         ("numpy", "numpy.histogram(x, bins=100) on the host copy of x"),
         ("vs numpy", "numpy's median / the patched one's")]
        + [(w.name, w.code) for w in WORKLOADS])
    return "\n\n".join(part for part in [
        "Patched: unchanged jax code, stock against jaxsearch.patch(): median ms per call",
        format_table(["case", "stock ms", "patched ms", "speed-up", "target", "met",
                      "identical", "served", "numpy ms", "vs numpy"], rows),
        str(notes), "Legend:\n" + legend, MARKER_TEXT] if part)


def results_json(results: Sequence[PatchedResult], meta: dict[str, Any]) -> dict[str, Any]:
    """Results as rows ready for json.dump, under `meta`."""
    return {"meta": meta, "results": [{
        "problem": dataclasses.asdict(r.problem),
        "stock": timing_json(r.stock), "patched": timing_json(r.patched),
        "numpy": timing_json(r.numpy), "speedup": r.speedup,
        "target": _BY_NAME[r.problem.workload].target, "served": r.served,
        "identical": r.difference and r.difference.identical,
        "difference": r.difference and dataclasses.asdict(r.difference),
        "error": r.error} for r in results]}


def results_from_json(data: dict[str, Any]) -> list[PatchedResult]:
    """Rebuild results from :func:`results_json`'s output (to re-report a saved run)."""
    return [PatchedResult(
        PatchedProblem(**row["problem"]), timing_from_json(row["stock"]),
        timing_from_json(row["patched"]), timing_from_json(row["numpy"]), row["served"],
        row["difference"] and Difference(**row["difference"]), row["error"])
        for row in data["results"]]


def bench(*, quick: bool, output: Path, repeats: int = 5,
          sizes: Sequence[int] | None = None) -> tuple[str, Path, bool]:
    """Run the patched family (at `sizes` in place of the grid's, if given);
    write patched_<device>.json into `output`.

    Returns:
      (table, path of the JSON, whether every problem was served by jaxsearch
      with stock's very answer).
    """
    grid = GRIDS.pick(quick)
    if sizes:
        grid = dataclasses.replace(grid, sizes=tuple(sizes))
    probs = problems(grid)
    results = run(probs, repeats=repeats, progress=Progress(len(probs), "patched"))
    meta = machine_info() | {"family": "patched", "grid": dataclasses.asdict(grid)}
    path = write_json(results_json(results, meta), output / f"patched_{tuning.device_kind()}.json")
    return table(results), path, all(r.ok for r in results)
