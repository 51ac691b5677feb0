"""Merge-path searchsorted for sorted needles, in the Triton language.

The kernels behind `triton_merge_path_searchsorted` (in `searchsorted.py`,
which imports this module lazily). With `a` and `v` both sorted the answers
are one merge of the two: a[i] goes before v[j] when it precedes it (a < v
for side='left', a <= v for 'right'), and the answer for v[j] is the number
of elements of `a` merged before it. The merged sequence of N + M elements
is cut into tiles of TILE elements, one program each (grid axis 0; axis 1
is the batch). Where a program's two tile boundaries (diagonals) cross `a`
comes from the partition kernel that runs first (`partition.py`; here
`merge_path_partitioned_kernel`), or from a fixed-step binary search of the
program's own with a lane per boundary (`merge_path_kernel`, the
`partition="per_program"` kernel). The program then resolves its needles
against its slice of `a` only: by a binary search per lane inside the slice
(BISECT); by counting, chunk by chunk of the slice, the elements that
precede each needle (a needles x CHUNK compare matrix); or (SERIAL) by one
serial merge per lane over a run of ITEMS elements of the tile, from where
that run starts in the tile's slices.

Broken promises (unsorted `a` or `v`) give unspecified answers, but every
answer lies in [0, N], every read and write is in bounds, and every needle
is written: the two programs sharing a boundary read one split or compute
it identically, so their needle ranges cover [0, M) without gaps; a program
whose range comes out longer than a tile loops over it; and a serial merge
whose lanes' walks did not cover the tile's needles once each answers them
again by bisection.
"""

import triton
import triton.language as tl

