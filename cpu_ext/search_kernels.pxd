# The CPU searchsorted kernels, as inline fused functions shared by the FFI
# handler. One row: a haystack `a` of n keys and m needles `v`. On a sorted
# `a`, out[j] is the number of a-elements that sort before v[j] for the side
# (a < x for side='left', a <= x for side='right'), in jnp's total order:
# every NaN equal and last, -0.0 == 0.0.
#
# The binary search (bisect_kernel) follows jnp's own probes, so it answers
# as jnp's default method does on any `a`, sorted or not. The merge and runs
# kernels, and the lower-bound search (lower_bound_kernel), take a sorted `a`
# (NaN last): the handler checks that first unless the caller promised it.
# For them NaNs are split off once per row: `na` is the length of a's
# non-NaN prefix, so the hot loops compare plainly. A NaN needle gets na
# (left) or n (right).
#
# Every kernel keeps its indices in [0, n] whatever the input order, so a
# broken sortedness promise gives wrong indices, never an access out of bounds.
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t,
                          uint8_t, uint16_t, uint32_t, uint64_t)
from libc.stdlib cimport free, malloc, qsort
from libc.string cimport memcpy

from gather_probes cimport GATHER_LANES, GATHER_F32, GATHER_I32, GATHER_U32, gather, gathers_take

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

# The side as a type, so that each kernel is compiled once per side with its
# comparison folded in: the kernels take a null `const side_t*` whose type
# picks the side. (A runtime flag left the compiler one shared copy of each
# kernel, comparing both ways per step: 1.5x slower merges.)
cdef struct LeftSide:
    char unused
cdef struct RightSide:
    char unused

ctypedef fused side_t:
    LeftSide
    RightSide

# Whether the runs kernel trusts the needles' order (sorted_v=True) or checks
# it as it goes (sorted_v=None), also a type for the same reason. The runs
# kernel need not read most needles; checking, it reads each one once, in the
# pass that writes its answer, and gives up at the first run out of place
# (its caller then binary-searches the part). Against the promised call, at
# N=100 and M=1e6 on two cores: 2.0x with a separate check pass, 1.4-1.8x
# with each needle checked against its run's keys, 1.3-1.65x with the
# run's order checked (see fill_run). (The merge reads every needle anyway; for it one vectorised check of
# the whole part first measured cheaper than checks between its rounds of
# steps: within 1.1x at N=M, against 1.2-1.3x.)
cdef struct Trusted:
    char unused
cdef struct Checked:
    char unused

ctypedef fused trust_t:
    Trusted
    Checked

cdef enum:
    # Needles searched in lock-step by the binary search, for memory parallelism
    # (16 measured fastest on x86-64 from N = 1e3 to 1e7: 8 and 12 leave
    # misses unoverlapped, 24 and 32 spill registers).
    LANES = 16
    # Independent merges interleaved in one loop, to hide the loop-carried
    # latency. With one loop-carried register per chain (merge_kernel carries
    # i alone), 8 chains against the old 6 chains of two registers each: gcc's
    # build took 0.87-0.99x the time of the promised call on sorted N = M =
    # 1e5 and 1e7 in int32, int64 and float64 (bench/wheel_speed.py, the old
    # build as the "wheel"). Both gcc and clang still keep some chain state on
    # the stack at 8.
    CHAINS = 8
    # Steps of all chains at most between two looks at how near the end of
    # `a` they are (merge_kernel): a batch whose chains cannot reach it runs
    # without the clamp.
    MERGE_BATCH = 512
    # Elements the order checks look at between looks at their verdict.
    CHECK_BLOCK = 1024
    # Needles, at least, that merge_around_descents merges rather than
    # probes: a merge's setup costs about as many binary searches.
    MERGE_RUN = 64
    # Needles count_kernel counts together: 4-byte keys' counts in
    # registers (four AVX2 vectors), other keys' in L1.
    COUNT_TILE = 32
    COUNT_BLOCK = 256
    # Keys, at most, that count_kernel compares each needle with: the
    # built-in value of the call's `count_keys` (CpuConfig.count_keys, tuned
    # per machine) for 4-byte keys; the Python side gives keys of other
    # sizes their own (BUILT_IN_COUNT_KEYS, jaxsearch/tuning/cpu_config.py).
    # 1e6 unsorted needles on 2 cores, AMD EPYC, counted against searched:
    # float32 N = 64 0.90 against 1.71 ms, N = 128 1.60 against 1.89; int32
    # N = 64 0.76 against 1.38, N = 128 1.34 against 1.57. On an Intel Xeon
    # the crossover lay at 45 keys (float32) and 22 (int32) when the counts
    # were kept in L1, which took 1.4-2x the time of counts in registers.
    COUNT_KEYS = 64


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
        # One probe in the common case: the search's probes near the end of a
        # large `a` miss the TLB, one after another.
        if n == 0 or not is_nan(p[n - 1]):
            return n
        while lo < hi:
            mid = lo + (hi - lo) // 2
            if p[mid] != p[mid]:
                hi = mid
            else:
                lo = mid + 1
        return lo
    else:
        return n


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


cdef inline bint in_order(const key_t* v, Py_ssize_t start, Py_ssize_t stop,
                          bint nan_last) noexcept nogil:
    """Whether v[t - 1] <= v[t] for every t in [start, stop); false at any NaN,
    or with nan_last, true where v[t] is NaN: jnp's total order, NaNs last.
    Branch-free, so it vectorises. (Accumulating the pairs out of order,
    not the pairs in order: with nan_last a constant true, clang leaves
    `ok &= in_order_pair` scalar, 4x slower than gcc's vector loop.)"""
    cdef Py_ssize_t t
    cdef bint out_of_order = False
    for t in range(start, stop):
        out_of_order |= not ((v[t - 1] <= v[t]) | (nan_last & is_nan(v[t])))
    return not out_of_order


