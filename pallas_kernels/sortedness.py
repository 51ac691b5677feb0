"""Whether the needles are sorted: one cheap device reduction."""

import jax
import jax.numpy as jnp

from ._order import sort_key


@jax.jit
def is_sorted(v):
    """Whether `v` (flattened) is ascending in the searchsorted total order.

    Args:
      v: array of any shape and a supported dtype.

    Returns:
      Boolean scalar array: True when every element is >= the one before it,
      where NaNs are equal and sort last and -0.0 == 0.0 (so -0.0 after 0.0
      is sorted). Empty and one-element arrays are sorted.
    """
    key = sort_key(jnp.ravel(v))
    return jnp.all(key[1:] >= key[:-1])