from ._common import (
    bisect,
    bit_length,
    boundary_count,
    diagonal_split,
    load_needles,
    order_key,
    precedes,
    row_program,
    row_start,
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
def _serial_merge(a_ptr, v_ptr, o_ptr, na, nv, i0, TILE: tl.constexpr, ITEMS: tl.constexpr,
                  LEFT: tl.constexpr):
    """Answers the needles v[0:nv] against a[0:na], the tile's slices (the
    pointers start there; answers are i0 plus a position in the slice), in
    runs of ITEMS merged elements, one lane each. Returns whether the walks
    covered v[0:nv] once each.

    Each lane finds where its run starts in the slices (a diagonal search of
    log2(TILE) steps), then walks ITEMS steps of their merge: a step answers
    the next needle or passes an element of `a`, and loads only the element
    it moves to. With the promise kept, each walk ends where the next lane's
    run starts; a prefix sum of the needles each lane answered tells whether
    that held (a broken promise may leave needles unanswered, or answered
    twice). Every read and write stays inside the slices whatever the data.
    """
    lane = tl.arange(0, TILE // ITEMS).to(na.dtype)
    start = tl.minimum(lane * ITEMS, na + nv)
    i = diagonal_split(a_ptr, v_ptr, na, nv, start, bit_length(TILE), LEFT)
    j = start - i
    j_start = j
    a_key = order_key(tl.load(a_ptr + i, mask=i < na, other=0))
    v_key = order_key(tl.load(v_ptr + j, mask=j < nv, other=0))
    # A constant trip count: lanes past the end of a short tile idle.
    for _ in range(ITEMS):
        answer = (j < nv) & ((i >= na) | (precedes(a_key, v_key, LEFT) == 0))
        # Masked lanes write nothing, on a GPU and in Triton's interpreter.
        tl.store(o_ptr + j, (i0 + i).to(o_ptr.dtype.element_ty), mask=answer)
        passes = (answer == 0) & (i < na)
        i = tl.where(passes, i + 1, i)
        j = tl.where(answer, j + 1, j)
        a_next = tl.load(a_ptr + i, mask=passes & (i < na), other=0)
        a_key = tl.where(passes, order_key(a_next), a_key)
        v_next = tl.load(v_ptr + j, mask=answer & (j < nv), other=0)
        v_key = tl.where(answer, order_key(v_next), v_key)
    answered = j - j_start
    through = tl.cumsum(answered, 0)  # needles answered by this lane and those before it
    # Every lane's run starts where the lanes before it stopped, and the
    # last stops at nv.
    misses = tl.sum(tl.where(through - answered == j_start, 0, 1), 0)
    return (misses == 0) & (tl.max(through, 0) == nv)


@triton.jit
def _merge_tile(
    a_ptr,
    v_ptr,
    o_ptr,
    d0,
    d1,
    i0,
    i1,
    TILE: tl.constexpr,
    BISECT: tl.constexpr,
    CHUNK: tl.constexpr,
    SERIAL: tl.constexpr,
    ITEMS: tl.constexpr,
    LEFT: tl.constexpr,
):
    """Writes the answers of the needles of the tile between diagonals d0
    and d1, whose splits (elements of `a` before them) are i0 and i1.

    Where the bisection answers again after a serial merge, a walk's store
    to the same needle (by another thread) may still land after it: both
    lie in [i0, i0 + na], so the answer stays in range either way."""
    # Sorted inputs: (i1 - i0) + (j1 - j0) = d1 - d0 <= TILE. Broken promises
    # may give a negative length; clamping keeps every index in range.
    na = tl.maximum(i1 - i0, 0)
    start = d0 - i0
    j1 = tl.maximum(d1 - i1, start)
    if SERIAL:
        covered = _serial_merge(a_ptr + i0, v_ptr + start, o_ptr + start, na, j1 - start, i0,
                                TILE, ITEMS, LEFT)
        start = tl.where(covered, j1, start)
    # A needle per lane: the serial merge's lanes are a tile's 1 / ITEMS
    # (ITEMS is 1 for the other methods).
    BLOCK: tl.constexpr = TILE // ITEMS
    # One block when the promise holds; more only if it is broken. After a
    # serial merge, none unless a broken promise left needles uncovered.
    while start < j1:
        v_key, valid = load_needles(v_ptr, start, j1 - start, BLOCK)
        if BISECT:
            lo = tl.zeros([BLOCK], i0.dtype) + i0
            hi = tl.where(valid, lo + na, lo)
            answer = bisect(lo, hi, a_ptr, v_key, None, None, bit_length(TILE), LEFT, False)
        else:
            answer = i0 + _compare_counts(a_ptr + i0, na, v_key, CHUNK, LEFT)
        store_answers(o_ptr, start, answer, valid, BLOCK)
        start += BLOCK


@triton.jit
def merge_program(
    s_ptr,
    a_ptr,
    v_ptr,
    o_ptr,
    n,
    m,
    program,
    TILE: tl.constexpr,
    BISECT: tl.constexpr,
    CHUNK: tl.constexpr,
    SERIAL: tl.constexpr,
    ITEMS: tl.constexpr,
    DIAG_STEPS: tl.constexpr,
    LEFT: tl.constexpr,
):
    """The answers of tile `program` of one batch row (the pointers start at
    the row; `n`, `m` and `program` in the index type). Its two boundaries'
    splits are read from the row's splits at `s_ptr` (`partition_kernel`'s,
    `boundary_count(n, m, TILE)` per row), or with `s_ptr` None searched
    here in DIAG_STEPS halvings."""
    d0 = tl.minimum(program * TILE, n + m)
    d1 = tl.minimum(d0 + TILE, n + m)
    if s_ptr is None:
        # Both boundaries in one search: the two lanes share every step's latency.
        lane = tl.arange(0, 2)
        diag = tl.where(lane == 0, d0, d1)
        split = diagonal_split(a_ptr, v_ptr, n, m, diag, DIAG_STEPS, LEFT)
        i0 = tl.max(tl.where(lane == 0, split, 0))
        i1 = tl.max(tl.where(lane == 1, split, 0))
    else:
        s_ptr = row_start(s_ptr, boundary_count(n, m, TILE))
        i0 = tl.load(s_ptr + program).to(n.dtype)
        i1 = tl.load(s_ptr + program + 1).to(n.dtype)
    _merge_tile(a_ptr, v_ptr, o_ptr, d0, d1, i0, i1, TILE, BISECT, CHUNK, SERIAL, ITEMS, LEFT)


@triton.jit
def merge_path_kernel(a_ptr, v_ptr, n, m, a_stride, v_stride, o_ptr,
                      TILE: tl.constexpr, BISECT: tl.constexpr, CHUNK: tl.constexpr,
                      SERIAL: tl.constexpr, ITEMS: tl.constexpr, DIAG_STEPS: tl.constexpr,
                      LEFT: tl.constexpr, WIDE: tl.constexpr):
    """o[j] = the number of `a` elements that precede v[j], for the needles of
    this program's tile of the merged sequence; the program searches its own
    two tile boundaries (`partition="per_program"`).

    Args:
      a_ptr, v_ptr: the sorted haystack (n elements) and sorted needles (m
        elements) of batch row 0; row r starts `r * a_stride` (`r * v_stride`)
        further on, 0 for an operand every row shares.
      o_ptr: int32 or int64 answers, m per row.
      TILE: merged elements per program. BISECT: per-lane bisection inside the
        slice, else compare matrices over CHUNK elements of `a` at a time.
        SERIAL: a serial merge of ITEMS elements per lane first (BISECT
        answers again what it did not cover); ITEMS is 1 without it.
      DIAG_STEPS: halvings of the diagonal search, min(n, m).bit_length().
      WIDE: int64 positions (n + m + TILE passes 2**31 - 1).
    """
    a_ptr, v_ptr, o_ptr, n, m, program = row_program(a_ptr, v_ptr, o_ptr, n, m, a_stride,
                                                     v_stride, WIDE)
    merge_program(None, a_ptr, v_ptr, o_ptr, n, m, program, TILE, BISECT, CHUNK, SERIAL, ITEMS,
                  DIAG_STEPS, LEFT)


@triton.jit
def merge_path_partitioned_kernel(s_ptr, a_ptr, v_ptr, n, m, a_stride, v_stride, o_ptr,
                                  TILE: tl.constexpr, BISECT: tl.constexpr, CHUNK: tl.constexpr,
                                  SERIAL: tl.constexpr, ITEMS: tl.constexpr, LEFT: tl.constexpr,
                                  WIDE: tl.constexpr):
    """`merge_path_kernel` with this program's two tile boundaries' splits
    read from `s_ptr`, the output of `partition_kernel` (same TILE and
    LEFT): `boundary_count(n, m, TILE)` splits per batch row, in the index
    type."""
    a_ptr, v_ptr, o_ptr, n, m, program = row_program(a_ptr, v_ptr, o_ptr, n, m, a_stride,
                                                     v_stride, WIDE)
    merge_program(s_ptr, a_ptr, v_ptr, o_ptr, n, m, program, TILE, BISECT, CHUNK, SERIAL, ITEMS,
                  0, LEFT)