cdef inline bint in_order_blocks(const key_t* v, Py_ssize_t start, Py_ssize_t stop,
                                 bint nan_last) noexcept nogil:
    """in_order, in blocks of CHECK_BLOCK, each branch-free (vectorised), so
    that an order broken early is given up on within its block."""
    while start < stop:
        if not in_order(v, start, min(start + CHECK_BLOCK, stop), nan_last):
            return False
        start += CHECK_BLOCK
    return True


cdef inline Py_ssize_t merge_step(const key_t* a, Py_ssize_t na, const key_t* v,
                                  idx_t* out, Py_ssize_t i, Py_ssize_t j, bint right,
                                  bint clamp) noexcept nogil:
    """One step of a merge at (i, j): either a[i] is counted for v[j] (the
    next i is i + 1) or v[j] is resolved at i (the next j is j + 1); returns
    the next i. Branch-free. With `clamp` (a constant at each call), i may be
    na: the load is clamped and the step then takes no a; without, the
    caller guarantees i < na."""
    cdef bint take_a
    if clamp:
        take_a = (i < na) & before(a[min(i, na - 1)], v[j], right)
    else:
        take_a = before(a[i], v[j], right)
    out[j] = <idx_t>i
    return i + take_a


cdef extern from *:
    """
    /* x, which the optimiser must take as unknown (clang only: see
       merge_batch). */
    static inline Py_ssize_t jaxsearch_opaque(Py_ssize_t x) {
    #ifdef __clang__
        __asm__ volatile("" : "+r"(x));
    #endif
        return x;
    }
    """
    Py_ssize_t opaque "jaxsearch_opaque"(Py_ssize_t x) noexcept nogil
    void prefetch "__builtin_prefetch"(const void* p) noexcept nogil


cdef inline void merge_batch(const key_t* a, Py_ssize_t na, const key_t* v, idx_t* out,
                             Py_ssize_t* i, const Py_ssize_t* s, Py_ssize_t steps,
                             const side_t* side, bint clamp) noexcept nogil:
    """`steps` steps of every chain in lock-step (merge_kernel): chain k at
    (i[k], s[k] - i[k]) before them. A step moves i or j by one, so i + j
    grows by one per step: the loop carries i alone, and j is s[k] + t - i,
    one loop-carried register per chain, not two.

    Written for clang as well as gcc. clang need not inline this function
    into merge_kernel (gcc does), so the chains' i are copied into a local
    array, which it keeps in registers, not in the caller's memory, and the
    side is a type, not a flag. The step's needles and answers are two
    pointers, v + t and out + t, moved by `opaque(1)`: seeing them move by
    a constant, clang's loop strength reduction made v + s[k] + t and
    out + s[k] + t two induction variables per chain, more than there are
    registers, reloaded from the stack at every step (1.1-1.2x gcc's time
    on the sorted merge at N = M). With t itself opaque, it kept v, out, t,
    v + t and out + t, and the eighth chain's i went to the stack, its
    loop-carried add through memory (8-byte keys at N = M = 1e5: up to
    1.27x gcc's time). Now each chain's index is s[k] - i, one subtraction,
    as gcc compiles it, and the eight i stay in registers (8-byte integer
    keys, whose compare takes one more register, keep seven there).
    """
    cdef bint right = side_t is RightSide
    cdef Py_ssize_t k, one
    cdef Py_ssize_t at[CHAINS]
    cdef const key_t* v_now = v
    cdef const key_t* v_stop = v + steps
    cdef idx_t* out_now = out
    for k in range(CHAINS):
        at[k] = i[k]
    while v_now != v_stop:
        for k in range(CHAINS):
            at[k] = merge_step(a, na, v_now, out_now, at[k], s[k] - at[k], right, clamp)
        one = opaque(1)
        v_now += one
        out_now += one
    for k in range(CHAINS):
        i[k] = at[k]


cdef inline void merge_splits(const key_t* a, Py_ssize_t lo, Py_ssize_t hi,
                              const key_t* v, Py_ssize_t m, const Py_ssize_t* d,
                              Py_ssize_t* split, const side_t* side) noexcept nogil:
    """Where the merge of a[lo:hi] with v[0:m], started at (lo, 0), stands
    after d[k] steps, for each of the CHAINS k: split[k] = lo + the a's it
    has counted by then (the needles resolved are d[k] minus those). Binary
    searches along the diagonals (merge path): the step's a is counted
    before needle v[d[k] - t - 1] for the first t only. The CHAINS searches
    run in lock-step, so that their loads overlap: one after the other,
    each level waited for its load (the splits of the short merges of
    searchsorted_cumsum's segments took a third of their time so)."""
    cdef bint right = side_t is RightSide
    cdef Py_ssize_t base[CHAINS]
    cdef Py_ssize_t n[CHAINS]
    cdef Py_ssize_t k, half, t
    cdef bint searching = True
    # Chain k's answer lies in base[k] + [0, n[k]].
    for k in range(CHAINS):
        base[k] = max(<Py_ssize_t>0, d[k] - m)
        n[k] = max(<Py_ssize_t>0, min(d[k], hi - lo) - base[k])
    while searching:
        searching = False
        for k in range(CHAINS):
            if n[k] > 1:
                half = n[k] >> 1
                t = base[k] + half
                base[k] = t if before(a[lo + t], v[d[k] - t - 1], right) else base[k]
                n[k] -= half
                searching = True
    for k in range(CHAINS):
        if n[k] > 0:
            base[k] += before(a[lo + base[k]], v[d[k] - base[k] - 1], right)
        split[k] = lo + base[k]


