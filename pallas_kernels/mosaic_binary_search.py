"""Binary-search searchsorted for any needles (Pallas, Mosaic GPU backend).

Each warpgroup takes a block of needles, spread over its 128 threads, and
every needle searches the whole of `a` with the same fixed number of steps,
ceil(log2(N + 1)), each step one per-lane load (see `_mosaic_common`).
Blocks at the end of `v` move back to lie inside it: the needles two blocks
share get the same answer from both.
"""

import functools

import jax
import jax.numpy as jnp

from . import _bisect
from . import _mosaic_common as mc
from ._args import resolve_config, validate
from .configs import BinarySearchConfig, default_binary_search_config


def _binary_search_kernel(a_ref, v_ref, o_ref, *, lanes, threads, side):
    n, m = a_ref.shape[0], v_ref.shape[0]
    idx = _bisect.index_dtype(n + m + lanes.size * threads)
    block = mc.program_id(idx) * threads + mc.warpgroup_id(idx)
    start = mc.window(block * lanes.size, lanes.size, m)
    v_key = lanes.load(v_ref, start)
    lo, hi = lanes.full(0, idx), lanes.full(n, idx)
    answer = _bisect.lower_bound(
        lanes.gather(a_ref), lo, hi, v_key, steps=n.bit_length(), side=side
    )
    lanes.store(o_ref, start, answer)


@functools.partial(jax.jit, static_argnames=("side", "out_dtype", "config", "interpret"))
def mosaic_binary_search_searchsorted(a, v, *, side, out_dtype, config=None, interpret=False):
    """`jnp.searchsorted(a, v, side)` for sorted `a` and any `v`, by Mosaic GPU.

    Arguments, result and guarantees as `binary_search_searchsorted`'s (the
    Pallas Triton kernel), except: `config.block` must be a multiple of 128
    (`num_warps // 4` warpgroups share it; `num_stages` is not used), and
    `interpret` runs the kernel in Mosaic GPU's interpreter.
    """
    out_dtype = validate(a, v, side, out_dtype)
    n, m = a.shape[0], v.shape[0]
    if n == 0 or m == 0:
        return jnp.zeros((m,), out_dtype)
    config = resolve_config(config, BinarySearchConfig, default_binary_search_config, n, m, a.dtype)
    threads = mc.warpgroups(config.num_warps, config.block)
    lanes = mc.Lanes(config.block // threads, a.dtype, interpret)
    padded = mc.padded_length(m, lanes)
    _bisect.check_extent(n + padded + config.block)
    kernel = functools.partial(_binary_search_kernel, lanes=lanes, threads=threads, side=side)
    grid = -(-padded // config.block)
    return mc.launch(kernel, a, v, out_dtype=out_dtype, grid=grid, lanes=lanes, threads=threads,
                     interpret=interpret, name="mosaic_binary_search_searchsorted")
