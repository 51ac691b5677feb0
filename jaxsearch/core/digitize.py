"""digitize: jnp.digitize's bin numbers, found by jaxsearch's searchsorted."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import originals, serving
from .api import searchsorted
from .checks import check_arraylike
from .order import check_order_flag


def digitize(
    x: jax.typing.ArrayLike,
    bins: jax.typing.ArrayLike,
    right: bool = False,
    *,
    method: str | None = None,
    sorted_x: bool | None = None,
) -> jax.Array:
    """Bin numbers of `x` in `bins`; a drop-in for :func:`jax.numpy.digitize`
    that is fast when `x` is sorted.

    Returns exactly what ``jnp.digitize(x, bins, right)`` returns: the same
    values, dtype (int32, or int64 when ``len(bins)`` needs it) and shape
    (``x.shape``). For increasing (or constant) bins, the number of edges at
    or below each value (below it with ``right=True``); for decreasing bins,
    the same counted from the other end, as numpy.digitize defines it.

    Args:
      x: values to bin, any shape.
      bins: 1-D bin edges, monotonically increasing or decreasing (NaN last
        when increasing). Whether they rise or fall is read from their first
        and last edge, as jnp does.
      right: True: each bin holds its right edge instead of its left one.
      method: one of jnp.searchsorted's methods ("scan", "scan_unrolled",
        "sort", "compare_all") to run ``jnp.digitize`` with that method; None
        lets jaxsearch search.
      sorted_x: as searchsorted's `sorted_v`: True promises that the
        flattened `x` is sorted ascending (NaN last), whichever way `bins`
        run; a broken promise gives unspecified bin numbers, always within
        [0, len(bins)]. False: any `x`. None (default): exact for any `x`, and
        fast when it is sorted.

    Returns:
      Integer array of bin numbers with the shape of `x`.

    Raises:
      ValueError: `bins` is not 1-D, or an unknown method.
      TypeError: `sorted_x` is not a bool or None, or `x` or `bins` is not a
        numeric array or scalar.

    Example:
      >>> import jax.numpy as jnp, jaxsearch
      >>> jaxsearch.digitize(jnp.array([0.5, 1.0, 2.5]), jnp.array([1.0, 2.0, 3.0]))
      Array([0, 1, 2], dtype=int32)
    """
    check_arraylike("digitize", "x", x)
    check_arraylike("digitize", "bins", bins)
    check_order_flag("sorted_x", sorted_x)
    if method is not None:
        return originals.digitize(x, bins, right, method=method)
    if np.ndim(bins) != 1:
        raise ValueError(f"digitize: bins must be 1-dimensional, got shape {np.shape(bins)}")
    # `right` static, as jnp takes it: a traced one fails as it fails there.
    return _digitize(x, bins, right=right, sorted_x=sorted_x)


@serving.jit(static_argnames=("right", "sorted_x"))
def _digitize(x, bins, *, right: bool, sorted_x: bool | None) -> jax.Array:
    x, bins = jnp.asarray(x), jnp.asarray(bins)
    n = bins.shape[0]
    if n == 0:
        return jnp.zeros_like(x, dtype=np.int32)
    side = "left" if right else "right"

    def rising():
        return searchsorted(bins, x, side, sorted_v=sorted_x)

    def falling():
        # Counted from the far end in the reversed (rising) bins; x keeps its
        # own order, so a sorted x still merges.
        return n - searchsorted(bins[::-1], x, side, sorted_v=sorted_x)

    # jnp computes both and selects; one suffices (under vmap over bins the
    # cond becomes that select).
    return lax.cond(bins[-1] >= bins[0], rising, falling)