cdef inline void merge_kernel(const key_t* a, Py_ssize_t na, const key_t* v,
                              Py_ssize_t m, idx_t* out, const side_t* side) noexcept nogil:
    """Sorted, NaN-free needles: CHAINS interleaved branch-free merges, each
    starting where the merge path puts an equal share of the whole merge's
    steps (a's counted plus needles resolved) between the first needle's
    answer and the last's. Equal shares of steps, not of needles: with
    needles dense in some stretches of `a` and sparse in others, chains of
    equal needle counts finish far apart, and the slowest then runs alone
    (the running sums of log-normal particle weights spent half their merge
    time so).

    The needles that count a[na - 1] are answered na first: on sorted
    needles a suffix, found by one search over v. In the merge of the rest,
    a[na - 1] is counted for no needle, so a step takes a[i] only below its
    needle's answer, itself below na: i stays below na and a[i] needs no
    clamp. The clamp's compare and select were a large part of the hot
    loop: without them, the sorted merge at N = M (1e5 and 1e7, four
    dtypes, gcc) took 0.67-0.92x the time (bench/wheel_speed.py against a
    wheel of the clamped kernel). A broken order (a promise, or the running
    sums of negative weights) can still take i to na, so the chains run in
    batches of at most MERGE_BATCH steps, in which i grows by at most as
    many: a batch that cannot reach na runs unclamped, any other clamped,
    and a broken order gives wrong indices, never a load out of bounds."""
    cdef bint right = side_t is RightSide
    cdef Py_ssize_t k, steps, t, first, last, total, next_i, reach
    cdef Py_ssize_t i[CHAINS]
    cdef Py_ssize_t j[CHAINS]
    cdef Py_ssize_t s[CHAINS]
    cdef Py_ssize_t d[CHAINS]
    cdef Py_ssize_t end[CHAINS]
    if na == 0:
        for k in range(m):
            out[k] = 0
        return
    # v[t] does not count a[na - 1] iff v[t] is counted for a[na - 1] with
    # the other side: on sorted needles, a prefix.
    k = count_before(v, 0, m, a[na - 1], not right)
    for t in range(k, m):
        out[t] = <idx_t>na
    m = k
    if m == 0:
        return
    first = count_before(a, 0, na, v[0], right)
    last = count_before(a, first, na, v[m - 1], right)
    total = (last - first) + m
    for k in range(CHAINS):
        d[k] = total * k // CHAINS  # the chain's first step
    merge_splits(a, first, last, v, m, d, i, side)
    for k in range(CHAINS):
        j[k] = d[k] - (i[k] - first)
        # Out of order (a broken promise), the splits need not increase:
        # keep the chains' needle ranges consecutive, so that every needle
        # is written and none twice.
        if k > 0:
            j[k] = max(j[k], j[k - 1])
            end[k - 1] = j[k]
    end[CHAINS - 1] = m
    # The chains advance in lock-step: independent dependency chains that the
    # core overlaps. A step moves j by at most one, so no chain can finish
    # within `steps` steps and the inner loop needs no test per step.
    while True:
        steps = min(end[0] - j[0], <Py_ssize_t>MERGE_BATCH)
        reach = i[0]
        for k in range(1, CHAINS):
            steps = min(steps, end[k] - j[k])
            reach = max(reach, i[k])
        if steps == 0:
            break
        for k in range(CHAINS):
            s[k] = i[k] + j[k]
        if reach + steps <= na:
            merge_batch(a, na, v, out, i, s, steps, side, False)
        else:
            merge_batch(a, na, v, out, i, s, steps, side, True)
        for k in range(CHAINS):
            j[k] = s[k] + steps - i[k]
    for k in range(CHAINS):
        while j[k] < end[k]:
            next_i = merge_step(a, na, v, out, i[k], j[k], right, True)
            j[k] += 1 - (next_i - i[k])
            i[k] = next_i


cdef inline bint is_sorted(const key_t* v, Py_ssize_t m) noexcept nogil:
    """Whether v is sorted with no NaN: v[t - 1] <= v[t] for every t (false
    at a NaN)."""
    return not (m > 0 and is_nan(v[0])) and in_order_blocks(v, 1, m, False)


cdef inline bint fill_run(const key_t* a, Py_ssize_t na, const key_t* v,
                          Py_ssize_t start, Py_ssize_t stop, Py_ssize_t i, idx_t* out,
                          bint right, const trust_t* trust) noexcept nogil:
    """out[start:stop] = i. A checking fill also reads each needle and returns
    whether i is really its answer. It checks that the run is in order (false
    at a NaN), then that its first needle counts a[i - 1] (unless i == 0) and
    its last does not count a[i] (unless i == na), and that neither end is
    NaN: in order, every needle between lies between them. One compare per
    needle, fused with the store and branch-free, so it vectorises. (In a
    plain C loop over 1e6 float32 in runs of 1e4, built like the extension:
    as fast as the trusted fill; three compares per needle, against both
    keys, 1.5x slower.)"""
    cdef Py_ssize_t k
    cdef bint ok = True
    # v + 1, through `opaque`: clang, seeing the neighbour, loads each needle
    # once and shuffles it into place for the pair after, three shuffles per
    # vector, 1.1x gcc's time (two loads) on runs of about 100 needles.
    cdef const key_t* after = v + opaque(1)
    if stop <= start:
        return True
    out[start] = <idx_t>i
    for k in range(start + 1, stop):
        out[k] = <idx_t>i
        if trust_t is Checked:
            ok &= v[k - 1] <= after[k - 1]
    if trust_t is Checked:
        ok &= (i == 0 or before(a[i - 1], v[start], right)) \
            & (i == na or not before(a[i], v[stop - 1], right)) \
            & (not is_nan(v[start])) & (not is_nan(v[stop - 1]))
    return ok


