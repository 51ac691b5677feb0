"""The CPU binding: the Cython kernels of `cpu_ext/` (installed as
`jaxsearch._cpu_ext`), called through the XLA FFI as a custom call."""

from __future__ import annotations

import importlib
import math
import os
import warnings
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..keys import INT32_MAX
from ..tuning import CpuConfig
from ..tuning.cpu_config import MAX_THREADS  # noqa: F401 (the CPU path's limit, read here)

TARGET_NAME = "jaxsearch_searchsorted_cpu"
CUMSUM_TARGET_NAME = "jaxsearch_searchsorted_cumsum_cpu"
HISTOGRAM_TARGET_NAME = "jaxsearch_histogram_cpu"
SORT_TARGET_NAME = "jaxsearch_sort_keys_cpu"
INTERP_TARGET_NAME = "jaxsearch_interp_cpu"

# Which build of the extension serves the CPU: "auto" (the x86-64-v3 build
# where the CPU runs it, else the baseline), "x86-64-v3" (where the CPU runs
# it) or "baseline"; read at import from this variable.
ISA_ENV = "JAXSEARCH_CPU_ISA"
ISA_CHOICES = ("auto", "baseline", "x86-64-v3")


def _import_extension() -> tuple[ModuleType, str]:
    """The extension module for this CPU, and which build it is ("baseline"
    or "x86-64-v3"). The baseline build runs on any CPU of its architecture
    and says whether this one runs the x86-64-v3 build, which is only
    imported then (its code may use AVX2 anywhere, its import included)."""
    baseline = importlib.import_module(f"{__package__.rpartition('.')[0]}._cpu_ext")
    wanted = os.environ.get(ISA_ENV, "auto")
    if wanted not in ISA_CHOICES:
        warnings.warn(f"jaxsearch: {ISA_ENV}={wanted!r} is none of {ISA_CHOICES}; "
                      "taking 'auto'", RuntimeWarning, stacklevel=3)
        wanted = "auto"
    if wanted == "baseline" or not baseline.runs_x86_64_v3():
        if wanted == "x86-64-v3":
            warnings.warn(f"jaxsearch: {ISA_ENV}=x86-64-v3, but this CPU does not run "
                          "x86-64-v3 code; taking the baseline build", RuntimeWarning,
                          stacklevel=3)
        return baseline, "baseline"
    # Only a build without the v3 module (not x86-64 when built) falls back
    # here; a v3 module that is there but fails to import raises, and the
    # extension is reported unavailable with the reason.
    try:
        return importlib.import_module(f"{baseline.__name__}_x86_64_v3"), "x86-64-v3"
    except ModuleNotFoundError:
        return baseline, "baseline"


try:
    _ext, ISA = _import_extension()
except ImportError as exc:  # e.g. the source tree, which holds no compiled module
    UNAVAILABLE_REASON: str | None = f"the compiled extension did not import ({exc})"
    ISA = EXTENSION_MODULE = "none"
else:
    UNAVAILABLE_REASON = None
    EXTENSION_MODULE = _ext.__name__
    KERNEL_NAMES: dict[str, int] = _ext.KERNEL_NAMES
    ORDER_NAMES: dict[str, int] = _ext.ORDER_NAMES
    MAX_HISTOGRAM_EDGES: int = _ext.MAX_HISTOGRAM_EDGES
    # (the cumsum kernel's longest segment, read by cumsum)
    MAX_SEGMENT: int = _ext.MAX_SEGMENT
    # (the bin table's smallest row, which the autotuner's table sweep reads,
    # and the `table_check` attribute for the extension's own rule)
    TABLE_ROW_MIN_BYTES: int = _ext.TABLE_ROW_MIN_BYTES
    BUILT_IN_TABLE_CHECK: int = _ext.BUILT_IN_TABLE_CHECK
    _planned_threads = _ext.planned_threads
    try:
        jax.ffi.register_ffi_target(TARGET_NAME, _ext.handler_capsule(), platform="cpu")
        jax.ffi.register_ffi_target(CUMSUM_TARGET_NAME, _ext.cumsum_handler_capsule(),
                                    platform="cpu")
        jax.ffi.register_ffi_target(HISTOGRAM_TARGET_NAME, _ext.histogram_handler_capsule(),
                                    platform="cpu")
        jax.ffi.register_ffi_target(SORT_TARGET_NAME, _ext.sort_handler_capsule(),
                                    platform="cpu")
        jax.ffi.register_ffi_target(INTERP_TARGET_NAME, _ext.interp_handler_capsule(),
                                    platform="cpu")
    except Exception as exc:  # never let registration take JAX down
        UNAVAILABLE_REASON = f"registering the XLA FFI target failed ({exc})"

