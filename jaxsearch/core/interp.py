"""interp: jnp.interp's piecewise-linear interpolation, with the segments
found by jaxsearch's searchsorted: on CPU one search whose answers become
the values (the primitive `interp_p`), elsewhere the search, then jnp's
formula."""

from __future__ import annotations

import functools
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching

from .. import tuning
from ..keys import index_dtype
from . import api, cpu, jax_private, originals, partitioning, primitive, rows, rules, serving
from .api import searchsorted
from .checks import check_arraylike, check_side_and_order, promote_inexact
from .implementations import CYTHON
from .order import check_order_flag

EXTRAPOLATE = "extrapolate"
Edge = Literal["fp", "value", "extrapolate"]  # how a side beyond xp is filled

# jnp.interp's formula changed in jax 0.12.1: a step only where a segment has
# zero width (where its width was at most np.spacing(eps)), the NaNs of
# infinite knots mended, x bounded to xp's range first, and a complex fp
# interpolated a part at a time. jaxsearch computes the installed jax's.
ZERO_STEPS = jax.__version_info__ >= (0, 12, 1)


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
    the installed jax's formula (jax 0.12.1 changed it) in the same order
    of operations, so with the same bits.
    On CPU, where `x`, `xp` and `fp` share a float32 or float64 dtype, one
    search turns each answer into its value while the segment is in cache,
    its multiply-add fused into an FMA where XLA's code fuses it (where the
    CPU has FMA); elsewhere XLA compiles jnp's formula, and may contract a
    multiply-add of one program into an FMA and not of the other (seen on
    CPU for an integer `fp` when the formula was compiled there too: a
    difference in the last bit).

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
    if ZERO_STEPS and jnp.issubdtype(fp.dtype, jnp.complexfloating):
        # A part at a time, as jnp since 0.12.1: NaN's and infinities' parts
        # stay apart, and the imaginary part is 0 at a NaN x.
        real, imag = (_interp(x, xp, part(fp), None if left is None else part(left),
                              None if right is None else part(right), period,
                              left_edge=left_edge, right_edge=right_edge, order=order)
                      for part in (jnp.real, jnp.imag))
        return lax.complex(real, jnp.where(jnp.isnan(x), 0, imag))
    if period is not None:
        period = jnp.abs(period)
        x, xp = x % period, xp % period
        xp, fp = lax.sort_key_val(xp, fp)
        # One wrapped point on each side, so every x has a segment.
        xp = jnp.concatenate([xp[-1:] - period, xp, xp[:1] + period])
        fp = jnp.concatenate([fp[-1:], fp, fp[:1]])

    if xp.shape[0] == 0:
        # What jnp's gathers raise: an IndexError for a scalar x.
        error = IndexError if x.ndim == 0 else TypeError
        raise error("interp: xp and fp are empty; there is nothing to interpolate from")
    edges = period is None
    # fp[0] and fp[-1] for the sides beyond xp in the formula's pass; a
    # value given for a side, after it. jnp fills the left side first (the
    # right one wins where both apply, as for an xp out of order), so the
    # pass fills the right one only where the left one is not filled after.
    clamp_left = edges and left_edge == "fp"
    clamp_right = edges and right_edge == "fp" and left_edge != "value"
    bound_x = (edges and left_edge != "extrapolate", edges and right_edge != "extrapolate")
    f = _values(x, xp, fp, clamp_left=clamp_left, clamp_right=clamp_right, bound_x=bound_x,
                order=order)
    if edges and left_edge == "value":
        f = jnp.where(x < xp[0], left, f)
    if edges and right_edge != "extrapolate" and not clamp_right:
        f = jnp.where(x > xp[-1], fp[-1] if right_edge == "fp" else right, f)
    return f


