"""How the search splits over several devices: the rules of the
`custom_partitioning` call that `primitive.partitioned_p` lowers to.

The per-device search, `local(a, v, **params)`, comes from the primitive
(`primitive.search_local`); the partition rule decides which pieces each device
runs it on:

* a sharded batch or needle dimension of `v` stays sharded: each device
  answers its own needles, with no communication; the output is split like
  `v`;
* a sharded `a` (its last dimension) is cut into contiguous pieces: since
  `a` is sorted, the count of a-elements before a needle is the sum over the
  pieces of the count within each piece, so each device searches its piece
  and one all-reduce (`psum`) of the counts gives the answer; `a` is never
  gathered.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import NamedSharding, PartitionSpec

from . import jax_private


def may_partition() -> bool:
    """Whether a search traced now may run split over several devices that
    jax will know when it lowers it: custom_partitioning needs them, and jax
    refuses it in a lowering for an AbstractMesh alone ("AbstractMesh cannot
    be used when jaxpr contains primitives that require devices")."""
    concrete = jax_private.get_concrete_mesh()
    if not concrete.empty:  # jax.set_mesh: its devices (maybe an AOT topology's)
        return concrete.size > 1
    if not jax.sharding.get_abstract_mesh().empty:  # an abstract mesh only
        return False
    return jax.device_count() > 1


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


def explicit_out_sharding(a, v, needle_ndim):
    """The output's sharding in explicit sharding mode (sharding in types),
    else None: as `partition` splits it (like `v`; a batch dimension that
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


def _no_explicit_axes():
    """The abstract mesh in force, with its Explicit axes made Auto."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or not mesh.explicit_axes:
        return contextlib.nullcontext()
    return jax.sharding.use_abstract_mesh(mesh.update_axis_types(
        {axis: jax.sharding.AxisType.Auto for axis in mesh.explicit_axes}))


def partition(local: Callable, params, mesh, arg_shapes, result_shape):
    """custom_partitioning's partition callback for the search
    `local(a, v, **params)`: the shardings it runs with, and the per-device
    function."""
    a_info, v_info = arg_shapes
    needle_ndim = params["needle_ndim"]
    a_shape, v_shape = a_info.shape, v_info.shape
    search = functools.partial(local, **params)
    if not all(isinstance(x.sharding, NamedSharding) for x in arg_shapes):
        # No mesh to name axes by (jax gave device lists, not a mesh): search
        # whole arrays on every device, as XLA does for any custom call.
        replicated = jax_private.replicated(a_info.sharding)
        return mesh, search, replicated, (replicated, replicated)
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
        search = functools.partial(local, **{**params, "order": "check"})

    def per_device(a, v):
        # Traced when XLA compiles, in the caller's mesh context: under
        # jax.set_mesh with explicit axes, jax 0.12 would put sharding
        # annotations into psum's reduction, which XLA rejects. The pieces
        # are plain per-device arrays: trace them with Auto axes instead (the
        # mesh stays, and with it an abstract device AOT compiles may name).
        with _no_explicit_axes():
            if not keys:
                return search(a, v)
            if n % pieces == 0:
                return lax.psum(search(a, v), keys)
            # Unequal pieces: XLA pads each to the longest with unspecified
            # values (a piece may be all padding). Repeat the piece's last
            # key over its padding, so that it stays sorted, and count no
            # more than its own keys.
            size, dtype = a.shape[-1], params["out_dtype"]
            own = jnp.clip(n - lax.axis_index(keys).astype(dtype) * size, 0, size).astype(dtype)
            last = lax.dynamic_index_in_dim(a, jnp.maximum(own - 1, 0), axis=a.ndim - 1)
            a = jnp.where(lax.broadcasted_iota(dtype, a.shape, a.ndim - 1) < own, a, last)
            return lax.psum(jnp.minimum(search(a, v), own), keys)

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


def _infer_sharding(local, params, mesh, arg_shapes, result_shape):
    """The output's sharding for GSPMD (jax_use_shardy_partitioner=False)."""
    return partition(local, params, mesh, arg_shapes, result_shape)[2]


@functools.cache
def partitioned(local: Callable, params: tuple) -> Callable:
    """`local(a, v, **dict(params))` as a custom_partitioning function with
    the rules above (one per search, cached: jax keys its lowering by it)."""
    params = dict(params)

    def body(a, v):  # positional only: custom_partitioning binds by position
        return local(a, v, **params)

    fn = custom_partitioning(body)
    fn.def_partition(
        partition=functools.partial(partition, local, params),
        infer_sharding_from_operands=functools.partial(_infer_sharding, local, params),
        sharding_rule=functools.partial(_sharding_rule, params))
    return fn
