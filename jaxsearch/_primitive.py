"""The searchsorted primitive: one lowering rule per platform, a batching rule.

`searchsorted_p.bind(a, v, ...)` takes `a` of shape (..., n) and `v` of shape
(..., m) whose leading (batch) dimensions broadcast, and gives (..., m)
insertion indices. Each platform lowers it its own way: cpu to the Cython
kernels through the XLA FFI, cuda and rocm to the GPU kernels (Pallas or
native Triton, see `_gpu.choose`), anything else to `jnp.searchsorted`. Being one primitive rather than a
`lax.platform_dependent`, it exports for several platforms in one artifact,
and `vmap` goes through its own batching rule: an unbatched operand gains a
size-1 batch dimension (a reshape, never a copy) that the kernels broadcast.
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

from . import _cpu, _gpu

searchsorted_p = Primitive("jaxsearch_searchsorted")


def searchsorted(a: jax.Array, v: jax.Array, *, side: str, order: str, out_dtype: np.dtype,
                 cpu_kernel: str, cpu_threads: int, cpu_grain: int) -> jax.Array:
    """Binds the primitive.

    Args:
      a: sorted keys, shape (..., n).
      v: needles of a's dtype, shape (..., m).
      side: "left" or "right".
      order: "any", "sorted" (the caller promises sorted needles) or "check".
      out_dtype: int32 or int64.
      cpu_kernel: the CPU kernel for sorted needles ("merge", "runs", "bisect").
      cpu_threads: at most this many threads for the CPU kernels.
      cpu_grain: the fewest needles the CPU kernels give one thread.
    """
    return searchsorted_p.bind(a, v, side=side, order=order, out_dtype=np.dtype(out_dtype),
                               cpu_kernel=cpu_kernel, cpu_threads=cpu_threads,
                               cpu_grain=cpu_grain)


def _impl(a, v, **params):
    return jax.jit(functools.partial(searchsorted_p.bind, **params))(a, v)


def _abstract_eval(a, v, *, out_dtype, **_):
    batch = jnp.broadcast_shapes(a.shape[:-1], v.shape[:-1])
    return jax.core.ShapedArray(batch + v.shape[-1:], out_dtype)


def _batch(args, dims, **params):
    # Batch dimension first; an unbatched operand gets a size-1 one.
    a, v = (jnp.expand_dims(x, 0) if d is None else jnp.moveaxis(x, d, 0)
            for x, d in zip(args, dims))
    return searchsorted_p.bind(a, v, **params), 0


def _map_rows(row_fn: Callable, a: jax.Array, v: jax.Array) -> jax.Array:
    """row_fn(a_row, v_row) over the broadcast batch dimensions, vmapping an
    operand only where it is batched (so an unbatched `a` is not copied)."""
    batch = jnp.broadcast_shapes(a.shape[:-1], v.shape[:-1])
    if not batch:
        return row_fn(a, v)
    size = math.prod(batch)
    rows, axes = [], []
    for x in (a, v):
        if math.prod(x.shape[:-1]) == 1:
            rows.append(x.reshape(x.shape[-1:]))
            axes.append(None)
        else:
            rows.append(jnp.broadcast_to(x, batch + x.shape[-1:]).reshape(size, x.shape[-1]))
            axes.append(0)
    return jax.vmap(row_fn, in_axes=tuple(axes))(*rows).reshape(batch + v.shape[-1:])


def _xla_rows(a, v, *, side, out_dtype, **_):
    return _map_rows(lambda a, v: jnp.searchsorted(a, v, side=side).astype(out_dtype), a, v)


def _cpu_rows(a, v, *, side, order, out_dtype, cpu_kernel, cpu_threads, cpu_grain):
    if a.dtype not in _cpu.NATIVE_KEY_DTYPES:  # float16, bfloat16: exact in float32
        a, v = a.astype(jnp.float32), v.astype(jnp.float32)
    return _cpu.search(a, v, side=side, order=order, kernel=cpu_kernel, out_dtype=out_dtype,
                       threads=cpu_threads, grain=cpu_grain)


def _gpu_rows(a, v, *, side, order, out_dtype, **_):
    implementation = _gpu.choose(a.shape[-1], v.shape[-1], a.dtype)
    if implementation is None:
        return _xla_rows(a, v, side=side, out_dtype=out_dtype)

    def run(order):
        return _map_rows(functools.partial(_gpu.search, side=side, order=order,
                                           out_dtype=out_dtype, implementation=implementation),
                         a, v)

    if order != "check":
        return run(order)
    # One check for the whole batch: a batched predicate would turn lax.cond
    # into a select that runs both kernels.
    all_sorted = jnp.all(jax.vmap(_gpu.is_sorted)(v.reshape(-1, v.shape[-1])))
    return jax.lax.cond(all_sorted, lambda: run("sorted"), lambda: run("any"))


searchsorted_p.def_impl(_impl)
searchsorted_p.def_abstract_eval(_abstract_eval)
batching.primitive_batchers[searchsorted_p] = _batch
mlir.register_lowering(searchsorted_p, mlir.lower_fun(_xla_rows, multiple_results=False))
if _cpu.AVAILABLE:
    mlir.register_lowering(searchsorted_p, mlir.lower_fun(_cpu_rows, multiple_results=False),
                           platform="cpu")
for _platform in ("cuda", "rocm"):
    mlir.register_lowering(searchsorted_p, mlir.lower_fun(_gpu_rows, multiple_results=False),
                           platform=_platform)


def export_disabled_checks() -> list:
    """The custom calls jaxsearch lowers to, as `jax.export` safety checks to
    disable: `jax.export.export(f, platforms=[...],
    disabled_checks=jaxsearch.export_disabled_checks())`. The process that
    runs the exported artifact must `import jaxsearch` (it registers the CPU
    custom call)."""
    check = jax.export.DisabledSafetyCheck.custom_call
    return [check(_cpu.TARGET_NAME), check("__gpu$xla.gpu.triton")]
