"""What the autotuner (:mod:`jaxsearch.autotune`) sweeps: dtypes, sizes and
skews, and how long it measures each point."""

from __future__ import annotations

import dataclasses

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