if UNAVAILABLE_REASON is not None:
    MAX_HISTOGRAM_EDGES = 0  # no histogram kernel either
    warnings.warn(f"jaxsearch: {UNAVAILABLE_REASON}; on CPU, searchsorted falls back to "
                  "jnp.searchsorted", RuntimeWarning, stacklevel=2)

AVAILABLE = UNAVAILABLE_REASON is None
# The kernels for sorted needles, as the tuning's selector names them
# (`tuning.choose_cpu_kernel`) and the extension numbers them.
KERNELS = ("merge", "runs", "bisect")


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def search(a: jax.Array, v: jax.Array, *, side: str, order: str, kernel: str,
           out_dtype: np.dtype, threads: int, min_parallel: int,
           bucket_min_bytes: int = CpuConfig.bucket_min_bytes,
           table_check_ratio: float | None = CpuConfig.table_check_ratio,
           bucket_keys_per_needle: float = CpuConfig.bucket_keys_per_needle,
           count_keys: int = CpuConfig.count_keys,
           short_row_needles: int = CpuConfig.short_row_needles) -> jax.Array:
    """searchsorted of `v` in `a` by the Cython kernels, as an XLA custom call.

    Args:
      a: keys of a key dtype but float16 and bfloat16
        (`keys.WIDENED_TO_FLOAT32`); shape (..., n). For orders "any" and
        "check" any keys: the answers are jnp's default method's, sorted
        keys or not; for "sorted", sorted keys, NaN last.
      v: needles of a's dtype, shape (..., m). Leading dimensions of `a` and
        `v` are batch dimensions that broadcast as in numpy.
      side: "left" or "right".
      order: "any" (binary search), "sorted" (trust that a and v are sorted)
        or "check" (each row of `a` is checked once, each part of a row
        checks its needles as it merges them, and either found out of order
        is binary-searched).
      kernel: kernel for sorted needles: "merge", "runs" or "bisect".
      out_dtype: int32 or int64.
      threads: at most this many threads (the caller and tasks on XLA's CPU
        thread pool) work on the call; in [1, MAX_THREADS].
      min_parallel: the needles are cut into parts of at least this many (a
        row with fewer is one part), which the threads claim one at a time;
        `planned_threads` says how many threads that comes to.
      bucket_min_bytes: a row of many needles in any order is searched by
        buckets of its keys from this many bytes of `a`
        (`CpuConfig.bucket_min_bytes`).
      table_check_ratio: where the gathers serve, needles in any order take
        their row's bin table up to this many keys per needle; None, the
        extension's own rule (`CpuConfig.table_check_ratio`).
      bucket_keys_per_needle: that row is searched by buckets only where it
        has at most this many keys per needle
        (`CpuConfig.bucket_keys_per_needle`).
      count_keys: a row of at most this many keys, with needles in any
        order, is checked and, sorted, its needles counted against every
        key (`CpuConfig.count_keys`).
      short_row_needles: two rows or more of fewer needles than this are
        searched across rows, a few rows in lock-step
        (`CpuConfig.short_row_needles`).

    Returns:
      The insertion indices, shape broadcast(a.shape[:-1], v.shape[:-1]) + (m,).
    """
    return _call(TARGET_NAME, a, v, out_dtype, **_search_attributes(
        side=side, order=order, kernel=kernel, threads=threads, min_parallel=min_parallel,
        bucket_min_bytes=bucket_min_bytes, table_check_ratio=table_check_ratio,
        bucket_keys_per_needle=bucket_keys_per_needle, count_keys=count_keys,
        short_row_needles=short_row_needles))


