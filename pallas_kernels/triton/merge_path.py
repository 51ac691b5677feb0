"""Merge-path searchsorted for sorted needles, in the Triton language.

The kernel behind `triton_merge_path_searchsorted` (in `searchsorted.py`,
which imports this module lazily). With `a` and `v` both sorted the answers
are one merge of the two: a[i] goes before v[j] when it precedes it (a < v
for side='left', a <= v for 'right'), and the answer for v[j] is the number
of elements of `a` merged before it. The merged sequence of N + M elements
is cut into tiles of TILE elements, one program each (grid axis 0; axis 1
is the batch). A program finds where its two tile boundaries (diagonals)
cross `a` and `v` by one fixed-step binary search with a lane per diagonal,
then resolves its needles against its slice of `a` only: by a binary search
per lane inside the slice (BISECT), or by counting, chunk by chunk of the
slice, the elements that precede each needle (a needles x CHUNK compare
matrix).

Broken promises (unsorted `a` or `v`) give unspecified answers, but every
answer lies in [0, N], every read and write is in bounds, and every needle
is written: consecutive programs compute their shared boundary identically,
so their needle ranges cover [0, M) without gaps, and a program whose range
comes out longer than a tile loops over it.
"""

import triton
import triton.language as tl

from ._common import (
    as_index,
    batch_row,
    bisect,
    bit_length,
    load_needles,
    order_key,
    precedes,
    store_answers,
)


@triton.jit
def _compare_counts(a_ptr, count, v_key, CHUNK: tl.constexpr, LEFT: tl.constexpr):
    """Per needle, how many of `a[0:count]` precede it, CHUNK at a time.

    Counts take count's (the index) type: under a broken promise `count` is
    not bounded by the tile.
    """
    total = tl.zeros(v_key.shape, count.dtype)
    offset = count * 0  # A zero of the index type.
    # Loops with a runtime bound are `while` loops: Triton's interpreter
    # (3.6) cannot take a runtime `range` bound under numpy >= 2.4.
    while offset < count:
        lane = offset + tl.arange(0, CHUNK)
        ok = lane < count
        a_key = order_key(tl.load(a_ptr + lane, mask=ok, other=0))
        hits = precedes(a_key[None, :], v_key[:, None], LEFT) & ok[None, :]
        total += tl.sum(hits.to(count.dtype), axis=1)
        offset += CHUNK
    return total


@triton.jit
def merge_path_kernel(
    a_ptr,
    v_ptr,
    n,
    m,
    a_stride,
    v_stride,
    o_ptr,
    TILE: tl.constexpr,
    BISECT: tl.constexpr,
    CHUNK: tl.constexpr,
    DIAG_STEPS: tl.constexpr,
    LEFT: tl.constexpr,
    WIDE: tl.constexpr,
):
    """o[j] = the number of `a` elements that precede v[j], for the needles of
    this program's tile of the merged sequence.

    Args:
      a_ptr, v_ptr: the sorted haystack (n elements) and sorted needles (m
        elements) of batch row 0; row r starts `r * a_stride` (`r * v_stride`)
        further on, 0 for an operand every row shares.
      o_ptr: int32 or int64 answers, m per row.
      TILE: merged elements per program. BISECT: per-lane bisection inside the
        slice, else compare matrices over CHUNK elements of `a` at a time.
      DIAG_STEPS: halvings of the diagonal search, min(n, m).bit_length().
      WIDE: int64 positions (n + m + TILE passes 2**31 - 1).
    """
    a_ptr, v_ptr, o_ptr = batch_row(a_ptr, v_ptr, o_ptr, m, a_stride, v_stride)
    n = as_index(n, WIDE)
    m = as_index(m, WIDE)
    d0 = tl.minimum(as_index(tl.program_id(0), WIDE) * TILE, n + m)
    d1 = tl.minimum(d0 + TILE, n + m)
    # Both boundaries in one search: the two lanes share every step's latency.
    lane = tl.arange(0, 2)
    diag = tl.where(lane == 0, d0, d1)
    split = bisect(
        tl.maximum(diag - m, 0),
        tl.minimum(diag, n),
        a_ptr,
        None,
        v_ptr,
        diag - 1,
        DIAG_STEPS,
        LEFT,
        True,
    )
    i0 = tl.max(tl.where(lane == 0, split, 0))
    i1 = tl.max(tl.where(lane == 1, split, 0))
    # Sorted inputs: (i1 - i0) + (j1 - j0) = d1 - d0 <= TILE. Broken promises
    # may give a negative length; clamping keeps every index in range.
    na = tl.maximum(i1 - i0, 0)
    start = d0 - i0
    j1 = tl.maximum(d1 - i1, start)
    # One block when the promise holds; more only if it is broken.
    while start < j1:
        v_key, valid = load_needles(v_ptr, start, j1 - start, TILE)
        if BISECT:
            lo = tl.zeros([TILE], i0.dtype) + i0
            hi = tl.where(valid, lo + na, lo)
            answer = bisect(lo, hi, a_ptr, v_key, None, None, bit_length(TILE), LEFT, False)
        else:
            answer = i0 + _compare_counts(a_ptr + i0, na, v_key, CHUNK, LEFT)
        store_answers(o_ptr, start, answer, valid, TILE)
        start += TILE
