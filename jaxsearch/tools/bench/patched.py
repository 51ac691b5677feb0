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

The workloads are in :mod:`.patched_workloads`; the comparison, the
results and their table and JSON in :mod:`.patched_report`.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax

from ...core.patching import is_patched, patched
from ...pallas_kernels import BACKENDS
from ..grids import Grids
from .patched_report import PatchedResult, compare, results_from_json, results_json, table
from .patched_workloads import WORKLOADS, WORKLOADS_BY_NAME, PatchedProblem, build
from .timing import Progress, measure_all, run_each, save_run

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
    peer = WORKLOADS_BY_NAME[problem.workload].numpy
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
    """Each workload at each size (up to its largest), then the vmapped ones
    at the batch."""
    rows, n = grid.batch
    return [PatchedProblem(w.name, size) for size in grid.sizes for w in WORKLOADS
            if w.largest is None or size <= w.largest] + [
        PatchedProblem(w.name, n, rows) for w in WORKLOADS if w.vmapped]


def run(probs: Sequence[PatchedProblem], *, repeats: int = 5, budget_s: float = 1.0,
        progress: Progress | None = None) -> list[PatchedResult]:
    """:func:`run_one` on every problem. Refuses to run with the patch
    already in force (under ``jaxsearch.autopatch``): stock would not be jax's."""
    if is_patched():
        raise RuntimeError("the patch is in force: stock runs need jax's own functions "
                           "(run without jaxsearch.autopatch)")
    return run_each(probs, functools.partial(run_one, repeats=repeats, budget_s=budget_s),
                    progress)


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
    path = save_run(functools.partial(results_json, results), "patched", grid, output)
    return table(results), path, all(r.ok for r in results)


# What the CLI and the tests read from this module, beside what it defines.
__all__ = ["GRIDS", "WORKLOADS", "PatchedGrid", "PatchedProblem", "PatchedResult", "bench",
           "build", "compare", "problems", "results_from_json", "results_json", "run",
           "run_one", "served_by_jaxsearch", "table"]
