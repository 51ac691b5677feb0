"""Binary-search searchsorted for any needles (Pallas, Triton backend).

Each program takes a block of needles, one lane each, and every lane
searches the whole of `a` with the same fixed number of steps,
ceil(log2(N + 1)), so the lanes of a warp never diverge.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from . import _bisect, _common
from ._args import resolve_config, validate
from .configs import BinarySearchConfig, default_binary_search_config


def _binary_search_kernel(a_ref, v_ref, o_ref, *, block, side):
    n, m = a_ref.shape[0], v_ref.shape[0]
    idx = _bisect.index_dtype(n + m + block)
    start = pl.program_id(0).astype(idx) * block

    def resolve(v_key, valid):
        lo = jnp.zeros(v_key.shape, idx)
        hi = jnp.where(valid, n, 0).astype(idx)
        load = functools.partial(_common.gather, a_ref)
        return _bisect.lower_bound(load, lo, hi, v_key, steps=n.bit_length(), side=side)

    _common.resolve_needles(v_ref, o_ref, start, m - start, block=block, resolve=resolve)


@functools.partial(jax.jit, static_argnames=("side", "out_dtype", "config", "interpret"))
def binary_search_searchsorted(a, v, *, side, out_dtype, config=None, interpret=False):
    """`jnp.searchsorted(a, v, side)` for sorted `a` and any `v`.

    Args:
      a: 1-D sorted array (NaNs last), the haystack.
      v: 1-D array of the same dtype, the needles, in any order.
      side: 'left' or 'right', as in `jnp.searchsorted`.
      out_dtype: int32 or int64 (int64 needs jax_enable_x64).
      config: a BinarySearchConfig; None picks `default_binary_search_config`.
      interpret: run the kernel in the Pallas interpreter (any backend).

    Returns:
      Array of shape (len(v),) and dtype `out_dtype`: for each needle the
      number of elements of `a` before it (side='left': a < v; side='right':
      a <= v) in the total order where NaNs are equal and last and -0.0 == 0.0.
      If `a` is not sorted the values are unspecified but lie in [0, len(a)].
    """
    out_dtype = validate(a, v, side, out_dtype)
    n, m = a.shape[0], v.shape[0]
    if n == 0 or m == 0:
        return jnp.zeros((m,), out_dtype)
    config = resolve_config(config, BinarySearchConfig, default_binary_search_config, n, m, a.dtype)
    _bisect.check_extent(n + m + config.block)
    kernel = functools.partial(_binary_search_kernel, block=config.block, side=side)
    return _common.launch(
        kernel,
        a,
        v,
        out_dtype=out_dtype,
        grid=-(-m // config.block),
        num_warps=config.num_warps,
        num_stages=config.num_stages,
        interpret=interpret,
        name="binary_search_searchsorted",
    )
