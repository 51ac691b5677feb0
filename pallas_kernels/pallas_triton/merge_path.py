"""Merge-path searchsorted for sorted needles (Pallas, Triton backend).

With `a` and `v` both sorted, the answers are one merge of the two: a[i]
goes before v[j] when it counts towards v[j] (a[i] < v[j] for side='left',
so equal elements of `a` follow the needle; a[i] <= v[j] for 'right', so
they precede it), and the answer for v[j] is the number of elements of `a`
merged before it. The merged sequence of N + M elements is cut into tiles
of `tile` elements, one program each. Where its two tile boundaries
(diagonals) cross `a` and `v` comes from the partition pass that runs first
(`partition.py`), or, with `partition="per_program"`, from a fixed-step
binary search of its own; it then resolves its needles against its slice of
`a` only.

Broken promises (unsorted `a` or `v`) give unspecified answers, but every
answer lies in [0, N] and every needle is written: the needle ranges of
consecutive programs run from 0 to M without gaps whatever the data (the
two programs sharing a boundary read one split, or compute it identically),
and a program whose range comes out longer than a tile loops over it.
"""

import functools

import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from .. import _bisect
from .._order import precedes, sort_key
from .._wrapper import searchsorted_wrapper
from ..configs import MERGE_PATH
from . import _common, partition


def _compare_counts(a_ref, start, count, v_key, *, chunk, side):
    """Per needle: how many of `a[start:start + count]` count towards it."""

    def step(c, total):
        offset = c * chunk
        ok = jnp.arange(chunk, dtype=offset.dtype) < count - offset
        x = pltriton.load(
            a_ref.at[pl.ds(start + offset, chunk)], mask=ok, other=_common.zero_of(a_ref)
        )
        hits = precedes(sort_key(x)[None, :], v_key[:, None], side) & ok[None, :]
        return total + jnp.sum(hits, axis=1, dtype=total.dtype)

    return _bisect.count_loop(
        _bisect.cdiv_pow2(count, chunk), step, jnp.zeros(v_key.shape, start.dtype)
    )


def _merge_path_kernel(program, *refs, tile, method, chunk, side):
    # refs: the partition pass's splits (`partition.splits`) where it ran,
    # then a, v and the output.
    splits_ref, (a_ref, v_ref, o_ref) = (refs[0], refs[1:]) if len(refs) == 4 else (None, refs)
    n, m = a_ref.shape[0], v_ref.shape[0]
    idx = _bisect.index_dtype(n + m + tile)
    d0 = jnp.minimum(program.astype(idx) * tile, n + m)
    d1 = jnp.minimum(d0 + tile, n + m)
    if splits_ref is not None:  # this program's two boundaries, found already
        i0, i1 = (jnp.max(pltriton.load(splits_ref.at[pl.ds(program + k, 1)])).astype(idx)
                  for k in (0, 1))
    else:  # both boundaries in one search: two lanes share every step's latency
        lane = jnp.arange(2, dtype=idx)
        split = _bisect.diagonal_split(
            functools.partial(_common.gather, a_ref),
            functools.partial(_common.gather, v_ref),
            n,
            m,
            jnp.where(lane == 0, d0, d1),
            side=side,
        )
        i0 = jnp.max(jnp.where(lane == 0, split, 0))
        i1 = jnp.max(jnp.where(lane == 1, split, 0))
    j0, j1 = d0 - i0, d1 - i1
    # Sorted inputs: na + nv = d1 - d0 <= tile. Broken promises may give a
    # negative length; clamping keeps every index in range.
    na = jnp.maximum(i1 - i0, 0)
    nv = jnp.maximum(j1 - j0, 0)

    def resolve(v_key, valid):
        if method == "bisect":
            hi = jnp.where(valid, i0 + na, i0)
            return _bisect.lower_bound(
                functools.partial(_common.gather, a_ref),
                jnp.full(v_key.shape, i0),
                hi,
                v_key,
                steps=tile.bit_length(),
                side=side,
            )
        return i0 + _compare_counts(a_ref, i0, na, v_key, chunk=chunk, side=side)

    def needle_block(b, carry):
        offset = b * tile
        _common.resolve_needles(v_ref, o_ref, j0 + offset, nv - offset, block=tile, resolve=resolve)
        return carry

    # One block when the promise holds; more only if it is broken.
    _bisect.count_loop(_bisect.cdiv_pow2(nv, tile), needle_block, ())


@searchsorted_wrapper(MERGE_PATH, kernel="the Pallas Triton merge-path kernel",
                      interpreter="the Pallas interpreter (any backend)")
def merge_path_searchsorted(a, v, *, side, out_dtype, config, interpret):
    return _common.launch(
        _common.by_program_id(program(config, side)),
        *operands(a, v, config, side, interpret),
        out_dtype=out_dtype,
        grid=programs(a.shape[0], v.shape[0], config),
        num_warps=config.num_warps,
        num_stages=config.num_stages,
        interpret=interpret,
        name="merge_path_searchsorted",
    )


def operands(a, v, config, side, interpret):
    """What the merge-path program reads: (a, v), after the partition pass's
    splits where `config.partition` is 'once'."""
    if config.partition == "per_program":
        return a, v
    return partition.splits(a, v, tile=config.tile, side=side, interpret=interpret), a, v


def program(config, side):
    """The body of program `program`, `body(program, *refs, o_ref)` for the
    refs of `operands`, for `config`."""
    return functools.partial(
        _merge_path_kernel, tile=config.tile, method=config.method, chunk=config.chunk, side=side
    )


def programs(n, m, config):
    """The programs of a search of m needles in n keys (checked against x64)."""
    _bisect.check_extent(n + m + config.tile)
    return -(-(n + m) // config.tile)
