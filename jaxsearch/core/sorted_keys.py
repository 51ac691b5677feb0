"""Keys sorted as `jnp.sort` sorts them, for the searches that count.

jnp's "sort" and "compare_all" methods count the keys before each needle
whatever the order of `a`: their answers are those of a search of `a`
sorted. `sorted_keys(a)` gives that sorted `a` (each row of the last axis),
by a primitive with one lowering per platform:

* cpu: the extension's key sort (`cpu_ext/key_sort.pxd`): a copy of each
  row, its descents mended by insertion (one pass where the row is sorted
  but for a few small descents, as a rounded running sum is), or
  merge-sorted where mending would cost more;
* anywhere else, and in a `jax.export` artifact: `jnp.sort`, skipped where
  every row is sorted already.

Under `vmap` every row is mended on its own: no row pays for another's
sort (a `lax.cond` on a batched predicate runs both branches).

The sorted keys only feed the search, whose answers are integers: the
primitive takes no tangents (`sorted_keys` stops them), and rows whose only
difference is the order of -0.0 and 0.0, or which NaN comes where, search
alike.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

from ..keys import WIDENED_TO_FLOAT32
from . import cpu, jax_private, order

sorted_keys_p = Primitive("jaxsearch_sorted_keys")
# Keys in a call, below which one thread sorts them all.
_MIN_PARALLEL = 1 << 15


def sorted_keys(a: jax.Array) -> jax.Array:
    """`a` (*batch, n) with each row sorted as `jnp.sort` sorts it (NaN
    last), up to the order of equal keys: -0.0 and 0.0, and NaNs, may
    come in another order. Its derivative is not taken (see the module's
    docstring)."""
    return sorted_keys_p.bind(lax.stop_gradient(a))


def _sort_unless_sorted(a):
    return lax.cond(order.every_row_sorted(a), lambda a: a, lambda a: jnp.sort(a, axis=-1), a)


def _cpu(a):
    if a.dtype in WIDENED_TO_FLOAT32:
        return _cpu(a.astype(jnp.float32)).astype(a.dtype)
    rows = math.prod(a.shape[:-1])
    threads = 1 if a.size < _MIN_PARALLEL else min(rows, cpu.available_cores(), cpu.MAX_THREADS)
    return cpu.sort_keys(a, threads=threads)


def _lower_cpu(ctx, a):
    fn = _sort_unless_sorted if jax_private.lowers_for_export(ctx) else _cpu
    return mlir.lower_fun(fn, multiple_results=False)(ctx, a)


def _batch(args, dims):
    (a,), (d,) = args, dims
    return sorted_keys_p.bind(jnp.moveaxis(a, d, 0)), 0


sorted_keys_p.def_impl(lambda a: jax_private.apply_primitive(sorted_keys_p, a))
sorted_keys_p.def_abstract_eval(lambda a: a)
batching.primitive_batchers[sorted_keys_p] = _batch
mlir.register_lowering(sorted_keys_p, mlir.lower_fun(_sort_unless_sorted, multiple_results=False))
if cpu.AVAILABLE:
    mlir.register_lowering(sorted_keys_p, _lower_cpu, platform="cpu")
