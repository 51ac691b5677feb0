"""The merge path's partition, every tile's at once (Pallas, Triton backend).

A merge-path program covers `tile` elements of the merge of `a` and `v`,
from boundary k * tile to (k + 1) * tile; where those boundaries cross `a`
(`_bisect.diagonal_split`) gives its slices of `a` and `v`. Searched by the
program itself, each boundary costs a fixed-step search whose two lanes the
program's other warps wait for, and each boundary is searched twice (by
the two programs that share it). Here one pass finds them all first, one
lane per boundary, and a merge program reads its two.

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
from jax.experimental.pallas import triton as pltriton

from .. import _bisect
from . import _common

_BLOCK = 128  # boundaries per program, one lane each


def _partition_kernel(*refs, tile, side, flagged):
    # refs: the checked kernel's flag where `flagged`, then a, v, splits.
    # The program id is read here: Pallas' interpreter replaces it at the
    # kernel's top level only.
    body = functools.partial(_partition, pl.program_id(0), tile=tile, side=side)
    if flagged:
        flag_ref, a_ref, v_ref, s_ref = refs
        pl.when(jnp.max(flag_ref[...]) != 0)(lambda: body(a_ref, v_ref, s_ref))
    else:
        body(*refs)


def _partition(program, a_ref, v_ref, s_ref, *, tile, side):
    n, m = a_ref.shape[0], v_ref.shape[0]
    count = s_ref.shape[0]
    idx = s_ref.dtype
    start = program.astype(idx) * _BLOCK
    k = start + jnp.arange(_BLOCK, dtype=idx)
    valid = k < count
    # Lanes past the last boundary repeat it (no overflow in k * tile).
    diag = jnp.minimum(jnp.minimum(k, count - 1) * tile, n + m)
    split = _bisect.diagonal_split(
        functools.partial(_common.gather, a_ref),
        functools.partial(_common.gather, v_ref),
        n,
        m,
        diag,
        side=side,
    )
    pltriton.store(s_ref.at[pl.ds(start, _BLOCK)], split.astype(idx), mask=valid)


def splits(a, v, *, tile, side, interpret, merging=None):
    """For k = 0 .. ceil((N + M) / tile), how many elements of `a` the first
    min(k * tile, N + M) elements of the merge of `a` and `v` hold; in the
    merge path's index dtype (int64 only where N + M + tile passes int32).
    With `merging` (the checked kernel's int32 flag of shape (1,)), only
    where it is nonzero: elsewhere the splits are left unwritten."""
    n, m = a.shape[0], v.shape[0]
    _bisect.check_extent(n + m + tile)
    count = -(-(n + m) // tile) + 1
    return pl.pallas_call(
        functools.partial(_partition_kernel, tile=tile, side=side, flagged=merging is not None),
        out_shape=jax.ShapeDtypeStruct((count,), _bisect.index_dtype(n + m + tile)),
        grid=(-(-count // _BLOCK),),
        compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=1),
        interpret=interpret,
        name="merge_path_partition",
    )(*([] if merging is None else [merging]), a, v)
