"""The GPU path: the kernels in jaxsearch.pallas_kernels, written twice.

"pallas": Pallas with its Triton backend (deprecated in jax 0.11, to leave
jax later). "triton": the same kernels in the Triton language, called through
jax-triton. Both take the same configs and give the same answers.
"""

from __future__ import annotations

import functools
import warnings
from typing import Callable

import jax
import numpy as np
from jax import lax

from . import _tuning
from . import pallas_kernels as _pk

GPU_IMPLEMENTATIONS = ("pallas", "triton")
PALLAS_AVAILABLE, PALLAS_REASON = _pk.pallas_available()


def status(implementation: str, *, interpret: bool = False) -> tuple[bool, str]:
    """Whether a GPU implementation can run here, and why not when it cannot.

    With `interpret`, whether it can run on the host in its interpreter (for
    tests). Asking about "triton" may import triton (never jax-triton on a
    machine without GPU support in jaxlib).
    """
    if implementation == "pallas":
        return PALLAS_AVAILABLE, PALLAS_REASON
    return _pk.triton_available(interpret=interpret)


@functools.cache
def _fallback_warning(reason: str) -> None:
    warnings.warn(f"jaxsearch: no GPU kernel can run here ({reason}); using "
                  "jnp.searchsorted on the GPU", RuntimeWarning, stacklevel=3)


def choose(n: int, m: int, dtype) -> str | None:
    """The GPU implementation for this search: the one the tuning cache found
    fastest on this device, else Pallas where jax still has its Triton
    backend, else native Triton where jax-triton imports; None (with a
    one-time warning naming what to install) when neither can run."""
    tuned = _tuning.gpu_config("implementation", n, m, dtype)
    candidates = ([tuned["name"]] if tuned and tuned.get("name") in GPU_IMPLEMENTATIONS
                  else []) + list(GPU_IMPLEMENTATIONS)
    reasons = []
    for name in candidates:
        ok, reason = status(name)
        if ok:
            return name
        reasons.append(f"{name}: {reason}")
    _fallback_warning("; ".join(dict.fromkeys(reasons)))
    return None


def kernels(implementation: str) -> tuple[Callable, Callable]:
    """The merge-path (sorted needles) and binary-search kernels of a GPU
    implementation, as `(merge, bisect)`; both take `(a, v, *, side,
    out_dtype, config, interpret)`."""
    if implementation == "pallas":
        return _pk.merge_path_searchsorted, _pk.binary_search_searchsorted
    return _pk.triton_merge_path_searchsorted, _pk.triton_binary_search_searchsorted


def is_sorted(v: jax.Array) -> jax.Array:
    """Whether 1-D `v` is sorted (NaN last, -0.0 == 0.0), as a device reduction."""
    return _pk.is_sorted(v)


def search(a: jax.Array, v: jax.Array, *, side: str, order: str, out_dtype: np.dtype,
           implementation: str = "pallas", interpret: bool = False) -> jax.Array:
    """searchsorted of 1-D `v` in 1-D `a` by the GPU kernels.

    Args:
      a, v: keys and needles of one dtype.
      side: "left" or "right".
      order: "any" (binary search), "sorted" (merge path, trusting that v is
        sorted) or "check" (a device reduction checks v; lax.cond picks).
      out_dtype: int32 or int64.
      implementation: "pallas" or "triton".
      interpret: run the kernels on the host, in their interpreter.
    """
    ok, reason = status(implementation, interpret=interpret)
    if not ok:
        raise ValueError(f"jaxsearch's {implementation} kernels cannot run here: {reason}")
    merge_fn, bisect_fn = kernels(implementation)
    n, m = a.shape[0], v.shape[0]
    kwargs = dict(side=side, out_dtype=out_dtype, interpret=interpret)
    # Tuned tile sizes where the cache has them; else the kernels' heuristics.
    tuned = functools.partial(_tuning.tuned_gpu_config, n=n, m=m, dtype=a.dtype,
                              implementation=implementation)
    merge = functools.partial(merge_fn, config=tuned(_pk.MergePathConfig), **kwargs)
    bisect = functools.partial(bisect_fn, config=tuned(_pk.BinarySearchConfig), **kwargs)
    if order == "sorted":
        return merge(a, v)
    if order == "any":
        return bisect(a, v)
    return lax.cond(is_sorted(v), merge, bisect, a, v)
