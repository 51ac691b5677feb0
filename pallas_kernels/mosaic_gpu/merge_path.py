"""Merge-path searchsorted for sorted needles (Pallas, Mosaic GPU backend).

The partition is the Pallas Triton kernel's (see
`pallas_triton/merge_path.py`): the merge of `a` and `v` is cut into tiles of
`tile` elements, one program each. Where a program's two diagonals cross `a`
and `v` comes from the partition pass that runs first (`partition.py`), or,
with `partition="per_program"`, from a fixed-step binary search of its own
(scalar loads, every thread alike). Each warpgroup copies the program's
slice of `a`, as sort keys, to shared memory in coalesced blocks (the
`tile` keys from the slice's start; all of `a` where it is shorter), then
resolves its needles by a binary search of that copy, one needle per lane,
in blocks of at most `_BLOCK` needles that its warpgroups take in turn.
Blocks start anywhere: a block that lies inside the program's needles is
stored whole, and the one or two at their ends per lane under a mask (see
`_common`). Where `a` is shorter than a block of lanes, the search reads
`a` from global memory instead.

Broken promises (unsorted `a` or `v`) give unspecified answers, but every
answer lies in [0, N] and every needle is written, as in the Pallas Triton kernel.
"""

import functools

import jax.numpy as jnp
from jax.experimental import pallas as pl

from .. import _bisect
from .._wrapper import searchsorted_wrapper
from ..configs import MERGE_PATH
from . import _common as mc
from . import partition

# Needles per warpgroup and block: 4 per thread keeps a 64-bit search's
# registers (bounds, keys, loaded values) well under the spill line.
_BLOCK = 4 * mc.LANES


def _merge_path_program(program, warpgroup, splits_ref, a_ref, v_ref, o_ref, smem_ref, *, tile,
                        lanes, threads, side):
    # splits_ref: the partition pass's splits (`partition.splits`), None
    # where it did not run; smem_ref: the shared memory (`scratch`), None
    # where there is none.
    n, m = a_ref.shape[0], v_ref.shape[0]
    idx = _bisect.index_dtype(n + m + tile)
    program = program.astype(idx)
    d0 = jnp.minimum(program * tile, n + m)
    d1 = jnp.minimum(d0 + tile, n + m)
    if splits_ref is not None:  # this program's two boundaries, found already
        i0, i1 = splits_ref[program], splits_ref[program + 1]
    else:
        split = functools.partial(
            _bisect.diagonal_split, lanes.scalar(a_ref), lanes.scalar(v_ref), n, m, side=side
        )
        i0, i1 = split(d0), split(d1)
    j0 = d0 - i0
    # Sorted inputs: na + nv = d1 - d0 <= tile. Broken promises may give a
    # negative length; clamping keeps every index in range.
    na = jnp.maximum(i1 - i0, 0)
    nv = jnp.maximum(d1 - i1 - j0, 0)
    if smem_ref is not None:  # the slice's keys, from the start of a span of `count` that holds it
        count = smem_ref.shape[0] // threads
        load_a = lanes.stage(a_ref, mc.window(i0, count, n), smem_ref,
                             warpgroup.astype(idx) * count, count)
    else:
        load_a = lanes.gather(a_ref)
    stride = lanes.size * threads
    first = j0 + warpgroup.astype(idx) * lanes.size

    def needle_block(b, carry):
        start = first + b * stride
        window = mc.window(start, lanes.size, m)
        position = window + lanes.iota(idx)
        valid = (position >= start) & (position < j0 + nv)
        lo = lanes.full(i0, idx)
        # An array as the select's first choice: jax 0.10's Mosaic GPU gives
        # where(mask, scalar, x) the mask's signedness, unsigned.
        hi = jnp.where(valid, lanes.full(i0 + na, idx), lo)
        answer = _bisect.lower_bound(
            load_a,
            lo,
            hi,
            lanes.load(v_ref, window),
            steps=tile.bit_length(),
            side=side,
        )
        whole = (window == start) & (start + lanes.size <= j0 + nv)
        pl.when(whole)(lambda: lanes.store(o_ref, window, answer))
        pl.when(jnp.logical_not(whole))(lambda: lanes.store_where(o_ref, window, answer, valid))
        return carry

    # One round when the promise holds; more only if it is broken.
    _bisect.count_loop(_bisect.cdiv_pow2(nv, stride), needle_block, ())


