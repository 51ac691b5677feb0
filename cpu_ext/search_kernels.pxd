# The CPU searchsorted kernels, as inline fused functions shared by the FFI
# handler. One row: a sorted haystack `a` of n keys and m needles `v`; out[j]
# is the number of a-elements that sort before v[j] for the side (a < x for
# side='left', a <= x for side='right'), in jnp's total order: every NaN equal
# and last, -0.0 == 0.0.
#
# NaNs are split off once per row: `na` is the length of a's non-NaN prefix
# (a sorted with NaN last), so the hot loops compare plainly. A NaN needle
# gets na (left) or n (right).
#
# Every kernel keeps its indices in [0, na] whatever the input order, so a
# broken sortedness promise gives wrong indices, never an access out of bounds.
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t,
                          uint8_t, uint16_t, uint32_t, uint64_t)

ctypedef fused key_t:
    int8_t
    int16_t
    int32_t
    int64_t
    uint8_t
    uint16_t
    uint32_t
    uint64_t
    float
    double

ctypedef fused idx_t:
    int32_t
    int64_t

cdef enum:
    # Width of the window the merge counts in one vectorised step.
    WINDOW = 16
    # Needles searched in lock-step by the binary search, for memory parallelism.
    LANES = 8
    # Independent merges interleaved in one loop, to hide the loop-carried latency.
    CHAINS = 4


cdef inline bint is_nan(key_t x) noexcept nogil:
    if key_t is float or key_t is double:
        return x != x
    else:
        return False


cdef inline bint before(key_t y, key_t x, bint right) noexcept nogil:
    """Whether y is counted for needle x: y < x (left) or y <= x (right)."""
    return (y < x) | (right & (y == x))


