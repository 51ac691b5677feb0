"""What the autotuner (:mod:`jaxsearch.autotune`) sweeps: dtypes, sizes and
skews, and how long it measures each point; and where a skew sweep crosses
over (the CPU's and the GPU's kernel selectors)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from ..grids import Grids


@dataclasses.dataclass(frozen=True)
class TuneGrid:
    """What the autotuner sweeps."""

    dtypes: tuple[str, ...]
    sizes: tuple[int, ...]  # the larger of N and M
    ratios: tuple[int, ...]  # N/M (or M/N) skews tried for each crossover
    gpu_sizes: tuple[int, ...]  # N = M for the GPU sweep
    repeats: int = 5
    budget_s: float = 0.5
    threads: bool = True  # tune threads and min_parallel too


GRIDS = Grids(
    quick=TuneGrid(dtypes=("float32", "int32"), sizes=(10**5, 10**6, 10**7),
                   ratios=tuple(4**k for k in range(7)), gpu_sizes=(10**6, 10**7),
                   repeats=5, budget_s=0.3),
    full=TuneGrid(dtypes=("float32", "int32", "float64", "int64"),
                  sizes=(10**4, 10**5, 10**6, 10**7), ratios=tuple(2**k for k in range(13)),
                  gpu_sizes=(10**5, 10**6, 10**7, 10**8)))


def final_run_start(wins: Sequence[bool]) -> int:
    """Index where the trailing run of wins starts (len(wins) when the last lost)."""
    start = len(wins)
    while start > 0 and wins[start - 1]:
        start -= 1
    return start


def crossover(ratios: Sequence[float], base_s: Sequence[float], alt_s: Sequence[float]) -> float:
    """The ratio above which the alternative kernel wins.

    The alternative must win at every tested ratio from the crossover on; the
    threshold sits halfway (in log space) between the last loss and the first
    win. Never winning puts it one step past the largest ratio tried.
    """
    first_win = final_run_start([a < b for a, b in zip(alt_s, base_s)])
    step = ratios[1] / ratios[0] if len(ratios) > 1 else 2.0
    if first_win == len(ratios):
        return float(ratios[-1] * step)
    below = ratios[first_win - 1] if first_win > 0 else ratios[0] / step
    return float(math.sqrt(below * ratios[first_win]))
