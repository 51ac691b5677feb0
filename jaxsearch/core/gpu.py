"""The GPU binding: the kernels of `pallas_kernels`, written for three
backends (`pallas_kernels.BACKENDS`).

"pallas": Pallas with its Triton backend (deprecated in jax 0.11, to leave
jax later). "mosaic": Pallas with its Mosaic GPU backend, for compute
capability 9.0 and above. "triton": the same kernels in the Triton language,
called through jax-triton. All take the same configs and give the same
answers.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import tuning
from ..pallas_kernels import (
    BACKENDS,
    BINARY_SEARCH,
    MERGE_PATH,
    compute_capability,
    is_sorted,
)
from . import rules
from .implementations import GPU_IMPLEMENTATIONS

__all__ = ["by_order", "choose", "compute_capability", "search", "search_rows", "status"]


def status(implementation: str, *, interpret: bool = False) -> tuple[bool, str]:
    """Whether a GPU implementation can run here, and why not when it cannot
    (`pallas_kernels.Backend.status`). With `interpret`, whether it can run
    on the host in its interpreter (for tests). Asking about "triton" may
    import triton (never jax-triton on a machine without GPU support in
    jaxlib)."""
    return BACKENDS[implementation].status(interpret=interpret)


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
    tuned = tuning.tuned_gpu_implementation(n, m, dtype)
    candidates = ([tuned] if tuned in GPU_IMPLEMENTATIONS else []) + list(GPU_IMPLEMENTATIONS)
    reasons = []
    for name in candidates:
        ok, reason = status(name)
        if ok:
            return name
        reasons.append(f"{name}: {reason}")
    _fallback_warning("; ".join(dict.fromkeys(reasons)))
    return None


def by_order(order: str, a: jax.Array, v: jax.Array,
             run: Callable[[str], jax.Array]) -> jax.Array:
    """`run("sorted")` or `run("any")` for keys `a` and needles `v`, as
    `order` says: "check" tests the rows of both and picks one with lax.cond.
    The merge path only where `a` is sorted too: on any other `a`, the binary
    search follows jnp's probes and gives jnp's answers.

    One test for the whole batch (of this device's rows, when partitioned): a
    batched predicate would turn lax.cond into a select that runs both.
    """
    if order != "check":
        return run(order)
    rows_sorted = jnp.all(jax.vmap(is_sorted)(v.reshape(-1, v.shape[-1]))) & \
        jnp.all(jax.vmap(is_sorted)(a.reshape(-1, a.shape[-1])))
    return lax.cond(rows_sorted, lambda: run("sorted"), lambda: run("any"))


def search(a: jax.Array, v: jax.Array, *, side: str, order: str, out_dtype: np.dtype,
           implementation: str = "pallas", interpret: bool = False) -> jax.Array:
    """searchsorted of 1-D `v` in 1-D `a` by the GPU kernels.

    Args:
      a, v: keys and needles of one dtype.
      side: "left" or "right".
      order: "any" (binary search) or "sorted" (merge path, trusting that v
        is sorted); "check" is decided by `by_order` first.
      out_dtype: int32 or int64.
      implementation: "pallas", "mosaic" or "triton".
      interpret: run the kernels on the host, in their interpreter.
    """
    ok, reason = status(implementation, interpret=interpret)
    if not ok:
        raise ValueError(f"jaxsearch's {implementation} kernels cannot run here: {reason}")
    backend = BACKENDS[implementation]
    kind = MERGE_PATH if order == "sorted" else BINARY_SEARCH
    # The tuning cache's tiles for this kernel, else (None) its heuristics.
    config = tuning.tuned_gpu_config(kind.config_cls, a.shape[0], v.shape[0], a.dtype,
                                     implementation=implementation)
    return backend.kernel(kind)(a, v, side=side, out_dtype=out_dtype, config=config,
                                interpret=interpret)


def search_rows(a: jax.Array, v: jax.Array, *, side: str, order: str, out_dtype: np.dtype,
                implementation: str, interpret: bool) -> jax.Array:
    """Rows (*batch, n) and (*batch, m) by a GPU implementation's kernels
    (with `interpret`, in its interpreter), the order decided once for the
    whole batch."""
    def run(order):
        return rules.map_rows(functools.partial(search, side=side, order=order,
                                                out_dtype=out_dtype,
                                                implementation=implementation,
                                                interpret=interpret),
                              a, v)

    return by_order(order, a, v, run)