def _values(x, xp, fp, *, clamp_left: bool, clamp_right: bool, bound_x: tuple[bool, bool],
            order: bool | None):
    """jnp's formula at x, on the segments of xp that jaxsearch's search
    finds (fp[0] below xp[0] and fp[-1] above xp[-1] where asked): fused
    into one search where its CPU kernels take the call, else searched,
    then computed as jnp computes it."""
    search_order = check_side_and_order("right", order)
    n = xp.shape[0]
    if (cpu.AVAILABLE and x.size and x.dtype == xp.dtype == fp.dtype
            and x.dtype in (jnp.float32, jnp.float64) and index_dtype(n) == np.int32
            and not partitioning.may_partition()):
        search = api.search_params(n, x.size, x.dtype, side="right", order=search_order,
                                   cpu_override=tuning.cpu_config_override())
        del search["portable"]  # interp_p's own parameter, which its lowering reads
        return interp_p.bind(x, xp, fp, clamp_left=clamp_left, clamp_right=clamp_right,
                             bound_x=bound_x, search=tuple(sorted(search.items())),
                             portable=serving.for_patch())
    index = searchsorted(xp, x, "right", sorted_v=order)
    return _formula(x, xp, fp, index, clamp_left=clamp_left, clamp_right=clamp_right,
                    bound_x=bound_x)


# ------------------------------------------------------------ interp_p

# The search of x in xp and jnp's formula on its segments, as one primitive:
# on cpu, one call of the Cython search in interp mode; elsewhere, under
# vmap and under differentiation, the search primitive, then the formula.
# Bound for x, xp and fp of one float32 or float64 dtype; its `search`
# holds the search primitive's parameters (api.search_params) but
# `portable`, its own parameter, as items.
interp_p = Primitive("jaxsearch_interp")


def _formula(x, xp, fp, index, *, clamp_left: bool, clamp_right: bool,
             bound_x: tuple[bool, bool], zero_steps: bool = ZERO_STEPS):
    """jnp.interp's values from index = searchsorted(xp, x, 'right'),
    computed as jnp computes them: its gathers and its formula (jax 0.12.1's
    where `zero_steps`, else jax 0.10's to 0.12.0's), in its order of
    operations. `bound_x`: whether x is bounded to xp[0], to xp[-1], before
    jax 0.12.1's formula (where `left`, `right` do not extrapolate: no
    value changes, but no infinity reaches the gradients)."""
    n = xp.shape[0]
    # hi = clip(index, 1, n - 1) as in jnp, whose fp[hi - 1] is fp[0] too
    # when n == 1 (hi = 0, index -1 wraps). Both are in bounds, so the
    # gathers skip jnp's negative-index and bounds handling.
    hi = jnp.clip(index, 1, n - 1)
    lo = jnp.maximum(hi - 1, 0)
    xp_lo, xp_hi, fp_lo, fp_hi = (t.at[k].get(mode="promise_in_bounds")
                                  for t in (xp, fp) for k in (lo, hi))
    df = fp_hi - fp_lo
    dx = xp_hi - xp_lo
    if zero_steps:
        f = _zero_steps(x, xp, fp, xp_lo, xp_hi, fp_lo, fp_hi, df, dx, bound_x)
    else:
        # A segment no wider than this is a step: its left value, with no
        # division that could give NaN (or a NaN gradient).
        epsilon = np.spacing(np.finfo(xp.dtype).eps)
        step = lax.abs(dx) <= epsilon
        f = jnp.where(step, fp_lo, fp_lo + ((x - xp_lo) / jnp.where(step, 1, dx)) * df)
    if clamp_left:
        f = jnp.where(x < xp[0], fp[0], f)
    if clamp_right:
        f = jnp.where(x > xp[-1], fp[-1], f)
    return f


