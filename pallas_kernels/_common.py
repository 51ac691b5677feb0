"""Pieces both kernels share: fixed-step search, needle blocks, the launch."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from ._order import precedes, sort_key

_INT32_MAX = np.iinfo(np.int32).max


def index_dtype(extent):
    """Index dtype for positions up to `extent` (a static Python int)."""
    return jnp.int32 if extent <= _INT32_MAX else jnp.int64


def cdiv_pow2(x, block):
    """ceil(x / block) for x >= 0 and a power-of-two `block`, as a shift."""
    return (x + (block - 1)) >> (block.bit_length() - 1)


def zero_of(ref):
    """The `other` of a masked load: a zero of the ref's dtype, never promoted."""
    return np.zeros((), ref.dtype)


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
        return jnp.where(right, mid + 1, lo), jnp.where(active & ~right, mid, hi)

    return repeat(steps, step, (lo, hi))[0]


def gather(ref, index, active):
    """Loads `ref[index]` where `active`, with `index` clamped into the ref."""
    index = jnp.clip(index, 0, ref.shape[0] - 1)
    return pltriton.load(ref.at[index], mask=active, other=zero_of(ref))


def lower_bound(a_ref, lo, hi, v_key, *, steps, side):
    """Per lane: `lo` plus the number of `a_ref[lo:hi]` counted for `v_key`."""

    def goes_right(i, active):
        return precedes(sort_key(gather(a_ref, i, active)), v_key, side)

    return bisect(lo, hi, steps, goes_right)


def resolve_needles(v_ref, o_ref, start, count, *, block, resolve):
    """Writes `resolve` of the needles `v[start:start + min(count, block)]`.

    `resolve(v_key, valid)` maps the keys of a block of needles (`valid` marks
    the real ones) to their answers. Loads and stores are coalesced and masked;
    `start` must lie in [0, len(v)) when `count` > 0.
    """
    valid = jnp.arange(block, dtype=count.dtype) < count
    needles = pltriton.load(v_ref.at[pl.ds(start, block)], mask=valid, other=zero_of(v_ref))
    answer = resolve(sort_key(needles), valid)
    pltriton.store(o_ref.at[pl.ds(start, block)], answer.astype(o_ref.dtype), mask=valid)


def check_extent(extent):
    """Positions past int32 need int64 indices, hence x64 mode."""
    if extent > _INT32_MAX and not jax.config.jax_enable_x64:
        raise ValueError(f"inputs of {extent} elements need jax_enable_x64 for 64-bit indices")


def launch(kernel, a, v, *, out_dtype, grid, num_warps, num_stages, interpret, name):
    """Runs `kernel(a_ref, v_ref, o_ref)` on the Triton backend.

    No BlockSpecs: every program sees the whole of `a` and `v` and the output,
    and under `vmap` the batching rule of `pallas_call` adds a grid axis and
    hands each program one batch row.
    """
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(v.shape, out_dtype),
        grid=(grid,),
        compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
        interpret=interpret,
        name=name,
    )(a, v)
