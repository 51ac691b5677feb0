"""histogram, histogram2d, histogramdd: jnp's histograms, with the bins found
by jaxsearch's searchsorted, and counted without a pass over the data when it
is sorted.

Unweighted counts of unsorted data go through the primitive `bin_counts_p`:
on cpu the Cython kernel counts each value as it finds its bin, in one pass
(no index array, no scatter); elsewhere, and for `jax.export` under the
patch, the bins are searched and scatter-added as jnp does.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive

from ..keys import WIDENED_TO_FLOAT32, index_dtype
from . import cpu, jax_private, originals, rules, serving
from .api import searchsorted
from .checks import check_arraylike, promote_inexact
from .order import CHECK_ROW, sorted_everywhere

# Sorted-data weighted sums: weights in blocks of about sqrt(n) (a power of
# two), so that each bin costs O(sqrt(n)) and the blocks' sums one pass.
_MIN_BLOCK = 64
# The sorted path's per-bin work for weights, against a scatter's n: taken
# while nbins * (blocks + 2 * block) stays within this many times n.
_MAX_WORK = 2

# jnp.histogram takes a string of bins ("sqrt", "sturges") from jax 0.12.1;
# before, a TypeError as for any non-array.
STRING_BINS = jax.__version_info__ >= (0, 12, 1)


def histogram(
    a: jax.typing.ArrayLike,
    bins: jax.typing.ArrayLike | str = 10,
    range: Sequence[jax.typing.ArrayLike] | None = None,
    weights: jax.typing.ArrayLike | None = None,
    density: bool | None = None,
) -> tuple[jax.Array, jax.Array]:
    """A 1-D histogram; a drop-in for :func:`jax.numpy.histogram` that is fast
    when the flattened `a` is sorted.

    Returns what ``jnp.histogram(a, bins, range, weights, density)`` returns:
    the same edges, and counts of the same dtype (the inexact dtype of `a`, or
    of `a` and `weights` together) and values. Values below the first edge,
    above the last, or NaN count nowhere; a value equal to the last edge
    counts in the last bin.

    Without weights the counts are exact, as jnp's are wherever its running
    float counts are: theirs stop growing at 2**24 in float32, 2048 in
    float16, and so do these.
    When `a` is sorted (checked at run time, NaN last) the counts come from
    searching the edges in `a`, with no pass over it but the check;
    otherwise, without weights, on CPU each value's bin is found and counted
    in one pass (up to 65,536 edges), and elsewhere each value is searched
    among the edges and counted in a scatter, as jnp does. With float32 or
    float64 weights and sorted `a`, each bin's weights are summed in blocks
    rather than one by one, so a weighted count may differ from jnp's by
    rounding (by about jnp's own rounding error); other weights, and
    unsorted `a`, are summed as jnp sums them.

    Args:
      a: values, any shape (flattened).
      bins: the number of equal bins between ``range`` (default 10), or a
        1-D array of edges, increasing (a bin is [left, right), the last
        [left, right]). With edges that do not increase the counts are
        unspecified (numpy refuses such edges). From jax 0.12.1, as jnp
        takes them: "sqrt" or "sturges", a number of bins counted from the
        size of `a` (without weights).
      range: (low, high) of the equal bins; None: the minimum and maximum of
        `a`. Ignored when `bins` are edges.
      weights: one weight per value, the shape of `a`; None: each counts 1.
      density: True: counts divided by their sum and by the bins' widths.

    Returns:
      ``(counts, edges)``: ``len(edges) - 1`` counts, and the edges.

    Raises:
      TypeError: an input is not a numeric array or scalar (a list, a
        string...), `bins` is neither an integer nor 1-D, or is a string
        with weights, as jnp raises.
      NotImplementedError: `bins` is a string jnp does not take (jax
        0.12.1 and on).
      ValueError: `weights` is not the shape of `a`, `range` is not a pair,
        or `a` is empty and has no range.
      IndexError: `bins` is an empty array of edges.

    Example:
      >>> import jax.numpy as jnp, jaxsearch
      >>> jaxsearch.histogram(jnp.array([0.5, 1.0, 2.5, 3.0]), jnp.array([0.0, 1.0, 2.0, 3.0]))[0]
      Array([1., 1., 2.], dtype=float32)
    """
    check_arraylike("histogram", "a", a)
    if not (STRING_BINS and isinstance(bins, str)):
        check_arraylike("histogram", "bins", bins)
    elif weights is not None:  # as jnp, where it takes a string
        raise TypeError("histogram: bins counted from the data (a string) take no weights")
    if weights is not None:
        check_arraylike("histogram", "weights", weights)
        if np.shape(a) != np.shape(weights):
            raise ValueError(f"histogram: weights must have the shape of a, got "
                             f"{np.shape(weights)} and {np.shape(a)}")
        a, weights = promote_inexact(a, weights)
    else:
        a, = promote_inexact(a)
    edges = jnp.histogram_bin_edges(a, bins, range)
    if edges.shape[0] == 0:
        raise IndexError("histogram: bins is an empty array of edges")
    counts = _histogram(a, edges, weights)
    if density:
        counts = counts / jnp.diff(edges) / counts.sum()
    return counts, edges


@serving.jit
def _histogram(a, edges, weights) -> jax.Array:
    a, edges, weights = jax_private.vary_alike(a.ravel(), edges, weights)
    w = None if weights is None else weights.ravel()
    dtype = a.dtype if w is None else w.dtype
    n, nbins = a.shape[0], edges.shape[0] - 1
    if n == 0 or nbins == 0:
        return jnp.zeros(nbins, dtype)

    def unsorted():
        if w is None:
            return bin_counts_p.bind(edges, a, dtype=np.dtype(dtype),
                                     portable=serving.for_patch())
        return _scatter(edges, a, w, _search)

    block = _block(n)
    # Half-precision sums in another order stray far from jnp's (which stop
    # growing early): those are summed as jnp sums them.
    if w is not None and (jnp.finfo(dtype).bits < 32 or
                          nbins * (-(-n // block) + 2 * block) > _MAX_WORK * n):
        return unsorted()

    def from_sorted():
        starts, stops = _bin_bounds(a, edges)
        if w is not None:
            return _range_sums(w, starts, stops, block)
        return _saturated(stops - starts, n, dtype)

    # Under vmap these predicates hold for every row or for none
    # (sorted_everywhere), so that each cond runs one branch.
    def maybe_sorted():
        return lax.cond(sorted_everywhere(a) & sorted_everywhere(edges), from_sorted, unsorted)

    # A strided sample out of order settles it without the full pass.
    return lax.cond(sorted_everywhere(a[::CHECK_ROW]), maybe_sorted, unsorted)


def _search(edges: jax.Array, x: jax.Array) -> jax.Array:
    return searchsorted(edges, x, "right", sorted_v=False)


def _scatter(edges: jax.Array, x: jax.Array, w: jax.Array, search) -> jax.Array:
    """jnp's count: each value's bin by `search` (searchsorted's 'right'
    side), then its weight `w` (an array, or a scalar for all) scatter-added
    there, in w's dtype."""
    nbins = edges.shape[0] - 1
    index = search(edges, x)
    index = jnp.where(x == edges[-1], nbins, index)  # the last bin is closed
    return jnp.zeros(nbins + 1, w.dtype).at[index].add(w)[1:]


def _saturated(counts: jax.Array, n: int, dtype) -> jax.Array:
    """Exact counts of n values as jnp's float counts of `dtype` come out:
    those stop at 2**(nmant + 1), where adding 1 rounds back down (to even)."""
    limit = 2 ** (jnp.finfo(dtype).nmant + 1)
    return (counts if n <= limit else jnp.minimum(counts, limit)).astype(dtype)


# ------------------------------------------------------------ bin_counts_p

bin_counts_p = Primitive("jaxsearch_histogram_bin_counts")


def _counts_abstract_eval(edges, x, *, dtype, **_):
    return jax_private.varying_as(jax.core.ShapedArray((edges.shape[0] - 1,), dtype), edges, x)


def _jnp_counts(edges, x, *, dtype, portable=False, search=_search):
    """The counts as jnp counts them: search, then scatter-add ones."""
    del portable  # acts in the lowering rule
    return _scatter(edges, x, jnp.ones((), dtype), search)


def _export_counts(edges, x, **params):
    return _jnp_counts(edges, x, search=lambda e, x: originals.searchsorted(e, x, "right"),
                       **params)


def _cpu_counts(edges, x, *, dtype, portable=False):
    key = jnp.result_type(edges, x)
    if edges.shape[0] > cpu.MAX_HISTOGRAM_EDGES or not jnp.issubdtype(key, jnp.floating):
        return _jnp_counts(edges, x, dtype=dtype)
    key = jnp.float32 if key in WIDENED_TO_FLOAT32 else key  # exact, order kept
    n = x.shape[0]
    counts = cpu.histogram_counts(edges.astype(key), x.astype(key), out_dtype=index_dtype(n),
                                  threads=min(cpu.available_cores(), cpu.MAX_THREADS))
    return _saturated(counts[1:-1], n, dtype)


def _batch_counts(args, dims, **params):
    # Batched histograms are rare: jnp's way, vmapped.
    in_axes = tuple(None if d is None else 0 for d in dims)
    args = tuple(x if d is None else jnp.moveaxis(x, d, 0) for x, d in zip(args, dims))
    return jax.vmap(lambda e, x: _jnp_counts(e, x, **params), in_axes)(*args), 0


rules.define_rules(bin_counts_p, _counts_abstract_eval, batcher=_batch_counts)
rules.register_lowerings(bin_counts_p, default=_jnp_counts,
                         cpu=_cpu_counts if cpu.AVAILABLE else None, gpu=_jnp_counts,
                         for_export=_export_counts)


def _bin_bounds(a: jax.Array, edges: jax.Array) -> tuple[jax.Array, jax.Array]:
    """For sorted `a` and increasing `edges`: each bin's values are
    ``a[starts[i]:stops[i]]`` (a bin holds its left edge; the last its right
    one too, unless that is NaN, which nothing equals)."""
    below = searchsorted(a, edges, "left", sorted_v=False)
    last = edges[-1]
    closed = jnp.where(last == last, searchsorted(a, last, "right"), below[-1])
    return below[:-1], below[1:].at[-1].set(closed)


def _block(n: int) -> int:
    """A power of two near sqrt(n), at least `_MIN_BLOCK`."""
    return max(_MIN_BLOCK, 1 << (math.isqrt(n).bit_length() - 1))


def _range_sums(w: jax.Array, starts: jax.Array, stops: jax.Array, block: int) -> jax.Array:
    """``w[starts[i]:stops[i]].sum()`` for each i, in O(len(w)) for the
    blocks' sums and O(sqrt(len(w))) per range: the first and last block of a
    range summed in part, the blocks between whole."""
    n = w.shape[0]
    full = n // block
    # A window reduction, not a sum over rows of a reshape: that ran 10x
    # slower on XLA CPU (rows a power of two long, and a slice before it).
    whole = lax.reduce_window(w, np.zeros((), w.dtype), lax.add, (block,), (block,), "VALID")
    sums = jnp.concatenate([whole, w[full * block:].sum(keepdims=True)])
    first, last = starts // block, stops // block
    between = jnp.arange(full + 1)
    inside = (between > first[:, None]) & (between < last[:, None])
    middle = jnp.where(inside, sums, 0).sum(1)

    def in_block(b):
        index = b[:, None] * block + jnp.arange(block)
        part = w.at[jnp.minimum(index, n - 1)].get(mode="promise_in_bounds")
        # where, not a product: a NaN or inf weight of another bin stays there.
        mine = (index >= starts[:, None]) & (index < stops[:, None])
        return jnp.where(mine, part, 0).sum(1)

    return in_block(first) + middle + jnp.where(last > first, in_block(last), 0)


def histogramdd(
    sample: jax.typing.ArrayLike,
    bins: jax.typing.ArrayLike | Sequence[jax.typing.ArrayLike] = 10,
    range: Sequence[Sequence[jax.typing.ArrayLike] | None] | None = None,
    weights: jax.typing.ArrayLike | None = None,
    density: bool | None = None,
) -> tuple[jax.Array, list[jax.Array]]:
    """An N-dimensional histogram; a drop-in for :func:`jax.numpy.histogramdd`.

    Returns what ``jnp.histogramdd(sample, bins, range, weights, density)``
    returns: the same edges, and the same counts (int32, or int64 with x64,
    without weights; the weights' inexact dtype with them; the sample's with
    `density`), each dimension's bins found by jaxsearch's searchsorted and
    the points counted as jnp counts them.

    Args:
      sample: (N, D) points.
      bins: one for every dimension or one per dimension: a number of equal
        bins, or increasing 1-D edges.
      range: None, or per dimension None or (low, high) for its equal bins.
      weights: (N,) weights; None: each point counts 1.
      density: True: counts divided by their sum and by the bins' volumes.

    Returns:
      ``(counts, edges)``: counts of shape ``(len(edges[i]) - 1, ...)`` and
      the list of each dimension's edges.

    Raises:
      TypeError: `sample` or `weights` is not a numeric array, or a number
        of bins is not an integer.
      ValueError: `sample` is not 2-D, `weights` not (N,), or `range` or
        `bins` do not give one entry per dimension.

    Example:
      >>> import jax.numpy as jnp, jaxsearch
      >>> jaxsearch.histogramdd(jnp.array([[0.0, 1.0], [1.0, 0.0]]), bins=2)[0]
      Array([[0, 1],
             [1, 0]], dtype=int32)
    """
    check_arraylike("histogramdd", "sample", sample)
    if weights is None:
        sample, = promote_inexact(sample)
    else:
        check_arraylike("histogramdd", "weights", weights)
        if np.shape(weights) != np.shape(sample)[:1]:
            raise ValueError(f"histogramdd: weights must be one per point, shape "
                             f"{np.shape(sample)[:1]}, got {np.shape(weights)}")
        sample, weights = promote_inexact(sample, weights)
    if sample.ndim != 2:
        raise ValueError(f"histogramdd: sample must be (N, D), got shape {sample.shape}")
    n, d = sample.shape
    if range is not None and (len(range) != d or any(
            r is not None and np.shape(r)[0] != 2 for r in range)):
        raise ValueError(f"histogramdd: for a sample of shape {(n, d)}, range must be a "
                         f"sequence of {d} pairs or Nones, got {range!r}")
    try:
        per_dimension = list(bins)
    except TypeError:
        per_dimension = d * [bins]  # one number of bins for every dimension
    else:
        if len(per_dimension) != d:
            raise ValueError(f"histogramdd: bins must be one per dimension ({d}), got "
                             f"{len(per_dimension)}")
    edges = [jnp.histogram_bin_edges(sample[:, i], per_dimension[i],
                                     None if range is None else range[i])
             for i in builtins.range(d)]  # `range` is an argument, as in numpy
    counts = _histogramdd(sample, edges, weights)
    if density:
        counts = counts.astype(sample.dtype)
        counts /= counts.sum()
        for widths in jnp.ix_(*(jnp.diff(e) for e in edges)):
            counts /= widths
    return counts, edges


@serving.jit
def _histogramdd(sample, edges, weights) -> jax.Array:
    index = []
    for i, e in enumerate(edges):
        column = sample[:, i]
        found = searchsorted(e, column, "right")
        index.append(jnp.where(column == e[-1], found - 1, found))  # the last bin is closed
    # One bin more on each side of each dimension, for the values beyond the
    # edges, cut off at the end.
    shape = tuple(e.shape[0] + 1 for e in edges)
    flat = jnp.ravel_multi_index(tuple(index), shape, mode="clip")
    counts = jnp.bincount(flat, weights, length=math.prod(shape)).reshape(shape)
    return counts[(slice(1, -1),) * len(edges)]


def histogram2d(
    x: jax.typing.ArrayLike,
    y: jax.typing.ArrayLike,
    bins: jax.typing.ArrayLike | Sequence[jax.typing.ArrayLike] = 10,
    range: Sequence[Sequence[jax.typing.ArrayLike] | None] | None = None,
    weights: jax.typing.ArrayLike | None = None,
    density: bool | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """A 2-D histogram; a drop-in for :func:`jax.numpy.histogram2d`.

    Returns what ``jnp.histogram2d(x, y, bins, range, weights, density)``
    returns (:func:`histogramdd` of the points ``(x[i], y[i])``).

    Args:
      x, y: 1-D coordinates of the points, one length.
      bins: a number of bins or edges for both dimensions, or a pair of them.
      range: None, or ``[(xlow, xhigh), (ylow, yhigh)]`` (either may be None).
      weights: one weight per point; None: each counts 1.
      density: True: counts divided by their sum and by the bins' areas.

    Returns:
      ``(counts, x_edges, y_edges)``.

    Raises:
      TypeError, ValueError: as :func:`histogramdd`, and as jnp for `x` and
        `y` of different lengths.

    Example:
      >>> import jax.numpy as jnp, jaxsearch
      >>> jaxsearch.histogram2d(jnp.array([0.0, 1.0]), jnp.array([1.0, 0.0]), bins=2)[0]
      Array([[0, 1],
             [1, 0]], dtype=int32)
    """
    check_arraylike("histogram2d", "x", x)
    check_arraylike("histogram2d", "y", y)
    try:
        pair = len(bins) in (1, 2)
    except TypeError:
        pair = True  # a number of bins
    if not pair:
        bins = [jnp.asarray(bins)] * 2  # one array of edges for both
    counts, edges = histogramdd(jnp.transpose(jnp.asarray([x, y])), bins, range, weights,
                                density)
    return counts, edges[0], edges[1]
