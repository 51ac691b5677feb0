"""Pieces both native Triton kernels share, in the Triton language.

The same order as `.._order.sort_key` (every NaN equal and last, -0.0 == 0.0,
+-inf ordinary; integers in their own signed or unsigned order), computed on
values already loaded; a fixed-step bisection that serves both the per-lane
lower bound and the merge-path diagonal search; and the needle-block load
and store. This module imports triton: import it only where triton is
installed (the wrappers in `searchsorted.py` do so lazily).
"""

import triton
import triton.language as tl


@triton.constexpr_function
def _key_dtype(dtype):
    """The dtype of the keys of `dtype`: a float's signed twin, else itself."""
    if dtype.is_floating():
        return tl.core.get_int_dtype(dtype.primitive_bitwidth, True)
    return dtype


@triton.constexpr_function
def _magnitude_mask(dtype):
    """All bits but the sign bit of a float of this width."""
    return (1 << (dtype.primitive_bitwidth - 1)) - 1


@triton.constexpr_function
def _inf_bits(dtype):
    """The bit pattern of +inf: exponent all ones, mantissa zero."""
    return _magnitude_mask(dtype) - ((1 << dtype.fp_mantissa_width) - 1)


@triton.constexpr_function
def _sign_shift(dtype):
    return dtype.primitive_bitwidth - 1


@triton.jit
def order_key(x):
    """Integer keys whose order is the searchsorted total order of `x`.

    Integers are their own keys (signed or unsigned compares follow the
    dtype). A float becomes the signed integer of its width by bit tests
    alone, never a float compare, so subnormals keep their IEEE order even
    where the hardware flushes them to zero: -0.0 becomes +0.0, every NaN
    becomes the largest key, and negatives flip their magnitude bits
    (sign-magnitude to two's complement).
    """
    if x.dtype.is_floating():
        key_dtype: tl.constexpr = _key_dtype(x.dtype)
        mask: tl.constexpr = _magnitude_mask(x.dtype)
        bits = x.to(key_dtype, bitcast=True)
        magnitude = bits & mask
        bits = tl.where(magnitude == 0, tl.zeros_like(bits), bits)
        bits = tl.where(magnitude > _inf_bits(x.dtype), tl.full(bits.shape, mask, key_dtype), bits)
        return bits ^ ((bits >> _sign_shift(x.dtype)) & mask)
    else:
        return x


@triton.jit
def precedes(a_key, v_key, LEFT: tl.constexpr):
    """Whether an element of `a` counts towards needle `v` (merges before it).

    side='left' counts a < v, so equal elements of `a` follow the needle;
    side='right' counts a <= v, so they precede it.
    """
    if LEFT:
        return a_key < v_key
    else:
        return a_key <= v_key


@triton.constexpr_function
def index_dtype(wide):
    """The kernels' index type: int64 where positions may pass 2**31 - 1."""
    return tl.int64 if wide else tl.int32


@triton.constexpr_function
def bit_length(x):
    """`x.bit_length()` of a constexpr int: ceil(log2(x + 1)) halvings."""
    return x.bit_length()


@triton.jit
def as_index(x, WIDE: tl.constexpr):
    """`x` as the index type. `x` may be a scalar argument (int32, or uint32
    or int64 for large values), a constexpr (jax-triton turns a scalar equal
    to 1 into one) or a program id."""
    return tl.cast(x, index_dtype(WIDE))


@triton.jit
def bisect(
    lo,
    hi,
    a_ptr,
    v_key,
    v_ptr,
    v_last,
    STEPS: tl.constexpr,
    LEFT: tl.constexpr,
    DIAGONAL: tl.constexpr,
):
    """Per lane, the first `i` in [lo, hi] whose `a[i]` does not precede the
    needle, in STEPS halvings (ceil(log2(hi - lo + 1)) resolve every lane):
    the trip count is a constant, never data. A loop, not `tl.static_range`:
    unrolled, the merge-path kernel took 10 s instead of 0.2 s to compile.

    The needle is `v_key`, or with DIAGONAL the element `v[v_last - i]` across
    the merge-path diagonal from `a[i]` (then `v_key` is unused). For an exact
    answer `precedes` must be true then false along [lo, hi) (sorted inputs);
    whatever the data, the answer stays in [lo, max(lo, hi)] and every element
    read lies at an `i` in [lo, hi), at `v_last - i` with DIAGONAL: the caller
    keeps those in bounds.
    """
    for _ in range(STEPS):
        active = lo < hi
        mid = lo + ((hi - lo) >> 1)  # No overflow: 0 <= lo < hi <= extent.
        a_key = order_key(tl.load(a_ptr + mid, mask=active, other=0))
        if DIAGONAL:
            needle = order_key(tl.load(v_ptr + (v_last - mid), mask=active, other=0))
        else:
            needle = v_key
        right = precedes(a_key, needle, LEFT) & active
        lo = tl.where(right, mid + 1, lo)
        hi = tl.where(active & (right == 0), mid, hi)
    return lo


