# Search in a running sum without materialising it: out[j] is the number of
# running sums P[t] = w[0] + ... + w[t] that come before needle v[j] for the
# side (P[t] < v[j] for side='left', P[t] <= v[j] for 'right'), in the total
# order of searchsorted (every NaN equal and last).
#
# The weights are cut into segments of at most a few thousand. Their sums
# (in double, `segment_sum`) and a prefix over them give each segment its
# base, the running sum before it; a segment then merges its own running
# sums, started from its base, with the needles that fall between its base
# and the next one (`merge_segments`). The running sums are accumulated in
# double whatever the weights, and no sum runs longer than a segment from an
# accurate base, so each P[t] is within about (segment length) * 2^-53 of the
# exact sum, relative, for non-negative weights: as accurate as a float64
# running sum, and better than one over all the weights.
#
# Every kernel keeps its indices in bounds and writes every needle whatever
# the inputs: negative weights (an unsorted running sum) or unsorted needles
# give unspecified indices, never an access out of bounds.
from search_kernels cimport idx_t, side_t, RightSide

ctypedef fused weight_t:
    float
    double

cdef enum:
    # Independent accumulators of a segment sum: the adds overlap.
    SUM_LANES = 8
    # Segments merged in lock-step, to hide each merge's loop-carried latency.
    CUMSUM_CHAINS = 6


cdef inline bint sum_before(double s, double x, bint right) noexcept nogil:
    """Whether a running sum s counts for needle x, in the total order: NaN
    needles come after every number, and a NaN sum after every needle but
    a NaN one on side='right'."""
    return (s < x) | (right & (s == x)) | ((x != x) & (right | (s == s)))


cdef inline double segment_sum(const weight_t* w, Py_ssize_t count) noexcept nogil:
    """Sum of w[0:count] in double."""
    cdef double acc[SUM_LANES]
    cdef Py_ssize_t t = 0, k
    for k in range(SUM_LANES):
        acc[k] = 0.0
    while t + SUM_LANES <= count:
        for k in range(SUM_LANES):
            acc[k] += w[t + k]
        t += SUM_LANES
    for t in range(t, count):
        acc[0] += w[t]
    for k in range(1, SUM_LANES):
        acc[0] += acc[k]
    return acc[0]


cdef inline Py_ssize_t needles_before(const weight_t* v, Py_ssize_t m, double base,
                                      bint right) noexcept nogil:
    """How many of the sorted needles v[0:m] have their answer before the
    running sum `base`: those for which `base` does not count."""
    cdef Py_ssize_t lo = 0, hi = m, mid
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if sum_before(base, v[mid], right):
            hi = mid
        else:
            lo = mid + 1
    return lo


cdef inline void running_sums(const weight_t* w, Py_ssize_t count, double base,
                              double* out) noexcept nogil:
    """out[t] = base + w[0] + ... + w[t] for t < count, in double."""
    cdef Py_ssize_t t
    for t in range(count):
        base += w[t]
        out[t] = base


cdef inline void merge_segments(const weight_t* w, const weight_t* v, idx_t* out,
                                const Py_ssize_t* start, const Py_ssize_t* stop,
                                const double* base, const Py_ssize_t* first,
                                const Py_ssize_t* last, int count,
                                const side_t* side) noexcept nogil:
    """Merges up to CUMSUM_CHAINS segments in lock-step.

    Segment k holds weights w[start[k]:stop[k]] (non-empty), its running sums
    start from base[k], and it answers the needles v[first[k]:last[k]].
    Each step either counts one running sum for the current needle or writes
    the needle's answer; a needle past the segment's last running sum gets
    stop[k]. Branch-free: the weight to add is selected, never branched on.
    """
    cdef bint right = side_t is RightSide
    cdef Py_ssize_t i[CUMSUM_CHAINS]
    cdef Py_ssize_t j[CUMSUM_CHAINS]
    cdef Py_ssize_t end[CUMSUM_CHAINS]
    cdef double s[CUMSUM_CHAINS]
    cdef Py_ssize_t steps, t, k
    cdef bint take
    for k in range(CUMSUM_CHAINS):
        if k < count:
            i[k], j[k], end[k] = start[k], first[k], max(first[k], last[k])
            s[k] = base[k] + w[start[k]]
        else:  # an idle chain: no needles
            i[k], j[k], end[k], s[k] = 0, 0, 0, 0.0
    # As in the search merge: a step moves j by at most one, so no chain can
    # finish within `steps` steps and the inner loop needs no test per step.
    while True:
        steps = end[0] - j[0]
        for k in range(1, CUMSUM_CHAINS):
            if end[k] > j[k]:
                steps = min(steps, end[k] - j[k]) if steps > 0 else end[k] - j[k]
        if steps <= 0:
            break
        for t in range(steps):
            for k in range(CUMSUM_CHAINS):
                if j[k] < end[k]:
                    take = (i[k] < stop[k]) & sum_before(s[k], v[j[k]], right)
                    out[j[k]] = <idx_t>i[k]
                    i[k] += take
                    j[k] += not take
                    # The clamped load stays inside the segment; past its end
                    # the sum is never counted again, so its value is moot.
                    s[k] += w[min(i[k], stop[k] - 1)] if take else 0.0
