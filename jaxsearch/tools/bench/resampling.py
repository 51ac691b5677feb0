"""The resampling benchmark: particle-filter ancestor indices, the workload
searchsorted_cumsum is for.

Each problem is normalised float32 weights `w` and sorted float32 uniforms
`u` in [0, 1) from one resampling scheme (systematic, stratified or
multinomial); each implementation turns them into ancestor indices
``min(searchsorted(cumsum(w), u), N - 1)``, for one filter or for a batch of
filters under ``jax.vmap``. The uniforms are drawn on the host beforehand:
what is timed is the step from weights and uniforms to indices. Every
result is compared with the float64 reference,
``numpy.searchsorted(numpy.cumsum(w, dtype=float64), u)``: its largest index
error, and how many indices differ beyond searchsorted_cumsum's contract
(a needle within one float32 ulp of a running sum may go either way).
Timing goes through the harness of :mod:`jaxsearch.tools.bench.timing`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...core.api import searchsorted
from ...core.cumsum import searchsorted_cumsum
from ..grids import Grids
from .format import (
    MARKER_TEXT,
    MEDIAN_TEXT,
    Footnotes,
    batch_label,
    fmt_ms,
    fmt_x,
    format_legend,
    format_table,
    group_by_problem,
)
from .peers import log2_size, uniform_order_statistics
from .resampling_accuracy import accuracy, reference
from .timing import (
    Progress,
    Timing,
    measure_all,
    save_run,
    timing_from_json,
    timing_json,
    too_slow,
)

SCHEMES = ("systematic", "stratified", "multinomial")
HEADLINE = "searchsorted_cumsum"
NUMBA = "numba callback"
# Not an implementation: the least any one does, one pass that reads w and u
# and writes an int32 per particle (XLA's allocation of the output included).
FLOOR = "XLA floor"


@dataclasses.dataclass(frozen=True)
class ResamplingProblem:
    """`filters` particle filters of `n` particles each, resampled by `scheme`
    (filters > 1: under jax.vmap)."""

    scheme: str
    n: int
    filters: int = 1

    @property
    def label(self) -> str:
        return batch_label(self.scheme, self.n, self.filters)


def sorted_uniforms(scheme: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """n sorted uniforms in [0, 1) for a resampling scheme, in float32.

    systematic: (k + U) / n with one U; stratified: (k + U_k) / n;
    multinomial: sorted uniforms as normalised exponential spacings (the
    order statistics of n uniforms, in O(n)).
    """
    k = np.arange(n, dtype=np.float64)
    if scheme == "systematic":
        u = (k + rng.random()) / n
    elif scheme == "stratified":
        u = (k + rng.random(n)) / n
    elif scheme == "multinomial":
        u = uniform_order_statistics(rng, n)
    else:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    # Rounding to float32 may reach 1.0: keep every uniform below it.
    return np.minimum(u.astype(np.float32), np.nextafter(np.float32(1), np.float32(0)))


def make_inputs(problem: ResamplingProblem, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Normalised float32 weights (from Gaussian log-weights) and sorted
    uniforms, each of shape (filters, n)."""
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((problem.filters, problem.n)) * 2.0
    w = np.exp(logits - logits.max(axis=1, keepdims=True))
    w = (w / w.sum(axis=1, keepdims=True)).astype(np.float32)
    u = np.stack([sorted_uniforms(problem.scheme, problem.n, rng) for _ in range(problem.filters)])
    return w, u


# ---------------------------------------------------------------- implementations


@dataclasses.dataclass(frozen=True)
class ResamplingImpl:
    """One way to compute ancestors: `build(n, batched)` gives a function of
    (w, u) arrays of shape (filters, n); `host` ones take numpy arrays.
    `cost(n)`: rough seconds per filter on a 2-core CPU, to skip peers that
    would not finish in the time allowed."""

    name: str
    build: Callable[[int, bool], Callable[[Any, Any], Any]]
    host: bool = False
    cost: Callable[[int], float] = lambda n: 0.0
    checked: bool = True  # its indices are compared with the reference


def _jitted(row_fn: Callable[[jax.Array, jax.Array], jax.Array]) -> Callable[[int, bool], Any]:
    """A jax row function over all filters: vmap when batched, jit always."""
    def build(n: int, batched: bool) -> Callable[[Any, Any], Any]:
        def ancestors(w, u):
            return jnp.minimum(row_fn(w, u), n - 1)

        if batched:
            return jax.jit(jax.vmap(ancestors))
        return jax.jit(lambda w, u: ancestors(w[0], u[0])[None])
    return build


def _numba_kernel() -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    """The O(N + M) loop SMC libraries run on the host: one pass over the
    weights with a float32 running sum, one over the sorted uniforms."""
    numba = importlib.import_module("numba")

    @numba.njit
    def resample(w, u, out):
        for r in range(w.shape[0]):
            n, i = w.shape[1], 0
            total = w[r, 0]
            for j in range(u.shape[1]):
                while total < u[r, j] and i < n - 1:
                    i += 1
                    total += w[r, i]
                out[r, j] = i

    return resample


