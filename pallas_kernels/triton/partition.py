"""The merge path's partition, every tile boundary at once, in the Triton language.

A merge-path program covers TILE elements of the merge of `a` and `v`, from
boundary k * TILE to (k + 1) * TILE; where a boundary crosses `a` (its split)
gives the program its slices of `a` and `v`. Searched by the merge program
itself (`merge_path_kernel`), each boundary costs a fixed-step search of two
lanes that the program's other warps wait for, and each is searched twice,
by the two programs that share it. This kernel, launched first, finds them
all, one lane per boundary, and `merge_path_partitioned_kernel` reads its
two. Grid: (ceil(boundaries / BLOCK), batch).

Whatever the data, every split lies in [max(d - m, 0), min(d, n)] for its
boundary d: a broken promise moves the slices, never out of range.
"""

import triton
import triton.language as tl

from ._common import as_index, boundary_count, diagonal_split, row_start


@triton.jit
def partition_kernel(a_ptr, v_ptr, n, m, a_stride, v_stride, s_ptr,
                     TILE: tl.constexpr, BLOCK: tl.constexpr, DIAG_STEPS: tl.constexpr,
                     LEFT: tl.constexpr, WIDE: tl.constexpr):
    """s[k] = how many elements of `a` the first min(k * TILE, n + m)
    elements of the merge hold, for the BLOCK boundaries k of this program.

    Args:
      a_ptr, v_ptr: the sorted haystack (n elements) and needles (m
        elements) of batch row 0, rows `a_stride` (`v_stride`) apart, 0 for
        an operand every row shares.
      s_ptr: the splits, `boundary_count(n, m, TILE)` per row, in the index
        type (int64 with WIDE).
      DIAG_STEPS: halvings of each search, min(n, m).bit_length().
      WIDE: int64 positions (n + m + TILE passes 2**31 - 1).
    """
    n = as_index(n, WIDE)
    m = as_index(m, WIDE)
    count = boundary_count(n, m, TILE)
    a_ptr = row_start(a_ptr, a_stride)
    v_ptr = row_start(v_ptr, v_stride)
    s_ptr = row_start(s_ptr, count)
    k = as_index(tl.program_id(0), WIDE) * BLOCK + tl.arange(0, BLOCK)
    # Lanes past the last boundary search it again, unstored: k * TILE
    # would pass the index type there.
    diag = tl.minimum(tl.minimum(k, count - 1) * TILE, n + m)
    split = diagonal_split(a_ptr, v_ptr, n, m, diag, DIAG_STEPS, LEFT)
    tl.store(s_ptr + k, split.to(s_ptr.dtype.element_ty), mask=k < count)
