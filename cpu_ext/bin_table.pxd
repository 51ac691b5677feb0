# The bin table: a search for needles in any order that starts each one
# near its answer. The keys' range [a[0], a[na - 1]] is cut into equal bins;
# a table gives, for each bin, a window of `a` that holds the answer of any
# needle in it, about the table's stride wide on evenly spread keys. A
# needle then takes one table lookup and a binary search of its window
# (about 5 levels) instead of a binary search of all of `a` (20 levels at
# 1e6 keys, the last of them cache misses), and the windows of a block of
# needles are found, and their first probes prefetched, before any is
# searched. For 4-byte keys in the x86-64-v3 module the windows are searched
# by jnp's probes in AVX2 gathers (gather_probes.pxd), 64 at a time: 1e6
# uniform float32 needles in 1e6 keys took 4.5 ms where the scalar lanes
# took 7.3 (2 threads, Intel Xeon), in 1e7 keys 12.6-14.9 ms against
# 16.3-17.4. Built from every stride-th key, in O(na / stride).
#
# Exact on any `a`, as jnp answers: a needle x whose predicate "a[i] is
# counted for x" is monotone in i (every needle, where `a` is sorted) has
# one boundary r, which every correct search finds, and r lies in its
# bin's window (see bin_window). Where it is not monotone, x lies in
# [a[d], a[d - 1]] for some descent d of `a` (see merge_around_descents):
# the table keeps those intervals, joined, and marks the bins they meet; a
# needle of a marked bin that lies in one takes jnp's own probes
# (probe_later), the others their window (needles of a float32 running sum
# of 1e7 weights: 1 in 260 probed, where the marked bins hold 1 in 28).
# Skewed keys crowd some bins, whose windows are then wider: never more
# levels than a binary search of all of `a`, plus the lookup.
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.stdlib cimport free, malloc, qsort

from search_kernels cimport (key_t, idx_t, side_t, RightSide, LANES, before, is_nan,
                             count_before, narrow_lanes, probe_levels, probe_lanes, probe_one,
                             KeyInterval, disjoint, gathers_serve, gather_lanes, prefetch)
from gather_probes cimport GATHER_LANES, table_windows

cdef enum:
    # A table's stride (table_stride) on rows of TABLE_PREFETCH_BYTES or
    # more: a bin per TABLE_STRIDE keys on evenly spread keys, and every
    # TABLE_STRIDE-th key places its bin (a window reaches back stride - 1
    # keys before the first such key of its bin). 8 and 16 measured alike
    # (float32, N = M = 1e6), 4 slower to build, 32 slower to search.
    TABLE_STRIDE = 8
    # Samples whose bins fill_samples finds together (a check block's).
    SAMPLE_BLOCK = 128
    # Groups of LANES needles whose windows are found before any of them is
    # searched, so that the lookups' and the first probes' cache misses
    # overlap (8 groups: 1.4x faster than one at a time, N = M = 1e6).
    TABLE_GROUPS = 8
    # Bytes of `a` below which a plain binary search is as fast: a row of
    # a few hundred keys takes no more levels than a window (1e6 uniform
    # float32 needles on 2 cores, AMD EPYC, against the gathers over all of
    # `a`: N = 800 3.7 -> 2.0-2.8 ms, N = 1e3 3.0-3.5 -> 2.1-2.6, N = 1e4
    # 4.8-5.0 -> 2.9-3.4; N = 200 and 500 no table, alike).
    TABLE_MIN_BYTES = 2048
    # Bytes of `a` from which a table takes TABLE_STRIDE, and table_block
    # prefetches the block's entries and windows. Below, the keys and the
    # table stay in L2: the prefetches only cost (N = 1e3 float32, 1e6
    # needles: 3.2-3.4 -> 2.1-2.6 ms without them), and a stride of 1 (a
    # bin per key, every key sampled) costs little to build and leaves
    # windows of a few keys, searched in 2-3 levels where stride 8 took 5
    # (2.0-3.2 -> 1.5-2.0 ms at N = 1e3 and 3e3).
    TABLE_PREFETCH_BYTES = 131072  # 2**17
    # A table entry: a position below 2^30 (rows of more keys take no
    # table), and a bit that marks a bin some descent's interval meets.
    POSITION = 0x3fffffff
    MARKED = 0x40000000


