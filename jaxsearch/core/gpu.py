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

import jax
import jax.numpy as jnp
import numpy as np

from .. import tuning
from ..keys import INT32_MAX
from ..pallas_kernels import (
    BACKENDS,
    BINARY_SEARCH,
    MERGE_PATH,
    compute_capability,
    for_warp_lanes,
    is_sorted,
)
from . import rules
from .implementations import GPU_IMPLEMENTATIONS

__all__ = ["both_sorted", "choose", "compute_capability", "route", "search_rows", "status"]


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


def both_sorted(a: jax.Array, v: jax.Array) -> jax.Array:
    """Whether every row of `a` and of `v` is sorted: the merge path only
    where `a` is sorted too, since on any other `a` the binary search follows
    jnp's probes and gives jnp's answers.

    One test for the whole batch (of this device's rows, when partitioned):
    the checked kernel reads one flag for all its rows.
    """
    return jnp.all(jax.vmap(is_sorted)(v.reshape(-1, v.shape[-1]))) & \
        jnp.all(jax.vmap(is_sorted)(a.reshape(-1, a.shape[-1])))


# Threads per warp on each GPU platform: ROCm's are taken for CDNA's
# 64-lane wavefronts (the Instinct GPUs, gfx90a to gfx950), not RDNA's 32.
_WARP_LANES = {"cuda": 32, "rocm": 64}


def _config(kind, n: int, m: int, dtype, implementation: str, platform: str | None = None):
    """The tuning cache's tiles for `kind`'s kernel, else its heuristics,
    with the threads per program they were sized for on `platform`'s warps
    (None: an interpreter, as on cuda)."""
    tuned = tuning.tuned_gpu_config(kind.config_cls, n, m, dtype, implementation=implementation)
    if tuned:
        return tuned
    return for_warp_lanes(kind.default_config(n, m, jnp.dtype(dtype)),
                          _WARP_LANES.get(platform, 32))


def _fits(kind, n: int, m: int, dtype, implementation: str) -> bool:
    """Whether `kind`'s kernels can index n keys and m needles here: always
    with x64; without it, where every position fits in int32. The merge path
    counts positions along the merge (N + M); binary search counts in `a`
    and in `v` apart. Each backend pads `v` by less than one tile or block."""
    if jax.config.jax_enable_x64:
        return True
    config = _config(kind, n, m, dtype, implementation)
    if kind is MERGE_PATH:
        return n + m + 2 * config.tile <= INT32_MAX
    return max(n, m + 2 * config.block) <= INT32_MAX


def route(order: str, n: int, m: int, dtype, implementation: str) -> str | None:
    """The needles' order the kernels serve rows of n keys and m needles as:
    `order` itself ("sorted": merge path, "any": binary search, "check":
    both behind the sortedness check), or "any" where binary search serves
    sorted needles too (n above `tuning.gpu_bisect_ratio` times m, or a merge
    too long for int32 positions without x64), so that nothing is checked;
    None where neither kernel can index them (jnp answers)."""
    if not _fits(BINARY_SEARCH, n, m, dtype, implementation):
        return None
    if order == "any":
        return order
    if n > tuning.gpu_bisect_ratio(n, m, dtype) * m or \
            not _fits(MERGE_PATH, n, m, dtype, implementation):
        return "any"
    return order


def search_rows(a: jax.Array, v: jax.Array, *, side: str, order: str, out_dtype: np.dtype,
                implementation: str, interpret: bool = False,
                platform: str | None = None) -> jax.Array:
    """searchsorted of rows (*batch, m) of `v` in rows (*batch, n) of `a`,
    of one dtype, by a GPU implementation's kernels.

    Args:
      side: "left" or "right".
      order: as `route` gives it (not None): "any" (binary search),
        "sorted" (merge path, trusting that the needles are sorted) or
        "check": the backend's checked kernel, which runs either kind as
        `both_sorted` finds the whole batch, reading the test on the device.
      out_dtype: int32 or int64.
      implementation: "pallas", "mosaic" or "triton".
      interpret: run the kernels on the host, in their interpreter.
      platform: "cuda" or "rocm", whose warps the default configs are
        fitted to (`_config`); None where they run in their interpreter.
    """
    ok, reason = status(implementation, interpret=interpret)
    if not ok:
        raise ValueError(f"jaxsearch's {implementation} kernels cannot run here: {reason}")
    backend = BACKENDS[implementation]
    n, m = a.shape[-1], v.shape[-1]

    def config(kind):
        return _config(kind, n, m, a.dtype, implementation, platform)

    if order == "check":
        search_row = functools.partial(
            backend.checked, merging=both_sorted(a, v).astype(np.int32).reshape(1),
            merge_config=config(MERGE_PATH), bisect_config=config(BINARY_SEARCH))
    else:
        kind = MERGE_PATH if order == "sorted" else BINARY_SEARCH
        search_row = functools.partial(backend.kernel(kind), config=config(kind))
    return rules.map_rows(functools.partial(search_row, side=side, out_dtype=out_dtype,
                                            interpret=interpret), a, v)
