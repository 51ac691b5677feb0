"""What jaxsearch's primitives share: their batching rule, their zero
derivative, eager calls through jax's dispatch, per-platform lowerings from
jnp-level functions, and the map over batch rows that their lowerings use.

Every primitive here takes `a` (*batch, n) and `v` (*batch, ...) whose batch
dimensions broadcast, and gives integer indices.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from . import jax_private

# The platforms the GPU kernels compile for.
GPU_PLATFORMS = ("cuda", "rocm")


def define_rules(primitive: Primitive, abstract_eval: Callable,
                 batcher: Callable | None = None) -> None:
    """The rules of a jaxsearch primitive whose output is integer indices (or
    counts): its shapes, its batching (by default batch dimension first, an
    unbatched operand given a size-1 one: a reshape, never a copy, which the
    kernels broadcast; else `batcher`, a batching rule), eager calls through
    jax's dispatch (one compilation per shapes and parameters), and a zero
    derivative (float0 tangents for indices, as jnp's searchsorted has)."""
    primitive.def_impl(functools.partial(jax_private.apply_primitive, primitive))
    primitive.def_abstract_eval(abstract_eval)
    batching.primitive_batchers[primitive] = batcher or functools.partial(_batch, primitive)
    ad.primitive_jvps[primitive] = functools.partial(_zero_jvp, primitive)


def rows_abstract_eval(a, v, *, out_dtype, **_):
    """The output of a search of rows: (*broadcast batch, m) `out_dtype`."""
    batch = jnp.broadcast_shapes(a.shape[:-1], v.shape[:-1])
    return jax_private.varying_as(jax.core.ShapedArray(batch + v.shape[-1:], out_dtype), a, v)


def _batch(primitive, args, dims, **params):
    a, v = (jnp.expand_dims(x, 0) if d is None else jnp.moveaxis(x, d, 0)
            for x, d in zip(args, dims))
    return primitive.bind(a, v, **params), 0


def _zero_jvp(primitive, primals, tangents, **params):
    out = primitive.bind(*primals, **params)
    return out, ad.Zero(out.aval.to_tangent_aval())


def register_lowerings(primitive: Primitive, *, default: Callable, cpu: Callable | None,
                       gpu: Callable | Mapping[str, Callable],
                       for_export: Callable | None = None) -> None:
    """Lowers `primitive` by the jnp-level function of each platform: `cpu`
    on cpu (None: `default` there too, as where the CPU extension is
    unavailable), `gpu` on cuda and rocm (one function for both, or one
    per platform), `default` elsewhere; and, given
    `for_export`, by that on every platform when a binding with `portable`
    set lowers for `jax.export`."""
    def rule(fn):
        lowered = mlir.lower_fun(fn, multiple_results=False)
        if for_export is None:
            return lowered
        portable = mlir.lower_fun(for_export, multiple_results=False)

        def lower(ctx, *args, **params):
            if params.get("portable") and jax_private.lowers_for_export(ctx):
                return portable(ctx, *args, **params)
            return lowered(ctx, *args, **params)
        return lower

    mlir.register_lowering(primitive, rule(default))
    if cpu is not None:
        mlir.register_lowering(primitive, rule(cpu), platform="cpu")
    for platform in GPU_PLATFORMS:
        fn = gpu[platform] if isinstance(gpu, Mapping) else gpu
        mlir.register_lowering(primitive, rule(fn), platform=platform)


def map_rows(row_fn: Callable, a: jax.Array, v: jax.Array) -> jax.Array:
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
