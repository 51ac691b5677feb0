"""The argument checks every public function shares, as jnp words them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..keys import SIDES
from . import order


def check_side_and_order(side: str, sorted_v: bool | None) -> str:
    """Checks `side` and `sorted_v`; returns the needles' order for the
    kernels (`order.order_of`)."""
    if side not in SIDES:
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    return order.order_of("sorted_v", sorted_v)


def check_arraylike(caller: str, name: str, x: object) -> None:
    """TypeError, as jnp raises, unless `x` is an array or a scalar of a
    numeric dtype JAX takes; the message names `caller` and its argument."""
    if isinstance(x, (jax.Array, bool, int, float, complex)) or hasattr(x, "__jax_array__"):
        return
    if isinstance(x, (np.ndarray, np.generic)):
        try:
            jnp.result_type(x)
            return
        except (TypeError, ValueError):  # strings, objects, datetimes
            pass
    dtype = getattr(x, "dtype", None)
    raise TypeError(f"{caller}: {name} must be a numeric array or scalar, got "
                    f"{type(x).__name__}{'' if dtype is None else f' of dtype {dtype}'}")


def promote_inexact(*args: jax.typing.ArrayLike) -> list[jax.Array]:
    """The arguments in their common dtype, made inexact as jnp makes it:
    integers and bool become float32, 64-bit integers float64."""
    dtype = jnp.result_type(*args)
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = np.dtype(np.float64 if dtype.itemsize == 8 else np.float32)
    return [jnp.asarray(a, dtype) for a in args]
