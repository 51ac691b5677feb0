"""The public searchsorted: validation, promotion, and per-platform dispatch."""

from __future__ import annotations

import functools
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from .. import tuning
from ..keys import KEY_DTYPES, index_dtype
from . import cpu, gpu, originals, primitive, rows, serving
from .checks import check_arraylike, check_side_and_order
from .implementations import CYTHON, GPU_IMPLEMENTATIONS, IMPLEMENTATIONS, XLA, check_implementation

Side = Literal["left", "right"]
JNP_METHODS = ("scan", "scan_unrolled", "sort", "compare_all")


def searchsorted(
    a: jax.typing.ArrayLike,
    v: jax.typing.ArrayLike,
    side: Side = "left",
    sorter: jax.typing.ArrayLike | None = None,
    *,
    sorted_v: bool | None = None,
    method: str | None = None,
    implementation: str | None = None,
) -> jax.Array:
    """Find insertion indices of `v` in the sorted array `a`; a drop-in for
    :func:`jax.numpy.searchsorted` that is fast when `v` is sorted too.

    Returns exactly what ``jnp.searchsorted(a, v, side, sorter)`` returns:
    the same values, dtype (int32, or int64 when ``len(a)`` needs it) and
    shape (``v.shape``). NaN sorts after everything, every NaN equal; -0.0
    equals 0.0.

    Args:
      a: 1-D array, sorted ascending (NaN last) unless `sorter` is given.
      v: needles, any shape.
      side: "left" (first suitable index) or "right" (last).
      sorter: optional indices that sort `a`, as in numpy.
      sorted_v: True promises that `a` and the flattened `v` are both sorted
        ascending (NaN last): one merge of two sorted streams. A broken
        promise gives unspecified indices, always within [0, len(a)]. False:
        any `v`, binary search. None (default): exact for any `v`; the kernel
        for sorted needles checks their order as it goes (and a's, once), and
        what is found out of order is binary-searched instead. For None and
        False the answers equal jnp's default method's on any `a`, sorted or
        not.
      method: one of jnp's methods ("scan", "scan_unrolled", "sort",
        "compare_all") to run ``jnp.searchsorted`` with that method; None lets
        jaxsearch choose.
      implementation: None (by platform: Cython on CPU, but jnp for a
        single key, which XLA fuses; the GPU kernels on CUDA/ROCm, jnp
        elsewhere), "cython" (the same as None on CPU), "pallas" (the GPU kernels in
        Pallas; interpret mode on a CPU backend), "mosaic" (the same kernels
        in Pallas' Mosaic GPU backend, for compute capability 9.0 and above;
        its interpreter on a CPU backend), "triton" (the same kernels
        in native Triton through jax-triton; on a CPU backend Triton's
        interpreter, which needs torch and TRITON_INTERPRET=1) or "xla"
        (``jnp.searchsorted``).

    Returns:
      Integer array of insertion indices with the shape of `v`.

    Raises:
      ValueError: `a` is not 1-D, or an unknown side, method or
        implementation, or an implementation that cannot run here.
      TypeError: `sorted_v` is not a bool or None, or `a`, `v` or `sorter`
        is not a numeric array or scalar (None, a string, a list...), as
        jnp.searchsorted raises.

    Example:
      >>> import jax.numpy as jnp, jaxsearch
      >>> jaxsearch.searchsorted(jnp.array([1, 2, 2, 3]), jnp.array([2, 4]))
      Array([1, 4], dtype=int32)
    """
    order = check_side_and_order(side, sorted_v)
    if method is not None and method not in JNP_METHODS:
        raise ValueError(f"method must be None or one of {JNP_METHODS}, got {method!r}")
    check_implementation(implementation, IMPLEMENTATIONS)
    if implementation == CYTHON and not cpu.AVAILABLE:
        raise ValueError(f"implementation='cython' cannot run: {cpu.UNAVAILABLE_REASON}")
    if implementation in GPU_IMPLEMENTATIONS:
        ok, reason = gpu.status(implementation, interpret=jax.default_backend() == "cpu")
        if not ok:
            raise ValueError(f"implementation={implementation!r} cannot run here: {reason}")
    for name, x in (("a", a), ("v", v), ("sorter", sorter)):
        if name != "sorter" or x is not None:
            check_arraylike("searchsorted", name, x)
    a_shape = np.shape(a)
    if len(a_shape) != 1:
        raise ValueError(f"a must be 1-dimensional, got shape {a_shape}")

    if method is not None or implementation == XLA:
        return originals.searchsorted(a, v, side=side, sorter=sorter, method=method or "scan")
    if implementation == CYTHON and jax.default_backend() != "cpu":
        raise ValueError("implementation='cython' needs the CPU backend; "
                         f"the default backend is {jax.default_backend()!r}")
    # This thread's use_cpu_config override is a static argument, so jit keeps
    # one compilation per override and a call never runs with another thread's
    # (the tuning cache answers when there is none, at trace time).
    return _promote_and_bind(a, v, sorter, side=side, order=order,
                             implementation=implementation,
                             cpu_override=tuning.cpu_config_override(),
                             portable=serving.for_patch())


