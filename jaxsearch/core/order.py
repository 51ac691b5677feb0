"""The needles' order, decided in one place: what a call's promise
(`sorted_v`) asks of the kernels.

The orders: "any" (binary search), "sorted" (the caller promised sorted
needles, and a sorted `a`: merge) and "check" (test them, then merge when
sorted). The CPU kernels take "check" themselves (each row of `a` is checked
once, each part of the needles while it is merged, in the extension); the
GPU binding tests the needles and keys on the device, and its checked kernel
reads the test (`gpu.search_rows`).

`is_sorted` is the same test in jnp, for the functions that choose by an
array's order (the histograms); `sorted_everywhere` the same test as a
predicate that `vmap` leaves unbatched, so that a `lax.cond` on it stays
one branch.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

from . import jax_private

ORDERS = ("any", "sorted", "check")
_ORDER_OF_PROMISE = {None: "check", True: "sorted", False: "any"}
# Rows of the vectorised order check (its rows compare within themselves).
CHECK_ROW = 1024


def check_order_flag(name: str, flag: object) -> None:
    """TypeError unless `flag` (a sortedness promise) is True, False or None.

    It chooses the kernel while the call is traced, so a traced value (an
    argument of a jitted function) cannot stand for it: its message says so
    and how to pass a Python value.
    """
    if isinstance(flag, jax.core.Tracer):
        raise TypeError(f"{name} must be a Python bool or None, not a traced value: it "
                        "chooses the kernel when the call is traced; under jax.jit mark it "
                        f"static (static_argnames=...) or close over it (got {flag})")
    if flag is not None and not isinstance(flag, (bool, np.bool_)):
        raise TypeError(f"{name} must be True, False or None, got {flag!r}")


def order_of(name: str, sorted_v: bool | None) -> str:
    """The order a promise `sorted_v` (argument `name`) asks for: "check"
    for None, "sorted" for True, "any" for False; TypeError for anything
    else."""
    check_order_flag(name, sorted_v)
    return _ORDER_OF_PROMISE[None if sorted_v is None else bool(sorted_v)]


def is_sorted(x: jax.Array) -> jax.Array:
    """Whether the 1-D `x` is ascending as jnp sorts (NaN last, -0.0 equal
    to 0.0): one vectorised pass, in rows (a comparison of two long shifted
    slices runs at half the speed)."""

    def in_order(lo, hi):
        return (lo <= hi) | jnp.isnan(hi)

    n = x.shape[0]
    rows = n // CHECK_ROW
    if rows < 2:
        return jnp.all(in_order(x[:-1], x[1:]))
    body = x[:rows * CHECK_ROW].reshape(rows, CHECK_ROW)
    return (jnp.all(in_order(body[:, :-1], body[:, 1:]))
            & jnp.all(in_order(body[:-1, -1], body[1:, 0]))
            & jnp.all(in_order(x[rows * CHECK_ROW - 1:-1], x[rows * CHECK_ROW:])))


def sorted_everywhere(x: jax.Array) -> jax.Array:
    """`is_sorted(x)` for a 1-D `x`; under `vmap`, whether every row of the
    batch is sorted: one unbatched answer for all rows.

    A `lax.cond` on a batched predicate runs both branches for every row;
    on this one it runs one. It serves a choice between two exact routes
    whose sorted one is valid wherever the answer is True: one row out of
    order sends the whole batch down the other route, never a row down the
    wrong one."""
    return sorted_everywhere_p.bind(lax.stop_gradient(x))


sorted_everywhere_p = Primitive("jaxsearch_sorted_everywhere")


def every_row_sorted(x: jax.Array) -> jax.Array:
    """Whether each row of `x` (its last axis; rows of 0 keys too) is
    sorted as `is_sorted` tests one."""
    return jnp.all(jax.vmap(is_sorted)(x.reshape(math.prod(x.shape[:-1]), x.shape[-1])))


def _batch_sorted_everywhere(args, dims):
    (x,), (d,) = args, dims
    return sorted_everywhere_p.bind(jnp.moveaxis(x, d, 0)), None  # not batched


sorted_everywhere_p.def_impl(lambda x: jax_private.apply_primitive(sorted_everywhere_p, x))
sorted_everywhere_p.def_abstract_eval(
    lambda x: jax_private.varying_as(jax.core.ShapedArray((), np.dtype(bool)), x))
batching.primitive_batchers[sorted_everywhere_p] = _batch_sorted_everywhere
mlir.register_lowering(sorted_everywhere_p,
                       mlir.lower_fun(every_row_sorted, multiple_results=False))
