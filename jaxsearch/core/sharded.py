"""searchsorted over a device mesh, spelled out as one shard_map.

Because `a` is sorted, splitting it into contiguous pieces splits every
answer into a sum: the number of a-elements before a needle is the sum over
the pieces of the number in each piece. So with `a` sharded, each device
searches its piece and one `psum` of the counts gives the global answer, and
`a` is never gathered. With `v` sharded, each device answers its own needles
and nothing is communicated at all.

`jaxsearch.searchsorted` does the same by itself for sharded inputs under
jit (its primitive's partitioning rule, in `partitioning`); this form names the
mesh axes explicitly, for code that wants the split written out.
"""

from __future__ import annotations

import jax
import numpy as np
from jax import lax
from jax.sharding import Mesh, PartitionSpec

from ..keys import index_dtype
from .api import Side, searchsorted


def sharded_searchsorted(
    a: jax.Array,
    v: jax.Array,
    side: Side = "left",
    *,
    mesh: Mesh,
    a_axis: str | tuple[str, ...] | None = None,
    v_axis: str | tuple[str, ...] | None = None,
    sorted_v: bool | None = None,
) -> jax.Array:
    """`jnp.searchsorted(a, v, side)` with `a` and/or `v` split over a mesh.

    Args:
      a: 1-D sorted array (NaN last), split along `a_axis` (or replicated).
      v: needles; their first dimension is split along `v_axis` (or
        replicated).
      side: "left" or "right".
      mesh: the device mesh.
      a_axis: mesh axis (or axes) that split `a` into contiguous pieces;
        None keeps `a` whole on every device.
      v_axis: mesh axis (or axes) that split `v`; None keeps `v` whole on
        every device. It must not share an axis with `a_axis`.
      sorted_v: as in :func:`jaxsearch.searchsorted`, for each device's needles.

    Returns:
      The insertion indices, shape `v.shape`, split like `v`. Values and dtype
      equal `jnp.searchsorted(a, v, side)`.

    The whole computation is one `shard_map`: per device one local search,
    plus one `psum` over `a_axis` when `a` is split; no all-gather. It runs
    the same way on a multi-host mesh under `jax.distributed`: call it in
    every process with the global arrays' shardings. The plain
    :func:`jaxsearch.searchsorted` under jit partitions sharded inputs the
    same way without being told the axes.
    """
    a_axes = _axes(a_axis)
    v_axes = _axes(v_axis)
    if set(a_axes) & set(v_axes):
        raise ValueError(f"a_axis {a_axis!r} and v_axis {v_axis!r} must not share mesh axes")
    if np.ndim(a) != 1:
        raise ValueError(f"a must be 1-dimensional, got shape {np.shape(a)}")
    if np.ndim(v) == 0 and v_axes:
        raise ValueError("a 0-d v cannot be split along v_axis")
    n = a.shape[0]
    out_dtype = index_dtype(n)

    def local(a_piece, v_piece):
        counts = searchsorted(a_piece, v_piece, side, sorted_v=sorted_v).astype(out_dtype)
        return lax.psum(counts, a_axes) if a_axes else counts

    v_spec = PartitionSpec(v_axis) if v_axes else PartitionSpec()
    # check_vma off: the custom searchsorted primitive has no replication rule.
    return jax.shard_map(local, mesh=mesh, in_specs=(PartitionSpec(a_axis), v_spec),
                         out_specs=v_spec, check_vma=False)(a, v)


def _axes(axis: str | tuple[str, ...] | None) -> tuple[str, ...]:
    if axis is None:
        return ()
    return tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
