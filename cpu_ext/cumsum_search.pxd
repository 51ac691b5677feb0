# Search in a running sum without materialising it: out[j] is the number of
# running sums P[t] = w[0] + ... + w[t] that come before needle v[j] for the
# side (P[t] < v[j] for side='left', P[t] <= v[j] for 'right'), in the total
# order of searchsorted (every NaN equal and last).
#
# The weights are cut into segments of at most a few thousand. Their sums
# (in double, `segment_sum`) and a prefix over them give each segment its
# base, the running sum before it; a segment then writes its own running
# sums, started from its base, into a buffer that stays in cache
# (`running_sums`), and merges them with the needles that fall between its
# base and the next one (`merge_segment`, the search's merge kernel). The
# running sums are accumulated in double whatever the weights, and no sum
# runs longer than a segment from an accurately summed base, so each P[t] is
# within about (segment length) * 2^-53 of the exact sum, relative, for
# non-negative weights: as accurate as a float64 running sum, and better
# than one over all the weights.
#
# Every kernel keeps its indices in bounds and writes every needle whatever
# the inputs: negative weights (an unsorted running sum) or unsorted needles
# give unspecified indices, never an access out of bounds.
from search_kernels cimport idx_t, side_t, RightSide, merge_kernel, non_nan_prefix

ctypedef fused weight_t:
    float
    double

cdef enum:
    # The longest segment: its running sums fit in a buffer on the stack
    # (and in the L1 or L2 cache).
    MAX_SEGMENT = 4096
    # Needles converted to double at a time, and merged by one call of the
    # merge kernel: as many as a segment's running sums, so that sorted
    # needles about as many as the weights take one call per segment (1024
    # took 1.09x this time at N = M = 1e7 float32, 1.1-1.3x float64, gcc).
    MERGE_BLOCK = MAX_SEGMENT
    # Probes per round of needles_before, plus one.
    SEARCH_WAYS = 8


cdef inline bint sum_before(double s, double x, bint right) noexcept nogil:
    """Whether a running sum s counts for needle x, in the total order: NaN
    needles come after every number, and a NaN sum after every needle but
    a NaN one on side='right'."""
    return (s < x) | (right & (s == x)) | ((x != x) & (right | (s == s)))


cdef extern from *:
    """
    /* Sum of w[0:count] in double, in eight lanes whose adds overlap: lane
       k takes w[8i + k], lane 0 the tail too, then the lanes are added in
       order. Written with vectors because clang, whose SLP vectorizer is
       off for this module (meson.build), left eight scalar lanes where gcc
       makes two 4-wide ones: phase 0 of the sorted cumsum took 1.09x gcc's
       perf samples at N = M = 1e7, float32 (now 0.92x). */
    typedef double jaxsearch_double4 __attribute__((vector_size(32)));
    #define JAXSEARCH_SEGMENT_SUM(name, T)                                   \
    static inline double name(const T* w, Py_ssize_t count) {                \
        typedef T T4 __attribute__((vector_size(4 * sizeof(T))));            \
        jaxsearch_double4 lo = {0, 0, 0, 0}, hi = {0, 0, 0, 0};              \
        T4 x, y;                                                             \
        Py_ssize_t t = 0;                                                    \
        for (; t + 8 <= count; t += 8) {                                     \
            __builtin_memcpy(&x, w + t, sizeof x);                           \
            __builtin_memcpy(&y, w + t + 4, sizeof y);                       \
            lo += __builtin_convertvector(x, jaxsearch_double4);             \
            hi += __builtin_convertvector(y, jaxsearch_double4);             \
        }                                                                    \
        double sum = lo[0];                                                  \
        for (; t < count; t++)                                               \
            sum += w[t];                                                     \
        return sum + lo[1] + lo[2] + lo[3] + hi[0] + hi[1] + hi[2] + hi[3];  \
    }
    JAXSEARCH_SEGMENT_SUM(jaxsearch_segment_sum_float, float)
    JAXSEARCH_SEGMENT_SUM(jaxsearch_segment_sum_double, double)
    """
    double segment_sum_float "jaxsearch_segment_sum_float"(const float* w,
                                                           Py_ssize_t count) noexcept nogil
    double segment_sum_double "jaxsearch_segment_sum_double"(const double* w,
                                                             Py_ssize_t count) noexcept nogil


cdef inline double segment_sum(const weight_t* w, Py_ssize_t count) noexcept nogil:
    """Sum of w[0:count] in double, in eight lanes (the C helper above)."""
    if weight_t is float:
        return segment_sum_float(w, count)
    else:
        return segment_sum_double(w, count)