cdef inline bint runs_kernel(const key_t* a, Py_ssize_t na, const key_t* v,
                             Py_ssize_t m, idx_t* out, const side_t* side,
                             const trust_t* trust) noexcept nogil:
    """Sorted, NaN-free needles, many per a-element: fill the run of needles
    whose answer is i, for each i, galloping through v to the run's end.
    Returns False when checking found a needle whose answer is not its run's
    (the answers are then incomplete)."""
    cdef bint right = side_t is RightSide
    cdef Py_ssize_t i, j = 0, stop
    # Needles before the first a-element counted for v[0] are skipped at once.
    i = count_before(a, 0, na, v[0], right) if m > 0 else na
    while i < na and j < m:
        # v[k] has answer <= i iff a[i] is not counted for it, that is iff
        # v[k] is counted for a[i] with the other side.
        stop = gallop_before(v, j, m, a[i], not right)
        if not fill_run(a, na, v, j, stop, i, out, right, trust):
            return False
        j = stop
        i += 1
    return fill_run(a, na, v, j, m, na, out, right, trust)


cdef inline int probe_levels(Py_ssize_t n) noexcept nogil:
    """The levels of jnp's binary search over n keys: ceil(log2(n + 1)),
    the bit length of n."""
    cdef int levels = 0
    while n > 0:
        levels += 1
        n >>= 1
    return levels


cdef inline void probe_lanes(const key_t* a, Py_ssize_t n, int levels, const key_t* v,
                             idx_t* out, const side_t* side,
                             const int64_t* starts=NULL) noexcept nogil:
    """out[k] for the LANES needles v[0:LANES], by jnp's probe recurrence
    (jax's _searchsorted_scan_impl): `levels` times mid = low + (high - low)
    // 2, then (low, high) = (mid, high) if a[mid] is counted else (low,
    mid); the answer is high. Same probes, so the same answers as jnp on any
    `a`, sorted or not (a NaN needle is answered by the caller). Every mid
    lies in [0, n). Branch-free (two selects), the lanes in lock-step so
    that their cache misses overlap. With `starts`, lane k searches the row
    a[starts[k]:][:n] (its bounds run from starts[k], as gather_lanes'
    do)."""
    cdef bint right = side_t is RightSide
    cdef Py_ssize_t low[LANES]
    cdef Py_ssize_t high[LANES]
    cdef Py_ssize_t k, mid
    cdef bint c
    cdef int level
    for k in range(LANES):
        low[k] = starts[k] if starts != NULL else 0
        high[k] = low[k] + n
    for level in range(levels):
        for k in range(LANES):
            # low + (high - low) // 2, as both are below 2^62.
            mid = (low[k] + high[k]) >> 1
            c = before(a[mid], v[k], right)
            low[k] = mid if c else low[k]
            high[k] = high[k] if c else mid
    for k in range(LANES):
        out[k] = <idx_t>(high[k] - (starts[k] if starts != NULL else 0))


cdef inline Py_ssize_t probe_one(const key_t* a, Py_ssize_t n, int levels, key_t x,
                                 bint right) noexcept nogil:
    """jnp's probes for one needle (probe_lanes' recurrence, one lane): for
    a few needles, where a group of LANES would be mostly padding."""
    cdef Py_ssize_t low = 0, high = n, mid
    cdef bint c
    cdef int level
    for level in range(levels):
        mid = (low + high) >> 1
        c = before(a[mid], x, right)
        low = mid if c else low
        high = high if c else mid
    return high


cdef inline Py_ssize_t nan_needle_answer(const key_t* a, Py_ssize_t n, int levels,
                                         bint right) noexcept nogil:
    """jnp's answer for a NaN needle: n on side='right' (it comes after every
    key), else where its probes end, every non-NaN key being counted for it."""
    cdef Py_ssize_t low = 0, high = n, mid
    cdef int level
    if right:
        return n
    for level in range(levels):
        mid = low + (high - low) // 2
        if is_nan(a[mid]):
            high = mid
        else:
            low = mid
    return high


cdef inline bint gathers_serve(const key_t* a, Py_ssize_t n) noexcept nogil:
    """Whether gather_lanes answers for these keys: 4-byte keys, fewer than
    2^31 of them, in the x86-64-v3 module."""
    return ((key_t is float or key_t is int32_t or key_t is uint32_t)
            and gathers_take(sizeof(key_t), n))


cdef inline void gather_lanes(const key_t* a, const int32_t* starts, Py_ssize_t n, int levels,
                              const key_t* v, idx_t* out, const side_t* side) noexcept nogil:
    """out[k] for the GATHER_LANES needles v[0:GATHER_LANES], by jnp's probes
    in AVX2 lanes (gather_probes.pxd): each in the row a[starts[k]:][:n], or
    all in a[0:n] where `starts` is NULL; where gathers_serve(a, the keys
    from a to the last row's end)."""
    cdef int32_t answers[GATHER_LANES]
    cdef int32_t* into = <int32_t*>out if idx_t is int32_t else answers
    cdef Py_ssize_t k
    gather(GATHER_F32 if key_t is float else GATHER_I32 if key_t is int32_t else GATHER_U32,
           side_t is RightSide, a, starts, <int32_t>n, levels, v, into)
    if idx_t is int64_t:
        for k in range(GATHER_LANES):
            out[k] = answers[k]


