"""The searchsorted primitive: one lowering rule per platform, a batching
rule, a zero derivative, and a partitioning rule for arrays sharded over
several devices (in `_partitioning`).

`searchsorted_p.bind(a, v, needle_ndim=k, ...)` takes `a` of shape
(*batch, n) and `v` of shape (*batch, *needles) with k = len(needles), whose
batch dimensions broadcast, and gives (*batch, *needles) insertion indices:
each batch row of `v`, flattened, is searched in the same row of `a`. `vmap`
goes through its batching rule: an unbatched operand gains a size-1 batch
dimension (a reshape, never a copy) that the kernels broadcast. The output
is integer: its derivative is zero (float0 tangents), as jnp's. Called
outside jit, it runs through jax's own dispatch, which compiles it once per
shapes and parameters.

The body of the search, `_local`, flattens each row's needles (a reshape
without a copy) and binds `_rows_p`, whose lowering runs the implementation
`implementation_for` names for the platform: on cpu the Cython kernels
through the XLA FFI, on cuda and rocm the GPU kernels (Pallas, Mosaic GPU or
native Triton, see `_gpu.choose`), anything else `jnp.searchsorted`. Being
primitives rather than a `lax.platform_dependent`, they export for several
platforms in one artifact.

`partitioned_p` is the same search for programs that may run on several
devices: it lowers to a `jax.experimental.custom_partitioning` call whose
partition rule (`_partitioning.partition`) tells XLA how to split the work
when `a` or `v` is sharded, so that each device runs `_local` on its own
pieces. `searchsorted` binds it where jax knows the devices when it lowers
(custom_partitioning needs them) and there are several; an export and a
lowering for several platforms lower its body directly, like
`searchsorted_p`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# Not public API, alike in jax 0.10 to 0.12: the eager path of every jax
# primitive (a jit of the primitive alone, cached per shapes and
# parameters), and jit's lowering with the devices, when asked.
from jax._src import dispatch as _dispatch
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from . import _cpu, _gpu, _partitioning, _sortedness

searchsorted_p = Primitive("jaxsearch_searchsorted")
# The same search, lowered to a custom_partitioning call (see the docstring):
# bound wherever the search may run on several devices that are known.
partitioned_p = Primitive("jaxsearch_searchsorted_partitioned")
# The per-device search of flattened needle rows: (*batch, n), (*batch, m).
_rows_p = Primitive("jaxsearch_searchsorted_rows")
# The platforms the GPU kernels compile for.
GPU_PLATFORMS = ("cuda", "rocm")


def searchsorted(a: jax.Array, v: jax.Array, *, side: str, order: str, out_dtype: np.dtype,
                 cpu_kernel: str, cpu_threads: int, cpu_min_parallel: int,
                 needle_ndim: int | None = None, implementation: str | None = None) -> jax.Array:
    """Binds the primitive.

    Args:
      a: sorted keys, shape (*batch, n).
      v: needles of a's dtype, shape (*batch, *needles); `batch` has as many
        dimensions as a's, and the two broadcast.
      side: "left" or "right".
      order: "any", "sorted" (the caller promises that each batch row of
        needles, flattened, is sorted) or "check" (see `_sortedness`).
      out_dtype: int32 or int64.
      cpu_kernel: the CPU kernel for sorted needles ("merge", "runs", "bisect").
      cpu_threads: at most this many threads for the CPU kernels.
      cpu_min_parallel: the fewest needles the CPU kernels give one thread
        (`CpuConfig.min_parallel`).
      needle_ndim: len(needles); None means v.ndim - a.ndim + 1.
      implementation: None (by platform, `implementation_for`), or a GPU
        implementation asked for by name: its real kernels where the search
        lowers for cuda or rocm, its interpreter where it lowers for any
        other platform.

    Returns:
      Insertion indices of shape (*broadcast batch, *needles).
    """
    if needle_ndim is None:
        needle_ndim = np.ndim(v) - np.ndim(a) + 1
    params = dict(side=side, order=order, out_dtype=np.dtype(out_dtype), cpu_kernel=cpu_kernel,
                  cpu_threads=cpu_threads, cpu_min_parallel=cpu_min_parallel,
                  needle_ndim=int(needle_ndim), implementation=implementation)
    if implementation in _gpu.TRACE_TIME_INTERPRETERS and _gpu.compute_capability() is None \
            and jax.default_backend() == "cpu":
        # Its interpreter has ordered effects, which a lowering rule cannot
        # take: where no GPU is being compiled for, interpret it here, where
        # no primitive carries the zero derivative.
        a, v = lax.stop_gradient(a), lax.stop_gradient(v)
        return _local(a, v, **params, rows=functools.partial(_rows, platform=None))
    primitive = partitioned_p if _partitioning.may_partition() else searchsorted_p
    return primitive.bind(a, v, **params)


def implementation_for(platform: str | None, n: int, m: int, dtype) -> str:
    """The implementation that searches rows of m needles in n keys of
    `dtype` lowered for `platform`, when the call names none: "cython" on
    cpu where the extension loaded, on a GPU the implementation
    `_gpu.choose` picks ("xla" when none can run), "xla" (jnp) elsewhere.

    `platform` is a lowering platform ("cpu", "cuda", "rocm", ...), or "gpu"
    (`jax.default_backend()`'s name for either GPU platform).
    """
    if platform == "cpu":
        return "cython" if _cpu.AVAILABLE else "xla"
    if platform in GPU_PLATFORMS + ("gpu",):
        return _gpu.choose(n, m, dtype) or "xla"
    return "xla"


def define_rules(primitive: Primitive, abstract_eval: Callable, batch: Callable) -> None:
    """The rules of a jaxsearch primitive whose output is integer indices:
    its shapes, its batching, eager calls through jax's dispatch (one
    compilation per shapes and parameters), and a zero derivative (float0
    tangents, as jnp's searchsorted has)."""
    primitive.def_impl(functools.partial(_dispatch.apply_primitive, primitive))
    primitive.def_abstract_eval(abstract_eval)
    batching.primitive_batchers[primitive] = batch
    ad.primitive_jvps[primitive] = functools.partial(_zero_jvp, primitive)


def _zero_jvp(primitive, primals, tangents, **params):
    out = primitive.bind(*primals, **params)
    return out, ad.Zero(out.aval.to_tangent_aval())


def _split_v(v_shape, needle_ndim):
    """(batch, needles) of a shape of v."""
    k = len(v_shape) - needle_ndim
    return tuple(v_shape[:k]), tuple(v_shape[k:])


def _out_batch(a_shape, v_shape, needle_ndim):
    batch_v, _ = _split_v(v_shape, needle_ndim)
    if len(batch_v) != len(a_shape) - 1:
        raise ValueError(f"jaxsearch: a {a_shape} and v {v_shape} with {needle_ndim} needle "
                         "dimensions must have as many batch dimensions")
    return jnp.broadcast_shapes(tuple(a_shape[:-1]), batch_v)


def _abstract_eval(a, v, *, out_dtype, needle_ndim, **_):
    batch = _out_batch(a.shape, v.shape, needle_ndim)
    shape = batch + _split_v(v.shape, needle_ndim)[1]
    sharding = _partitioning.explicit_out_sharding(a, v, needle_ndim)
    if sharding is None:
        return jax.core.ShapedArray(shape, out_dtype)
    return jax.core.ShapedArray(shape, out_dtype, sharding=sharding)


def _batch(primitive, args, dims, **params):
    # Batch dimension first; an unbatched operand gets a size-1 one.
    a, v = (jnp.expand_dims(x, 0) if d is None else jnp.moveaxis(x, d, 0)
            for x, d in zip(args, dims))
    return primitive.bind(a, v, **params), 0


def _local(a, v, *, needle_ndim, rows=_rows_p.bind, **params):
    """The search of each batch row's needles, flattened, on one device's
    pieces (or on the whole arrays), by `rows`."""
    batch_v, needles = _split_v(v.shape, needle_ndim)
    out_batch = _out_batch(a.shape, v.shape, needle_ndim)
    rows = rows(a, v.reshape(batch_v + (math.prod(needles),)), **params)
    return rows.reshape(out_batch + needles)


# ------------------------------------------------------------- lowering


def _lower_partitioned(ctx, a, v, **params):
    module = ctx.module_context
    lowering = getattr(module, "lowering_parameters", None)
    if len(module.platforms) > 1 or getattr(lowering, "for_export", False) or \
            getattr(module.axis_context, "manual_axes", None):
        # jax.export: the partitioning call refers to this process's Python
        # callbacks and cannot be serialized. Inside a shard_map the body
        # gets each device's pieces already (jax's own rule covers only a
        # shard_map over every axis). The body lowers directly.
        fn = functools.partial(_local, **params)
    else:
        fn = _partitioning.partitioned(_local, tuple(sorted(params.items())))
    return _lower_unsharded(fn, ctx, a, v)


def _lower_direct(ctx, a, v, **params):
    return _lower_unsharded(functools.partial(_local, **params), ctx, a, v)


def _lower_unsharded(fn, ctx, *args):
    """Lowers fn(*args) traced without the operands' shardings: in explicit
    sharding mode they would make jax refuse the reshapes in `_local`, which
    only ever flatten one device's piece (or the whole array)."""
    def strip(aval):
        return jax.core.ShapedArray(aval.shape, aval.dtype, aval.weak_type)

    ctx = ctx.replace(avals_in=[strip(x) for x in ctx.avals_in],
                      avals_out=[strip(x) for x in ctx.avals_out])
    return mlir.lower_fun(fn, multiple_results=False)(ctx, *args)


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


def _rows(a, v, *, platform, implementation, side, order, out_dtype, cpu_kernel, cpu_threads,
          cpu_min_parallel):
    """The rows by `implementation`, else by the one `implementation_for`
    names for `platform` (None: one without kernels of its own). A GPU
    implementation off cuda and rocm runs in its interpreter."""
    implementation = implementation or implementation_for(platform, a.shape[-1], v.shape[-1],
                                                          a.dtype)
    if implementation in _gpu.GPU_IMPLEMENTATIONS:
        return _gpu_rows(a, v, side=side, order=order, out_dtype=out_dtype,
                         implementation=implementation, interpret=platform not in GPU_PLATFORMS)
    if implementation != "cython":
        return _xla_rows(a, v, side=side, out_dtype=out_dtype)
    if a.dtype not in _cpu.NATIVE_KEY_DTYPES:  # float16, bfloat16: exact in float32
        a, v = a.astype(jnp.float32), v.astype(jnp.float32)
    return _cpu.search(a, v, side=side, order=order, kernel=cpu_kernel, out_dtype=out_dtype,
                       threads=cpu_threads, min_parallel=cpu_min_parallel)


def _xla_rows(a, v, *, side, out_dtype):
    return _map_rows(lambda a, v: jnp.searchsorted(a, v, side=side).astype(out_dtype), a, v)


def _gpu_rows(a, v, *, side, order, out_dtype, implementation, interpret):
    """Rows by a GPU implementation's kernels (with `interpret`, in its
    interpreter), the order decided once for the whole batch."""
    def run(order):
        return _map_rows(functools.partial(_gpu.search, side=side, order=order,
                                           out_dtype=out_dtype, implementation=implementation,
                                           interpret=interpret),
                         a, v)

    return _sortedness.by_order(order, v, run)


def _rows_abstract_eval(a, v, *, out_dtype, **_):
    batch = jnp.broadcast_shapes(a.shape[:-1], v.shape[:-1])
    return jax.core.ShapedArray(batch + v.shape[-1:], out_dtype)


for _p in (searchsorted_p, partitioned_p):
    define_rules(_p, _abstract_eval, functools.partial(_batch, _p))
mlir.register_lowering(searchsorted_p, _lower_direct)
mlir.register_lowering(partitioned_p, _lower_partitioned)
# custom_partitioning needs the devices when it lowers (jit otherwise lowers
# without them); jax's own custom_partitioning_p is registered the same way.
_dispatch.prim_requires_devices_during_lowering.add(partitioned_p)
_rows_p.def_abstract_eval(_rows_abstract_eval)


def register_lowerings(primitive: Primitive, *, default: Callable, cpu: Callable,
                       gpu: Callable) -> None:
    """Lowers `primitive` by the jnp-level function of each platform: `cpu`
    where the CPU extension is available, `gpu` on cuda and rocm, `default`
    elsewhere (and on a CPU without the extension)."""
    mlir.register_lowering(primitive, mlir.lower_fun(default, multiple_results=False))
    if _cpu.AVAILABLE:
        mlir.register_lowering(primitive, mlir.lower_fun(cpu, multiple_results=False),
                               platform="cpu")
    for platform in GPU_PLATFORMS:
        mlir.register_lowering(primitive, mlir.lower_fun(gpu, multiple_results=False),
                               platform=platform)


register_lowerings(_rows_p, default=functools.partial(_rows, platform=None),
                   cpu=functools.partial(_rows, platform="cpu"),
                   gpu=functools.partial(_rows, platform="cuda"))


def export_disabled_checks() -> list:
    """The custom calls jaxsearch lowers to, as `jax.export` safety checks to
    disable: `jax.export.export(f, platforms=[...],
    disabled_checks=jaxsearch.export_disabled_checks())`. The process that
    runs the exported artifact must `import jaxsearch` (it registers the CPU
    custom call)."""
    check = jax.export.DisabledSafetyCheck.custom_call
    return [check(_cpu.TARGET_NAME), check(_cpu.CUMSUM_TARGET_NAME),
            check("__gpu$xla.gpu.triton")]
