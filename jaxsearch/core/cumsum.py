"""searchsorted in a running sum: ``searchsorted(cumsum(w), v)`` without
materialising the running sum, accumulated in double precision.

`searchsorted_cumsum_p.bind(w, v, ...)` takes weights `w` (*batch, n) and
needles `v` (*batch, m) whose batch dimensions broadcast, and gives
(*batch, m) insertion indices. Its lowering differs by platform: cpu to the
Cython kernel through the XLA FFI (one fused pass, no running sum in
memory); anything else to the jnp route below, a running sum accumulated in
float64 where x64 is on, else in compensated float32 (a float32 pair per
sum), then searched by the rows primitive (`rows.rows_p`: on a GPU, the
kernels `gpu.choose` picks). `vmap` goes through the batching rule; the output is integer,
so gradients are zero.
"""

from __future__ import annotations

import functools
import math
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive

from ..keys import check_x64, index_dtype
from . import checks, cpu, rows, rules
from .implementations import CUMSUM_IMPLEMENTATIONS, CYTHON, XLA, check_implementation

searchsorted_cumsum_p = Primitive("jaxsearch_searchsorted_cumsum")
# The CPU kernel's segments run from `_MIN_SEGMENT` weights to the
# extension's `MAX_SEGMENT` (4096): no running sum runs longer than that from
# an accurately summed base, so its relative rounding error stays below
# (4096 + a few) * 2^-53 < 1e-12 for non-negative weights (the float64
# contract, with room to spare).
_MIN_SEGMENT = 256
# Weights and needles below which one thread is faster than several.
_MIN_PARALLEL = 1 << 15


def searchsorted_cumsum(
    w: jax.typing.ArrayLike,
    v: jax.typing.ArrayLike,
    side: Literal["left", "right"] = "left",
    *,
    sorted_v: bool | None = None,
    implementation: str | None = None,
) -> jax.Array:
    """``searchsorted(cumsum(w), v, side)`` without materialising ``cumsum(w)``.

    The running sums are accumulated at least as accurately as a float64
    running sum (in float64, or in compensated float32 where float64 is not
    available, as on a GPU without x64). The result equals
    ``numpy.searchsorted(numpy.cumsum(w, dtype=numpy.float64), v, side)``
    except where a needle lies within one ulp of a running sum: one float32
    ulp for float32 inputs, 1e-12 relative for float64 inputs (there the
    exact running sum is the reference; numpy's own float64 sum may stray
    further). Subnormal float32 inputs may count as zero, as XLA flushes them.

    Resampling particles: with normalised weights `w` and sorted uniforms `u`
    in [0, 1), ``jnp.minimum(searchsorted_cumsum(w, u, sorted_v=True), n - 1)``
    are the ancestor indices.

    Args:
      w: 1-D weights, non-negative, so that their running sum is sorted.
        Negative weights break that promise: the indices are then
        unspecified, but stay within [0, len(w)].
      v: needles, any shape.
      side: "left" (count running sums < needle) or "right" (<=).
      sorted_v: True promises that the flattened `v` is sorted ascending (NaN
        last): one merge of the running sum with the needles. A broken
        promise gives unspecified indices within [0, len(w)]. False: any
        `v` (the running sum is then written out and binary-searched). None
        (default): the kernel checks the needles' order first.
      implementation: None (by platform: the Cython kernel on CPU, a float64
        or compensated running sum and the GPU merge path on CUDA/ROCm, jnp
        elsewhere), "cython", "pallas" (the GPU route; interpret mode on a
        CPU backend) or "xla" (jnp throughout).

    Returns:
      Integer insertion indices (int32; int64 where len(w) needs it) with the
      shape of `v`. The gradient is zero.

    Raises:
      ValueError: `w` is not 1-D, an unknown side or implementation, or one
        that cannot run here.
      TypeError: complex inputs, a non-numeric input, or `sorted_v` not a
        bool or None.

    Example:
      >>> import jax.numpy as jnp, jaxsearch
      >>> jaxsearch.searchsorted_cumsum(jnp.array([0.5, 0.25, 0.25]), jnp.array([0.1, 0.6]))
      Array([0, 1], dtype=int32)
    """
    order = checks.check_side_and_order(side, sorted_v)
    check_implementation(implementation, CUMSUM_IMPLEMENTATIONS)
    if implementation == CYTHON and (not cpu.AVAILABLE or jax.default_backend() != "cpu"):
        raise ValueError("implementation='cython' needs the CPU backend and the compiled "
                         f"extension ({cpu.UNAVAILABLE_REASON or jax.default_backend()})")
    for name, x in (("w", w), ("v", v)):
        checks.check_arraylike("searchsorted_cumsum", name, x)
    if np.ndim(w) != 1:
        raise ValueError(f"w must be 1-dimensional, got shape {np.shape(w)}")
    dtype = jnp.result_type(w, v)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        raise TypeError(f"searchsorted_cumsum needs real weights and needles, got {dtype}")
    return _searchsorted_cumsum(w, v, side=side, order=order, implementation=implementation)


