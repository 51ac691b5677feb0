"""The searchsorted primitive: one lowering rule per platform, a batching
rule, and a partitioning rule for arrays sharded over several devices.

`searchsorted_p.bind(a, v, needle_ndim=k, ...)` takes `a` of shape
(*batch, n) and `v` of shape (*batch, *needles) with k = len(needles), whose
batch dimensions broadcast, and gives (*batch, *needles) insertion indices:
each batch row of `v`, flattened, is searched in the same row of `a`. `vmap`
goes through its batching rule: an unbatched operand gains a size-1 batch
dimension (a reshape, never a copy) that the kernels broadcast.

The body of the search, `_local`, flattens each row's needles (a reshape
without a copy) and binds `_rows_p`, whose lowering differs by platform:
cpu to the Cython kernels through the XLA FFI, cuda and rocm to the GPU
kernels (Pallas or native Triton, see `_gpu.choose`), anything else to
`jnp.searchsorted`. Being primitives rather than a `lax.platform_dependent`,
they export for several platforms in one artifact.

`partitioned_p` is the same search for programs that may run on several
devices: it lowers to a `jax.experimental.custom_partitioning` call whose
partition rule (`_partition`) tells XLA how to split the work when `a` or
`v` is sharded, so that each device runs `_local` on its own pieces:

* a sharded batch or needle dimension of `v` stays sharded: each device
  answers its own needles, with no communication; the output is split like
  `v`;
* a sharded `a` (its last dimension) is cut into contiguous pieces: since
  `a` is sorted, the count of a-elements before a needle is the sum over the
  pieces of the count within each piece, so each device searches its piece
  and one all-reduce (`psum`) of the counts gives the answer; `a` is never
  gathered.

`searchsorted` binds `partitioned_p` where jax knows the devices when it
lowers (custom_partitioning needs them) and there are several; an export
and a lowering for several platforms lower its body directly, like
`searchsorted_p`.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.custom_partitioning import custom_partitioning
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir
from jax.sharding import NamedSharding, PartitionSpec

# Not public API, alike in jax 0.10 to 0.12: jit lowers a primitive with the
# devices only when asked, the concrete mesh in force, and a sharding without
# a mesh.
from jax._src import dispatch as _dispatch
from jax._src import mesh as _mesh_lib
from jax._src.sharding_impls import GSPMDSharding

from . import _cpu, _gpu

searchsorted_p = Primitive("jaxsearch_searchsorted")
# The same search, lowered to a custom_partitioning call (see the docstring):
# bound wherever the search may run on several devices that are known.
partitioned_p = Primitive("jaxsearch_searchsorted_partitioned")
# The per-device search of flattened needle rows: (*batch, n), (*batch, m).
_rows_p = Primitive("jaxsearch_searchsorted_rows")


def searchsorted(a: jax.Array, v: jax.Array, *, side: str, order: str, out_dtype: np.dtype,
                 cpu_kernel: str, cpu_threads: int, cpu_grain: int,
                 needle_ndim: int | None = None, implementation: str | None = None) -> jax.Array:
    """Binds the primitive.

    Args:
      a: sorted keys, shape (*batch, n).
      v: needles of a's dtype, shape (*batch, *needles); `batch` has as many
        dimensions as a's, and the two broadcast.
      side: "left" or "right".
      order: "any", "sorted" (the caller promises that each batch row of
        needles, flattened, is sorted) or "check".
      out_dtype: int32 or int64.
      cpu_kernel: the CPU kernel for sorted needles ("merge", "runs", "bisect").
      cpu_threads: at most this many threads for the CPU kernels.
      cpu_grain: the fewest needles the CPU kernels give one thread.
      needle_ndim: len(needles); None means v.ndim - a.ndim + 1.
      implementation: None (by platform), or a GPU implementation asked for
        by name: its real kernels where the search lowers for cuda or rocm,
        its interpreter where it lowers for any other platform.

    Returns:
      Insertion indices of shape (*broadcast batch, *needles).
    """
    if needle_ndim is None:
        needle_ndim = np.ndim(v) - np.ndim(a) + 1
    params = dict(side=side, order=order, out_dtype=np.dtype(out_dtype), cpu_kernel=cpu_kernel,
                  cpu_threads=cpu_threads, cpu_grain=cpu_grain, needle_ndim=int(needle_ndim),
                  implementation=implementation)
    if implementation in _gpu.TRACE_TIME_INTERPRETERS and _gpu.compute_capability() is None \
            and jax.default_backend() == "cpu":
        # Its interpreter has ordered effects, which a lowering rule cannot
        # take: where no GPU is being compiled for, interpret it here.
        return _local(a, v, **params, rows=_host_rows)
    primitive = partitioned_p if _may_partition() else searchsorted_p
    return primitive.bind(a, v, **params)


def _may_partition() -> bool:
    """Whether a search traced now may run split over several devices that
    jax will know when it lowers it: custom_partitioning needs them, and jax
    refuses it in a lowering for an AbstractMesh alone ("AbstractMesh cannot
    be used when jaxpr contains primitives that require devices")."""
    concrete = _mesh_lib.get_concrete_mesh()
    if not concrete.empty:  # jax.set_mesh: its devices (maybe an AOT topology's)
        return concrete.size > 1
    if not jax.sharding.get_abstract_mesh().empty:  # an abstract mesh only
        return False
    return jax.device_count() > 1


def _impl(primitive, a, v, **params):
    return jax.jit(functools.partial(primitive.bind, **params))(a, v)


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
    sharding = _explicit_out_sharding(a, v, needle_ndim)
    if sharding is None:
        return jax.core.ShapedArray(shape, out_dtype)
    return jax.core.ShapedArray(shape, out_dtype, sharding=sharding)


def _explicit_out_sharding(a, v, needle_ndim):
    """The output's sharding in explicit sharding mode (sharding in types),
    else None: as `_partition` splits it (like `v`; a batch dimension that
    `v` broadcasts like `a`'s; never along an axis that splits a's keys,
    whose counts are summed over it)."""
    meshes = {x.sharding.mesh for x in (a, v) if not x.sharding.mesh.empty}
    if len(meshes) != 1:
        return None
    mesh, = meshes
    if not mesh.explicit_axes:
        return None
    explicit = set(mesh.explicit_axes)
    dims = _result_axes(a.shape, v.shape, needle_ndim, _spec_axes(a.sharding.spec, a.ndim),
                        _spec_axes(v.sharding.spec, v.ndim))[0]
    return NamedSharding(mesh, PartitionSpec(
        *(_spec_entry(tuple(ax for ax in d if ax in explicit)) for d in dims)))


def _batch(primitive, args, dims, **params):
    # Batch dimension first; an unbatched operand gets a size-1 one.
    a, v = (jnp.expand_dims(x, 0) if d is None else jnp.moveaxis(x, d, 0)
            for x, d in zip(args, dims))
    return primitive.bind(a, v, **params), 0


# ------------------------------------------------------------- partitioning


def _spec_axes(spec, ndim):
    """A PartitionSpec as one tuple of mesh axis names per dimension."""
    entries = tuple(spec) + (None,) * (ndim - len(spec))
    return [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in entries]


def _spec_entry(axes):
    return None if not axes else axes[0] if len(axes) == 1 else tuple(axes)


def _result_axes(a_shape, v_shape, needle_ndim, a_spec, v_spec):
    """How the partitioned search splits its operands and result.

    Args:
      a_shape, v_shape: the global shapes.
      a_spec, v_spec: per dimension, the mesh axes that split it now.

    Returns:
      (out, keys): per output dimension the mesh axes that split it, and the
      axes that split a's keys (its last dimension) into contiguous pieces.
      `v` keeps its own axes wherever it is not broadcast; a batch dimension
      that `v` broadcasts (size 1) or leaves whole takes `a`'s axes; the keys
      keep the axes of `a`'s split that nothing else uses (a mesh axis splits
      one dimension at most), so when `v` and `a` are split along the same
      axis, `a` is gathered along it, as jnp.searchsorted does.
    """
    nb = len(a_shape) - 1
    batch = jnp.broadcast_shapes(tuple(a_shape[:-1]), tuple(v_shape[:nb]))
    out = [tuple(axes) if i >= nb or v_shape[i] == batch[i] else ()
           for i, axes in enumerate(v_spec)]
    used = {ax for axes in out for ax in axes}
    for i in range(nb):
        if not out[i] and a_shape[i] == batch[i] and batch[i] > 1:
            out[i] = tuple(ax for ax in a_spec[i] if ax not in used)
            used.update(out[i])
    keys = tuple(ax for ax in a_spec[-1] if ax not in used)
    return out, keys


def _local(a, v, *, needle_ndim, rows=_rows_p.bind, **params):
    """The search of each batch row's needles, flattened, on one device's
    pieces (or on the whole arrays), by `rows`."""
    batch_v, needles = _split_v(v.shape, needle_ndim)
    out_batch = _out_batch(a.shape, v.shape, needle_ndim)
    rows = rows(a, v.reshape(batch_v + (math.prod(needles),)), **params)
    return rows.reshape(out_batch + needles)


def _no_explicit_axes():
    """The abstract mesh in force, with its Explicit axes made Auto."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or not mesh.explicit_axes:
        return contextlib.nullcontext()
    return jax.sharding.use_abstract_mesh(mesh.update_axis_types(
        {axis: jax.sharding.AxisType.Auto for axis in mesh.explicit_axes}))


def _partition(params, mesh, arg_shapes, result_shape):
    """custom_partitioning's partition callback: the shardings the search
    runs with, and the per-device function."""
    a_info, v_info = arg_shapes
    needle_ndim = params["needle_ndim"]
    a_shape, v_shape = a_info.shape, v_info.shape
    local = functools.partial(_local, **params)
    if not all(isinstance(x.sharding, NamedSharding) for x in arg_shapes):
        # No mesh to name axes by (jax gave device lists, not a mesh): search
        # whole arrays on every device, as XLA does for any custom call.
        replicated = GSPMDSharding.get_replicated(a_info.sharding._device_assignment)
        return mesh, local, replicated, (replicated, replicated)
    mesh = a_info.sharding.mesh
    out, keys = _result_axes(a_shape, v_shape, needle_ndim,
                             _spec_axes(a_info.sharding.spec, len(a_shape)),
                             _spec_axes(v_info.sharding.spec, len(v_shape)))
    n, pieces = a_shape[-1], math.prod(mesh.shape[ax] for ax in keys)
    nb = len(a_shape) - 1
    a_axes = [out[i] if a_shape[i] > 1 else () for i in range(nb)] + [keys]
    v_axes = [out[i] if v_shape[i] > 1 else () for i in range(nb)] + out[nb:]
    # Needle dimensions XLA splits unevenly come padded with unspecified
    # values: a promise that the needles are sorted would not hold there.
    uneven = any(size % math.prod(mesh.shape[ax] for ax in axes)
                 for size, axes in zip(v_shape, v_axes))
    if uneven and params["order"] == "sorted":
        local = functools.partial(_local, **{**params, "order": "check"})

    def per_device(a, v):
        # Traced when XLA compiles, in the caller's mesh context: under
        # jax.set_mesh with explicit axes, jax 0.12 would put sharding
        # annotations into psum's reduction, which XLA rejects. The pieces
        # are plain per-device arrays: trace them with Auto axes instead (the
        # mesh stays, and with it an abstract device AOT compiles may name).
        with _no_explicit_axes():
            if not keys:
                return local(a, v)
            if n % pieces == 0:
                return lax.psum(local(a, v), keys)
            # Unequal pieces: XLA pads each to the longest with unspecified
            # values (a piece may be all padding). Repeat the piece's last
            # key over its padding, so that it stays sorted, and count no
            # more than its own keys.
            size, dtype = a.shape[-1], params["out_dtype"]
            own = jnp.clip(n - lax.axis_index(keys).astype(dtype) * size, 0, size).astype(dtype)
            last = lax.dynamic_index_in_dim(a, jnp.maximum(own - 1, 0), axis=a.ndim - 1)
            a = jnp.where(lax.broadcasted_iota(dtype, a.shape, a.ndim - 1) < own, a, last)
            return lax.psum(jnp.minimum(local(a, v), own), keys)

    def named(axes):
        return NamedSharding(mesh, PartitionSpec(*map(_spec_entry, axes)))

    return mesh, per_device, named(out), (named(a_axes), named(v_axes))


def _sharding_rule(params, mesh, operand_types, result_types):
    """Shardy's rule for the partitioning call: batch and needle dimensions
    pass through from `v` (and `a`) to the output; a's keys are a reduction
    factor (split, the output is summed over them)."""
    a_shape = tuple(operand_types[0].shape)
    v_shape = tuple(operand_types[1].shape)
    nb = len(a_shape) - 1
    out_shape = tuple(result_types[0].shape)
    a_dims, v_dims, out_dims = [], [], []
    for i in range(nb):
        b = f"b{i}"
        out_dims.append(b)
        for dims, shape, own in ((a_dims, a_shape, f"a{i}"), (v_dims, v_shape, f"v{i}")):
            if shape[i] == out_shape[i]:
                dims.append(b)
            else:  # broadcast: a size-1 dimension of its own
                dims.append(own)
    needles = [f"m{j}" for j in range(len(v_shape) - nb)]
    rule = (f"{' '.join(a_dims + ['n'])}, {' '.join(v_dims + needles)} -> "
            f"{' '.join(out_dims + needles)}")
    return rule, dict(reduction_factors=("n",))


@functools.cache
def _partitioned(params: tuple) -> Callable:
    params = dict(params)

    def body(a, v):  # positional only: custom_partitioning binds by position
        return _local(a, v, **params)

    fn = custom_partitioning(body)
    fn.def_partition(
        partition=functools.partial(_partition, params),
        infer_sharding_from_operands=functools.partial(_infer_sharding, params),
        sharding_rule=functools.partial(_sharding_rule, params))
    return fn


def _infer_sharding(params, mesh, arg_shapes, result_shape):
    """The output's sharding for GSPMD (jax_use_shardy_partitioner=False)."""
    return _partition(params, mesh, arg_shapes, result_shape)[2]


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
        fn = _partitioned(tuple(sorted(params.items())))
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


def _xla_rows(a, v, *, side, out_dtype, **_):
    return _map_rows(lambda a, v: jnp.searchsorted(a, v, side=side).astype(out_dtype), a, v)


def _host_rows(a, v, *, implementation, **params):
    """Rows on a platform without GPU kernels (cpu, TPU, ...): a GPU
    implementation asked for by name runs in its interpreter; otherwise jnp."""
    if implementation in _gpu.GPU_IMPLEMENTATIONS:
        return _gpu_rows(a, v, implementation=implementation, interpret=True, **params)
    return _xla_rows(a, v, **params)


def _cpu_rows(a, v, *, side, order, out_dtype, cpu_kernel, cpu_threads, cpu_grain,
              implementation):
    if implementation in _gpu.GPU_IMPLEMENTATIONS:
        return _host_rows(a, v, side=side, order=order, out_dtype=out_dtype,
                          implementation=implementation)
    if a.dtype not in _cpu.NATIVE_KEY_DTYPES:  # float16, bfloat16: exact in float32
        a, v = a.astype(jnp.float32), v.astype(jnp.float32)
    return _cpu.search(a, v, side=side, order=order, kernel=cpu_kernel, out_dtype=out_dtype,
                       threads=cpu_threads, grain=cpu_grain)


def _gpu_rows(a, v, *, side, order, out_dtype, implementation=None, interpret=False, **_):
    """Rows by the GPU kernels: `implementation`'s (with `interpret`, in its
    interpreter), or when None the one `_gpu.choose` picks, else jnp."""
    implementation = implementation or _gpu.choose(a.shape[-1], v.shape[-1], a.dtype)
    if implementation is None:
        return _xla_rows(a, v, side=side, out_dtype=out_dtype)

    def run(order):
        return _map_rows(functools.partial(_gpu.search, side=side, order=order,
                                           out_dtype=out_dtype, implementation=implementation,
                                           interpret=interpret),
                         a, v)

    if order != "check":
        return run(order)
    # One check for the whole batch (of this device's rows and needles, when
    # partitioned: `_partition` runs this on each device's pieces): a batched
    # predicate would turn lax.cond into a select that runs both kernels.
    all_sorted = jnp.all(jax.vmap(_gpu.is_sorted)(v.reshape(-1, v.shape[-1])))
    return jax.lax.cond(all_sorted, lambda: run("sorted"), lambda: run("any"))


def _rows_abstract_eval(a, v, *, out_dtype, **_):
    batch = jnp.broadcast_shapes(a.shape[:-1], v.shape[:-1])
    return jax.core.ShapedArray(batch + v.shape[-1:], out_dtype)


for _p in (searchsorted_p, partitioned_p):
    _p.def_impl(functools.partial(_impl, _p))
    _p.def_abstract_eval(_abstract_eval)
    batching.primitive_batchers[_p] = functools.partial(_batch, _p)
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
    for platform in ("cuda", "rocm"):
        mlir.register_lowering(primitive, mlir.lower_fun(gpu, multiple_results=False),
                               platform=platform)


register_lowerings(_rows_p, default=_host_rows, cpu=_cpu_rows, gpu=_gpu_rows)


def export_disabled_checks() -> list:
    """The custom calls jaxsearch lowers to, as `jax.export` safety checks to
    disable: `jax.export.export(f, platforms=[...],
    disabled_checks=jaxsearch.export_disabled_checks())`. The process that
    runs the exported artifact must `import jaxsearch` (it registers the CPU
    custom call)."""
    check = jax.export.DisabledSafetyCheck.custom_call
    return [check(_cpu.TARGET_NAME), check(_cpu.CUMSUM_TARGET_NAME),
            check("__gpu$xla.gpu.triton")]
