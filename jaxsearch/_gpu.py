"""The GPU path: the Pallas (Triton backend) kernels in jaxsearch.pallas_kernels."""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax import lax

from . import _tuning

try:
    from . import pallas_kernels as _pk
except ImportError as exc:  # jax without Pallas' Triton backend
    _pk = None
    UNAVAILABLE_REASON: str | None = f"jaxsearch.pallas_kernels did not import ({exc})"
else:
    UNAVAILABLE_REASON = None

AVAILABLE = UNAVAILABLE_REASON is None


def is_sorted(v: jax.Array) -> jax.Array:
    """Whether 1-D `v` is sorted (NaN last, -0.0 == 0.0), as a device reduction."""
    return _pk.is_sorted(v)


def search(a: jax.Array, v: jax.Array, *, side: str, order: str, out_dtype: np.dtype,
           interpret: bool = False) -> jax.Array:
    """searchsorted of 1-D `v` in 1-D `a` by the Pallas kernels.

    `order` is "any" (binary search), "sorted" (merge path, trusting that v is
    sorted) or "check" (a device reduction checks v; lax.cond picks the kernel).
    `interpret` runs the kernels on the CPU (for tests and debugging).
    """
    if not AVAILABLE:
        raise ValueError(f"jaxsearch's Pallas kernels are unavailable: {UNAVAILABLE_REASON}")
    n, m = a.shape[0], v.shape[0]
    kwargs = dict(side=side, out_dtype=out_dtype, interpret=interpret)
    # Tuned tile sizes where the cache has them; else the kernels' heuristics.
    merge = functools.partial(
        _pk.merge_path_searchsorted,
        config=_tuning.tuned_gpu_config(_pk.MergePathConfig, n, m, a.dtype), **kwargs)
    bisect = functools.partial(
        _pk.binary_search_searchsorted,
        config=_tuning.tuned_gpu_config(_pk.BinarySearchConfig, n, m, a.dtype), **kwargs)
    if order == "sorted":
        return merge(a, v)
    if order == "any":
        return bisect(a, v)
    return lax.cond(_pk.is_sorted(v), merge, bisect, a, v)