cdef inline void answer_nan_needles(const key_t* a, Py_ssize_t n, int levels, const key_t* v,
                                    Py_ssize_t m, idx_t* out, bint right,
                                    Py_ssize_t* nan_answer) noexcept nogil:
    """jnp's answer for each NaN needle among v[0:m], found once per call
    (*nan_answer, -1 until then)."""
    cdef Py_ssize_t k
    if key_t is float or key_t is double:
        for k in range(m):
            if is_nan(v[k]):
                if nan_answer[0] < 0:
                    nan_answer[0] = nan_needle_answer(a, n, levels, right)
                out[k] = <idx_t>nan_answer[0]


cdef inline void bisect_kernel(const key_t* a, Py_ssize_t n, const key_t* v, Py_ssize_t m,
                               idx_t* out, const side_t* side) noexcept nogil:
    """Any needles in any `a`: jnp's binary search, GATHER_LANES needles at
    a time in AVX2 lanes where gathers_serve, else LANES at a time
    (probe_lanes); each NaN needle's answer is the same, found once."""
    cdef bint right = side_t is RightSide
    cdef int levels = probe_levels(n)
    cdef Py_ssize_t j = 0, k, nan_answer = -1
    cdef key_t last[LANES]
    cdef idx_t last_out[LANES]
    if gathers_serve(a, n):
        while j + GATHER_LANES <= m:
            gather_lanes(a, NULL, n, levels, v + j, out + j, side)
            answer_nan_needles(a, n, levels, v + j, GATHER_LANES, out + j, right, &nan_answer)
            j += GATHER_LANES
    while j < m:
        if j + LANES <= m:
            probe_lanes(a, n, levels, v + j, out + j, side)
        elif m - j <= LANES // 4:
            for k in range(j, m):
                out[k] = <idx_t>probe_one(a, n, levels, v[k], right)
        else:
            # The last few needles, padded to a group with the last of them.
            for k in range(LANES):
                last[k] = v[min(j + k, m - 1)]
            probe_lanes(a, n, levels, last, last_out, side)
            for k in range(m - j):
                out[j + k] = last_out[k]
        answer_nan_needles(a, n, levels, v + j, min(LANES, m - j), out + j, right, &nan_answer)
        j += LANES


cdef inline void count_kernel(const key_t* a, Py_ssize_t n, const key_t* v, Py_ssize_t m,
                               idx_t* out, const side_t* side) noexcept nogil:
    """Any needles in a short sorted `a` (NaN last): each needle's answer is
    the count of keys before it, each key compared with many needles at
    once (branch-free over the needles, so it vectorises), where jnp's
    probes would take a dependent load per level. A NaN needle gets na
    (left) or n (right).

    4-byte keys take COUNT_TILE needles at a time: a fixed count, so that
    their 32-bit counts, as wide as the keys' compares, stay in registers
    while every key passes. Counts in L1 (COUNT_BLOCK needles at a time)
    took a load and a store more per compare: one thread, 2e5 unsorted
    needles, AMD EPYC, float32 N = 32 0.27 -> 0.20 ms, N = 64 0.52 -> 0.33,
    N = 128 1.01 -> 0.60; int32 N = 32 0.29 -> 0.18; N = 9 0.10 -> 0.11,
    where reading the needles and writing the answers take most of the
    time. Other keys lost in such tiles (float64 N = 8 0.22 -> 0.26-0.35 ms,
    int16 N = 8 0.10 -> 0.12) and keep the blocks. A tile's answers are
    copied with the constant count too: with `size`, gcc made an int32
    tile's copy a `rep movsq` (with count_before_needles' zeroing, since
    gone, 1e6 int32 needles at N = 9 took 0.64 ms on two cores, 0.27
    without)."""
    cdef Py_ssize_t na = non_nan_prefix(a, n), start = 0, size
    cdef int32_t counts[COUNT_BLOCK]
    while start < m:
        size = min(<Py_ssize_t>(COUNT_TILE if sizeof(key_t) == 4 else COUNT_BLOCK), m - start)
        if size == COUNT_TILE:
            # The constant, not `size`: inlined, the loops then have a fixed
            # count, and the tile's counts stay in registers.
            count_before_needles(a, na, v + start, COUNT_TILE, counts, side)
            answer_counts(v + start, COUNT_TILE, counts, na, n, out + start, side)
        else:
            count_before_needles(a, na, v + start, size, counts, side)
            answer_counts(v + start, size, counts, na, n, out + start, side)
        start += size


cdef inline void count_before_needles(const key_t* a, Py_ssize_t na, const key_t* v,
                                      Py_ssize_t size, int32_t* counts,
                                      const side_t* side) noexcept nogil:
    """counts[j], j < size: the keys of a[0:na] counted for needle v[j].
    The counts start from the first key's compares, not from zeros: gcc
    made the zeroing of a tile a `rep stosq`, and its startup took a fifth
    of the kernel's time at N = 9 (int32)."""
    cdef bint right = side_t is RightSide
    cdef Py_ssize_t i, j
    cdef key_t key
    if na == 0:
        for j in range(size):
            counts[j] = 0
        return
    for j in range(size):
        counts[j] = before(a[0], v[j], right)
    for i in range(1, na):
        key = a[i]
        for j in range(size):
            counts[j] += before(key, v[j], right)


