"""Fixed-step searches every Pallas backend shares (Triton and Mosaic GPU).

Nothing here loads from memory itself: each search takes a `load(index,
active)` that reads the elements at `index` (lanes where `active` is false
may read anything in bounds), so the same steps run on Triton's masked
gathers and on Mosaic GPU's per-lane loads.
"""

import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxsearch.keys import check_x64, index_dtype  # noqa: F401 (the kernels call _bisect.index_dtype)

from ._order import precedes, sort_key


def check_extent(extent):
    """Positions past int32 need int64 indices, hence x64 mode."""
    check_x64(extent, f"inputs of {extent} elements")


def cdiv_pow2(x, block):
    """ceil(x / block) for x >= 0 and a power-of-two `block`, as a shift."""
    return (x + (block - 1)) >> (block.bit_length() - 1)


def count_loop(count, body, init):
    """`fori_loop(0, count, body, init)` for a traced `count`.

    The counter takes `count`'s dtype, not the int64 that jax_enable_x64 would
    give a Python 0.
    """
    return lax.fori_loop(np.zeros((), count.dtype)[()], count, body, init)


def repeat(steps, body, init):
    """Applies `body` `steps` (static) times. A scan without an index: a
    static `fori_loop` would carry its index as a Python int, int64 under x64.
    """
    return lax.scan(lambda carry, _: (body(carry), None), init, None, length=steps)[0]


def bisect(lo, hi, steps, goes_right):
    """Per lane, the first `i` in [lo, hi] where `goes_right(i, active)` fails.

    `goes_right` must be true then false along [lo, hi) for the answer to be
    exact; whatever it returns, the answer stays in [lo, max(lo, hi)] and each
    `i` it is asked about lies in [lo, hi) where `active` holds. `steps` is
    static: ceil(log2(hi - lo + 1)) steps resolve every lane, so the loop has no
    data-dependent trip count.
    """

    def step(carry):
        lo, hi = carry
        active = lo < hi
        mid = lo + ((hi - lo) >> 1)  # No overflow: lo, hi in [0, extent].
        right = goes_right(mid, active) & active
        # No `~` on a bool array: jax 0.12's Mosaic GPU cannot lower it
        # ("Register bitwidth in target type must be divisible by 8, got 1").
        return jnp.where(right, mid + 1, lo), jnp.where(right, hi, jnp.where(active, mid, hi))

    return repeat(steps, step, (lo, hi))[0]


def lower_bound(load_a, lo, hi, v_key, *, steps, side):
    """Per lane: `lo` plus the number of `a[lo:hi]` counted for `v_key`."""

    def goes_right(i, active):
        return precedes(sort_key(load_a(i, active)), v_key, side)

    return bisect(lo, hi, steps, goes_right)


def probe_search(load_a, lo, hi, v_key, *, steps, side):
    """Per lane, where jnp's own binary search ("scan") lands for `v_key` in
    `a[lo:hi]`, `lo` 0 for the whole of `a`: its probes, in its order (`lo`
    moves to a counted key, `hi` to an uncounted one, over
    ceil(log2(hi - lo + 1)) steps), so that the answer is jnp's on any `a`,
    sorted or not (on a sorted `a`, lo plus the count of a[lo:hi] counted for
    `v_key`). A lane with lo == hi answers hi; every read lies in [lo, hi)
    where `active` holds."""

    def step(carry):
        lo, hi = carry
        active = lo < hi
        mid = lo + ((hi - lo) >> 1)
        counted = precedes(sort_key(load_a(mid, active)), v_key, side) & active
        return jnp.where(counted, mid, lo), jnp.where(counted, hi, mid)

    return repeat(steps, step, (lo, hi))[1]


def diagonal_split(load_a, load_v, n, m, diag, *, side, steps=None):
    """How many elements of `a` (length n) the first `diag` elements of the
    merge of `a` and `v` (length m) hold; per lane, or a scalar `diag`.

    `n` and `m` may be traced (a slice of each, read through the loads) if
    `steps` is given: bit_length(min(n, m)) steps resolve every lane, and
    fewer still keep the split in [max(diag - m, 0), min(diag, n)].
    """

    def goes_right(i, active):
        # a[i] against v[diag - 1 - i]: along a diagonal, true then false.
        return precedes(sort_key(load_a(i, active)), sort_key(load_v(diag - 1 - i, active)), side)

    lo = jnp.maximum(diag - m, 0)
    hi = jnp.minimum(diag, n)
    steps = min(n, m).bit_length() if steps is None else steps
    return bisect(lo, hi, steps, goes_right)