def _zero_steps(x, xp, fp, xp_lo, xp_hi, fp_lo, fp_hi, df, dx, bound_x):
    """jax 0.12.1's formula on the segments [xp_lo, xp_hi], before the
    sides are filled."""
    bounded = x
    if bound_x[0]:
        bounded = jnp.where(bounded < xp[0], xp[0], bounded)
    if bound_x[1]:
        bounded = jnp.where(bounded > xp[-1], xp[-1], bounded)
    # A zero-width segment is a step: no division by zero, no NaN gradient.
    step = dx == 0
    width = jnp.where(step, 1, dx)
    rise = jnp.where(step, 0, df)
    # A width below the smallest normal has a square of 0: the quotient's
    # gradient through it would be NaN where delta or the rise is 0, so
    # none flows there.
    tiny = lax.abs(width) < jnp.finfo(xp.dtype).tiny

    def line_from(x_end, f_end):
        delta = bounded - x_end
        t = delta / jnp.where(tiny & (delta == 0), lax.stop_gradient(width), width)
        t = jnp.where(tiny & (rise == 0), lax.stop_gradient(t), t)
        return f_end + t * rise

    at_step = jnp.where(jnp.isnan(x), np.nan, jnp.where(x >= xp_hi, fp_hi, fp_lo))
    f = jnp.where(step, at_step, line_from(xp_lo, fp_lo))
    # NaN from an infinite knot or value (inf - inf, 0 * inf): the knot's
    # value at a knot, else the line from the other end, else the segment's
    # one value where both ends have it.
    other = line_from(xp_hi, fp_hi)
    other = jnp.where(jnp.isnan(other) & (fp_lo == fp_hi), fp_lo, other)
    mended = jnp.where(x == xp_hi, fp_hi, jnp.where(x == xp_lo, fp_lo, other))
    return jnp.where(jnp.isnan(f) & ~jnp.isnan(x) & ~step, mended, f)


def _searched(x, xp, fp, *, clamp_left, clamp_right, bound_x, search, portable=False,
              jnp_search=False):
    """interp_p's values by the search primitive (or jnp's search), then the
    formula."""
    if jnp_search:
        index = originals.searchsorted(xp, x, side="right")
    else:
        index = primitive.searchsorted_p.bind(xp, x, needle_ndim=x.ndim, portable=portable,
                                              **dict(search))
    return _formula(x, xp, fp, index, clamp_left=clamp_left, clamp_right=clamp_right,
                    bound_x=bound_x)


def _interp_abstract_eval(x, xp, fp, **_):
    return jax_private.varying_as(jax.core.ShapedArray(x.shape, x.dtype), x, xp, fp)


def _cpu_interp(x, xp, fp, *, clamp_left, clamp_right, bound_x, search, portable=False):
    params = dict(search)
    if rows.implementation_for("cpu", xp.shape[0], x.size, x.dtype) != CYTHON:
        return _searched(x, xp, fp, clamp_left=clamp_left, clamp_right=clamp_right,
                         bound_x=bound_x, search=search, portable=portable)
    f = cpu.search_interp(xp, x.ravel(), fp, clamp_left=clamp_left, clamp_right=clamp_right,
                          zero_steps=ZERO_STEPS, order=params["order"],
                          **cpu.search_arguments(params))
    return f.reshape(x.shape)


def _export_interp(x, xp, fp, **params):
    return _searched(x, xp, fp, **params, jnp_search=True)


def _batch_interp(args, dims, **params):
    in_axes = tuple(None if d is None else 0 for d in dims)
    args = tuple(a if d is None else jnp.moveaxis(a, d, 0) for a, d in zip(args, dims))
    return jax.vmap(functools.partial(_searched, **params), in_axes)(*args), 0


def _interp_jvp(primals, tangents, **params):
    """The searched values' derivative, and those values: the same as the
    fused ones."""
    tangents = tuple(ad.instantiate_zeros(t) for t in tangents)
    return jax.jvp(functools.partial(_searched, **params), primals, tangents)


interp_p.def_impl(functools.partial(jax_private.apply_primitive, interp_p))
interp_p.def_abstract_eval(_interp_abstract_eval)
batching.primitive_batchers[interp_p] = _batch_interp
ad.primitive_jvps[interp_p] = _interp_jvp


rules.register_lowerings(interp_p, default=_searched,
                         cpu=_cpu_interp if cpu.AVAILABLE else None, gpu=_searched,
                         for_export=_export_interp)