@triton.jit
def diagonal_split(a_ptr, v_ptr, n, m, diag, STEPS: tl.constexpr, LEFT: tl.constexpr):
    """Per lane, how many elements of a[0:n] the first `diag` elements of the
    merge of `a` and v[0:m] hold, in STEPS halvings (min(n, m).bit_length()
    resolve every lane). Whatever the data, the split lies in
    [max(diag - m, 0), min(diag, n)] and every element read is in range."""
    return bisect(tl.maximum(diag - m, 0), tl.minimum(diag, n), a_ptr, None, v_ptr, diag - 1,
                  STEPS, LEFT, True)


@triton.jit
def probe_search(lo, hi, a_ptr, v_key, STEPS: tl.constexpr, LEFT: tl.constexpr):
    """Per lane, where jnp's own binary search ("scan") lands for `v_key` in
    a[lo:hi]: its probes in its order (`lo` moves to a counted key, `hi` to
    an uncounted one), so that the answer is jnp's on any `a`, sorted or not
    (as `_bisect.probe_search`). STEPS: ceil(log2(hi - lo + 1)). Every
    element read lies in [lo, hi)."""
    for _ in range(STEPS):
        active = lo < hi
        mid = lo + ((hi - lo) >> 1)  # No overflow: 0 <= lo < hi <= extent.
        a_key = order_key(tl.load(a_ptr + mid, mask=active, other=0))
        counted = precedes(a_key, v_key, LEFT) & active
        lo = tl.where(counted, mid, lo)
        hi = tl.where(counted, hi, mid)
    return hi


@triton.jit
def row_start(ptr, stride):
    """Where this program's batch row (grid axis 1) of an operand starts: row
    r lies `r * stride` elements on, stride 0 for an operand every row
    shares. Offsets are int64 whatever the index type: a batch may hold
    more than 2**31 elements in all."""
    return ptr + tl.program_id(1).to(tl.int64) * tl.cast(stride, tl.int64)


@triton.jit
def row_program(a_ptr, v_ptr, o_ptr, n, m, a_stride, v_stride, WIDE: tl.constexpr):
    """Where every answering kernel starts: the pointers of this program's
    batch row (`a` and `v` at their row strides, the output contiguous, one
    row of `m` per batch element), then `n`, `m` and the program's id along
    grid axis 0, in the index type."""
    a_ptr = row_start(a_ptr, a_stride)
    v_ptr = row_start(v_ptr, v_stride)
    o_ptr = row_start(o_ptr, m)
    return (a_ptr, v_ptr, o_ptr, as_index(n, WIDE), as_index(m, WIDE),
            as_index(tl.program_id(0), WIDE))


@triton.jit
def boundary_count(n, m, TILE: tl.constexpr):
    """The merge path's tile boundaries for n + m elements, both ends
    included: ceil((n + m) / TILE) + 1, the partition's splits per row.
    `n` and `m` in the index type (n + m + TILE fits it)."""
    return (n + m + (TILE - 1)) // TILE + 1


@triton.jit
def load_needles(v_ptr, start, count, BLOCK: tl.constexpr):
    """Keys of the needles `v[start:start + min(count, BLOCK)]` and the lanes
    that hold one. `start` must lie in [0, len(v)) where `count` > 0."""
    lane = tl.arange(0, BLOCK)
    valid = lane < count
    v = tl.load(v_ptr + start + lane, mask=valid, other=0)
    return order_key(v), valid


@triton.jit
def store_answers(o_ptr, start, answer, valid, BLOCK: tl.constexpr):
    """Writes a block of answers, converted to the output's dtype."""
    lane = tl.arange(0, BLOCK)
    tl.store(o_ptr + start + lane, answer.to(o_ptr.dtype.element_ty), mask=valid)


@triton.jit
def copy_one(x_ptr, o_ptr):
    """The smallest kernel: `triton_available` lowers a call of it once to
    learn whether jax-triton works with the installed jax."""
    tl.store(o_ptr, tl.load(x_ptr))
