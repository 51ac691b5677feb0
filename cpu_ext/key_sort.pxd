# Keys sorted as jnp.sort sorts them (NaN after every number, -0.0 and 0.0
# alike), for the searches whose answers count the keys before each needle
# whatever a's order: jnp's "sort" and "compare_all" methods, whose answers
# are those of a search of the sorted keys.
#
# A row is copied, then its descents mended by insertion, one pass where it
# is sorted but for a few small descents (a running sum rounded, the
# resampling step's). Where mending would move more than one key per key of
# the row, the copy is merge-sorted instead: O(n log n) on any row.
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc
from libc.string cimport memcpy

from search_kernels cimport key_t

cdef enum:
    # Keys each merge sort run starts from, sorted by insertion.
    SORT_RUN = 16


cdef inline bint sorts_before(key_t x, key_t y) noexcept nogil:
    """x < y in jnp's sort order: a NaN after every number, NaNs alike."""
    if key_t is float or key_t is double:
        return (x < y) | ((y != y) & (x == x))
    else:
        return x < y


cdef inline bint mend(key_t* x, int64_t n, int64_t budget) noexcept nogil:
    """Sorts x[:n] in place by insertion, stably; False (x left a
    permutation of itself) once more than `budget` keys have moved."""
    cdef int64_t i, j
    cdef key_t key
    for i in range(1, n):
        if not sorts_before(x[i], x[i - 1]):
            continue
        key = x[i]
        j = i
        while j > 0 and sorts_before(key, x[j - 1]):
            x[j] = x[j - 1]
            j -= 1
        x[j] = key
        budget -= i - j
        if budget < 0:
            return False
    return True


cdef inline void merge_runs(const key_t* src, key_t* dst, int64_t lo, int64_t mid,
                            int64_t hi) noexcept nogil:
    """dst[lo:hi] = the sorted src[lo:mid] and src[mid:hi] merged, stably."""
    cdef int64_t i = lo, j = mid, k
    for k in range(lo, hi):
        if j == hi or (i < mid and not sorts_before(src[j], src[i])):
            dst[k] = src[i]
            i += 1
        else:
            dst[k] = src[j]
            j += 1


cdef inline void merge_sort(key_t* x, key_t* scratch, int64_t n) noexcept nogil:
    """Sorts x[:n] stably, bottom-up: runs of SORT_RUN by insertion, then
    merged pairwise, back and forth between x and `scratch` (n keys)."""
    cdef int64_t lo, width = SORT_RUN
    cdef key_t* src = x
    cdef key_t* dst = scratch
    cdef key_t* swap
    for lo in range((n + width - 1) // width):
        mend(x + lo * width, min(width, n - lo * width), width * width)
    while width < n:
        lo = 0
        while lo < n:
            merge_runs(src, dst, lo, min(lo + width, n), min(lo + 2 * width, n))
            lo += 2 * width
        swap = src
        src = dst
        dst = swap
        width *= 2
    if src != x:
        memcpy(x, src, n * sizeof(key_t))


cdef inline bint sort_row(const key_t* a, key_t* out, int64_t n,
                          key_t** scratch) noexcept nogil:
    """out[:n] = a[:n] sorted. `scratch` holds NULL or the merge sort's n
    keys, allocated here on the first row that needs them (the caller frees
    them); False where that allocation failed."""
    memcpy(out, a, n * sizeof(key_t))
    if mend(out, n, n):
        return True
    if scratch[0] == NULL:
        scratch[0] = <key_t*>malloc(n * sizeof(key_t))
        if scratch[0] == NULL:
            return False
    merge_sort(out, scratch[0], n)
    return True
