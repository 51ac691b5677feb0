"""Binary-search searchsorted for any needles (Pallas, Triton backend).

Each program takes a block of needles, one lane each, and every lane
searches the whole of `a` with the same fixed number of steps,
ceil(log2(N + 1)), so the lanes of a warp never diverge; in jnp's probe order
(`_bisect.probe_search`), so that an unsorted `a` gets jnp's answers.
"""

import functools

import jax.numpy as jnp

from .. import _bisect
from .._wrapper import searchsorted_wrapper
from ..configs import BINARY_SEARCH
from . import _common


def _binary_search_kernel(program, a_ref, v_ref, o_ref, *, block, side):
    n, m = a_ref.shape[0], v_ref.shape[0]
    # Positions in `a` and in `v` apart: int32 unless one of them passes it.
    idx = _bisect.index_dtype(max(n, m + block))
    start = program.astype(idx) * block

    def resolve(v_key, valid):
        lo = jnp.zeros(v_key.shape, idx)
        hi = jnp.where(valid, n, 0).astype(idx)
        load = functools.partial(_common.gather, a_ref)
        return _bisect.probe_search(load, lo, hi, v_key, steps=n.bit_length(), side=side)

    _common.resolve_needles(v_ref, o_ref, start, m - start, block=block, resolve=resolve)


@searchsorted_wrapper(BINARY_SEARCH, kernel="the Pallas Triton binary-search kernel",
                      interpreter="the Pallas interpreter (any backend)")
def binary_search_searchsorted(a, v, *, side, out_dtype, config, interpret):
    return _common.launch_program(program(config, side), (a, v), config,
                                  programs(a.shape[0], v.shape[0], config), out_dtype=out_dtype,
                                  interpret=interpret, name="binary_search_searchsorted")


def program(config, side):
    """The body of program `program`, `body(program, a_ref, v_ref, o_ref)`,
    for `config`."""
    return functools.partial(_binary_search_kernel, block=config.block, side=side)


def programs(n, m, config):
    """The programs of a search of m needles in n keys (checked against x64)."""
    _bisect.check_extent(max(n, m + config.block))
    return -(-m // config.block)
