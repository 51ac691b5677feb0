"""What a patched run found, and how it reads: the bit-for-bit comparison
of the patched output with stock's, each problem's result, its table and
its JSON."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from .format import MARKER_TEXT, MEDIAN_TEXT, Footnotes, fmt_ms, fmt_x, format_legend, format_table
from .patched_workloads import WORKLOADS, WORKLOADS_BY_NAME, PatchedProblem
from .timing import Timing, timing_from_json, timing_json


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
        target = WORKLOADS_BY_NAME[r.problem.workload].target_for(r.problem.rows)
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
         ("target", "the speed-up the patch should reach on this workload (under vmap, its "
                    "own where it has one)"),
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
        "target": WORKLOADS_BY_NAME[r.problem.workload].target_for(r.problem.rows),
        "served": r.served,
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