def numba_impl() -> ResamplingImpl | None:
    """The numba loop through jax.pure_callback (None without numba)."""
    try:
        kernel = _numba_kernel()
    except ImportError:
        return None

    def host(w: np.ndarray, u: np.ndarray) -> np.ndarray:
        w, u = np.asarray(w), np.asarray(u)
        out = np.empty(np.broadcast_shapes(w.shape, u.shape), np.int32)
        kernel(np.broadcast_to(w, out.shape), np.broadcast_to(u, out.shape), out)
        return out

    def row(w, u):
        shape = jax.ShapeDtypeStruct(jnp.broadcast_shapes(w.shape, u.shape), jnp.int32)
        # Batched filters reach the callback as one call on all of them.
        return jax.pure_callback(lambda a, b: host(a[None], b[None])[0] if a.ndim == 1
                                 else host(a, b), shape, w, u, vmap_method="broadcast_all")

    return ResamplingImpl(NUMBA, _jitted(row))


def numpy_impl() -> ResamplingImpl:
    """numpy on the host: its float32 cumsum and searchsorted."""
    def build(n: int, batched: bool) -> Callable[[Any, Any], Any]:
        def ancestors(w: np.ndarray, u: np.ndarray) -> np.ndarray:
            return np.stack([np.minimum(np.searchsorted(np.cumsum(wr), ur), n - 1)
                             for wr, ur in zip(w, u)])
        return ancestors

    return ResamplingImpl("numpy", build, host=True)


def impls() -> list[ResamplingImpl]:
    """searchsorted_cumsum, jaxsearch.searchsorted on jnp.cumsum, the numba
    callback, jnp's sort and default methods, and numpy on the host."""
    out = [
        ResamplingImpl(HEADLINE, _jitted(
            lambda w, u: searchsorted_cumsum(w, u, sorted_v=True))),
        ResamplingImpl("jaxsearch.searchsorted(jnp.cumsum)", _jitted(
            lambda w, u: searchsorted(jnp.cumsum(w), u, sorted_v=True))),
        ResamplingImpl("jnp sort", _jitted(
            lambda w, u: jnp.searchsorted(jnp.cumsum(w), u, method="sort")),
            cost=lambda n: 3.6e-8 * n * log2_size(2 * n)),
        ResamplingImpl("jnp default", _jitted(lambda w, u: jnp.searchsorted(jnp.cumsum(w), u)),
             cost=lambda n: 6e-9 * n * log2_size(n)),
    ]
    numba = numba_impl()
    floor = ResamplingImpl(FLOOR, _jitted(lambda w, u: lax.bitcast_convert_type(w + u, jnp.int32)),
                 checked=False)
    return out + ([numba] if numba else []) + [numpy_impl(), floor]


# ---------------------------------------------------------------- running


@dataclasses.dataclass
class ResamplingResult:
    """One implementation on one problem: time, accuracy, or why skipped."""

    problem: ResamplingProblem
    impl: str
    timing: Timing | None = None
    skipped: str | None = None
    max_index_error: int | None = None
    beyond_contract: int | None = None


def run(problems: Sequence[ResamplingProblem], impls: Sequence[ResamplingImpl], *, repeats: int = 5,
        budget_s: float = 1.0, max_call_s: float = 5.0,
        progress: Progress | None = None) -> list[ResamplingResult]:
    """Time every impl on every problem side by side, with its accuracy."""
    results = []
    for problem in problems:
        if progress:
            progress.show(problem.label)
        w, u = make_inputs(problem)
        ref = reference(w, u)
        jw, ju = jnp.asarray(w), jnp.asarray(u)
        todo, calls, checks = [], [], []
        for impl in impls:
            result = ResamplingResult(problem, impl.name)
            results.append(result)
            result.skipped = too_slow(impl.cost(problem.n) * problem.filters, max_call_s)
            if result.skipped:
                continue
            fn = impl.build(problem.n, problem.filters > 1)
            args = (w, u) if impl.host else (jw, ju)
            todo.append(result)
            calls.append(functools.partial(fn, *args))

            def check(out, result=result):
                result.max_index_error, result.beyond_contract = accuracy(w, u, out, ref)
                return True

            checks.append(check if impl.checked else None)
        for result, m in zip(todo, measure_all(calls, repeats=repeats, budget_s=budget_s,
                                               checks=checks)):
            result.timing, result.skipped = m.timing, m.failure
        if progress:
            progress.step()
    return results


def problems(sizes: Sequence[int], batch: tuple[int, int] | None) -> list[ResamplingProblem]:
    """Each scheme at each size, then `batch` = (filters, n) under vmap."""
    out = [ResamplingProblem(s, n) for s in SCHEMES for n in sizes]
    if batch:
        out += [ResamplingProblem(s, batch[1], batch[0]) for s in SCHEMES]
    return out


@dataclasses.dataclass(frozen=True)
class ResamplingGrid:
    """What the family runs: each scheme at each of `sizes` particles, then
    `batch` = (filters, n) under vmap."""

    sizes: tuple[int, ...]
    batch: tuple[int, int] | None