cdef inline Py_ssize_t non_nan_prefix(const key_t* p, Py_ssize_t n) noexcept nogil:
    """Length of the prefix of p (NaN last) that holds no NaN."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    if key_t is float or key_t is double:
        while lo < hi:
            mid = lo + (hi - lo) // 2
            if p[mid] != p[mid]:
                hi = mid
            else:
                lo = mid + 1
    return lo


cdef inline Py_ssize_t count_before(const key_t* p, Py_ssize_t lo, Py_ssize_t hi,
                                    key_t x, bint right) noexcept nogil:
    """lo + the length of the prefix of p[lo:hi] counted for x (branch-free)."""
    cdef Py_ssize_t n = hi - lo, half
    if n <= 0:
        return lo
    while n > 1:
        half = n >> 1
        lo = lo + half if before(p[lo + half], x, right) else lo
        n -= half
    return lo + before(p[lo], x, right)


cdef inline Py_ssize_t gallop_before(const key_t* p, Py_ssize_t lo, Py_ssize_t hi,
                                     key_t x, bint right) noexcept nogil:
    """count_before, in O(log(answer - lo)) steps: exponential search from lo."""
    cdef Py_ssize_t step = 1
    while lo + step <= hi and before(p[lo + step - 1], x, right):
        lo += step
        step <<= 1
    return count_before(p, lo, min(lo + step - 1, hi), x, right)


cdef inline bint is_sorted(const key_t* v, Py_ssize_t m) noexcept nogil:
    """Whether v is sorted in the total order (NaN last, -0.0 == 0.0)."""
    cdef Py_ssize_t j, start, stop
    cdef bint bad
    # Blocks keep the inner loop branch-free (vectorised) yet stop early.
    for start in range(0, m - 1, 1024):
        stop = min(start + 1024, m - 1)
        bad = False
        for j in range(start, stop):
            bad |= (v[j + 1] < v[j]) | (is_nan(v[j]) & (not is_nan(v[j + 1])))
        if bad:
            return False
    return True


cdef inline Py_ssize_t merge_step(const key_t* a, Py_ssize_t na, key_t x,
                                  Py_ssize_t i, bint right) noexcept nogil:
    """Answer for needle x given that a[:i] is counted for it (sorted input).

    Skips whole windows while their last element is counted, then counts the
    final window branch-free: for sorted a that count is exact.
    """
    cdef Py_ssize_t w
    cdef Py_ssize_t counted
    while i + WINDOW <= na:
        if before(a[i + WINDOW - 1], x, right):
            i += WINDOW
            continue
        counted = 0
        for w in range(WINDOW):
            counted += before(a[i + w], x, right)
        return i + counted
    while i < na and before(a[i], x, right):
        i += 1
    return i


cdef inline void merge_kernel(const key_t* a, Py_ssize_t na, const key_t* v,
                              Py_ssize_t m, idx_t* out, bint right) noexcept nogil:
    """Sorted, NaN-free needles: CHAINS interleaved merges over equal chunks of v."""
    cdef Py_ssize_t chunk = m // CHAINS, t, j
    cdef Py_ssize_t i0 = 0, i1, i2, i3
    if chunk >= 64:
        i1 = count_before(a, 0, na, v[chunk], right)
        i2 = count_before(a, 0, na, v[2 * chunk], right)
        i3 = count_before(a, 0, na, v[3 * chunk], right)
        for t in range(chunk):
            i0 = merge_step(a, na, v[t], i0, right)
            i1 = merge_step(a, na, v[chunk + t], i1, right)
            i2 = merge_step(a, na, v[2 * chunk + t], i2, right)
            i3 = merge_step(a, na, v[3 * chunk + t], i3, right)
            out[t] = <idx_t>i0
            out[chunk + t] = <idx_t>i1
            out[2 * chunk + t] = <idx_t>i2
            out[3 * chunk + t] = <idx_t>i3
        i0 = i3
        j = CHAINS * chunk
    else:
        j = 0
    for j in range(j, m):
        i0 = merge_step(a, na, v[j], i0, right)
        out[j] = <idx_t>i0


cdef inline void runs_kernel(const key_t* a, Py_ssize_t na, const key_t* v,
                             Py_ssize_t m, idx_t* out, bint right) noexcept nogil:
    """Sorted, NaN-free needles, many per a-element: fill the run of needles
    whose answer is i, for each i, galloping through v to the run's end."""
    cdef Py_ssize_t i, j = 0, stop, k
    # Needles before the first a-element counted for v[0] are skipped at once.
    i = count_before(a, 0, na, v[0], right) if m > 0 else na
    while i < na and j < m:
        # v[k] has answer <= i iff a[i] is not counted for it, that is iff
        # v[k] is counted for a[i] with the other side.
        stop = gallop_before(v, j, m, a[i], not right)
        for k in range(j, stop):
            out[k] = <idx_t>i
        j = stop
        i += 1
    for k in range(j, m):
        out[k] = <idx_t>na


cdef inline void bisect_kernel(const key_t* a, Py_ssize_t na, Py_ssize_t n,
                               const key_t* v, Py_ssize_t m, idx_t* out,
                               bint right) noexcept nogil:
    """Any needles: branch-free binary searches, LANES of them in lock-step so
    their cache misses overlap."""
    cdef Py_ssize_t base[LANES]
    cdef Py_ssize_t j = 0, k, length, half
    cdef Py_ssize_t nan_answer = n if right else na
    cdef key_t x
    if na == 0:
        for j in range(m):
            out[j] = <idx_t>(nan_answer if is_nan(v[j]) else 0)
        return
    while j + LANES <= m:
        for k in range(LANES):
            base[k] = 0
        length = na
        while length > 1:
            half = length >> 1
            for k in range(LANES):
                base[k] = base[k] + half if before(a[base[k] + half], v[j + k], right) else base[k]
            length -= half
        for k in range(LANES):
            x = v[j + k]
            out[j + k] = <idx_t>(nan_answer if is_nan(x)
                                 else base[k] + before(a[base[k]], x, right))
        j += LANES
    for j in range(j, m):
        x = v[j]
        out[j] = <idx_t>(nan_answer if is_nan(x) else count_before(a, 0, na, x, right))