cdef inline void answer_counts(const key_t* v, Py_ssize_t size, const int32_t* counts,
                               Py_ssize_t na, Py_ssize_t n, idx_t* out,
                               const side_t* side) noexcept nogil:
    """count_kernel's answers for needles v[0:size] from their counts."""
    cdef bint right = side_t is RightSide
    cdef Py_ssize_t j
    for j in range(size):
        out[j] = (<idx_t>(n if right else na)) if is_nan(v[j]) else <idx_t>counts[j]


cdef inline void probe_rows(const key_t** a, const key_t** v, idx_t** out, Py_ssize_t n,
                            Py_ssize_t m, const side_t* side) noexcept nogil:
    """m needles v[k][0:m] in each of LANES rows a[k][0:n], answers into
    out[k][0:m]: jnp's probes (probe_lanes), each step taken by the LANES
    rows in lock-step, so that a batch of short rows keeps LANES independent
    searches in flight where one row has too few needles to. Exact on any
    `a`, as probe_lanes is. A caller with fewer rows repeats its last one."""
    cdef bint right = side_t is RightSide
    cdef int levels = probe_levels(n)
    cdef Py_ssize_t low[LANES]
    cdef Py_ssize_t high[LANES]
    cdef key_t x[LANES]
    cdef Py_ssize_t j, k, mid
    cdef bint c
    cdef int level
    for j in range(m):
        for k in range(LANES):
            low[k] = 0
            high[k] = n
            x[k] = v[k][j]
        for level in range(levels):
            for k in range(LANES):
                mid = (low[k] + high[k]) >> 1
                c = before(a[k][mid], x[k], right)
                low[k] = mid if c else low[k]
                high[k] = high[k] if c else mid
        for k in range(LANES):
            out[k][j] = <idx_t>(nan_needle_answer(a[k], n, levels, right) if is_nan(x[k])
                                else high[k])