def search_interp(xp: jax.Array, x: jax.Array, fp: jax.Array, *, clamp_left: bool,
                  clamp_right: bool, zero_steps: bool, **search_args) -> jax.Array:
    """jnp.interp(x, xp, fp) with jnp's default `left` and `right` where
    asked, else the end segments' lines: one `search` of `x` in `xp` on the
    right side whose answers become the values, each while its segment's
    keys are in cache, as an XLA custom call. The values have the bits of
    jnp's formula as XLA compiles it on this CPU (its multiply-add fused
    where the CPU has FMA).

    Args:
      xp: 1-D keys, float32 or float64, n >= 1 of them (fewer than 2**31 for
        float32); any order, as `search` takes them.
      x: 1-D needles of xp's dtype.
      fp: the values at `xp`, its dtype and shape.
      clamp_left: x below xp[0] takes fp[0], where True.
      clamp_right: x above xp[-1] takes fp[-1], where True (after the left
        side, as jnp fills them).
      zero_steps: jax 0.12.1's formula (a step where a segment has zero
        width; the NaNs of infinite knots mended), else jax 0.10's to
        0.12.0's (a step where its width is at most np.spacing(eps)).
      **search_args: `search`'s keyword arguments but `side` and `out_dtype`.

    Returns:
      The values, x's shape and dtype.
    """
    if not AVAILABLE:
        raise ValueError(f"jaxsearch's CPU extension is unavailable: {UNAVAILABLE_REASON}")
    call = jax.ffi.ffi_call(INTERP_TARGET_NAME, jax.ShapeDtypeStruct(x.shape, x.dtype))
    return call(xp, x, fp, clamp_left=np.int32(clamp_left), clamp_right=np.int32(clamp_right),
                # interp_values.pxd's FORMULA_ZERO_STEPS or FORMULA_EPSILON_STEPS
                formula=np.int32(1 if zero_steps else 0),
                **_search_attributes(side="right", **search_args))


def search_arguments(params: Mapping[str, Any]) -> dict[str, Any]:
    """`search`'s tuning arguments from the search primitive's parameters:
    its `cpu_` ones (`cpu_kernel`, `cpu_threads`, ...), unprefixed."""
    return {name.removeprefix("cpu_"): value for name, value in params.items()
            if name.startswith("cpu_")}


def _search_attributes(*, side: str, order: str, kernel: str, threads: int,
                       min_parallel: int, bucket_min_bytes: int = CpuConfig.bucket_min_bytes,
                       table_check_ratio: float | None = CpuConfig.table_check_ratio,
                       bucket_keys_per_needle: float = CpuConfig.bucket_keys_per_needle,
                       count_keys: int = CpuConfig.count_keys,
                       short_row_needles: int = CpuConfig.short_row_needles
                       ) -> dict[str, np.int32]:
    """The search handler's attributes for `search`'s arguments."""
    return dict(bucket_density=_sixteenths(bucket_keys_per_needle),
                bucket_min_bytes=_int32_attribute(bucket_min_bytes),
                count_keys=_int32_attribute(count_keys),
                short_rows=_int32_attribute(short_row_needles),
                table_check=_table_check_attribute(table_check_ratio),
                right=np.int32(side == "right"),
                order=np.int32(ORDER_NAMES[order]),
                kernel=np.int32(KERNEL_NAMES[kernel]),
                threads=np.int32(threads),
                min_parallel=_int32_attribute(min_parallel))


def planned_threads(m: int, *, threads: int, min_parallel: int, rows: int = 1,
                    n: int = 1, short_row_needles: int = CpuConfig.short_row_needles) -> int:
    """The threads a `search` of `rows` rows of m needles in n keys runs on, with these
    `threads`, `min_parallel` and `short_row_needles`: the extension's own
    plan (1 where the extension is unavailable and jnp searches instead)."""
    if not AVAILABLE:
        return 1
    return _planned_threads(rows, n, m, threads, _int32_attribute(min_parallel),
                            _int32_attribute(short_row_needles))


def threads_for(config: CpuConfig, m: int) -> int:
    """Threads one call of a row of m needles runs on here under `config`:
    the kernels' own plan for the threads and min_parallel it passes them."""
    return planned_threads(m, threads=config.max_threads(available_cores()),
                           min_parallel=config.min_parallel)


def gathers_search(dtype: np.dtype, n: int) -> bool:
    """Whether the extension's binary search runs jnp's probes in SIMD
    gathers for a row of n keys of `dtype` (4-byte keys in the x86-64-v3
    build): where `CpuConfig.table_check_ratio` applies."""
    return AVAILABLE and _ext.gathers_search(np.dtype(dtype).itemsize, n)


def _table_check_attribute(ratio: float | None) -> np.int32:
    """The search's `table_check` attribute: the ratio in sixteenths of a
    key per needle (rounded up, clamped: inf is "always"), the extension's
    value for its built-in rule for None."""
    if ratio is None:
        return np.int32(BUILT_IN_TABLE_CHECK)
    return _sixteenths(ratio)


