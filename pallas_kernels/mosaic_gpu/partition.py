"""The merge path's partition, every tile's at once (Pallas, Mosaic GPU backend).

As in `pallas_triton/partition.py`: a merge-path program covers `tile`
elements of the merge of `a` and `v`, from boundary k * tile to (k + 1) *
tile, and where those boundaries cross `a` (`_bisect.diagonal_split`) gives
its slices of `a` and `v`. Searched by the program itself, each boundary is
a scalar search that every thread runs alike, one dependent load per step,
twice (by the two programs that share it). Here one pass finds them all
first, one lane per boundary (per-lane gathers, `_common.Lanes`), and a
merge program reads its two.

Every split lies in [max(d - M, 0), min(d, N)] for its boundary d, whatever
the data: a broken promise moves the slices, never out of range.

Before the checked kernel (`checked.py`), the pass reads the same flag as
that kernel and does nothing where it picks binary search: its splits are
then never read.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from .. import _bisect
from . import _common as mc


def _partition_kernel(*refs, tile, lanes, side, flagged):
    # refs: the checked kernel's flag where `flagged`, then a, v, splits.
    body = functools.partial(_partition, mc.program_id(jnp.int32), tile=tile, lanes=lanes,
                             side=side)
    if flagged:
        flag_ref, a_ref, v_ref, s_ref = refs
        pl.when(flag_ref[0] != 0)(lambda: body(a_ref, v_ref, s_ref))
    else:
        body(*refs)


def _partition(program, a_ref, v_ref, s_ref, *, tile, lanes, side):
    n, m = a_ref.shape[0], v_ref.shape[0]
    count = -(-(n + m) // tile) + 1
    idx = s_ref.dtype
    # A block of lanes at the end moves back to lie inside the splits: the
    # boundaries two blocks share get the same split from both.
    start = mc.window(program.astype(idx) * lanes.size, lanes.size, s_ref.shape[0])
    k = start + lanes.iota(idx)
    # Lanes past the last boundary (splits padded to a block) repeat it; k
    # is clamped first, so that k * tile cannot overflow.
    diag = jnp.minimum(jnp.minimum(k, count - 1) * tile, n + m)
    split = _bisect.diagonal_split(lanes.gather(a_ref), lanes.gather(v_ref), n, m, diag,
                                   side=side)
    lanes.store(s_ref, start, split)


def splits(a, v, *, dtype, tile, side, interpret, merging=None):
    """For k = 0 .. ceil((N + M) / tile), how many elements of `a` the first
    min(k * tile, N + M) elements of the merge of `a` and `v` hold, in the
    merge path's index dtype (int64 only where N + M + tile passes int32);
    padded with the last one to at least a block of lanes (128).

    `a` and `v` are the merge kernel's operands (`_common.kernel_operands`),
    `dtype` the dtype searched. With `merging` (the checked kernel's int32
    flag of shape (1,)), only where it is nonzero: elsewhere the splits are
    left unwritten.
    """
    n, m = a.shape[0], v.shape[0]
    _bisect.check_extent(n + m + tile)
    lanes = mc.Lanes(mc.LANES, dtype, interpret)
    length = max(-(-(n + m) // tile) + 1, lanes.size)
    return mc.call(
        functools.partial(_partition_kernel, tile=tile, lanes=lanes, side=side,
                          flagged=merging is not None),
        *([] if merging is None else [merging]),
        a,
        v,
        out_type=jax.ShapeDtypeStruct((length,), _bisect.index_dtype(n + m + tile)),
        grid=-(-length // lanes.size),
        threads=1,
        interpret=interpret,
        name="mosaic_merge_path_partition",
    )
