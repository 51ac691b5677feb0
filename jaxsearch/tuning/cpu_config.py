"""How the CPU path picks and runs its kernels: :class:`CpuConfig`, and
the override of the tuned one (:func:`use_cpu_config`). `tuning.cache`
finds the config in force."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import numbers
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

try:
    # The FFI handler's limit on the threads of one call: it rejects a call
    # that asks for more, so a host with more cores uses this many.
    from .._cpu_ext import MAX_THREADS
except ImportError:  # No extension: no CPU kernel runs, nothing limits the threads.
    MAX_THREADS = sys.maxsize


@dataclasses.dataclass(frozen=True)
class CpuConfig:
    """How the CPU path picks and runs its kernels.

    Hashable, so that a search passes it to jit as a static argument: jit
    caches one compilation per config.

    Attributes:
      bisect_ratio: use lock-step binary search when n / m exceeds this;
        finite and > 0.
      runs_ratio: fill runs of needles per a-element when m / n exceeds this;
        finite and > 0.
      threads: at most this many threads for one call, in [0, MAX_THREADS]
        (the FFI handler's limit, ``MAX_THREADS``); 0 means all cores
        available, up to MAX_THREADS.
      min_parallel: the fewest needles a thread takes on, >= 1: a row of
        fewer runs on one thread (a vmapped batch of such rows still spreads
        its rows over the threads).
      bucket_min_bytes: one row of needles in any order (dense enough:
        bucket_keys_per_needle) is searched bucket by bucket of its keys
        from this many bytes of keys, >= 0; the default, 16 MiB, from a
        2-core AMD EPYC (float32, 1e6 needles and more: at 4 MB the buckets
        took 1.6x the bin table's time, at 40 MB 0.5x).
      table_check_ratio: where jnp's probes run in SIMD gathers (4-byte keys
        in the x86-64-v3 build), needles in any order are searched through
        the bin table of their row of `a` (which costs a check of `a`) where
        the row has at most this many keys per needle and 2 KiB of keys or
        more, else by the gathers alone; >= 0 (inf: always), or None
        (default) for the built-in rule: rows under 2 MiB at a quarter of
        a key per needle (float32 on a 2-core Intel Xeon), under 16 MiB
        at 16, larger ones at 48 (float32 and int32 on a 2-core AMD
        EPYC). It decides only for calls whose kernel for
        sorted needles is the binary search (past `bisect_ratio`): the
        others check `a` anyway, and take the table.
      bucket_keys_per_needle: a row of needles in any order (of
        bucket_min_bytes of keys or more) is searched by buckets only where
        it has at most this many keys per needle, else by its bin table
        alone; >= 0 (inf: at any density); the default, 16, from 1e6
        needles in 1e7 float32 keys (at 10 keys per needle the buckets took
        0.7-0.8x the table's time).
      count_keys: one row of `a` of at most this many keys, with needles in
        any order, is checked, and where sorted each needle is compared with
        every key and its answer counted (SIMD over the needles), else
        searched; >= 0 (0: never counted); the default, 64, for 4-byte
        keys, from 1e6 unsorted needles on a 2-core AMD EPYC (float32 at N
        = 64 counted 0.90 ms, searched 1.71; at N = 128 1.60 and 1.89;
        int32 alike). Where nothing is tuned, keys of other sizes take
        their own (:func:`built_in_cpu_config`).
      short_row_needles: a batch of two rows or more (under vmap, say) with
        fewer needles per row than this is searched across rows, several
        rows' searches in lock-step, with no per-row setup; >= 0 (0: never);
        the default, 64, from float32 rows of 200 keys under vmap on a
        2-core Intel Xeon, each call after one of jnp's (2^16 needles in
        all: across rows 0.32 ms against 0.69 row by row at 32 needles a
        row, alike at 64 and 128, 0.65 against 0.31 at 256; timed back to
        back, as `jaxsearch autotune` times them, across rows won up to
        128).

    Raises:
      TypeError: a field of the wrong type (a bool is no number here).
      ValueError: a field out of range.
    """

    bisect_ratio: float = 64.0
    runs_ratio: float = 8.0
    threads: int = 0
    min_parallel: int = 1 << 16
    bucket_min_bytes: int = 1 << 24
    table_check_ratio: float | None = None
    bucket_keys_per_needle: float = 16.0
    count_keys: int = 64
    short_row_needles: int = 64

    def __post_init__(self) -> None:
        # Checked here, so that neither an explicit config nor a cached one
        # reaches the kernels out of range.
        for name, kind, what in (("bisect_ratio", numbers.Real, "a number"),
                                 ("runs_ratio", numbers.Real, "a number"),
                                 ("threads", numbers.Integral, "an integer"),
                                 ("min_parallel", numbers.Integral, "an integer"),
                                 ("bucket_min_bytes", numbers.Integral, "an integer"),
                                 ("bucket_keys_per_needle", numbers.Real, "a number"),
                                 ("count_keys", numbers.Integral, "an integer"),
                                 ("short_row_needles", numbers.Integral, "an integer")):
            x = getattr(self, name)
            if not isinstance(x, kind) or isinstance(x, (bool, np.bool_)):
                raise TypeError(f"{name} must be {what}, got {x!r}")
        for name in ("bisect_ratio", "runs_ratio"):
            if not 0 < getattr(self, name) < math.inf:  # NaN too
                raise ValueError(f"{name} must be finite and > 0, got {getattr(self, name)!r}")
        if not 0 <= self.threads <= MAX_THREADS:
            raise ValueError(f"threads must be in [0, {MAX_THREADS}], got {self.threads!r}")
        if self.min_parallel < 1:
            raise ValueError(f"min_parallel must be >= 1, got {self.min_parallel!r}")
        if self.bucket_min_bytes < 0:
            raise ValueError(f"bucket_min_bytes must be >= 0, got {self.bucket_min_bytes!r}")
        if not self.bucket_keys_per_needle >= 0:  # NaN too
            raise ValueError("bucket_keys_per_needle must be >= 0, got "
                             f"{self.bucket_keys_per_needle!r}")
        for name in ("count_keys", "short_row_needles"):
            if not 0 <= getattr(self, name) < 2**31:
                raise ValueError(f"{name} must be in [0, 2**31), got {getattr(self, name)!r}")
        ratio = self.table_check_ratio
        if ratio is not None:
            if not isinstance(ratio, numbers.Real) or isinstance(ratio, (bool, np.bool_)):
                raise TypeError(f"table_check_ratio must be a number or None, got {ratio!r}")
            if not ratio >= 0:  # NaN too
                raise ValueError(f"table_check_ratio must be >= 0 or None, got {ratio!r}")

    def max_threads(self, cores: int) -> int:
        """The thread count a call passes to the kernels on a host with
        `cores` free: `threads`, or all cores for 0, up to MAX_THREADS."""
        return min(self.threads or max(cores, 1), MAX_THREADS)


DEFAULT_CPU_CONFIG = CpuConfig()
_CPU_FIELDS = tuple(f.name for f in dataclasses.fields(CpuConfig))


# The built-in count_keys by bytes per key (other sizes: CpuConfig's). Each
# compare of 4-byte keys takes an AVX2 lane of a 32-bit count held in a
# register; other keys' counts are kept in memory, and fewer keys pay. One
# thread, 2e5 unsorted needles, AMD EPYC, counted against searched: float64
# N = 16 0.40 against 0.46 ms, N = 24 0.58 against 0.53 (int64 alike);
# int16 N = 64 0.49 against 0.54; int8 N = 32 0.31 against 0.45, N = 64
# 0.59 against 0.51.
BUILT_IN_COUNT_KEYS = {1: 32, 8: 16}


def built_in_cpu_config(dtype: Any = np.float32) -> CpuConfig:
    """The config where nothing is tuned, for keys of `dtype`: the
    defaults, with the count_keys of its key size (BUILT_IN_COUNT_KEYS)."""
    count_keys = BUILT_IN_COUNT_KEYS.get(np.dtype(dtype).itemsize)
    if count_keys is None:
        return DEFAULT_CPU_CONFIG
    return dataclasses.replace(DEFAULT_CPU_CONFIG, count_keys=count_keys)


def cpu_config_from(fields: Mapping[str, Any], dtype: Any = np.float32) -> CpuConfig:
    """A CpuConfig from a cached config's fields for keys of `dtype`: fields
    it lacks keep their built-in values (built_in_cpu_config; a cache tuned
    without threads holds only the ratios), fields it does not know (from a
    newer jaxsearch) are dropped."""
    return dataclasses.replace(built_in_cpu_config(dtype),
                               **{k: v for k, v in fields.items() if k in _CPU_FIELDS})


_cpu_override: contextvars.ContextVar[CpuConfig | None] = contextvars.ContextVar(
    "jaxsearch_cpu_config", default=None)


@contextlib.contextmanager
def use_cpu_config(config: CpuConfig) -> Iterator[CpuConfig]:
    """Make `config` the CPU config in force inside the block, in this thread
    (or asyncio task) only: other threads keep theirs.

    :func:`jaxsearch.searchsorted` reads this override on every call and
    hands it to its inner jit as a static argument, so jit compiles once per
    config and no cache needs clearing. Under your own ``jax.jit``, though, the
    config is read when your function is traced, and jax caches that trace
    per function (even across ``jax.jit`` wrappers of the same function): a
    function traced outside the block keeps its config inside it, and vice
    versa. To pin a config, trace a function of its own inside the block,
    e.g. ``jax.jit(functools.partial(f)).lower(*args).compile()``.
    Benchmarks and tests use this to compare thread counts and thresholds.
    """
    if not isinstance(config, CpuConfig):
        raise TypeError(f"config must be a CpuConfig, got {type(config).__name__}")
    token = _cpu_override.set(config)
    try:
        yield config
    finally:
        _cpu_override.reset(token)


def cpu_config_override() -> CpuConfig | None:
    """The config of the innermost :func:`use_cpu_config` block of this
    thread, or None (the tuning cache answers)."""
    return _cpu_override.get()
