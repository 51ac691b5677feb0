"""Kernel-selection thresholds and tile sizes: every tunable in one place.

The autotuner (``python -m jaxsearch.autotune``) measures these for a machine
and writes them to a JSON cache. A lookup takes the first of:

1. an explicit config (the ``config`` argument, or :func:`use_cpu_config`);
2. the user cache: ``$JAXSEARCH_TUNING_DIR/<device_kind>/searchsorted.json``,
   by default under the user cache directory (``$XDG_CACHE_HOME/jaxsearch``
   or ``~/.cache/jaxsearch``);
3. the cache shipped with the package:
   ``jaxsearch/data/autotuning/<device_kind>/searchsorted.json``;
4. the heuristic defaults (``built_in_cpu_config(dtype)``; for the GPU kernels, their
   own ``default_*_config`` functions, signalled by :func:`gpu_config` or
   :func:`tuned_gpu_config` returning None).

An entry that is malformed or out of range (a CPU config that
:class:`CpuConfig` rejects) warns once, naming the file and the entry, and
is skipped; the file's other entries still count.

Within a cache, entries are keyed by kernel ("cpu" for a :class:`CpuConfig`,
else a GPU config's ``kind``), dtype class (:func:`dtype_class`) and size
bucket: ``{"size": max(N, M)}`` for the CPU, ``{"n": N, "m": M}`` for the GPU.
A source answers only for a dtype class it has entries for; among those the
nearest bucket (in log2 space) wins, so an exact bucket is never required.

The device kind is ``jax.devices()[0].device_kind`` lower-cased, with every run
of other characters turned into "_" ("NVIDIA H200" -> "nvidia_h200"). Every
CPU is "cpu": the CPU thresholds are ratios that carry over between x86 hosts,
and a thread count of 0 means "all cores", so one CPU cache serves any host.
The host that measured it is recorded in the file's ``meta``.

Cache file format (version 1)::

    {"version": 1, "op": "searchsorted", "device_kind": "cpu",
     "meta": {...where and how it was measured...},
     "entries": [{"kernel": "cpu", "dtype": "float32", "bucket": {"size": 1000000},
                  "config": {...the winner's fields...},
                  "times": {...the measurements that chose it...}}]}
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from .cache_io import CPU_KERNEL, CacheEntry, cache_file, load_entries
from .cpu_config import CpuConfig, built_in_cpu_config, cpu_config_from, cpu_config_override

# The kernel key of the entries that name the fastest GPU implementation.
IMPLEMENTATION_KERNEL = "implementation"
# The kernel key of the entries that hold the GPU's crossover from the merge
# path to binary search for sorted needles (config {"bisect_ratio": r}).
GPU_ROUTE_KERNEL = "route"
# Binary search serves sorted needles on a GPU once N > 64 M. By bytes, at
# N = 1e8 float32 keys on an H200: the merge path reads about 4 (N/M + 1)
# bytes per needle; a needle's binary search reads 27 keys, of which the
# top 20 levels (2**20 sectors of 32 bytes: 32 MiB) stay in the 50 MB L2,
# so about 7 sectors, 224 bytes, come from HBM. The two meet near N/M = 55,
# and near 27 for 8-byte keys. The autotuner measures the crossover per device.
DEFAULT_GPU_BISECT_RATIO = 64.0
TUNING_DIR_ENV = "JAXSEARCH_TUNING_DIR"
SHIPPED_DIR = Path(__file__).parent.parent / "data" / "autotuning"


# ---------------------------------------------------------------- keys


def normalize_device_kind(kind: str) -> str:
    """Device kind as a file-name-safe key: "NVIDIA H200" -> "nvidia_h200"."""
    return re.sub(r"[^a-z0-9]+", "_", kind.lower()).strip("_") or "unknown"


def device_kind(platform: str | None = None) -> str:
    """Normalised device kind of the first device of `platform` (default backend)."""
    return normalize_device_kind(jax.devices(platform)[0].device_kind)


def dtype_class(dtype: Any) -> str:
    """The dtype class a tuned entry is keyed by: float32/float64/int32/int64.

    Narrow floats (float16, bfloat16) run as float32 and narrow integers and
    bool in 32-bit registers, so they share the 32-bit class.
    """
    dt = np.dtype(dtype)
    wide = dt.itemsize > 4
    if jnp.issubdtype(dt, jnp.floating):
        return "float64" if wide else "float32"
    return "int64" if wide else "int32"


def _bucket_distance(query: Mapping[str, int], bucket: Mapping[str, int]) -> float:
    """Squared distance in log2 space over the dimensions both name."""
    return sum((math.log2(max(query[k], 1)) - math.log2(max(bucket[k], 1))) ** 2
               for k in query.keys() & bucket.keys())


# ---------------------------------------------------------------- lookup


def user_cache_dir() -> Path:
    """Root of the user cache: $JAXSEARCH_TUNING_DIR, else the user cache dir."""
    if os.environ.get(TUNING_DIR_ENV):
        return Path(os.environ[TUNING_DIR_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.environ.get("LOCALAPPDATA")
    return (Path(base) if base else Path.home() / ".cache") / "jaxsearch"


def cache_files(kind: str) -> list[Path]:
    """The cache files searched for `kind`, in lookup order (user, shipped)."""
    return [cache_file(user_cache_dir(), kind), cache_file(SHIPPED_DIR, kind)]


def lookup(kernel: str, dtype: Any, bucket: Mapping[str, int] | None,
           kind: str) -> CacheEntry | None:
    """The cached entry for `kernel` and `dtype` nearest to `bucket`, or None.

    Sources are searched in lookup order; the first with any entry for this
    kernel and dtype class answers. `bucket` None takes the largest bucket.
    """
    cls = dtype_class(dtype)
    for path in cache_files(kind):
        candidates = [e for e in load_entries(path) if e.kernel == kernel and e.dtype == cls]
        if not candidates:
            continue
        if bucket is None:
            return max(candidates, key=lambda e: sorted(e.bucket.values(), reverse=True))
        return min(candidates, key=lambda e: _bucket_distance(bucket, e.bucket))
    return None


# ---------------------------------------------------------------- CPU


def resolve_cpu_config(n: int | None = None, m: int | None = None,
                       dtype: Any = np.float32, *,
                       override: CpuConfig | None = None) -> tuple[CpuConfig, str]:
    """The CPU config for a search of m needles in n keys, and where it came from.

    Returns:
      (config, source): source is "use_cpu_config", a cache file path, or
      "defaults".
    """
    override = override or cpu_config_override()
    if override is not None:
        return override, "use_cpu_config"
    sizes = [x for x in (n, m) if x is not None]
    entry = lookup(CPU_KERNEL, dtype, {"size": max(sizes)} if sizes else None, "cpu")
    if entry is None:
        return built_in_cpu_config(dtype), "defaults"
    return cpu_config_from(entry.config, dtype), entry.source


def cpu_config(n: int | None = None, m: int | None = None,
               dtype: Any = np.float32) -> CpuConfig:
    """The CPU configuration in force for this machine (and, if given, this size).

    Without sizes, the cache's largest size bucket answers (the regime where
    thread settings matter).
    """
    return resolve_cpu_config(n, m, dtype)[0]


def choose_cpu_kernel(n: int, m: int, config: CpuConfig | None = None, *,
                      dtype: Any = np.float32) -> str:
    """The CPU kernel for sorted needles: "merge", "runs" or "bisect" (the
    lock-step binary search), as the CPU extension's KERNEL_NAMES has them."""
    c = config or cpu_config(n, m, dtype)
    if n > c.bisect_ratio * max(m, 1):
        return "bisect"
    if m > c.runs_ratio * max(n, 1):
        return "runs"
    return "merge"


