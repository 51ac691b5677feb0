"""The GPU path: the kernels in jaxsearch.pallas_kernels, written three times.

"pallas": Pallas with its Triton backend (deprecated in jax 0.11, to leave
jax later). "mosaic": Pallas with its Mosaic GPU backend, for compute
capability 9.0 and above. "triton": the same kernels in the Triton language,
called through jax-triton. All take the same configs and give the same
answers.
"""

from __future__ import annotations

import functools
import warnings
from typing import Callable

import jax
import numpy as np

# Not public API, alike in jax 0.10 to 0.12: the mesh in force (an AOT
# topology's devices too).
from jax._src import mesh as _mesh_lib

from . import _sortedness, _tuning
from . import pallas_kernels as _pk

# In the order the dispatch prefers them, after the tuned choice.
GPU_IMPLEMENTATIONS = ("pallas", "mosaic", "triton")
PALLAS_AVAILABLE, PALLAS_REASON = _pk.pallas_available()
# The wrappers of each implementation: (sorted needles, any needles).
_KERNELS = {
    "pallas": ("merge_path_searchsorted", "binary_search_searchsorted"),
    "mosaic": ("mosaic_merge_path_searchsorted", "mosaic_binary_search_searchsorted"),
    "triton": ("triton_merge_path_searchsorted", "triton_binary_search_searchsorted"),
}
# Implementations whose interpreter has ordered effects (Mosaic GPU's): on a
# host that compiles for no GPU, they are interpreted where the search is
# traced, not inside a lowering rule.
TRACE_TIME_INTERPRETERS = ("mosaic",)
# Mosaic GPU targets Hopper (sm_90a) and later.
_MOSAIC_MIN_CAPABILITY = (9, 0)


def status(implementation: str, *, interpret: bool = False) -> tuple[bool, str]:
    """Whether a GPU implementation can run here, and why not when it cannot.

    With `interpret`, whether it can run on the host in its interpreter (for
    tests). Mosaic GPU needs compute capability 9.0 or above on the device
    compiled for; an unknown device (lowering on a host with no GPU) counts
    as 9.0, as Mosaic GPU's own lowering assumes. Asking about "triton" may
    import triton (never jax-triton on a machine without GPU support in
    jaxlib).
    """
    if implementation == "pallas":
        return PALLAS_AVAILABLE, PALLAS_REASON
    if implementation == "mosaic":
        ok, reason = _pk.mosaic_available()
        capability = None if interpret or not ok else compute_capability()
        if capability is not None and capability < _MOSAIC_MIN_CAPABILITY:
            return False, ("Mosaic GPU needs compute capability 9.0 or above; the device "
                           f"compiled for has {capability[0]}.{capability[1]}")
        return ok, reason
    return _pk.triton_available(interpret=interpret)


def compute_capability() -> tuple[int, int] | None:
    """(major, minor) of the CUDA device being compiled for: the mesh's in
    force (an AOT topology's included), else the first GPU's; None when no
    device says (lowering on a host with no GPU)."""
    mesh = _mesh_lib.get_concrete_mesh()
    if not mesh.empty:
        devices = list(mesh.devices.flat)
    else:
        try:
            devices = jax.devices("gpu")
        except RuntimeError:  # No GPU backend in this process.
            devices = []
    for device in devices:
        capability = getattr(device, "compute_capability", None)
        if capability:
            major, minor = str(capability).split(".")[:2]
            return int(major), int(minor)
    return None


@functools.cache
def _fallback_warning(reason: str) -> None:
    warnings.warn(f"jaxsearch: no GPU kernel can run here ({reason}); using "
                  "jnp.searchsorted on the GPU", RuntimeWarning, stacklevel=3)


def choose(n: int, m: int, dtype) -> str | None:
    """The GPU implementation for this search: the one the tuning cache found
    fastest on this device, else Pallas where jax still has its Triton
    backend, else Mosaic GPU on compute capability 9.0 and above, else native
    Triton where jax-triton imports; None (with a one-time warning naming what
    to install) when none can run."""
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
    merge, bisect = _KERNELS[implementation]
    return getattr(_pk, merge), getattr(_pk, bisect)


def search(a: jax.Array, v: jax.Array, *, side: str, order: str, out_dtype: np.dtype,
           implementation: str = "pallas", interpret: bool = False) -> jax.Array:
    """searchsorted of 1-D `v` in 1-D `a` by the GPU kernels.

    Args:
      a, v: keys and needles of one dtype.
      side: "left" or "right".
      order: "any" (binary search), "sorted" (merge path, trusting that v is
        sorted) or "check" (as `_sortedness.by_order` decides).
      out_dtype: int32 or int64.
      implementation: "pallas", "mosaic" or "triton".
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
    return _sortedness.by_order(order, v, lambda order: (merge if order == "sorted"
                                                         else bisect)(a, v))
