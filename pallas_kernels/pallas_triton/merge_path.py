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
`a` only: by a binary search per needle ('bisect'), a compare matrix
('compare'), or ('serial') one serial merge per lane over a run of the tile,
from where that run's two ends cross the tile's slices.

Broken promises (unsorted `a` or `v`) give unspecified answers, but every
answer lies in [0, N] and every needle is written: the needle ranges of
consecutive programs run from 0 to M without gaps whatever the data (the
two programs sharing a boundary read one split, or compute it identically),
and a program whose range comes out longer than a tile loops over it. A
serial merge whose lanes' walks did not cover the tile's needles once each
answers them again by bisection.
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


def _serial_merge(a_ref, v_ref, o_ref, i0, j0, na, nv, *, tile, items, side):
    """Answers the needles v[j0:j0 + nv] against a[i0:i0 + na], the tile's
    slices, in runs of `items` merged elements, one lane each; returns
    whether the runs' needles, as walked, covered v[j0:j0 + nv] once each.

    Each lane finds where its run starts in the slices (a search of
    log2(tile) steps), then walks `items` steps of their merge: a step
    answers the next needle (with i0 plus the elements of `a` passed so far)
    or passes an element of `a`, reading only the element it moves to. With
    the promise kept, each walk ends where the next lane's run starts; a
    prefix sum of the needles each lane answered tells whether that held
    (a broken promise may leave needles unanswered or answered twice).
    """
    lanes = tile // items
    idx = na.dtype
    start = jnp.minimum(jnp.arange(lanes, dtype=idx) * items, na + nv)

    def load_a(i, active):
        return sort_key(_common.gather(a_ref, i0 + i, active))

    def load_v(j, active):
        return sort_key(_common.gather(v_ref, j0 + j, active))

    i_start = _bisect.diagonal_split(load_a, load_v, na, nv, start, side=side,
                                     steps=tile.bit_length())
    j_start = start - i_start

    def step(_, carry):
        i, j, a_key, v_key = carry
        answer = (j < nv) & ((i >= na) | ~precedes(a_key, v_key, side))
        # Lanes that answer nothing point past the end: masked off, a GPU
        # writes nothing there, and the interpreter, which stores every lane
        # (its old value where masked), drops the store; pointed at a needle,
        # that old value could land on another lane's answer.
        pltriton.store(o_ref.at[jnp.where(answer, j0 + j, o_ref.shape[0])],
                       (i0 + i).astype(o_ref.dtype), mask=answer)
        passes = ~answer & (i < na)
        i = jnp.where(passes, i + 1, i)
        j = jnp.where(answer, j + 1, j)
        a_key = jnp.where(passes, load_a(i, passes & (i < na)), a_key)
        v_key = jnp.where(answer, load_v(j, answer & (j < nv)), v_key)
        return i, j, a_key, v_key

    init = (i_start, j_start, load_a(i_start, i_start < na), load_v(j_start, j_start < nv))
    # A traced trip count (items while the tile is full): a static one lets
    # the compiler unroll the walk by a factor of its choosing.
    j_end = _bisect.count_loop(jnp.minimum(na + nv, items), step, init)[1]
    answered = j_end - j_start
    through = jnp.cumsum(answered)  # needles answered by this lane and those before it
    # Every lane's run starts where the lanes before it stopped (a max, not
    # jnp.all: Pallas Triton lowers no reduce_and), and the last stops at nv.
    misses = jnp.max(jnp.where(through - answered == j_start, 0, 1))
    return (misses == 0) & (jnp.max(through) == nv)


def _merge_path_kernel(program, *refs, tile, method, chunk, items, side, partitioned):
    # refs: the partition pass's splits (`partition.splits`) where
    # `partitioned`, then a, v and the output.
    splits_ref, a_ref, v_ref, o_ref = refs if partitioned else (None, *refs)
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
    if method == "serial":
        covered = _serial_merge(a_ref, v_ref, o_ref, i0, j0, na, nv, tile=tile, items=items,
                                side=side)

    def resolve(v_key, valid):
        if method != "compare":
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

    # A needle per lane: the serial merge's lanes are a tile's 1 / items.
    block = tile // items if method == "serial" else tile

    def needle_block(b, carry):
        offset = b * block
        _common.resolve_needles(v_ref, o_ref, j0 + offset, nv - offset, block=block,
                                resolve=resolve)
        return carry

    # One block when the promise holds; more only if it is broken. After a
    # serial merge, none unless a broken promise left needles uncovered.
    blocks = _bisect.cdiv_pow2(nv, block)
    if method == "serial":
        blocks = jnp.where(covered, 0, blocks)
    _bisect.count_loop(blocks, needle_block, ())


@searchsorted_wrapper(MERGE_PATH, kernel="the Pallas Triton merge-path kernel",
                      interpreter="the Pallas interpreter (any backend)")
def merge_path_searchsorted(a, v, *, side, out_dtype, config, interpret):
    return _common.launch_program(program(config, side), operands(a, v, config, side, interpret),
                                  config, programs(a.shape[0], v.shape[0], config),
                                  out_dtype=out_dtype, interpret=interpret,
                                  name="merge_path_searchsorted")


def _partitioned(config):
    """Whether the partition pass runs before the merge programs."""
    return config.partition != "per_program"


def operands(a, v, config, side, interpret, merging=None):
    """What the merge-path program reads: (a, v), after the partition pass's
    splits where `config.partition` is 'once' (run only where the checked
    kernel's flag `merging`, if given, picks the merge path)."""
    if not _partitioned(config):
        return a, v
    return partition.splits(a, v, tile=config.tile, side=side, interpret=interpret,
                            merging=merging), a, v


def program(config, side):
    """The body of program `program`, `body(program, *refs, o_ref)` for the
    refs of `operands`, for `config`."""
    return functools.partial(
        _merge_path_kernel, tile=config.tile, method=config.method, chunk=config.chunk,
        items=config.items, side=side, partitioned=_partitioned(config),
    )


def programs(n, m, config):
    """The programs of a search of m needles in n keys (checked against x64)."""
    _bisect.check_extent(n + m + config.tile)
    return -(-(n + m) // config.tile)