GRIDS = Grids(quick=ResamplingGrid(sizes=(10**4, 10**5), batch=(16, 10**3)),
              full=ResamplingGrid(sizes=(10**5, 10**6, 10**7), batch=(64, 10**4)))


# ---------------------------------------------------------------- tables


def _ratio(by: dict[str, ResamplingResult], slow: str, fast: str) -> float | None:
    """`slow`'s median time over `fast`'s, if both have one."""
    if not all(by.get(name) and by[name].timing for name in (slow, fast)):
        return None
    return by[slow].timing.median / by[fast].timing.median


def table(results: Sequence[ResamplingResult]) -> str:
    """Median ms per implementation, searchsorted_cumsum's speed-up over the
    numba callback, then each one's largest index error (and indices beyond
    the contract) against the float64 reference."""
    names = list(dict.fromkeys(r.impl for r in results))
    checked = [n for n in names if n != FLOOR]
    groups = group_by_problem(results)
    notes = Footnotes()
    times, errors = [], []
    for problem, rs in groups.items():
        by = {r.impl: r for r in rs}
        times.append([problem.label] + [
            notes.cell(by[n].timing and by[n].timing.median, fmt_ms,
                       by[n].skipped or "not run") for n in names]
            + [notes.cell(_ratio(by, NUMBA, HEADLINE), fmt_x, f"{NUMBA}: not run"),
               notes.cell(_ratio(by, HEADLINE, FLOOR), fmt_x, f"{FLOOR}: not run")])
        errors.append([problem.label] + [
            notes.cell(by[n].max_index_error, lambda e, r=by[n]: f"{e} ({r.beyond_contract})",
                       by[n].skipped or "not run") for n in checked])
    legend = format_legend([
        ("problem", "scheme, particles (filters x particles under jax.vmap); normalised "
                    "float32 weights, sorted float32 uniforms; ancestors = min(searchsorted("
                    "cumsum(w), u), N - 1)"),
        ("median ms", MEDIAN_TEXT),
        (HEADLINE, "jaxsearch.searchsorted_cumsum(w, u, sorted_v=True)"),
        ("jaxsearch.searchsorted(jnp.cumsum)", "jnp.cumsum, then jaxsearch.searchsorted("
                                               "sorted_v=True)"),
        ("jnp sort / jnp default", "jnp.searchsorted(jnp.cumsum(w), u, method='sort' / "
                                   "the default method)"),
        (NUMBA, "a numba O(N + M) loop with a float32 running sum, through "
                "jax.pure_callback (all filters in one call)"),
        ("numpy", "numpy.cumsum (float32) and numpy.searchsorted on the host"),
        (FLOOR, "one XLA pass over the same bytes, no search: reads w and u, writes "
                "min(bitcast(w + u), N - 1) as int32 (the output's allocation included)"),
        ("x over numba", f"{NUMBA}'s median time / {HEADLINE}'s"),
        ("x floor", f"{HEADLINE}'s median time / {FLOOR}'s"),
        ("error (beyond)", "largest |index - reference| over all particles, the reference "
                           "being numpy.searchsorted(numpy.cumsum(w, dtype=float64), u); in "
                           "brackets, indices that differ where no running sum lies within one "
                           "float32 ulp of the uniform (beyond searchsorted_cumsum's contract)"),
    ])
    return "\n\n".join([
        "Resampling: median ms per call",
        format_table(["problem"] + names + ["x over numba", "x floor"], times),
        "Largest index error against the float64 reference (indices beyond the contract)",
        format_table(["problem"] + checked, errors),
        str(notes), "Legend:\n" + legend, MARKER_TEXT])


def results_json(results: Sequence[ResamplingResult], meta: dict[str, Any]) -> dict[str, Any]:
    """Results as rows ready for json.dump, under `meta`."""
    return {"meta": meta, "results": [{
        "problem": dataclasses.asdict(r.problem), "impl": r.impl, **timing_json(r.timing),
        "skipped": r.skipped, "max_index_error": r.max_index_error,
        "beyond_contract": r.beyond_contract} for r in results]}


def results_from_json(data: dict[str, Any]) -> list[ResamplingResult]:
    """Rebuild results from :func:`results_json`'s output (to re-report a saved run)."""
    return [ResamplingResult(ResamplingProblem(**row["problem"]), row["impl"],
                             timing_from_json(row), row["skipped"], row["max_index_error"],
                             row["beyond_contract"])
            for row in data["results"]]


def bench(*, quick: bool, output: Path, repeats: int = 5,
          max_call_s: float = 5.0) -> tuple[str, Path]:
    """Run the resampling family; write resampling_<device>.json into `output`.

    Returns:
      (table, path of the JSON).
    """
    grid = GRIDS.pick(quick)
    probs = problems(grid.sizes, grid.batch)
    progress = Progress(len(probs), "resampling")
    results = run(probs, impls(), repeats=repeats, max_call_s=max_call_s, progress=progress)
    path = save_run(functools.partial(results_json, results), "resampling", grid, output)
    return table(results), path
