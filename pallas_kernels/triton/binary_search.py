"""Binary-search searchsorted for any needles, in the Triton language.

The kernel behind `triton_binary_search_searchsorted` (in
`searchsorted.py`, which imports this module lazily): each program takes
`BLOCK` needles, one lane each, and every lane searches the whole of `a`
with the same fixed number of halvings, ceil(log2(N + 1)), so the lanes of
a warp never diverge; in jnp's probe order, so that an unsorted `a` gets
jnp's answers. Grid: (ceil(M / BLOCK), batch).
"""

import triton
import triton.language as tl

from ._common import load_needles, probe_search, row_program, store_answers


@triton.jit
def binary_search_kernel(a_ptr, v_ptr, n, m, a_stride, v_stride, o_ptr,
                         BLOCK: tl.constexpr, STEPS: tl.constexpr, LEFT: tl.constexpr,
                         WIDE: tl.constexpr):
    """o[j] = the number of `a` elements that precede v[j] (LEFT: a < v,
    else a <= v), for the BLOCK needles of this program.

    Args:
      a_ptr, v_ptr: the haystack (n elements) and the needles (m elements) of
        batch row 0; row r starts `r * a_stride` (`r * v_stride`) further on,
        0 for an operand every row shares.
      STEPS: halvings, n.bit_length().
      o_ptr: int32 or int64 answers, m per row.
      WIDE: int64 positions (n or m + BLOCK passes 2**31 - 1).
    """
    a_ptr, v_ptr, o_ptr, n, m, program = row_program(a_ptr, v_ptr, o_ptr, n, m, a_stride,
                                                     v_stride, WIDE)
    search_block(a_ptr, v_ptr, o_ptr, n, m, program, BLOCK, STEPS, LEFT)


@triton.jit
def search_block(a_ptr, v_ptr, o_ptr, n, m, program, BLOCK: tl.constexpr, STEPS: tl.constexpr,
                 LEFT: tl.constexpr):
    """The answers of needle block `program` of one batch row (the pointers
    start at the row; `n`, `m` and `program` in the index type)."""
    start = program * BLOCK
    v_key, valid = load_needles(v_ptr, start, m - start, BLOCK)
    lo = tl.zeros([BLOCK], n.dtype)
    hi = tl.where(valid, lo + n, lo)
    answer = probe_search(lo, hi, a_ptr, v_key, STEPS, LEFT)
    store_answers(o_ptr, start, answer, valid, BLOCK)