# ---------------------------------------------------------------- GPU


def gpu_config(kernel: str, n: int, m: int, dtype: Any) -> dict[str, Any] | None:
    """The tuned fields of a GPU kernel's config for this device, or None.

    Args:
      kernel: the config's ``kind``: "merge_path" or "binary_search".
      n, m: len(a) and the number of needles.
      dtype: the key dtype.

    Returns:
      The winning config's fields (``MergePathConfig(**fields)``), or None when
      no cache covers this device, kernel and dtype class, in which case the
      kernel's own heuristic default applies.
    """
    try:
        device = jax.devices()[0]
    except RuntimeError:
        return None
    if device.platform == "cpu":
        return None
    entry = lookup(kernel, dtype, {"n": n, "m": m}, normalize_device_kind(device.device_kind))
    return None if entry is None else dict(entry.config)


ConfigT = TypeVar("ConfigT")


def tuned_gpu_implementation(n: int, m: int, dtype: Any) -> str | None:
    """The GPU implementation the cache found fastest for this search on
    this device, or None."""
    tuned = gpu_config(IMPLEMENTATION_KERNEL, n, m, dtype)
    return tuned.get("name") if tuned else None


def gpu_bisect_ratio(n: int, m: int, dtype: Any) -> float:
    """Sorted needles take the GPU's binary_search kernel, not the merge path,
    when n exceeds this times m: the tuning cache's crossover for this device
    (kernel "route"), else `DEFAULT_GPU_BISECT_RATIO`. A cached value that is
    not a positive number warns and gives the default. (Named, as the
    route's "bisect_ratio" key is, after the CPU's CpuConfig.bisect_ratio.)"""
    tuned = gpu_config(GPU_ROUTE_KERNEL, n, m, dtype)
    if tuned is None:
        return DEFAULT_GPU_BISECT_RATIO
    ratio = tuned.get("bisect_ratio")
    if isinstance(ratio, numbers.Real) and not isinstance(ratio, bool) and ratio > 0:
        return float(ratio)
    warnings.warn(f"jaxsearch: ignoring cached GPU route {tuned}: bisect_ratio must be a "
                  "positive number", RuntimeWarning, stacklevel=2)
    return DEFAULT_GPU_BISECT_RATIO


def gpu_kernel_key(implementation: str, kind: str) -> str:
    """The cache's name of one implementation's kernel: the config's kind for
    Pallas (as caches have always named it), "<implementation>/<kind>" else."""
    return kind if implementation == "pallas" else f"{implementation}/{kind}"


def tuned_gpu_config(config_cls: type[ConfigT], n: int, m: int, dtype: Any,
                     implementation: str = "pallas") -> ConfigT | None:
    """A GPU kernel's config from the cache, or None for the kernel's heuristic.

    `config_cls` is the kernel's frozen config dataclass (its ``kind`` names
    the kernel), `implementation` the GPU implementation it runs in. Fields
    the class no longer has are dropped; a cached config the class rejects
    warns and gives None, so a stale cache never breaks a search.
    """
    fields = gpu_config(gpu_kernel_key(implementation, config_cls.kind), n, m, dtype)
    if fields is None:
        return None
    known = {f.name for f in dataclasses.fields(config_cls)}
    try:
        return config_cls(**{k: v for k, v in fields.items() if k in known})
    except (TypeError, ValueError) as exc:
        warnings.warn(f"jaxsearch: ignoring cached {config_cls.kind} config {fields}: {exc}",
                      RuntimeWarning, stacklevel=2)
        return None
