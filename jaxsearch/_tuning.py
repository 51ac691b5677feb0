"""Kernel-selection thresholds and tile sizes: every tunable in one place.

The autotuner measures these for a machine and writes them to a cache; until
then, and for anything the cache lacks, the defaults below hold (measured on a
2-core x86-64 machine, see bench/).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class CpuThresholds:
    """When the CPU path leaves the merge for a skew-aware kernel.

    Attributes:
      bisect_ratio: use lock-step binary search when n / m exceeds this.
      runs_ratio: fill runs of needles per a-element when m / n exceeds this.
    """

    bisect_ratio: float = 64.0
    runs_ratio: float = 8.0


DEFAULT_CPU_THRESHOLDS = CpuThresholds()


def cpu_thresholds() -> CpuThresholds:
    """The thresholds in force on this machine."""
    return DEFAULT_CPU_THRESHOLDS


def choose_cpu_kernel(n: int, m: int, thresholds: CpuThresholds | None = None) -> str:
    """The CPU kernel for sorted needles: "merge", "runs" or "bisect"."""
    t = thresholds or cpu_thresholds()
    if n > t.bisect_ratio * max(m, 1):
        return "bisect"
    if m > t.runs_ratio * max(n, 1):
        return "runs"
    return "merge"