def search_params(n: int, m: int, dtype, *, side: str, order: str,
                  cpu_override: tuning.CpuConfig | None, implementation: str | None = None,
                  portable: bool = False) -> dict:
    """`primitive.bind_search`'s parameters (but `needle_ndim`) for m needles
    in n keys of `dtype`, one of the kernels' (`KEY_DTYPES`).

    The CPU's choices are parameters of the primitive whatever the platform
    (other platforms' lowerings ignore them): use_cpu_config's override is
    known only in the calling thread at trace time, and as parameters they
    key jit's caches, so a call never runs with another thread's."""
    cpu_config, _ = tuning.resolve_cpu_config(n, m, dtype, override=cpu_override)
    return dict(side=side, order=order, out_dtype=index_dtype(n),
                cpu_kernel=tuning.choose_cpu_kernel(n, m, cpu_config),
                cpu_threads=cpu_config.max_threads(cpu.available_cores()),
                cpu_min_parallel=cpu_config.min_parallel,
                cpu_bucket_min_bytes=cpu_config.bucket_min_bytes,
                cpu_table_check_ratio=cpu_config.table_check_ratio,
                cpu_bucket_keys_per_needle=cpu_config.bucket_keys_per_needle,
                cpu_count_keys=cpu_config.count_keys,
                cpu_short_row_needles=cpu_config.short_row_needles,
                implementation=implementation, portable=portable)


def default_implementation(n: int, m: int, dtype) -> str:
    """The implementation ``searchsorted(a, v)`` runs by default here (on the
    default backend) for n keys and m needles of `dtype`: "cython", a GPU
    implementation, or "xla" (jnp)."""
    if not _kernels_take(n, jnp.dtype(dtype)):
        return XLA
    return rows.implementation_for(jax.default_backend(), n, m, dtype)


def _kernels_take(n: int, dtype: np.dtype) -> bool:
    """Whether jaxsearch's kernels search n keys of `dtype`: a key dtype
    they have, and an index dtype this jax can give (int64 needs x64)."""
    return dtype in KEY_DTYPES and (index_dtype(n) == np.int32 or jax.config.jax_enable_x64)


@functools.partial(jax.jit, static_argnames=("side", "order", "implementation", "cpu_override",
                                             "portable"))
def _promote_and_bind(a, v, sorter, *, side: str, order: str, implementation: str | None,
                      cpu_override: tuning.CpuConfig | None, portable: bool):
    """Promotes `a` and `v` to one dtype, applies `sorter`, hands what no
    kernel of ours takes to jnp, and binds the primitive."""
    dtype = jnp.result_type(a, v)
    a = jnp.asarray(a, dtype)
    v = jnp.asarray(v, dtype)
    if sorter is not None:
        a = a[sorter]
    n = a.shape[0]
    if not _kernels_take(n, dtype):
        # complex, float8, int4: no kernel of ours; past int32 without x64,
        # jnp raises its own error for an index dtype it cannot have.
        return originals.searchsorted(a, v, side=side)
    out_dtype = index_dtype(n)
    if v.size == 0 or n == 0:
        return jnp.zeros_like(v, dtype=out_dtype)
    # On v's own shape, all of it needle dimensions: flattening a sharded v
    # here would move data between devices (the primitive flattens each
    # device's piece). A GPU implementation asked for by name goes through
    # the primitive too, so that the platform being lowered for, not the
    # default backend, decides between its real kernels and its interpreter.
    out = primitive.bind_search(
        a, v, needle_ndim=v.ndim, **search_params(
            n, v.size, dtype, side=side, order=order, cpu_override=cpu_override,
            implementation=implementation if implementation in GPU_IMPLEMENTATIONS else None,
            portable=portable))
    return out.reshape(v.shape)