def sum_dtype(dtype) -> np.dtype:
    """The dtype weights and needles are compared in: float32 or float64
    (float16 and bfloat16 convert exactly to float32; integers to the
    default float)."""
    dtype = jnp.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        return jnp.dtype(jnp.result_type(float))
    return jnp.dtype(jnp.float64) if dtype == jnp.float64 else jnp.dtype(jnp.float32)


@functools.partial(jax.jit, static_argnames=("side", "order", "implementation"))
def _searchsorted_cumsum(w, v, *, side, order, implementation):
    dtype = sum_dtype(jnp.result_type(w, v))
    w, v = jnp.asarray(w, dtype), jnp.asarray(v, dtype)
    n = w.shape[0]
    check_x64(n, f"{n} weights")
    out_dtype = index_dtype(n)
    if n == 0 or v.size == 0:
        return jnp.zeros(v.shape, out_dtype)
    out = search(w, v.reshape(-1), side=side, order=order, out_dtype=out_dtype,
                 implementation=implementation)
    return out.reshape(v.shape)


def search(w: jax.Array, v: jax.Array, *, side: str, order: str, out_dtype: np.dtype,
           implementation: str | None = None, segment: int | None = None,
           threads: int | None = None) -> jax.Array:
    """Binds the primitive on rows: w (*batch, n), v (*batch, m), one dtype
    (float32 or float64), n, m >= 1. `segment` and `threads` override the
    CPU kernel's segment length and thread count (tests use short segments
    and several threads on small inputs); by default the lowering picks
    them from the shapes it sees, batch dimensions included (vmap adds them
    after this bind)."""
    return searchsorted_cumsum_p.bind(w, v, side=side, order=order,
                                      out_dtype=np.dtype(out_dtype), threads=threads,
                                      segment=segment, implementation=implementation)


def _cpu_plan(w_shape, v_shape) -> tuple[int, int]:
    """(threads, segment) for the CPU kernel on these shapes."""
    n, m = w_shape[-1], v_shape[-1]
    batch_rows = math.prod(jnp.broadcast_shapes(w_shape[:-1], v_shape[:-1]))
    threads = 1 if batch_rows * (n + m) < _MIN_PARALLEL else \
        min(cpu.available_cores(), cpu.MAX_THREADS)
    # About 16 parts of 4 segments per thread (as the search's parts),
    # within the kernel's MAX_SEGMENT.
    per_segment = batch_rows * n // (threads * 16 * 4)
    segment = min(cpu.MAX_SEGMENT, max(_MIN_SEGMENT, 1 << max(per_segment, 1).bit_length()))
    return threads, segment


# ---------------------------------------------------------------- jnp route


def _two_sum(a, b):
    """(s, e) with s = fl(a + b) and a + b = s + e exactly."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _add_pairs(x, y):
    """The sum of two float32 pairs (hi, lo), renormalised so that hi is the
    pair's value rounded and |lo| at most half an ulp of it."""
    s, e = _two_sum(x[0], y[0])
    e = e + (x[1] + y[1])
    hi = s + e
    # Past an infinite sum the error terms are NaN: the sum is s itself.
    finite = jnp.isfinite(s)
    return jnp.where(finite, hi, s), jnp.where(finite, e - (hi - s), 0)