cdef struct BinTable:
    double low          # a[0], as a double
    double scale        # bins per unit of key
    double last_bin     # bins - 1, as a double
    Py_ssize_t bins
    Py_ssize_t stride   # table_stride: a bin per `stride` keys, every stride-th sampled
    # bins + 1 entries: start[b] is the position of the first sampled key
    # (every stride-th) whose bin is b or later, or na; with the bit
    # MARKED where bin b is marked.
    uint32_t* start
    # The descents' intervals [a[d], a[d - 1]], joined and sorted; NULL
    # where `a` has no descent.
    KeyInterval* descents
    Py_ssize_t descent_count


cdef inline Py_ssize_t bin_of(const BinTable* t, key_t x) noexcept nogil:
    """x's bin: non-decreasing in x (every step rounds monotonically), in
    [0, bins); a NaN goes to bin 0 (its answer is found elsewhere)."""
    return bin_of_double(t, <double>x)


cdef inline Py_ssize_t bin_of_double(const BinTable* t, double x) noexcept nogil:
    return <Py_ssize_t>bin_place(t, x)


cdef inline double bin_place(const BinTable* t, double x) noexcept nogil:
    """x's place in the bins, in [0, bins - 1], whose integer part is its
    bin: the steps that bin_of_double and bucket_search.bucket_ids convert
    to integers (bins are below 2^30, so an int32 holds it)."""
    cdef double u = (x - t.low) * t.scale
    u = u if u >= 0 else 0.0  # also NaN
    return u if u <= t.last_bin else t.last_bin


cdef inline Py_ssize_t table_stride(Py_ssize_t row_bytes) noexcept nogil:
    """The stride of a table over a row of `a` of row_bytes bytes (see
    TABLE_PREFETCH_BYTES)."""
    return TABLE_STRIDE if row_bytes >= TABLE_PREFETCH_BYTES else 1