def _sixteenths(ratio: float) -> np.int32:
    """A ratio of keys per needle >= 0 as an int32 attribute in sixteenths
    of a key per needle: rounded up, clamped (inf is "always")."""
    return np.int32(math.ceil(16 * ratio) if 16 * ratio < INT32_MAX else INT32_MAX)


def _int32_attribute(x: int) -> np.int32:
    """A count for an int32 attribute, larger ones clamped (they mean "never")."""
    return np.int32(min(x, INT32_MAX))


def search_cumsum(w: jax.Array, v: jax.Array, *, side: str, order: str, out_dtype: np.dtype,
                  threads: int, segment: int) -> jax.Array:
    """searchsorted of `v` in the running sum of `w`, by the Cython kernel,
    as an XLA custom call (the running sum is never materialised for sorted
    needles).

    Args:
      w: weights, float32 or float64, shape (..., n) with n >= 1.
      v: needles of w's dtype, shape (..., m) with m >= 1; leading dimensions
        broadcast against w's as in numpy.
      side: "left" or "right".
      order: "any", "sorted" (trust that each row of v is sorted) or "check".
      out_dtype: int32 or int64.
      threads: at most this many threads, in [1, MAX_THREADS].
      segment: weights per segment, at most the extension's `MAX_SEGMENT`: no running
        sum runs longer than this from an exactly rounded base, which bounds
        its rounding error.

    Returns:
      The insertion indices, shape broadcast(w.shape[:-1], v.shape[:-1]) + (m,).
    """
    return _call(CUMSUM_TARGET_NAME, w, v, out_dtype,
                 right=np.int32(side == "right"),
                 order=np.int32(ORDER_NAMES[order]),
                 threads=np.int32(threads),
                 segment=np.int32(segment))


def histogram_counts(edges: jax.Array, x: jax.Array, *, out_dtype: np.dtype,
                     threads: int) -> jax.Array:
    """How many of the values `x` fall at each index that
    ``searchsorted(edges, x, 'right')`` gives, a value equal to the last
    edge counted in the last bin, as jnp.histogram bins them; by the Cython
    kernel, in one pass over `x`, as an XLA custom call.

    Args:
      edges: 1-D, float32 or float64, 1 to `MAX_HISTOGRAM_EDGES` of them; any
        order (the bins are those of jnp's probes).
      x: 1-D values of edges' dtype.
      out_dtype: int32 or int64, holding len(x).
      threads: at most this many threads, in [1, MAX_THREADS].

    Returns:
      ``len(edges) + 1`` counts: index 0 counts the values below the first
      edge, the last those past the last edge (and NaN), index k the
      histogram's bin k - 1.
    """
    return _call(HISTOGRAM_TARGET_NAME, edges, x, out_dtype, out_shape=(edges.shape[0] + 1,),
                 threads=np.int32(threads))


def sort_keys(a: jax.Array, *, threads: int) -> jax.Array:
    """Each row of `a` (..., n), one of the extension's key dtypes, sorted
    as jnp.sort sorts it (NaN last; equal keys, -0.0 and 0.0, NaNs, in any
    order), by the Cython kernel, as an XLA custom call: one pass where a
    row is sorted but for a few small descents; on `threads` threads at
    most, a row each."""
    if not AVAILABLE:
        raise ValueError(f"jaxsearch's CPU extension is unavailable: {UNAVAILABLE_REASON}")
    call = jax.ffi.ffi_call(SORT_TARGET_NAME, jax.ShapeDtypeStruct(a.shape, a.dtype))
    return call(a, threads=np.int32(threads))


def _call(target: str, a: jax.Array, v: jax.Array, out_dtype: np.dtype,
          out_shape: tuple[int, ...] | None = None, **attributes: np.int32) -> jax.Array:
    """One call of an FFI target of the extension: operands a (..., n) and
    v (..., m), the integer output (by default (..., m), broadcast over their
    batch dimensions)."""
    if not AVAILABLE:
        raise ValueError(f"jaxsearch's CPU extension is unavailable: {UNAVAILABLE_REASON}")
    if out_shape is None:
        out_shape = jnp.broadcast_shapes(a.shape[:-1], v.shape[:-1]) + v.shape[-1:]
    call = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(out_shape, out_dtype))
    return call(a, v, **attributes)