cdef inline Py_ssize_t needles_before(const weight_t* v, Py_ssize_t m, double base,
                                      bint right) noexcept nogil:
    """How many of the sorted needles v[0:m] have their answer before the
    running sum `base`: those for which `base` does not count.

    The needles searched here are mostly not in cache, and a binary search
    waits for each probe's miss before it knows the next probe; in its
    branch-free form (clang's, with the cmov converter off for the search
    kernels) it cannot even speculate. So each round probes SEARCH_WAYS - 1
    needles spread over the range, independent loads whose misses overlap,
    and keeps the stretch between the last probe that is before `base` and
    the first that is not: log(m) / log(SEARCH_WAYS) rounds of misses. On
    unsorted needles the answer is some index in [0, m], the same for a
    given base."""
    cdef Py_ssize_t lo = 0, hi = m, step, t, before, mid
    while hi - lo >= SEARCH_WAYS:
        step = (hi - lo) // SEARCH_WAYS
        before = 0
        for t in range(1, SEARCH_WAYS):
            before += not sum_before(base, v[lo + t * step], right)
        # The answer is past probe `before` (lo itself when none is before)
        # and at most probe before + 1 (hi past the last).
        hi = hi if before == SEARCH_WAYS - 1 else lo + (before + 1) * step
        lo = lo + before * step + (before > 0)
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if sum_before(base, v[mid], right):
            hi = mid
        else:
            lo = mid + 1
    return lo


cdef inline Py_ssize_t needles_before_from(const weight_t* v, Py_ssize_t lo, Py_ssize_t m,
                                           double base, bint right) noexcept nogil:
    """needles_before for needles whose answers before v[lo] are known to
    be before `base`: an exponential search from lo, O(log(answer - lo))
    probes near lo, where needles_before's first probes miss the cache all
    over v (a segment's needles follow the last one's). The same answer as
    needles_before on sorted needles."""
    cdef Py_ssize_t step = 1
    while lo + step <= m and not sum_before(base, v[lo + step - 1], right):
        lo += step
        step <<= 1
    return lo + needles_before(v + lo, min(step - 1, m - lo), base, right)


cdef inline void running_sums(const weight_t* w, Py_ssize_t count, double base,
                              double* out) noexcept nogil:
    """out[t] = base + w[0] + ... + w[t] for t < count, in double.

    Four weights per step of the loop-carried sum (a chain of one add per
    weight was latency-bound); each out[t] is `base` plus a sum of at most
    four weights, so the sums stay non-decreasing for non-negative weights.
    """
    cdef Py_ssize_t t = 0
    cdef double w0, w01, w012
    while t + 4 <= count:
        w0 = w[t]
        w01 = w0 + w[t + 1]
        w012 = w01 + w[t + 2]
        out[t] = base + w0
        out[t + 1] = base + w01
        out[t + 2] = base + w012
        base = base + (w01 + (<double>w[t + 2] + w[t + 3]))
        out[t + 3] = base
        t += 4
    for t in range(t, count):
        base = base + w[t]
        out[t] = base


cdef inline const double* as_double(const weight_t* v, Py_ssize_t size,
                                   double* block) noexcept nogil:
    """v[0:size] in double: v itself, or converted into `block`."""
    cdef Py_ssize_t t
    if weight_t is double:
        return v
    else:
        for t in range(size):
            block[t] = v[t]
        return block


cdef inline void merge_segment(const double* sums, Py_ssize_t count, const weight_t* v,
                               Py_ssize_t m, idx_t* out, Py_ssize_t offset, double* block,
                               const side_t* side) noexcept nogil:
    """The answers of sorted needles v[0:m] among one segment's running sums
    sums[0:count] (in cache), plus `offset`: the search's merge kernel, on
    blocks of needles converted to double in `block` (MERGE_BLOCK of them).
    A NaN needle comes after every non-NaN sum (and, on side='right', after
    the NaN ones too)."""
    cdef Py_ssize_t na = non_nan_prefix(sums, count), j = 0, t, size, nv
    cdef const double* needles
    while j < m:
        size = min(<Py_ssize_t>MERGE_BLOCK, m - j)
        needles = as_double(v + j, size, block)
        nv = non_nan_prefix(needles, size)
        merge_kernel(sums, na, needles, nv, out + j, side)
        for t in range(nv):
            out[j + t] += <idx_t>offset
        for t in range(nv, size):
            out[j + t] = <idx_t>(offset + (count if side_t is RightSide else na))
        j += size