def compensated_cumsum(w: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Running sums of float32 `w` as float32 pairs (hi, lo), hi + lo within
    about 2^-44 of the exact sum, relative: a scan whose combine step is
    error-free up to float32 squared."""
    return lax.associative_scan(_add_pairs, (w, jnp.zeros_like(w)))


def _tie_count(lo, start, stop, v, right):
    """Per needle, start + how many of lo[start:stop] count for it: the pairs
    whose hi equals the needle count when lo < 0 ('left') or lo <= 0
    ('right'); lo is non-decreasing there when the weights are
    non-negative. A binary search of fixed length, always in bounds."""
    steps = max(lo.shape[0], 1).bit_length()

    def step(_, bounds):
        a, b = bounds
        mid = jnp.minimum((a + b) // 2, lo.shape[0] - 1)
        value = lo[mid]
        counts = (value <= 0) if right else (value < 0)
        go = (a < b) & counts
        return jnp.where(go, mid + 1, a), jnp.where((a < b) & ~go, mid, b)

    return lax.fori_loop(0, steps, step, (start, stop))[0]


def _jnp_row(w, v, *, side, order, out_dtype, implementation):
    """One row by jnp: a float64 running sum where x64 is on, else a
    compensated float32 one; then the rows search of `implementation` (None:
    the platform's) on it, a primitive, so that vmap batches it whole."""
    def find(keys, needles, side):
        # No CPU kernel searches here (the cpu lowering has its own): their
        # parameters are unused.
        return rows.rows_p.bind(keys, needles, side=side, order=order, out_dtype=out_dtype,
                                implementation=implementation, cpu_kernel="merge",
                                cpu_threads=1, cpu_min_parallel=1,
                                cpu_bucket_min_bytes=0)

    if jax.config.jax_enable_x64:
        return find(jnp.cumsum(w.astype(jnp.float64)), v.astype(jnp.float64), side)
    hi, lo = compensated_cumsum(w)
    # hi + lo against a float32 needle x: the pair comes first when hi < x,
    # or hi == x and lo < 0 (<= 0 for 'right').
    first, last = find(hi, v, "left"), find(hi, v, "right")
    ties = _tie_count(lo, first, last, v, side == "right")
    # A NaN needle on 'right' counts every sum; the NaN sums' lo are NaN.
    return jnp.where((v != v) & (side == "right"), last, ties).astype(out_dtype)


def _jnp_rows(w, v, *, side, order, out_dtype, implementation, **_):
    row = functools.partial(_jnp_row, side=side, order=order, out_dtype=out_dtype,
                            implementation=implementation)
    return rules.map_rows(row, w, v)


def _cpu_rows(w, v, *, side, order, out_dtype, threads, segment, implementation):
    if implementation in (XLA, "pallas"):
        return _jnp_rows(w, v, side=side, order=order, out_dtype=out_dtype,
                         implementation=implementation)
    planned_threads, planned_segment = _cpu_plan(w.shape, v.shape)
    return cpu.search_cumsum(w, v, side=side, order=order, out_dtype=out_dtype,
                             threads=threads or planned_threads,
                             segment=segment or min(planned_segment, w.shape[-1]))


def _gpu_rows(w, v, *, implementation, **params):
    # "pallas" names the GPU route: its search is the one the dispatch picks.
    return _jnp_rows(w, v, implementation=None if implementation == "pallas" else implementation,
                     **params)


def _other_rows(w, v, *, implementation, **params):
    return _jnp_rows(w, v, implementation=XLA, **params)


rules.define_rules(searchsorted_cumsum_p, rules.rows_abstract_eval)
rules.register_lowerings(searchsorted_cumsum_p, default=_other_rows,
                         cpu=_cpu_rows if cpu.AVAILABLE else None, gpu=_gpu_rows)
