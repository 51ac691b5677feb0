"""jaxsearch.digitize and jaxsearch.interp against jnp's and numpy's, as ratios in one run.

    python bench/numpy_functions.py            # print the tables
    python bench/numpy_functions.py --check    # and exit 1 when a target is missed

Sorted float32 x (the values to bin or to interpolate at) of M elements
against N sorted bin edges or abscissae: N = M from 1e5 to 1e7, and a small
table (N = 1e3) under M = 1e7. Every call is the plain drop-in one
(``sorted_x=None``: the search finds out that x is sorted). Targets at
N = M = 1e7: digitize at least 10x faster than jnp.digitize, interp at least
5x faster than jnp.interp. Each answer is checked: digitize against
numpy.digitize, interp bit for bit against jnp.interp.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

import jaxsearch
from jaxsearch.tools.bench.format import fmt_count, fmt_ms, fmt_x, format_table
from jaxsearch.tools.bench.peers import Problem, make_arrays
from jaxsearch.tools.bench.timing import Progress, machine_info, measure_all

SIZES = ((10**5, 10**5), (10**6, 10**6), (10**7, 10**7), (10**3, 10**7))
TARGETS = {"digitize": 10.0, "interp": 5.0}  # speedup over jnp at N = M = 1e7
TARGET_SIZE = (10**7, 10**7)
REPEATS = 5


@dataclasses.dataclass(frozen=True)
class Row:
    """One function at one size: median seconds per call of each peer."""

    function: str
    n: int
    m: int
    seconds: dict[str, float | None]
    correct: bool

    def speedup(self, peer: str) -> float | None:
        ours, theirs = self.seconds["jaxsearch"], self.seconds[peer]
        return None if ours is None or theirs is None else theirs / ours


def calls(function: str, x: np.ndarray, table: np.ndarray, fp: np.ndarray
          ) -> dict[str, Callable[[], object]]:
    """The three peers' zero-argument calls, jax ones jitted and compiled."""
    jx, jt, jfp = jnp.asarray(x), jnp.asarray(table), jnp.asarray(fp)
    if function == "digitize":
        ours, theirs = jax.jit(jaxsearch.digitize), jax.jit(jnp.digitize)
        return {"jaxsearch": lambda: ours(jx, jt), "jnp": lambda: theirs(jx, jt),
                "numpy": lambda: np.digitize(x, table)}
    ours, theirs = jax.jit(jaxsearch.interp), jax.jit(jnp.interp)
    return {"jaxsearch": lambda: ours(jx, jt, jfp), "jnp": lambda: theirs(jx, jt, jfp),
            "numpy": lambda: np.interp(x, table, fp)}


def measure(function: str, n: int, m: int) -> Row:
    """The peers on one problem, interleaved; answers checked."""
    table, x = make_arrays(Problem(n, m, "float32", True))
    fp = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    peers = calls(function, x, table, fp)
    outputs: dict[str, np.ndarray] = {}

    def keep(name: str) -> Callable[[object], bool]:
        def check(out: object) -> bool:
            outputs[name] = np.asarray(out)
            return True
        return check

    results = measure_all(list(peers.values()), repeats=REPEATS, budget_s=3.0,
                          checks=[keep(name) for name in peers])
    for r in results:
        if r.error is not None:
            raise r.error
    if function == "digitize":
        correct = np.array_equal(outputs["jaxsearch"], np.digitize(x, table))
    else:  # the same bits as jnp's
        correct = np.array_equal(outputs["jaxsearch"].view(np.uint32),
                                 outputs["jnp"].view(np.uint32))
    return Row(function, n, m, {name: r.timing.median for name, r in zip(peers, results)},
               bool(correct))


def table(rows: Sequence[Row], function: str) -> str:
    """One function's rows: milliseconds and the speedups over jnp and numpy."""
    body = [[f"N={fmt_count(r.n)} M={fmt_count(r.m)}",
             *(fmt_ms(r.seconds[p]) for p in ("jaxsearch", "jnp", "numpy")),
             fmt_x(r.speedup("jnp")), fmt_x(r.speedup("numpy")),
             "yes" if r.correct else "NO"]
            for r in rows if r.function == function]
    return f"{function}: median ms per call, sorted float32 x\n" + format_table(
        ["", "jaxsearch", "jnp", "numpy", "vs jnp", "vs numpy", "correct"], body)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a target is missed or an answer is wrong")
    parser.add_argument("--functions", default="digitize,interp",
                        help="comma-separated: digitize, interp (default both)")
    args = parser.parse_args(argv)
    functions = args.functions.split(",")
    problems = [(f, n, m) for f in functions for n, m in SIZES]
    progress = Progress(len(problems), "numpy functions")
    rows = []
    for f, n, m in problems:
        progress.show(f"{f} N={fmt_count(n)} M={fmt_count(m)}")
        rows.append(measure(f, n, m))
        progress.step()
    meta = machine_info()
    print(f"jaxsearch {meta['jaxsearch']} on {meta['cpu_model']} ({meta['cores']} cores, "
          f"load average {meta['load_avg_1m']:.1f}), jax {meta['jax']}, numpy {meta['numpy']}\n")
    for f in functions:
        print(table(rows, f) + "\n")
    print("vs jnp, vs numpy: their time over jaxsearch's. correct: digitize equals "
          "numpy.digitize, interp has jnp.interp's bits. Medians of interleaved calls, jax "
          "ones under jax.jit.")
    failed = [r for r in rows if not r.correct]
    for f in functions:
        row = next(r for r in rows if r.function == f and (r.n, r.m) == TARGET_SIZE)
        speedup = row.speedup("jnp") or 0.0
        met = speedup >= TARGETS[f]
        print(f"target {f} >= {TARGETS[f]:g}x jnp at N=M=1e7: {speedup:.1f}x, "
              f"{'met' if met else 'MISSED'}")
        if not met:
            failed.append(row)
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
