"""The searchsorted primitive: one lowering rule per platform, a batching
rule, a zero derivative, and a partitioning rule for arrays sharded over
several devices (in `partitioning`).

`searchsorted_p.bind(a, v, needle_ndim=k, ...)` takes `a` of shape
(*batch, n) and `v` of shape (*batch, *needles) with k = len(needles), whose
batch dimensions broadcast, and gives (*batch, *needles) insertion indices:
each batch row of `v`, flattened, is searched in the same row of `a`. `vmap`
goes through its batching rule: an unbatched operand gains a size-1 batch
dimension (a reshape, never a copy) that the kernels broadcast. The output
is integer: its derivative is zero (float0 tangents), as jnp's. Called
outside jit, it runs through jax's own dispatch, which compiles it once per
shapes and parameters.

The body of the search, `search_local`, flattens each row's needles (a
reshape without a copy) and binds `rows.rows_p`, whose lowering runs the
implementation `rows.implementation_for` names for the platform.

`partitioned_p` is the same search for programs that may run on several
devices: it lowers to a `jax.experimental.custom_partitioning` call whose
partition rule (`partitioning.partition`) tells XLA how to split the work
when `a` or `v` is sharded, so that each device runs `_local` on its own
pieces. `bind_search` binds it where jax knows the devices when it lowers
(custom_partitioning needs them) and there are several; an export and a
lowering for several platforms lower its body directly, like
`searchsorted_p`.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import mlir

from ..pallas_kernels import BACKENDS, compute_capability
from ..tuning import CpuConfig
from . import cpu, jax_private, partitioning, rows, rules

searchsorted_p = Primitive("jaxsearch_searchsorted")
# The same search, lowered to a custom_partitioning call (see the docstring):
# bound wherever the search may run on several devices that are known.
partitioned_p = Primitive("jaxsearch_searchsorted_partitioned")


def bind_search(a: jax.Array, v: jax.Array, *, side: str, order: str, out_dtype: np.dtype,
                 cpu_kernel: str, cpu_threads: int, cpu_min_parallel: int,
                 cpu_bucket_min_bytes: int, cpu_table_check_ratio: float | None = None,
                 cpu_bucket_keys_per_needle: float = CpuConfig.bucket_keys_per_needle,
                 cpu_count_keys: int = CpuConfig.count_keys,
                 cpu_short_row_needles: int = CpuConfig.short_row_needles,
                 needle_ndim: int | None = None,
                 implementation: str | None = None, portable: bool = False) -> jax.Array:
    """Binds the primitive.

    Args:
      a: keys, shape (*batch, n): sorted for order "sorted"; for the
        others any, answered as jnp's default method answers.
      v: needles of a's dtype, shape (*batch, *needles); `batch` has as many
        dimensions as a's, and the two broadcast.
      side: "left" or "right".
      order: "any", "sorted" (the caller promises that each batch row of
        needles, flattened, is sorted) or "check" (see `order`).
      out_dtype: int32 or int64.
      cpu_kernel: the CPU kernel for sorted needles ("merge", "runs", "bisect").
      cpu_threads: at most this many threads for the CPU kernels.
      cpu_min_parallel: the fewest needles the CPU kernels give one thread
        (`CpuConfig.min_parallel`).
      cpu_bucket_min_bytes: the bytes of `a` from which the CPU kernel may
        search needles in any order by buckets (`CpuConfig.bucket_min_bytes`).
      cpu_table_check_ratio: the keys per needle up to which the CPU kernel
        searches needles in any order by their row's bin table where its
        gathers serve (`CpuConfig.table_check_ratio`; None: its own rule).
      cpu_bucket_keys_per_needle: the keys per needle up to which the CPU
        kernel may search needles in any order by buckets
        (`CpuConfig.bucket_keys_per_needle`).
      cpu_count_keys: the most keys of a row whose needles in any order the
        CPU kernel counts (`CpuConfig.count_keys`).
      cpu_short_row_needles: rows of fewer needles than this, two or more,
        are searched across rows by the CPU kernel
        (`CpuConfig.short_row_needles`).
      needle_ndim: len(needles); None means v.ndim - a.ndim + 1.
      implementation: None (by platform, `rows.implementation_for`), or a GPU
        implementation asked for by name: its real kernels where the search
        lowers for cuda or rocm, its interpreter where it lowers for any
        other platform.
      portable: lower to jnp's own search when lowering for `jax.export`, so
        that the artifact needs no jaxsearch (what the patch binds: the
        caller did not ask for jaxsearch by name).

    Returns:
      Insertion indices of shape (*broadcast batch, *needles).
    """
    if needle_ndim is None:
        needle_ndim = np.ndim(v) - np.ndim(a) + 1
    params = dict(side=side, order=order, out_dtype=np.dtype(out_dtype), cpu_kernel=cpu_kernel,
                  cpu_threads=cpu_threads, cpu_min_parallel=cpu_min_parallel,
                  cpu_bucket_min_bytes=int(cpu_bucket_min_bytes),
                  cpu_table_check_ratio=cpu_table_check_ratio,
                  cpu_bucket_keys_per_needle=float(cpu_bucket_keys_per_needle),
                  cpu_count_keys=int(cpu_count_keys),
                  cpu_short_row_needles=int(cpu_short_row_needles),
                  needle_ndim=int(needle_ndim), implementation=implementation,
                  portable=bool(portable))
    if implementation in BACKENDS and BACKENDS[implementation].interpreted_at_trace_time \
            and compute_capability() is None and jax.default_backend() == "cpu":
        # Its interpreter has ordered effects, which a lowering rule cannot
        # take: where no GPU is being compiled for, interpret it here, where
        # no primitive carries the zero derivative.
        a, v = lax.stop_gradient(a), lax.stop_gradient(v)
        return search_local(a, v, **params,
                            search_rows=functools.partial(rows.search_rows, platform=None))
    primitive = partitioned_p if partitioning.may_partition() else searchsorted_p
    return primitive.bind(a, v, **params)


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
    sharding = partitioning.explicit_out_sharding(a, v, needle_ndim)
    if sharding is None:
        return jax_private.varying_as(jax.core.ShapedArray(shape, out_dtype), a, v)
    return jax_private.varying_as(jax.core.ShapedArray(shape, out_dtype, sharding=sharding),
                                  a, v)


def search_local(a, v, *, needle_ndim, search_rows=rows.rows_p.bind, **params):
    """The search of each batch row's needles, flattened, on one device's
    pieces (or on the whole arrays), by `search_rows`."""
    batch_v, needles = _split_v(v.shape, needle_ndim)
    out_batch = _out_batch(a.shape, v.shape, needle_ndim)
    found = search_rows(a, v.reshape(batch_v + (math.prod(needles),)), **params)
    return found.reshape(out_batch + needles)


# ------------------------------------------------------------- lowering


def _lower_partitioned(ctx, a, v, **params):
    if len(jax_private.lowering_platforms(ctx)) > 1 or jax_private.lowers_for_export(ctx) or \
            jax_private.manual_axes(ctx):
        # jax.export: the partitioning call refers to this process's Python
        # callbacks and cannot be serialized. Inside a shard_map the body
        # gets each device's pieces already (jax's own rule covers only a
        # shard_map over every axis). The body lowers directly.
        fn = functools.partial(search_local, **params)
    else:
        fn = partitioning.partitioned(search_local, tuple(sorted(params.items())))
    return _lower_unsharded(fn, ctx, a, v)


def _lower_direct(ctx, a, v, **params):
    return _lower_unsharded(functools.partial(search_local, **params), ctx, a, v)


def _lower_unsharded(fn, ctx, *args):
    """Lowers fn(*args) traced without the operands' shardings: in explicit
    sharding mode they would make jax refuse the reshapes in `search_local`, which
    only ever flatten one device's piece (or the whole array)."""
    def strip(aval):
        return jax.core.ShapedArray(aval.shape, aval.dtype, aval.weak_type)

    ctx = ctx.replace(avals_in=[strip(x) for x in ctx.avals_in],
                      avals_out=[strip(x) for x in ctx.avals_out])
    return mlir.lower_fun(fn, multiple_results=False)(ctx, *args)


for _p in (searchsorted_p, partitioned_p):
    rules.define_rules(_p, _abstract_eval)
mlir.register_lowering(searchsorted_p, _lower_direct)
mlir.register_lowering(partitioned_p, _lower_partitioned)
# custom_partitioning needs the devices when it lowers (jit otherwise lowers
# without them); jax's own custom_partitioning_p is registered the same way.
jax_private.prim_requires_devices_during_lowering.add(partitioned_p)


def export_disabled_checks() -> list:
    """The custom calls jaxsearch lowers to, as `jax.export` safety checks to
    disable: `jax.export.export(f, platforms=[...],
    disabled_checks=jaxsearch.export_disabled_checks())`. The process that
    runs the exported artifact must `import jaxsearch` (it registers the CPU
    custom call)."""
    check = jax.export.DisabledSafetyCheck.custom_call
    return [check(cpu.TARGET_NAME), check(cpu.CUMSUM_TARGET_NAME),
            check("__gpu$xla.gpu.triton")]