cdef inline Py_ssize_t most_bins(Py_ssize_t n, Py_ssize_t key_bytes) noexcept nogil:
    """The most bins of a table over the first na <= n keys of a row of
    key_bytes keys (na // table_stride(na * key_bytes) does not rise with
    na at TABLE_PREFETCH_BYTES)."""
    return max(min(n, (TABLE_PREFETCH_BYTES - 1) // key_bytes), n // TABLE_STRIDE)


cdef inline bint begin_bin_table(BinTable* t, const key_t* a, Py_ssize_t na) noexcept nogil:
    """The table's bins and room for its entries, not filled, for a row of
    `a` whose first na keys hold no NaN; False where a table does not pay
    or cannot be made (few keys, an infinite or empty range, positions past
    POSITION, out of memory), and t.start is then NULL."""
    cdef double low, span
    t.start, t.descents, t.descent_count = NULL, NULL, 0
    if na * <Py_ssize_t>sizeof(key_t) < TABLE_MIN_BYTES or na > <Py_ssize_t>POSITION:
        return False
    low = <double>a[0]
    span = <double>a[na - 1] - low
    if not (span > 0) or span - span != 0:  # keys all equal, or not finite
        return False
    t.stride = table_stride(na * <Py_ssize_t>sizeof(key_t))
    t.bins = na // t.stride
    t.low, t.scale, t.last_bin = low, t.bins / span, <double>(t.bins - 1)
    t.start = <uint32_t*>malloc((t.bins + 1) * sizeof(uint32_t))
    return t.start != NULL


cdef inline Py_ssize_t table_samples(const BinTable* t, Py_ssize_t na) noexcept nogil:
    """The sampled keys of a begun table's row whose first na keys hold no
    NaN: every stride-th, from the first."""
    return (na - 1) // t.stride + 1


cdef inline void fill_samples(BinTable* t, const key_t* a, Py_ssize_t na, Py_ssize_t k0,
                              Py_ssize_t k1) noexcept nogil:
    """The share of a begun table's entries (begin_bin_table) that the
    sampled keys k0 to k1 - 1 place (key k * stride is sample k; k1
    at most table_samples): the bins from just past sample k0 - 1's bin to
    sample k1 - 1's (to the end, where that is the last sample); nothing
    for an empty share. Each bin's entry is written by one share, so the
    shares may be filled at once where they partition the samples; more
    than one share only where the row's first na keys are sorted (their
    bins then rise with them). Entries first hold na; then, from the back,
    each bin keeps its first sampled key; then each bin takes the least of
    its own and the next bins' (empty bins, and bins out of order around a
    descent). Branch-free but for the loops: a fill of each bin up to a
    sampled key's bin mispredicted its loop's uneven trip counts (perf at N
    = 1e7: 2.4x this fill's samples). The samples' bins are found
    SAMPLE_BLOCK at a time, in SIMD lanes, before any is placed."""
    cdef Py_ssize_t k = k1, first, last, b, j, block
    cdef int32_t bins[SAMPLE_BLOCK]
    if k1 <= k0:
        return
    first = bin_of(t, a[(k0 - 1) * t.stride]) + 1 if k0 > 0 else 0
    last = t.bins if k1 == table_samples(t, na) else bin_of(t, a[(k1 - 1) * t.stride])
    for b in range(first, last + 1):
        t.start[b] = <uint32_t>na
    while k > k0:
        block = min(<Py_ssize_t>SAMPLE_BLOCK, k - k0)
        k -= block
        for j in range(block):
            bins[j] = <int32_t>bin_place(t, <double>a[(k + j) * t.stride])
        j = block - 1
        # The share's first sampled keys may lie in the previous share's last bin.
        while j >= 0 and bins[j] >= first:
            t.start[bins[j]] = <uint32_t>((k + j) * t.stride)
            j -= 1
        if j >= 0:
            break
    for b in range(last - 1, first - 1, -1):
        t.start[b] = min(t.start[b], t.start[b + 1])


cdef inline bint build_bin_table(BinTable* t, const key_t* a, Py_ssize_t na,
                                 const int64_t* descents, Py_ssize_t count) noexcept nogil:
    """The table of a row of `a` whose first na keys hold no NaN, whose
    `count` descents (a[d - 1] > a[d]) are listed, in one share; False as
    begin_bin_table."""
    if not begin_bin_table(t, a, na):
        return False
    fill_samples(t, a, na, 0, table_samples(t, na))
    return mark_descents(t, a, descents, count)


cdef inline int by_low_key(const void* x, const void* y) noexcept nogil:
    cdef double p = (<const KeyInterval*>x).lo, q = (<const KeyInterval*>y).lo
    return (p > q) - (p < q)


cdef inline bint mark_descents(BinTable* t, const key_t* a, const int64_t* descents,
                               Py_ssize_t count) noexcept nogil:
    """Keeps the descents' intervals [a[d], a[d - 1]], joined, and marks
    the bins they meet, so that the marks cost O(bins + count log count)
    however wide and many they are; False (the table freed) when out of
    memory."""
    cdef KeyInterval* spans
    cdef Py_ssize_t k, b, held
    if count == 0:
        return True
    spans = <KeyInterval*>malloc(count * sizeof(KeyInterval))
    if spans == NULL:
        free(t.start)
        t.start = NULL
        return False
    for k in range(count):
        spans[k].lo, spans[k].hi = <double>a[descents[k]], <double>a[descents[k] - 1]
    qsort(spans, count, sizeof(KeyInterval), by_low_key)
    held = disjoint(spans, count)
    for k in range(held):
        for b in range(bin_of_double(t, spans[k].lo), bin_of_double(t, spans[k].hi) + 1):
            t.start[b] |= MARKED
    t.descents, t.descent_count = spans, held
    return True


cdef inline void free_bin_table(BinTable* t) noexcept nogil:
    free(t.start)
    free(t.descents)


cdef inline Py_ssize_t bin_window(const BinTable* t, Py_ssize_t b, Py_ssize_t* last) noexcept nogil:
    """The window [first, last] of bin b: it holds the boundary r of any
    needle x in bin b whose predicate is monotone. The keys at r and after
    are not counted for x, so their bins are b or later, and the first
    sampled one, at most stride - 1 after r, is at start[b] or later;
    the keys before r are counted, so their bins are b or earlier, and
    start[b + 1] is r or later."""
    last[0] = t.start[b + 1] & POSITION
    return max(<Py_ssize_t>(t.start[b] & POSITION) - (t.stride - 1), <Py_ssize_t>0)


cdef inline bint in_descent(const BinTable* t, double x) noexcept nogil:
    """Whether x lies in one of the table's descent intervals (False for a
    NaN)."""
    cdef Py_ssize_t lo = 0, hi = t.descent_count, mid
    while lo < hi:  # the intervals starting at x or below: [0, lo)
        mid = (lo + hi) >> 1
        if t.descents[mid].lo <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo > 0 and x <= t.descents[lo - 1].hi


cdef inline uint32_t aside_flag(const BinTable* t, Py_ssize_t b, key_t x) noexcept nogil:
    """Not 0 for a needle x of bin b that its window may not answer: MARKED
    for a marked bin, 1 for a NaN. Without a branch: a mispredicted one
    after the entry's load, at one needle in 28, stalled the block's
    lookups (1.5x the kernel's time)."""
    return (t.start[b] & MARKED) | <uint32_t>is_nan(x)


cdef inline uint32_t table_block(const key_t* a, Py_ssize_t na, const key_t* v, idx_t* out,
                                 uint32_t* aside, const BinTable* t, const side_t* side,
                                 Py_ssize_t shadow) noexcept nogil:
    """out for the block of TABLE_GROUPS * LANES needles at v, in groups
    each searched over one window length (the group's widest, so that the
    lanes run in lock-step), each lane's window moved left where it would
    pass na: groups of GATHER_LANES by jnp's probes in AVX2 gathers where
    gathers_serve (the window holds the one boundary every correct search
    finds; the windows found in AVX2 lanes too, by table_windows), else of
    LANES by narrow_lanes. Marked and NaN needles get a lane too; the
    caller replaces their answers where needed (answer_aside), finding
    them by `aside` (aside_flag of each needle) where the result, the
    flags' union, is not 0. Where `shadow` is not 0, the line `shadow`
    bytes past each window's middle is prefetched with it: the interp
    mode's line of fp (interp_values.pxd)."""
    cdef bint right = side_t is RightSide
    cdef bint prefetched = t.stride > 1
    cdef Py_ssize_t lo[TABLE_GROUPS * LANES]
    cdef int32_t bins[TABLE_GROUPS * LANES]
    cdef int32_t starts[TABLE_GROUPS * LANES]
    cdef Py_ssize_t width[TABLE_GROUPS]
    cdef const key_t* base[LANES]
    cdef key_t x[LANES]
    cdef Py_ssize_t g, k, b, w, last
    cdef int32_t gathered_width
    cdef uint32_t marks = 0
    # The block's table entries prefetched all at once: loaded one group at
    # a time, each stalled the group's windows (at N = 1e6 float32 the table
    # is 500 KB, mostly out of L2; 10-20% faster at N = 1e5 and 1e6).
    # The bins in 32 bits, apart from the prefetches, so that their loop
    # runs in SIMD lanes (as bucket_ids'): one at a time, it took a third
    # of this kernel's samples within buckets (N = M = 1e7).
    for k in range(TABLE_GROUPS * LANES):
        bins[k] = <int32_t>bin_place(t, <double>v[k])
    if prefetched:
        for k in range(TABLE_GROUPS * LANES):
            prefetch(&t.start[bins[k]])
    if gathers_serve(a, na):
        for g in range(TABLE_GROUPS * LANES // GATHER_LANES):
            k = g * GATHER_LANES
            marks |= table_windows(key_t is float, v + k, bins + k, t.start, POSITION, MARKED,
                                   <int32_t>t.stride - 1, <int32_t>na, starts + k, aside + k,
                                   &gathered_width)
            width[g] = gathered_width
            if prefetched:
                for k in range(k, k + GATHER_LANES):
                    prefetch(a + starts[k] + (gathered_width >> 1))
                    if shadow:
                        prefetch(<const char*>(a + starts[k] + (gathered_width >> 1)) + shadow)
        for g in range(TABLE_GROUPS * LANES // GATHER_LANES):
            k = g * GATHER_LANES
            gather_lanes(a, starts + k, width[g], probe_levels(width[g]), v + k, out + k, side)
            for k in range(k, k + GATHER_LANES):
                out[k] += starts[k]
        return marks
    for g in range(TABLE_GROUPS):
        w = 1
        for k in range(g * LANES, (g + 1) * LANES):
            b = bins[k]
            aside[k] = aside_flag(t, b, v[k])
            marks |= aside[k]
            lo[k] = bin_window(t, b, &last)
            w = max(w, last - lo[k] + 1)
        w = min(w, na)
        width[g] = w
        for k in range(g * LANES, (g + 1) * LANES):
            lo[k] = min(lo[k], na - w)
            if prefetched:
                prefetch(a + lo[k] + (w >> 1))
                if shadow:
                    prefetch(<const char*>(a + lo[k] + (w >> 1)) + shadow)
    for g in range(TABLE_GROUPS):
        for k in range(LANES):
            base[k] = a + lo[g * LANES + k]
            x[k] = v[g * LANES + k]
        narrow_lanes(base, x, width[g], side)
        for k in range(LANES):
            # An index from a difference of bytes, as in lower_bound_kernel.
            out[g * LANES + k] = <idx_t>((<const char*>base[k] - <const char*>a) // sizeof(key_t)
                                         + before(base[k][0], x[k], right))
    return marks

cdef struct Probes:
    # Needles of marked bins waiting for jnp's probes, LANES at a time.
    Py_ssize_t at[LANES]
    Py_ssize_t count


cdef inline void probe_later(Probes* probes, const key_t* a, Py_ssize_t n, int levels,
                             const key_t* v, idx_t* out, Py_ssize_t k,
                             const side_t* side) noexcept nogil:
    """Queues needle k for jnp's probes, and probes the queue in lock-step
    (probe_lanes) once it holds LANES needles: where a float32 running sum
    of 1e7 weights has 11,000 descents, a needle in a hundred is marked,
    and one at a time their probes' cache misses cost the row 2.5x."""
    cdef key_t x[LANES]
    cdef idx_t answers[LANES]
    cdef Py_ssize_t q
    probes.at[probes.count] = k
    probes.count += 1
    if probes.count < LANES:
        return
    for q in range(LANES):
        x[q] = v[probes.at[q]]
    probe_lanes(a, n, levels, x, answers, side)
    for q in range(LANES):
        out[probes.at[q]] = answers[q]
    probes.count = 0


cdef inline void answer_aside(Probes* probes, const key_t* a, Py_ssize_t n, int levels,
                              Py_ssize_t nan_answer, const key_t* v, idx_t* out, Py_ssize_t k,
                              uint32_t flag, const BinTable* t, const side_t* side) noexcept nogil:
    """Needle k, set aside by its flag (aside_flag), its window's answer in
    out[k]: a NaN's answer (in a marked bin too), jnp's probes queued
    (probe_later) for one in a descent's interval; the others of a marked
    bin keep their window's answer."""
    if flag & 1:
        out[k] = <idx_t>nan_answer
    elif in_descent(t, <double>v[k]):
        probe_later(probes, a, n, levels, v, out, k, side)


cdef inline void table_kernel(const key_t* a, Py_ssize_t na, Py_ssize_t n, const key_t* v,
                              Py_ssize_t m, idx_t* out, const BinTable* t,
                              const side_t* side, Py_ssize_t shadow=0) noexcept nogil:
    """Any needles in a row of `a` whose first na keys hold no NaN and are
    sorted but for the descents marked in `t`, as jnp's probes answer them:
    blocks of TABLE_GROUPS * LANES by table_block, the rest one by one; a
    NaN needle gets na (left) or n (right), where jnp's probes end with NaNs
    last; the needles in a descent's interval, jnp's probes (answer_aside).
    `shadow`: table_block's."""
    cdef bint right = side_t is RightSide
    cdef int levels = probe_levels(n)
    cdef Py_ssize_t nan_answer = n if right else na
    cdef Py_ssize_t j = 0, k, b, first, last
    cdef uint32_t aside[TABLE_GROUPS * LANES]
    cdef uint32_t flag
    cdef Probes probes
    probes.count = 0
    while j + TABLE_GROUPS * LANES <= m:
        if table_block(a, na, v + j, out + j, aside, t, side, shadow):
            for k in range(TABLE_GROUPS * LANES):
                if aside[k]:
                    answer_aside(&probes, a, n, levels, nan_answer, v, out, j + k, aside[k],
                                 t, side)
        j += TABLE_GROUPS * LANES
    for k in range(j, m):
        b = bin_of(t, v[k])
        first = bin_window(t, b, &last)
        out[k] = <idx_t>count_before(a, first, min(last, na), v[k], right)
        flag = aside_flag(t, b, v[k])
        if flag:
            answer_aside(&probes, a, n, levels, nan_answer, v, out, k, flag, t, side)
    for k in range(probes.count):
        out[probes.at[k]] = <idx_t>probe_one(a, n, levels, v[probes.at[k]], right)
