"""The checked call's search, decided on the device, in the Triton language.

`searchsorted(a, v)` with `sorted_v=None` merges where `a` and `v` are both
sorted and binary-searches elsewhere. A `lax.cond` on that test would make
XLA read the predicate back on the host before it launches a branch. Here
the kernels take the test's result (the flag: int32, one per batch row, 0
for binary search) as an input instead: each program reads it and runs
either its merge-path tile (`merge_path.merge_program`) or its block of
needles (`binary_search.search_block`), so the compiled program holds no
conditional and never waits on the host. The grid is the larger of the two
kernels' grids; a program past its own kernel's grid does nothing. Where
the merge path partitions first, `checked_partition_kernel` runs
`partition_kernel` only where the flag is nonzero. Answers are those of the
kernel the flag picks.
"""

import triton
import triton.language as tl

from ._common import boundary_count, row_program, row_start
from .binary_search import search_block
from .merge_path import merge_program
from .partition import partition_kernel


@triton.jit
def _merging(f_ptr, f_stride):
    """Whether this program's batch row takes the merge path."""
    return tl.load(row_start(f_ptr, f_stride)) != 0


@triton.jit
def _checked(s_ptr, f_ptr, a_ptr, v_ptr, n, m, f_stride, a_stride, v_stride, o_ptr,
             TILE: tl.constexpr, BISECT: tl.constexpr, CHUNK: tl.constexpr,
             SERIAL: tl.constexpr, ITEMS: tl.constexpr, DIAG_STEPS: tl.constexpr,
             BLOCK: tl.constexpr, STEPS: tl.constexpr, LEFT: tl.constexpr, WIDE: tl.constexpr):
    merging = _merging(f_ptr, f_stride)
    a_ptr, v_ptr, o_ptr, n, m, program = row_program(a_ptr, v_ptr, o_ptr, n, m, a_stride,
                                                     v_stride, WIDE)
    # Programs are compared with each kernel's program count, not their
    # offsets: program * TILE may pass the index type where the binary
    # search's grid is the larger.
    if merging:
        if program < boundary_count(n, m, TILE) - 1:
            merge_program(s_ptr, a_ptr, v_ptr, o_ptr, n, m, program, TILE, BISECT, CHUNK, SERIAL,
                          ITEMS, DIAG_STEPS, LEFT)
    elif program < (m + (BLOCK - 1)) // BLOCK:
        search_block(a_ptr, v_ptr, o_ptr, n, m, program, BLOCK, STEPS, LEFT)


@triton.jit
def checked_kernel(f_ptr, a_ptr, v_ptr, n, m, f_stride, a_stride, v_stride, o_ptr,
                   TILE: tl.constexpr, BISECT: tl.constexpr, CHUNK: tl.constexpr,
                   SERIAL: tl.constexpr, ITEMS: tl.constexpr, DIAG_STEPS: tl.constexpr,
                   BLOCK: tl.constexpr, STEPS: tl.constexpr, LEFT: tl.constexpr,
                   WIDE: tl.constexpr):
    """`merge_path_kernel` (TILE, BISECT, CHUNK, SERIAL, ITEMS, DIAG_STEPS)
    where this row's flag `f_ptr[r * f_stride]` is nonzero, else
    `binary_search_kernel` (BLOCK, STEPS). WIDE: int64 positions where
    either kernel needs them."""
    _checked(None, f_ptr, a_ptr, v_ptr, n, m, f_stride, a_stride, v_stride, o_ptr, TILE, BISECT,
             CHUNK, SERIAL, ITEMS, DIAG_STEPS, BLOCK, STEPS, LEFT, WIDE)


@triton.jit
def checked_partitioned_kernel(s_ptr, f_ptr, a_ptr, v_ptr, n, m, f_stride, a_stride, v_stride,
                               o_ptr, TILE: tl.constexpr, BISECT: tl.constexpr,
                               CHUNK: tl.constexpr, SERIAL: tl.constexpr, ITEMS: tl.constexpr,
                               BLOCK: tl.constexpr, STEPS: tl.constexpr, LEFT: tl.constexpr,
                               WIDE: tl.constexpr):
    """`checked_kernel` whose merge path reads its splits from `s_ptr`, the
    output of `checked_partition_kernel` (unwritten where the flag is 0,
    and then unread)."""
    _checked(s_ptr, f_ptr, a_ptr, v_ptr, n, m, f_stride, a_stride, v_stride, o_ptr, TILE, BISECT,
             CHUNK, SERIAL, ITEMS, 0, BLOCK, STEPS, LEFT, WIDE)


@triton.jit
def checked_partition_kernel(f_ptr, a_ptr, v_ptr, n, m, f_stride, a_stride, v_stride, s_ptr,
                             TILE: tl.constexpr, BLOCK: tl.constexpr, DIAG_STEPS: tl.constexpr,
                             LEFT: tl.constexpr, WIDE: tl.constexpr):
    """`partition_kernel` where this row's flag is nonzero; nothing (no
    search, no store) where binary search answers instead."""
    if _merging(f_ptr, f_stride):
        partition_kernel(a_ptr, v_ptr, n, m, a_stride, v_stride, s_ptr, TILE, BLOCK, DIAG_STEPS,
                         LEFT, WIDE)
