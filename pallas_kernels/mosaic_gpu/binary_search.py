"""Binary-search searchsorted for any needles (Pallas, Mosaic GPU backend).

Each warpgroup takes a block of needles, spread over its 128 threads, and
every needle searches the whole of `a` with the same fixed number of steps,
ceil(log2(N + 1)), each step one per-lane load (see `_common`), in jnp's
probe order (`_bisect.probe_search`), so that an unsorted `a` gets jnp's answers.
Blocks at the end of `v` move back to lie inside it: the needles two blocks
share get the same answer from both.
"""

import functools

from .. import _bisect
from .._wrapper import searchsorted_wrapper
from ..configs import BINARY_SEARCH
from . import _common as mc


def _binary_search_program(program, warpgroup, a_ref, v_ref, o_ref, *, lanes, threads, side):
    n, m = a_ref.shape[0], v_ref.shape[0]
    # Positions in `a` and in `v` apart: int32 unless one of them passes it.
    idx = _bisect.index_dtype(max(n, m + lanes.size * threads))
    block = program.astype(idx) * threads + warpgroup.astype(idx)
    start = mc.window(block * lanes.size, lanes.size, m)
    v_key = lanes.load(v_ref, start)
    lo, hi = lanes.full(0, idx), lanes.full(n, idx)
    answer = _bisect.probe_search(
        lanes.gather(a_ref), lo, hi, v_key, steps=n.bit_length(), side=side
    )
    lanes.store(o_ref, start, answer)


@searchsorted_wrapper(
    BINARY_SEARCH, kernel="the Pallas Mosaic GPU binary-search kernel",
    interpreter="Mosaic GPU's interpreter (any backend)",
    config_note="\n    `config.block` must be a multiple of 128, which `num_warps // 4`"
                "\n    warpgroups share; `num_stages` is not used.")
def mosaic_binary_search_searchsorted(a, v, *, side, out_dtype, config, interpret):
    m = v.shape[0]
    lanes = needle_lanes(config, a.dtype, interpret)
    a, v = mc.kernel_operands(a, v, lanes)
    return mc.launch(mc.by_ids(program(config, side, lanes)), a, v, needles=m,
                     out_dtype=out_dtype, grid=programs(a.shape[0], v.shape[0], config),
                     threads=warpgroups(config), interpret=interpret,
                     name="mosaic_binary_search_searchsorted")


def warpgroups(config):
    """The warpgroups of a binary-search program."""
    return mc.warpgroups(config.num_warps, config.block)


def needle_lanes(config, dtype, interpret):
    """A warpgroup's share of a program's block of needles."""
    return mc.Lanes(config.block // warpgroups(config), dtype, interpret)


def program(config, side, lanes):
    """The body of one warpgroup of a binary-search program, `body(program,
    warpgroup, a_ref, v_ref, o_ref)`, for `config` and `lanes` (`needle_lanes`)."""
    return functools.partial(_binary_search_program, lanes=lanes, threads=warpgroups(config),
                             side=side)


def programs(n, m, config):
    """The programs of a search of m needles (`v` padded) in n keys (checked
    against x64)."""
    _bisect.check_extent(max(n, m + config.block))
    return -(-m // config.block)
