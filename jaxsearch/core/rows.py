"""The per-device search of needle rows, by platform: the primitive
`rows_p` that `primitive.search_local` binds, and its lowering rule for each
platform.

`rows_p.bind(a, v, ...)` takes `a` (*batch, n) and flattened needles `v`
(*batch, m) of one dtype, whose batch dimensions broadcast, and gives
(*batch, m) indices, by the implementation `implementation_for` names for
the platform being lowered for: on cpu the Cython kernels through the XLA
FFI, on cuda and rocm the GPU kernels (`gpu.choose`), anything else
`jnp.searchsorted`. Being a primitive rather than a
`lax.platform_dependent`, it exports for several platforms in one artifact.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive

from ..keys import WIDENED_TO_FLOAT32
from . import cpu, gpu, originals, rules
from .implementations import CYTHON, GPU_IMPLEMENTATIONS, XLA

rows_p = Primitive("jaxsearch_searchsorted_rows")


def implementation_for(platform: str | None, n: int, m: int, dtype) -> str:
    """The implementation that searches rows of m needles in n keys of
    `dtype` lowered for `platform`, when the call names none: "cython" on
    cpu where the extension loaded and a row has more than one key, on a
    GPU the implementation `gpu.choose` picks ("xla" when none can run),
    "xla" (jnp) elsewhere.

    `platform` is a lowering platform ("cpu", "cuda", "rocm", ...), or "gpu"
    (`jax.default_backend()`'s name for either GPU platform).
    """
    if platform == "cpu":
        # One key is one compare per needle, which XLA fuses and vectorises:
        # the custom call took 1.7-3.5x jnp's time at M = 1e6 (2 cores).
        return CYTHON if cpu.AVAILABLE and n > 1 else XLA
    if platform in rules.GPU_PLATFORMS + ("gpu",):
        return gpu.choose(n, m, dtype) or XLA
    return XLA


def search_rows(a, v, *, platform, implementation, side, order, out_dtype, portable=False,
                **cpu_params):
    """The rows by `implementation`, else by the one `implementation_for`
    names for `platform` (None: one without kernels of its own). A GPU
    implementation off cuda and rocm runs in its interpreter. `cpu_params`:
    the search primitive's `cpu_` parameters. (`portable` acts in the
    lowering rule, which alone knows whether it lowers for an export.)"""
    stray = sorted(name for name in cpu_params if not name.startswith("cpu_"))
    if stray:  # a parameter of the primitive that no route reads
        raise TypeError(f"search_rows: unexpected parameters {stray}")
    implementation = implementation or implementation_for(platform, a.shape[-1], v.shape[-1],
                                                          a.dtype)
    if implementation in GPU_IMPLEMENTATIONS:
        order = gpu.route(order, a.shape[-1], v.shape[-1], a.dtype, implementation)
        if order is None:  # past what the kernels index without x64
            return xla_rows(a, v, side=side, out_dtype=out_dtype)
        on_gpu = platform in rules.GPU_PLATFORMS
        return gpu.search_rows(a, v, side=side, order=order, out_dtype=out_dtype,
                               implementation=implementation, interpret=not on_gpu,
                               platform=platform if on_gpu else None)
    if implementation != CYTHON:
        return xla_rows(a, v, side=side, out_dtype=out_dtype)
    if a.dtype in WIDENED_TO_FLOAT32:
        a, v = a.astype(jnp.float32), v.astype(jnp.float32)
    return cpu.search(a, v, side=side, order=order, out_dtype=out_dtype,
                      **cpu.search_arguments(cpu_params))


def xla_rows(a: jax.Array, v: jax.Array, *, side: str, out_dtype: np.dtype, **_) -> jax.Array:
    """The rows by `jnp.searchsorted`."""
    def row(a, v):
        return originals.searchsorted(a, v, side=side).astype(out_dtype)

    return rules.map_rows(row, a, v)


rules.define_rules(rows_p, rules.rows_abstract_eval)
rules.register_lowerings(rows_p, default=functools.partial(search_rows, platform=None),
                         cpu=functools.partial(search_rows, platform="cpu") if cpu.AVAILABLE
                         else None,
                         gpu={platform: functools.partial(search_rows, platform=platform)
                              for platform in rules.GPU_PLATFORMS},
                         for_export=xla_rows)