cdef inline void gather_rows(const key_t* base, const key_t** a, const key_t** v, idx_t** out,
                             Py_ssize_t n, Py_ssize_t m, const side_t* side) noexcept nogil:
    """probe_rows for GATHER_LANES rows a[k][0:n], each within the keys from
    `base` on, in AVX2 lanes (gather_lanes), where gathers_serve(base, the
    keys from base to the last row's end)."""
    cdef bint right = side_t is RightSide
    cdef int levels = probe_levels(n)
    cdef int32_t starts[GATHER_LANES]
    cdef key_t x[GATHER_LANES]
    cdef idx_t answers[GATHER_LANES]
    cdef Py_ssize_t j, k
    for k in range(GATHER_LANES):
        # From a difference of bytes, as in lower_bound_kernel.
        starts[k] = <int32_t>((<const char*>a[k] - <const char*>base) // sizeof(key_t))
    for j in range(m):
        for k in range(GATHER_LANES):
            x[k] = v[k][j]
        gather_lanes(base, starts, n, levels, x, answers, side)
        for k in range(GATHER_LANES):
            out[k][j] = <idx_t>(nan_needle_answer(a[k], n, levels, right) if is_nan(x[k])
                                else answers[k])


cdef enum:
    # row_block prefetches the rows of the group this many groups ahead,
    # where a row spans at most ROW_PREFETCH_BYTES: 320,000 rows of 9
    # float32 keys (11.5 MB), one needle each, 1.26 -> 0.59 ms on 2 threads
    # in gathers. Rows of 64 keys gained nothing; longer rows have lines the
    # probes never read.
    PREFETCH_GROUPS = 2
    ROW_PREFETCH_BYTES = 128


cdef inline void row_block(const key_t* a, const key_t* v, idx_t* out, Py_ssize_t n,
                           Py_ssize_t m, int64_t rows, const side_t* side) noexcept nogil:
    """gather_rows, or probe_rows where gathers do not serve, for `rows`
    rows laid end to end: row r's keys a[r * n:][:n], its needles
    v[r * m:][:m], its answers out[r * m:][:m]. Each group's starts are a
    product and its needles a stride: the per-row pointers of gather_rows
    cost more than the probes of rows of a few keys (80,000 rows of 9
    float32 keys, one needle each, on 2 threads: two thirds of the time,
    0.33-0.39 -> 0.21-0.24 ms). The last group repeats its last row."""
    cdef bint right = side_t is RightSide
    cdef bint gathers = gathers_serve(a, rows * n)
    cdef int64_t lanes = GATHER_LANES if gathers else LANES
    cdef int levels = probe_levels(n)
    cdef int64_t starts[GATHER_LANES]
    cdef int32_t narrow_starts[GATHER_LANES]
    cdef key_t x[GATHER_LANES]
    cdef idx_t answers[GATHER_LANES]
    cdef const key_t* needles
    cdef idx_t* into
    cdef int64_t first = 0, last, j, k
    cdef bint nan_seen, whole
    cdef bint row_lines = n * sizeof(key_t) <= ROW_PREFETCH_BYTES
    cdef int64_t ahead, byte
    while first < rows:
        last = min(first + lanes, rows) - 1
        # One needle per row in a whole group: its needles and answers are
        # runs of v and out, read and written in place.
        whole = m == 1 and last - first + 1 == lanes
        for k in range(lanes):
            starts[k] = min(first + k, last) * n
            narrow_starts[k] = <int32_t>starts[k]  # gathers_serve: below 2^31
        if row_lines:
            ahead = min((first + PREFETCH_GROUPS * lanes) * n, rows * n)
            for byte in range(0, (min(ahead + lanes * n, rows * n) - ahead) * sizeof(key_t),
                              64):
                prefetch(<const char*>(a + ahead) + byte)
        for j in range(m):
            if whole:
                needles, into = v + first, out + first
            else:
                for k in range(lanes):
                    x[k] = v[min(first + k, last) * m + j]
                needles, into = x, answers
            nan_seen = False
            for k in range(lanes):
                nan_seen |= is_nan(needles[k])
            if gathers:
                gather_lanes(a, narrow_starts, n, levels, needles, into, side)
            else:
                probe_lanes(a, n, levels, needles, into, side, starts)
            if nan_seen:
                for k in range(lanes):
                    if is_nan(needles[k]):
                        into[k] = <idx_t>nan_needle_answer(a + starts[k], n, levels, right)
            if not whole:
                for k in range(last - first + 1):
                    out[(first + k) * m + j] = answers[k]
        first = last + 1


cdef inline void narrow_lanes(const key_t** base, const key_t* x, Py_ssize_t length,
                              const side_t* side) noexcept nogil:
    """Each lane's window base[k][0:length], length >= 1, narrowed in
    lock-step to its one key base[k][0] after which x[k]'s boundary lies
    (the boundary is then base[k] + before(base[k][0], x[k])). Branch-free:
    the lanes share one interval length, so one select per lane and level.
    The side is a type, not a flag, since clang need not inline this
    function (gcc does): with `right` a flag, each lane's compare took four
    more instructions, and clang's lanes 1.8-2.1x gcc's time (N = 1e3, M =
    1e5, unsorted)."""
    cdef bint right = side_t is RightSide
    cdef Py_ssize_t half, k
    cdef const key_t* p
    while length > 1:
        half = length >> 1
        for k in range(LANES):
            p = base[k]
            base[k] = p + half if before(p[half], x[k], right) else p
        length -= half


cdef inline void lower_bound_kernel(const key_t* a, Py_ssize_t n, const key_t* v, Py_ssize_t m,
                                    idx_t* out, const side_t* side) noexcept nogil:
    """Any needles in a sorted `a` (NaN last): branch-free binary searches
    over a's non-NaN prefix, LANES in lock-step. On a sorted `a` every
    correct search answers as jnp's probes do, and this one is cheaper: the
    lanes share one interval length (one select per lane and level, where
    jnp's recurrence needs two): 1.4-1.6x faster than bisect_kernel's
    scalar lanes on the same sorted `a` (float32, N = 1e5 to 1e7, 1e6 and
    1e7 random needles). Where gathers_serve, bisect_kernel's AVX2 lanes
    answer instead: on a sorted `a` jnp's probes give the same answers, and
    those lanes took half this search's time (gather_probes.pxd)."""
    cdef bint right = side_t is RightSide
    cdef Py_ssize_t na, nan_answer
    # Each lane's search window starts at base[k]: a pointer, not an index,
    # for clang, which turns `c ? i + half : i` on an index into a select of
    # half or 0 and an add (1.1-1.3x slower lanes than gcc's lea and cmov);
    # on a pointer it keeps the cmov, and gcc's int lanes ran 5-15% faster.
    cdef const key_t* base[LANES]
    # The group's needles, copied, so that the lanes read them at fixed offsets.
    cdef key_t x[LANES]
    cdef Py_ssize_t j = 0, k, lo
    if gathers_serve(a, n):
        bisect_kernel(a, n, v, m, out, side)
        return
    na = non_nan_prefix(a, n)
    nan_answer = n if right else na
    if na == 0:
        for j in range(m):
            out[j] = <idx_t>(nan_answer if is_nan(v[j]) else 0)
        return
    while j + LANES <= m:
        for k in range(LANES):
            base[k] = a
            x[k] = v[j + k]
        narrow_lanes(base, x, na, side)
        for k in range(LANES):
            # The window's index, from a difference of bytes: Cython's
            # overflowcheck (meson's debug_checks) subtracts typed pointers
            # as integers, giving bytes, not elements.
            lo = (<const char*>base[k] - <const char*>a) // sizeof(key_t)
            out[j + k] = <idx_t>(nan_answer if is_nan(x[k])
                                 else lo + before(base[k][0], x[k], right))
        j += LANES
    for j in range(j, m):
        out[j] = <idx_t>(nan_answer if is_nan(v[j]) else count_before(a, 0, na, v[j], right))


cdef struct NeedleRange:
    Py_ssize_t lo
    Py_ssize_t hi


cdef struct KeyInterval:
    # [lo, hi] of keys, as doubles: a conversion that rounds (64-bit
    # integers past 2^53) rounds monotonically, so that a key in an interval
    # stays in it.
    double lo
    double hi


ctypedef fused span_t:
    NeedleRange
    KeyInterval


cdef inline int by_lo(const void* x, const void* y) noexcept nogil:
    cdef Py_ssize_t p = (<const NeedleRange*>x).lo, q = (<const NeedleRange*>y).lo
    return (p > q) - (p < q)


cdef inline int by_position(const void* x, const void* y) noexcept nogil:
    cdef int64_t p = (<const int64_t*>x)[0], q = (<const int64_t*>y)[0]
    return (p > q) - (p < q)


cdef inline void order_descents(const key_t* a, int64_t* descents, Py_ssize_t count,
                                int64_t* peaks, int64_t* valleys) noexcept nogil:
    """Sorts a row's descents by position, and for the k-th finds where the
    largest key before it lies (peaks[k], among the keys a[d - 1] of the
    first k + 1 descents) and the smallest after it (valleys[k], among the
    a[d] of the k-th and later): both rise with k, so that a slice of
    needles finds the descents that may hold any of its needles by two
    binary searches."""
    cdef Py_ssize_t k
    qsort(descents, count, sizeof(int64_t), by_position)
    for k in range(count):
        peaks[k] = descents[k] - 1
        if k > 0 and a[peaks[k - 1]] > a[peaks[k]]:
            peaks[k] = peaks[k - 1]
    for k in range(count - 1, -1, -1):
        valleys[k] = descents[k]
        if k < count - 1 and a[valleys[k + 1]] < a[valleys[k]]:
            valleys[k] = valleys[k + 1]


cdef inline Py_ssize_t disjoint(span_t* ranges, Py_ssize_t count) noexcept nogil:
    """Ranges sorted by start, overlapping ones joined in place; how many."""
    cdef Py_ssize_t k, kept = 0
    for k in range(count):
        if kept > 0 and ranges[k].lo <= ranges[kept - 1].hi:
            ranges[kept - 1].hi = max(ranges[kept - 1].hi, ranges[k].hi)
        else:
            ranges[kept] = ranges[k]
            kept += 1
    return kept


cdef inline bint merge_compacted(const key_t* a, Py_ssize_t na, const key_t* v, Py_ssize_t m,
                                 idx_t* out, const NeedleRange* ranges, Py_ssize_t count,
                                 const side_t* side) noexcept nogil:
    """The needles outside the disjoint, sorted `ranges` (count of them, then
    the sentinel (m, m)), copied together and merged in one merge_kernel,
    their answers copied back; False when out of memory (nothing written)."""
    cdef key_t* kept = <key_t*>malloc(m * sizeof(key_t))
    cdef idx_t* answers = <idx_t*>malloc(m * sizeof(idx_t))
    cdef Py_ssize_t k, j = 0, g = 0
    if kept == NULL or answers == NULL:
        free(kept)
        free(answers)
        return False
    for k in range(count + 1):
        memcpy(kept + g, v + j, (ranges[k].lo - j) * sizeof(key_t))
        g += ranges[k].lo - j
        j = ranges[k].hi
    merge_kernel(a, na, kept, g, answers, side)
    j = g = 0
    for k in range(count + 1):
        memcpy(out + j, answers + g, (ranges[k].lo - j) * sizeof(idx_t))
        g += ranges[k].lo - j
        j = ranges[k].hi
    free(kept)
    free(answers)
    return True


cdef inline bint merge_around_descents(const key_t* a, Py_ssize_t na, Py_ssize_t n,
                                       const key_t* v, Py_ssize_t m, idx_t* out,
                                       const int64_t* descents, const int64_t* peaks,
                                       const int64_t* valleys, Py_ssize_t count,
                                       const side_t* side) noexcept nogil:
    """Sorted, NaN-free needles in a row of `a` sorted but for `count`
    descents (a[d - 1] > a[d], neither a NaN, NaNs only at the end), as jnp
    answers them.

    Where a needle x's predicate "a[i] is counted for x" is monotone in i,
    jnp's probes find its one boundary, and so does the merge, as long as
    every needle it merges is such a needle (the grid of a's against needles
    is then a staircase, which is all the merge path needs). The predicate
    fails to be monotone only if some a[i] is not counted while a later a[j]
    is; walking from i to j the keys cross x downwards at a descent d, so x
    lies in [a[d], a[d - 1]]. The needles in those intervals (in a float32
    running sum, a few ulps wide each) take jnp's probes; the runs of needles
    between them are merged (or probed, where too short for a merge's setup).
    The descents come sorted, with their peaks and valleys (order_descents).
    Returns False when out of memory."""
    cdef Py_ssize_t k, lo, hi, first, last, j = 0, held = 0
    cdef NeedleRange* ranges
    if m == 0:
        return True
    # The descents whose [a[d], a[d - 1]] may meet [v[0], v[m - 1]]: the
    # first whose peak reaches v[0], to the last whose valley is under v[m - 1].
    first, last = 0, count
    while first < last:
        k = (first + last) >> 1
        if a[peaks[k]] < v[0]:
            first = k + 1
        else:
            last = k
    last = count
    lo = first
    while lo < last:
        k = (lo + last) >> 1
        if a[valleys[k]] <= v[m - 1]:
            lo = k + 1
        else:
            last = k
    ranges = <NeedleRange*>malloc((last - first + 1) * sizeof(NeedleRange))  # + the sentinel
    if ranges == NULL:
        return False
    for k in range(first, last):
        lo = count_before(v, 0, m, a[descents[k]], False)
        hi = count_before(v, lo, m, a[descents[k] - 1], True)
        if lo < hi:
            ranges[held].lo, ranges[held].hi = lo, hi
            held += 1
    qsort(ranges, held, sizeof(NeedleRange), by_lo)
    held = disjoint(ranges, held)
    ranges[held].lo, ranges[held].hi = m, m  # the sentinel: the last run ends at m
    # Few ranges: merge each run between them (a merge's setup costs about a
    # thousand needles' merging); many: merge a compacted copy of the runs.
    if held * 1024 <= m or not merge_compacted(a, na, v, m, out, ranges, held, side):
        for k in range(held + 1):
            lo = ranges[k].lo
            if lo - j >= MERGE_RUN:
                merge_kernel(a, na, v + j, lo - j, out + j, side)
            elif lo > j:
                bisect_kernel(a, n, v + j, lo - j, out + j, side)
            j = ranges[k].hi
    for k in range(held):
        bisect_kernel(a, n, v + ranges[k].lo, ranges[k].hi - ranges[k].lo, out + ranges[k].lo,
                      side)
    free(ranges)
    return True
