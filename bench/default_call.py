"""The default call against the promised ones, measured as ratios in one run.

    python bench/default_call.py            # print the tables
    python bench/default_call.py --check    # and exit 1 when a bound is missed

A drop-in user writes ``jaxsearch.searchsorted(a, v)``: ``sorted_v=None``,
which finds out by itself whether the needles are sorted. This measures what
that costs, for float32 and int32, at every N, M in {1e2, ..., 1e7}:

* sorted needles: the default call against ``sorted_v=True`` (the caller's
  promise, which skips the check);
* unsorted needles: the default call against ``sorted_v=False`` (binary
  search, no check).

Bound: the default call takes at most 10% longer than the promised one, or,
where both take under 20 us (JAX's dispatch alone is several), at most 2 us
longer. Each pair is timed interleaved (see ``jaxsearch.tools.bench.timing``), and each
answer is checked against numpy's.

Where the needles are many times the keys, the promised call need not read
them: its kernel finds each run of needles by a search and writes the run's
answer, so it only writes the output. A default call that answers unsorted
needles exactly must also read every needle. So sorted cells also time one
read of ``v`` (numpy's ``v.max()``, a vectorised pass), and the "floor" of a
cell is the promised call's time plus that read. A missed cell within 10% of
its floor is marked "floor".
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence

import numpy as np

from jaxsearch.tools.bench.format import fmt_count, format_table
from jaxsearch.tools.bench.peers import Problem, jaxsearch_impl, make_inputs
from jaxsearch.tools.bench.timing import Progress, machine_info, matches, measure_all

SIZES = tuple(10**k for k in range(2, 8))
DTYPES = ("float32", "int32")
MAX_RATIO = 1.10
SMALL_S, SMALL_SLACK_S = 20e-6, 2e-6
REPEATS = 9


@dataclasses.dataclass(frozen=True)
class Cell:
    """One problem: the default call's time and the promised call's."""

    problem: Problem
    default_s: float
    promised_s: float
    correct: bool
    floor_s: float | None = None  # promised call + one read of v (sorted needles only)

    @property
    def ratio(self) -> float:
        return self.default_s / self.promised_s

    @property
    def within(self) -> bool:
        if max(self.default_s, self.promised_s) < SMALL_S:
            return self.default_s - self.promised_s <= SMALL_SLACK_S
        return self.ratio <= MAX_RATIO

    @property
    def at_floor(self) -> bool:
        """Within 10% of the promised call plus one read of v (see the module
        docstring)."""
        return self.floor_s is not None and self.default_s <= MAX_RATIO * self.floor_s

    def text(self) -> str:
        mark = "" if self.within else " MISS floor" if self.at_floor else " MISS"
        wrong = "" if self.correct else " WRONG"
        return f"{self.ratio:.2f}{mark}{wrong}"


def measure(problem: Problem) -> Cell:
    """The default call and the promised one on `problem`, side by side (and
    one read of v, for sorted needles)."""
    x = make_inputs(problem)
    expected = np.searchsorted(x.a, x.v)
    calls = [jaxsearch_impl(s).build(x) for s in (None, problem.sorted_v)]
    checks = [lambda out: matches(expected, out)] * 2
    if problem.sorted_v:
        calls.append(x.v.max)
        checks.append(None)
    default, promised, *read = measure_all(
        calls, repeats=REPEATS, budget_s=2.0, checks=checks)
    for m in (default, promised, *read):
        if m.error is not None:
            raise m.error
    return Cell(problem, default.timing.median, promised.timing.median,
                bool(default.correct and promised.correct),
                promised.timing.median + read[0].timing.median if read else None)


def grid_table(cells: Sequence[Cell], dtype: str, sorted_v: bool) -> str:
    """N down, M across: the default call's time over the promised call's."""
    by_size = {(c.problem.n, c.problem.m): c for c in cells
               if c.problem.dtype == dtype and c.problem.sorted_v == sorted_v}
    ns = sorted({n for n, _ in by_size})
    ms = sorted({m for _, m in by_size})
    rows = [[f"N={fmt_count(n)}"] + [by_size[n, m].text() for m in ms] for n in ns]
    promised = "sorted_v=True" if sorted_v else "sorted_v=False"
    order = "sorted" if sorted_v else "unsorted"
    return (f"{dtype}, {order} needles, side='left': time of sorted_v=None / time of "
            f"{promised}\n" + format_table(
                ["", *(f"M={fmt_count(m)}" for m in ms)], rows))


def legend() -> str:
    return "\n".join([
        f"A cell is within bounds when the ratio is <= {MAX_RATIO:.2f}, or when both calls take "
        f"under {SMALL_S * 1e6:.0f} us",
        f"and the default call is at most {SMALL_SLACK_S * 1e6:.0f} us slower. MISS: out of "
        "bounds. WRONG: an answer differed from numpy's.",
        "MISS floor: out of bounds, but within 10% of the promised call's time plus one read "
        "of v (numpy's v.max()):",
        "where M is far above N the promised call writes the output without reading most "
        "needles, and a call that\nchecks them must read them all.",
        "Medians of interleaved calls under jax.jit."])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a bound is missed")
    parser.add_argument("--sizes", type=lambda t: tuple(int(float(x)) for x in t.split(",")),
                        default=SIZES, help="N and M values (default 1e2,...,1e7)")
    args = parser.parse_args(argv)
    problems = [Problem(n, m, dt, s) for dt in DTYPES for s in (True, False)
                for n in args.sizes for m in args.sizes]
    progress = Progress(len(problems), "default call")
    cells = []
    for p in problems:
        progress.show(p.label)
        cells.append(measure(p))
        progress.step()
    meta = machine_info()
    print(f"jaxsearch {meta['jaxsearch']} on {meta['cpu_model']} ({meta['cores']} cores, "
          f"load average {meta['load_avg_1m']:.1f}), jax {meta['jax']}\n")
    for dt in DTYPES:
        for s in (True, False):
            print(grid_table(cells, dt, s) + "\n")
    print(legend())
    worst = max(cells, key=lambda c: (not c.within, c.ratio))
    missed = [c for c in cells if not c.within or not c.correct]
    print(f"\nworst cell: {worst.problem.label}: {worst.default_s * 1e6:.1f} us against "
          f"{worst.promised_s * 1e6:.1f} us ({worst.ratio:.2f}x)")
    print(f"{len(cells) - len(missed)} of {len(cells)} cells within bounds; "
          f"{sum(not c.within and c.at_floor for c in cells)} more within 10% of their floor")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