@searchsorted_wrapper(
    MERGE_PATH, kernel="the Pallas Mosaic GPU merge-path kernel",
    interpreter="Mosaic GPU's interpreter (any backend)",
    config_note="\n    `config.tile` must be at least 128 and gives `num_warps // 4`"
                "\n    warpgroups per program; `method`, `chunk` and `num_stages` are"
                "\n    not used (the needles are resolved by bisection).")
def mosaic_merge_path_searchsorted(a, v, *, side, out_dtype, config, interpret):
    m = v.shape[0]
    lanes = needle_lanes(config, a.dtype, interpret)
    a, v = mc.kernel_operands(a, v, lanes)
    shared = scratch(config, lanes, a)
    return mc.launch(mc.by_ids(_kernel(config, side, lanes, staged=bool(shared))),
                     *operands(a, v, config, side, lanes, interpret),
                     needles=m, out_dtype=out_dtype,
                     grid=programs(a.shape[0], v.shape[0], config), threads=warpgroups(config),
                     interpret=interpret, name="mosaic_merge_path_searchsorted", scratch=shared)


def needle_lanes(config, dtype, interpret):
    """The block of needles a merge program resolves at a time, per warpgroup."""
    return mc.Lanes(min(config.tile, _BLOCK), dtype, interpret)


def warpgroups(config):
    """The warpgroups of a merge program."""
    return mc.warpgroups(config.num_warps, config.tile)


def operands(a, v, config, side, lanes, interpret, merging=None):
    """What the merge program reads, for `a` and `v` as `_common.kernel_operands`
    gives them: (a, v), after the partition pass's splits where
    `config.partition` is 'once' (run only where the checked kernel's flag
    `merging`, if given, picks the merge path)."""
    if not partitioned(config):
        return a, v
    return partition.splits(a, v, dtype=lanes.dtype, tile=config.tile, side=side,
                            interpret=interpret, merging=merging), a, v


def scratch(config, lanes, a):
    """The shared memory of a merge program, for `a` as
    `_common.kernel_operands` gives it: a span of min(tile, N) sort keys per
    warpgroup, which holds the program's slice of `a` where the promise
    holds; none where `a` is shorter than a block of lanes."""
    n = a.shape[0]
    if n < lanes.size:
        return []
    return [mc.shared(warpgroups(config) * min(config.tile, n), lanes.key_dtype(a.dtype))]


def partitioned(config):
    """Whether the partition pass runs before the merge programs."""
    return config.partition != "per_program"


def program(config, side, lanes):
    """The body of one warpgroup of a merge program, `body(program, warpgroup,
    splits_ref, a_ref, v_ref, o_ref, smem_ref)`, for `config` and `lanes`
    (`needle_lanes`): the refs of `operands` (`splits_ref` None where it
    gives no splits), the output, and the shared memory of `scratch` (None
    where it gives none)."""
    return functools.partial(_merge_path_program, tile=config.tile, lanes=lanes,
                             threads=warpgroups(config), side=side)


def _kernel(config, side, lanes, *, staged):
    """`program` as the body of a kernel of the refs of `operands`, the
    output, then those of `scratch` (`staged`: whether it gave any)."""
    body = program(config, side, lanes)

    def kernel(program, warpgroup, *refs):
        splits_ref, a_ref, v_ref, o_ref, smem_ref = mc.with_absent(
            refs, first=partitioned(config), last=staged)
        body(program, warpgroup, splits_ref, a_ref, v_ref, o_ref, smem_ref)

    return kernel


def programs(n, m, config):
    """The programs of a search of m needles (`v` padded) in n keys (checked
    against x64)."""
    _bisect.check_extent(n + m + config.tile)
    return -(-(n + m) // config.tile)
