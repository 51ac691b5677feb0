"""Plain-jnp reference for both kernels: the definition, counted directly."""

import functools

import jax
import jax.numpy as jnp

from ._args import validate
from ._order import precedes, sort_key


@functools.partial(jax.jit, static_argnames=("side", "out_dtype"))
def searchsorted_reference(a, v, *, side, out_dtype=jnp.int32):
    """For each needle, the number of elements of `a` that count towards it.

    O(N * M) compares, in batches: for tests, not for speed. It needs no sorted
    input: for sorted `a` it equals `jnp.searchsorted(a, v, side=side)`.

    Args:
      a: 1-D array, the haystack.
      v: 1-D array of the same dtype, the needles.
      side: 'left' (count a < v) or 'right' (count a <= v), in the total order
        where NaNs are equal and last and -0.0 == 0.0.
      out_dtype: int32 or int64.

    Returns:
      Array of shape (len(v),) and dtype `out_dtype`.
    """
    out_dtype = validate(a, v, side, out_dtype)
    a_key = sort_key(a)
    count = lambda v_key: jnp.sum(precedes(a_key, v_key, side), dtype=out_dtype)
    return jax.lax.map(count, sort_key(v), batch_size=256)
