"""Kernel-selection thresholds and tile sizes: every tunable in one place.

The autotuner measures these for a machine and writes them to a cache; until
then, and for anything the cache lacks, the defaults below hold.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class CpuConfig:
    """How the CPU path picks and runs its kernels.

    Attributes:
      bisect_ratio: use lock-step binary search when n / m exceeds this.
      runs_ratio: fill runs of needles per a-element when m / n exceeds this.
      threads: threads for one call; 0 means all cores available.
      min_parallel: fewer needles than this run on one thread.
    """

    bisect_ratio: float = 64.0
    runs_ratio: float = 8.0
    threads: int = 0
    min_parallel: int = 1 << 16


DEFAULT_CPU_CONFIG = CpuConfig()


def cpu_config() -> CpuConfig:
    """The CPU configuration in force on this machine."""
    return DEFAULT_CPU_CONFIG


def choose_cpu_kernel(n: int, m: int, config: CpuConfig | None = None) -> str:
    """The CPU kernel for sorted needles: "merge", "runs" or "bisect"."""
    c = config or cpu_config()
    if n > c.bisect_ratio * max(m, 1):
        return "bisect"
    if m > c.runs_ratio * max(n, 1):
        return "runs"
    return "merge"
