"""The needles' order, decided in one place: what a call's promise
(`sorted_v`) asks of the kernels, and, for a call that promises nothing, how
the jax side tests the needles before it picks a kernel.

The orders: "any" (binary search), "sorted" (the caller promised sorted
needles: merge) and "check" (test them, then merge when sorted). The CPU
kernels take "check" themselves (each part of the needles is checked while
it is merged, cpu_ext/_cpu_ext.pyx); the GPU kernels take "sorted" or "any",
as `by_order` decides.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import pallas_kernels as _pk

ORDERS = ("any", "sorted", "check")
_ORDER_OF_PROMISE = {None: "check", True: "sorted", False: "any"}
_PROMISE_OF_ORDER = {order: promise for promise, order in _ORDER_OF_PROMISE.items()}


def check_order_flag(name: str, flag: object) -> None:
    """TypeError unless `flag` (a sortedness promise) is True, False or None."""
    if flag is not None and not isinstance(flag, (bool, np.bool_)):
        raise TypeError(f"{name} must be True, False or None, got {flag!r}")


def order_of(name: str, sorted_v: bool | None) -> str:
    """The order a promise `sorted_v` (argument `name`) asks for: "check"
    for None, "sorted" for True, "any" for False; TypeError for anything
    else."""
    check_order_flag(name, sorted_v)
    return _ORDER_OF_PROMISE[None if sorted_v is None else bool(sorted_v)]


def promise_of(order: str) -> bool | None:
    """The `sorted_v` that asks for `order` (the inverse of `order_of`)."""
    return _PROMISE_OF_ORDER[order]


def rows_sorted(v: jax.Array) -> jax.Array:
    """Whether every row of `v` (its last dimension) is sorted in the
    searchsorted order (NaN last, -0.0 == 0.0): one boolean, by one device
    reduction."""
    return jnp.all(jax.vmap(_pk.is_sorted)(v.reshape(-1, v.shape[-1])))


def by_order(order: str, v: jax.Array, run: Callable[[str], jax.Array]) -> jax.Array:
    """`run("sorted")` or `run("any")` for the needles `v`, as `order` says:
    "check" tests v's rows and picks one with lax.cond.

    One test for the whole batch (of this device's rows, when partitioned): a
    batched predicate would turn lax.cond into a select that runs both.
    """
    if order != "check":
        return run(order)
    return lax.cond(rows_sorted(v), lambda: run("sorted"), lambda: run("any"))
