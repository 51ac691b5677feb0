"""interp: jnp.interp's piecewise-linear interpolation, with the segments
found by jaxsearch's searchsorted."""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import serving
from .api import searchsorted
from .checks import check_arraylike, promote_inexact
from .order import check_order_flag

EXTRAPOLATE = "extrapolate"
Edge = Literal["fp", "value", "extrapolate"]  # how a side beyond xp is filled


def interp(
    x: jax.typing.ArrayLike,
    xp: jax.typing.ArrayLike,
    fp: jax.typing.ArrayLike,
    left: jax.typing.ArrayLike | str | None = None,
    right: jax.typing.ArrayLike | str | None = None,
    period: jax.typing.ArrayLike | None = None,
    *,
    sorted_x: bool | None = None,
) -> jax.Array:
    """One-dimensional linear interpolation; a drop-in for
    :func:`jax.numpy.interp` that is fast when `x` is sorted.

    Returns what ``jnp.interp(x, xp, fp, left, right, period)`` returns: the
    same dtype and shape (``x.shape``), and the same values, computed with
    jnp's formula in the same order of operations, so with the same bits
    wherever XLA compiles the arithmetic alike (it may contract a
    multiply-add of one program into an FMA and not of the other: seen for
    an integer `fp`, a difference in the last bit).

    Args:
      x: where to evaluate, any shape; real.
      xp: 1-D increasing abscissae (any order with `period`); repeated ones
        are allowed.
      fp: the values at `xp`, the same shape; real or complex.
      left: the value for ``x < xp[0]``: None for ``fp[0]``, a value (or an
        array broadcasting against `x`), or "extrapolate" for the first
        segment's line. Ignored with `period`.
      right: the same for ``x > xp[-1]``, with ``fp[-1]`` and the last segment.
      period: a scalar period of the abscissae: `x` and `xp` are taken modulo
        its absolute value.
      sorted_x: as searchsorted's `sorted_v`: True promises that the
        flattened `x` (after promotion to `xp`'s dtype) is sorted ascending,
        NaN last; a broken promise gives values from unspecified segments of
        `xp` but never reads out of bounds. False: any `x`. None (default):
        exact for any `x`, and fast when it is sorted. With `period`, `x` is
        wrapped first and its order checked as with None (True counts as
        None), since wrapping breaks it.

    Returns:
      Array of interpolated values with the shape of `x`.

    Raises:
      ValueError: `xp` and `fp` are not 1-D arrays of one size, `left` or
        `right` is a string other than "extrapolate", `x` is complex,
        `period` is not a scalar.
      TypeError: `sorted_x` is not a bool or None, an input is not a numeric
        array or scalar, or `xp` is empty (IndexError for a scalar `x`), as
        jnp raises for each.

    Example:
      >>> import jax.numpy as jnp, jaxsearch
      >>> jaxsearch.interp(jnp.array([0.5, 2.0, 9.0]), jnp.arange(4.0), 2 * jnp.arange(4.0))
      Array([1., 4., 6.], dtype=float32)
    """
    for name, arg in (("x", x), ("xp", xp), ("fp", fp)):
        check_arraylike("interp", name, arg)
    check_order_flag("sorted_x", sorted_x)
    if np.shape(xp) != np.shape(fp) or np.ndim(xp) != 1:
        raise ValueError(f"interp: xp and fp must be 1-D arrays of one size, got shapes "
                         f"{np.shape(xp)} and {np.shape(fp)}")
    left_edge, right_edge = _edge("left", left), _edge("right", right)
    if period is None:
        order = sorted_x
    else:
        if np.ndim(period) != 0:
            raise ValueError(f"interp: period must be a scalar, got shape {np.shape(period)}")
        order = False if sorted_x is False else None
    return _interp(x, xp, fp, None if left_edge != "value" else left,
                   None if right_edge != "value" else right, period,
                   left_edge=left_edge, right_edge=right_edge, order=order)


def _edge(name: str, fill: object) -> Edge:
    if isinstance(fill, str):
        if fill != EXTRAPOLATE:
            raise ValueError(f"interp: the only string {name} takes is {EXTRAPOLATE!r}, "
                             f"got {fill!r}")
        return "extrapolate"
    return "fp" if fill is None else "value"


@serving.jit(static_argnames=("left_edge", "right_edge", "order"))
def _interp(x, xp, fp, left, right, period, *, left_edge: Edge, right_edge: Edge,
            order: bool | None) -> jax.Array:
    x, xp = promote_inexact(x, xp)
    fp, = promote_inexact(fp)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise ValueError("interp: complex x is not supported")
    if period is not None:
        period = jnp.abs(period)
        x, xp = x % period, xp % period
        xp, fp = lax.sort_key_val(xp, fp)
        # One wrapped point on each side, so every x has a segment.
        xp = jnp.concatenate([xp[-1:] - period, xp, xp[:1] + period])
        fp = jnp.concatenate([fp[-1:], fp, fp[:1]])

    n = xp.shape[0]
    if n == 0:
        # What jnp's gathers raise: an IndexError for a scalar x.
        error = IndexError if x.ndim == 0 else TypeError
        raise error("interp: xp and fp are empty; there is nothing to interpolate from")
    # The segment [lo, hi] around each x: hi = clip(index, 1, n - 1) as in
    # jnp, whose fp[hi - 1] is fp[0] too when n == 1 (hi = 0, index -1 wraps).
    # Both are in bounds, so the gathers skip jnp's negative-index and bounds
    # handling (a fifth of the time after the search at 1e7).
    hi = jnp.clip(searchsorted(xp, x, "right", sorted_v=order), 1, n - 1)
    lo = jnp.maximum(hi - 1, 0)
    xp_lo, xp_hi, fp_lo, fp_hi = (t.at[k].get(mode="promise_in_bounds")
                                  for t in (xp, fp) for k in (lo, hi))
    df = fp_hi - fp_lo
    dx = xp_hi - xp_lo
    delta = x - xp_lo
    # A segment no wider than this is a step: its left value, with no
    # division that could give NaN (or a NaN gradient).
    epsilon = np.spacing(np.finfo(xp.dtype).eps)
    step = lax.abs(dx) <= epsilon
    f = jnp.where(step, fp_lo, fp_lo + (delta / jnp.where(step, 1, dx)) * df)

    if period is None:
        if left_edge != "extrapolate":
            f = jnp.where(x < xp[0], fp[0] if left_edge == "fp" else left, f)
        if right_edge != "extrapolate":
            f = jnp.where(x > xp[-1], fp[-1] if right_edge == "fp" else right, f)
    return f
