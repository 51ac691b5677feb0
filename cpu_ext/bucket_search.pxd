# The bucket search: many needles in any order in a row of `a` too large for
# the cache, searched through its bin table (bin_table.pxd) bucket by
# bucket. A bucket is a run of 2^shift neighbouring bins, whose keys (on
# evenly spread keys) and table entries fit in a core's L2. The needles are
# copied bucket by bucket, each with its position (a counting sort by
# bucket: two passes over them, the buckets of PARTITION_BLOCK needles
# found at once, in SIMD lanes, and the copies gathered a line per bucket
# and written by streaming stores), then searched by table_kernel in that
# order, and their answers put back in place a stretch of `out` at a time.
# Searched in their own order, a needle took a cache miss for its table
# entry and one or two for its window; here the bucket's entries and keys
# are read about once while its needles are searched.
# The threads share the work in three steps (BucketJob): each partitions
# a slice of the needles; each then searches a run of buckets, the needles
# of every slice in them, so that each reads its share of `a` (where each
# searched its own slice's needles in every bucket, each read all of it:
# N = 1e7, M = 1e6 float32 on 12 threads of a 13-core host, 4.0-4.5 ->
# 3.1-3.5 ms; alike on 2 cores); each then puts a slice's answers in place.
#
# The partition only orders the work: each needle is answered by
# table_kernel, so the answers are jnp's on any `a` the table takes
# (descents included).
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

from search_kernels cimport key_t, idx_t, side_t
from bin_table cimport (BinTable, POSITION, most_bins, table_stride, bin_of, bin_place, bin_window,
                       prefetch, table_kernel)
from huge_pages cimport huge_malloc, scratch_malloc, scratch_free
from interp_values cimport InterpValues, fp_shadow, interp_values

cdef extern from *:
    """
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #define JAXSEARCH_STREAM_STORES 1
    /* n bytes (a multiple of 16) from src to dst (both on 16 bytes) by
       streaming stores, which write whole lines without reading them. */
    static inline void jaxsearch_stream(void* dst, const void* src, size_t n) {
        size_t k;
        for (k = 0; k < n; k += 16)
            _mm_stream_si128((__m128i*)((char*)dst + k),
                             _mm_load_si128((const __m128i*)((const char*)src + k)));
    }
    static inline void jaxsearch_stream_fence(void) { _mm_sfence(); }
    #else
    #define JAXSEARCH_STREAM_STORES 0
    static inline void jaxsearch_stream(void* dst, const void* src, size_t n) {}
    static inline void jaxsearch_stream_fence(void) {}
    #endif
    """
    bint STREAM_STORES "JAXSEARCH_STREAM_STORES"
    void stream "jaxsearch_stream"(void* dst, const void* src, size_t n) noexcept nogil
    void stream_fence "jaxsearch_stream_fence"() noexcept nogil

cdef enum:
    # Bytes of keys per bucket, on evenly spread keys: within a core's L2.
    BUCKET_BYTES = 262144  # 2**18
    # Keys per needle, at most, for buckets to pay (at 10 keys per needle,
    # 1e6 needles in 1e7 float32 keys, they took 0.7-0.8x the bin table's
    # time): the built-in value of the call's `bucket_density`.
    BUCKET_DENSITY = 16
    # Needles searched together (their answers kept aside, then laid over
    # their keys): a few table blocks.
    SEARCH_CHUNK = 512
    # Positions of `out` filled together by place_answers: their stores
    # stay in L2.
    PLACE_NEEDLES = 65536
    # Needles whose buckets partition_needles finds at once.
    PARTITION_BLOCK = 256
    # Needles per bucket gathered before they are streamed out: a line of
    # 4-byte positions.
    LINE_NEEDLES = 16


cdef struct PrefetchSpan:
    const char* lo
    const char* hi
    const char* next


cdef struct Buckets:
    int shift           # a needle's bucket: its bin >> shift
    Py_ssize_t count    # buckets
    Py_ssize_t* offset  # count + 1 entries: where each bucket's needles start
    Py_ssize_t* next    # count entries: each bucket's next answer to place


cdef inline int bucket_shift(Py_ssize_t key_bytes, Py_ssize_t stride) noexcept nogil:
    """log2 of the bins per bucket, a bin per `stride` keys: the most whose
    keys fit BUCKET_BYTES on evenly spread keys."""
    cdef int shift = 0
    while (stride * key_bytes) << (shift + 1) <= BUCKET_BYTES:
        shift += 1
    return shift


cdef inline bint buckets_pay(Py_ssize_t n, Py_ssize_t key_bytes, Py_ssize_t m,
                             Py_ssize_t min_bytes, Py_ssize_t density) noexcept nogil:
    """Whether a row of m needles in any order in n keys is searched by
    buckets: its keys far larger than a core's caches (min_bytes at least:
    the call's `bucket_min_bytes`, tuned per machine), and the needles
    dense enough that a bucket's keys are read for more than a few (at
    most density / 16 keys per needle: the call's `bucket_density`, tuned
    too)."""
    return n * key_bytes >= min_bytes and <double>m * density >= <double>n * 16


cdef inline void bucket_ids(const BinTable* t, int shift, const key_t* v, Py_ssize_t n,
                            int32_t* ids) noexcept nogil:
    """ids[k] = bin_of(t, v[k]) >> shift for k < n, converted to 32 bits,
    not bin_of's 64: so the loop runs in SIMD lanes where the keys convert
    so (float32 and int32)."""
    cdef Py_ssize_t k
    for k in range(n):
        ids[k] = (<int32_t>bin_place(t, <double>v[k])) >> shift


cdef inline void partition_needles(const BinTable* t, Buckets* b, const key_t* v,
                                   Py_ssize_t m, key_t* keys, uint32_t* at) noexcept nogil:
    """The needles into keys[0:m], bucket after bucket, each with its
    position in `at`, in order within a bucket; b.offset[c] is where
    bucket c's start (copy_needles: by lines where streaming stores
    serve)."""
    cdef Py_ssize_t j, k, c, size
    cdef int32_t ids[PARTITION_BLOCK]
    cdef key_t* key_lines = NULL
    cdef uint32_t* at_lines = NULL
    for c in range(b.count + 1):
        b.offset[c] = 0
    j = 0
    while j < m:
        size = min(<Py_ssize_t>PARTITION_BLOCK, m - j)
        bucket_ids(t, b.shift, v + j, size, ids)
        for k in range(size):
            b.offset[ids[k] + 1] += 1
        j += size
    for c in range(1, b.count + 1):
        b.offset[c] += b.offset[c - 1]
    if STREAM_STORES:
        key_lines = <key_t*>huge_malloc(b.count * LINE_NEEDLES * sizeof(key_t))
        at_lines = <uint32_t*>huge_malloc(b.count * LINE_NEEDLES * sizeof(uint32_t))
    if key_lines == NULL or at_lines == NULL:
        free(key_lines)
        key_lines = NULL
    copy_needles(t, b, v, m, keys, at, key_lines, at_lines)
    free(key_lines)
    free(at_lines)
    # Each offset is now its bucket's end: shift them back to starts.
    for c in range(b.count, 0, -1):
        b.offset[c] = b.offset[c - 1]
    b.offset[0] = 0


cdef inline void copy_needles(const BinTable* t, Buckets* b, const key_t* v, Py_ssize_t m,
                              key_t* keys, uint32_t* at, key_t* key_lines,
                              uint32_t* at_lines) noexcept nogil:
    """partition_needles' copies, where b.offset[c] is each bucket's start:
    each needle stored in place where key_lines is NULL, else by lines. A
    needle bound for keys[p] then goes to slot p % LINE_NEEDLES of its
    bucket's line, and a full line is streamed over keys[p + 1 -
    LINE_NEEDLES : p + 1] (at's alike), without the reads of its lines that
    a store takes (1e7 needles in 153 buckets, one core, Intel Xeon: 60 ->
    37 ms, and the buckets found 4 at a time, 22 -> 7 ms); the slots of a
    bucket's first line past its start, and of its last line, are stored
    one by one. keys and at start a whole line of LINE_NEEDLES keys into
    blocks on 64-byte lines (key_start, huge_malloc), so a line of them
    (16 bytes or more) lies on 16 bytes."""
    cdef Py_ssize_t j, k, c, p, first, size, slot
    cdef int32_t ids[PARTITION_BLOCK]
    # Locals, not b's fields, in the loops, and a slot by masks, not a
    # signed %: the fields were reloaded for every needle (N = M = 1e7, 2
    # threads: perf's samples in the partition 8,992 -> 7,946).
    cdef Py_ssize_t* offset = b.offset
    cdef Py_ssize_t* start = b.next  # each bucket's start (next is set later)
    cdef int shift = b.shift
    for c in range(b.count):
        start[c] = offset[c]
    j = 0
    while j < m:
        size = min(<Py_ssize_t>PARTITION_BLOCK, m - j)
        bucket_ids(t, shift, v + j, size, ids)
        if key_lines == NULL:
            for k in range(size):
                p = offset[ids[k]]
                offset[ids[k]] = p + 1
                keys[p] = v[j + k]
                at[p] = <uint32_t>(j + k)
            j += size
            continue
        for k in range(size):
            c = ids[k]
            p = offset[c]
            offset[c] = p + 1
            slot = c * LINE_NEEDLES + (p & (LINE_NEEDLES - 1))  # p >= 0
            key_lines[slot] = v[j + k]
            at_lines[slot] = <uint32_t>(j + k)
            if (p & (LINE_NEEDLES - 1)) != LINE_NEEDLES - 1:
                continue
            first = p + 1 - LINE_NEEDLES
            if first >= start[c]:
                stream(&keys[first], &key_lines[c * LINE_NEEDLES], LINE_NEEDLES * sizeof(key_t))
                stream(&at[first], &at_lines[c * LINE_NEEDLES], LINE_NEEDLES * sizeof(uint32_t))
            else:
                store_slots(keys, at, key_lines, at_lines, c, start[c], p + 1)
        j += size
    if key_lines == NULL:
        return
    for c in range(b.count):
        p = b.offset[c]
        store_slots(keys, at, key_lines, at_lines, c, max(start[c], p - p % LINE_NEEDLES), p)
    stream_fence()


cdef inline void store_slots(key_t* keys, uint32_t* at, const key_t* key_lines,
                             const uint32_t* at_lines, Py_ssize_t c, Py_ssize_t lo,
                             Py_ssize_t hi) noexcept nogil:
    """keys[lo:hi] and at[lo:hi] from their slots in bucket c's lines."""
    cdef Py_ssize_t p
    for p in range(lo, hi):
        keys[p] = key_lines[c * LINE_NEEDLES + p % LINE_NEEDLES]
        at[p] = at_lines[c * LINE_NEEDLES + p % LINE_NEEDLES]


cdef inline void place_answers(const Buckets* b, const char* answers, size_t stride,
                               const uint32_t* at, Py_ssize_t m, idx_t* out) noexcept nogil:
    """out[at[k]] = answer k, stored at answers + k * stride bytes, with
    each bucket's positions rising: out is filled PLACE_NEEDLES positions at
    a time, from each bucket's next run of answers in them, so that its
    stores stay in cache (in bucket order, each store was a cache miss).
    Reads each answer as stored, by memcpy (see search_bucket_run)."""
    cdef Py_ssize_t c, k, stop, limit = 0
    cdef idx_t r
    for c in range(b.count):
        b.next[c] = b.offset[c]
    while limit < m:
        limit = min(limit + PLACE_NEEDLES, m)
        for c in range(b.count):
            k, stop = b.next[c], b.offset[c + 1]
            while k < stop and at[k] < limit:
                memcpy(&r, answers + k * stride, sizeof(idx_t))
                out[at[k]] = r
                k += 1
            b.next[c] = k


cdef inline void bucket_lines(const key_t* a, Py_ssize_t na, const BinTable* t,
                              const Buckets* b, Py_ssize_t c, PrefetchSpan* span) noexcept nogil:
    """The bytes of bucket c's table entries and of its bins' windows, as
    two spans (empty past the last bucket)."""
    cdef Py_ssize_t first = c << b.shift, stop = min((c + 1) << b.shift, t.bins), last
    if first >= t.bins:
        span[0].lo = span[0].hi = span[1].lo = span[1].hi = NULL
        return
    span[0].lo = <const char*>&t.start[first]
    span[0].hi = <const char*>&t.start[stop + 1]
    span[1].lo = <const char*>(a + bin_window(t, first, &last))
    span[1].hi = <const char*>(a + min(<Py_ssize_t>(t.start[stop] & POSITION) + 1, na))


cdef inline void prefetch_share(PrefetchSpan* span, Py_ssize_t done,
                                Py_ssize_t total) noexcept nogil:
    """Prefetches the lines of `span` up to the fraction done / total of it,
    from where the last call stopped."""
    cdef const char* target
    cdef int k
    for k in range(2):
        target = span[k].lo + (span[k].hi - span[k].lo) * done // max(total, <Py_ssize_t>1)
        while span[k].next < target:
            prefetch(span[k].next)
            span[k].next += 64


cdef struct BucketJob:
    # One row's m needles in any order, searched by buckets in three steps,
    # each cut into `slices` parts run by the threads in turn (the handler's
    # phases): each part partitions one slice of the needles
    # (partition_slice), then each searches one run of buckets, every
    # slice's needles in them (search_bucket_run), then each puts one
    # slice's answers in place (place_slice). A run's keys and table entries
    # are read by one thread: where each thread searched its own slice in
    # every bucket, each read all of `a`.
    Py_ssize_t m
    long slices         # slice s: needles [m * s // slices, m * (s + 1) // slices)
    Buckets* slice      # slices entries: each slice's buckets
    void* keys          # room for m keys, each slice's partitioned from key_start
    uint32_t* at        # their positions, each within its slice
    void* answers       # their answers: over the keys where no wider, else apart
    size_t key_size
    size_t answer_size
    size_t answer_stride  # bytes from one answer to the next: a key's where over them
    long partitioned    # slices partitioned (the handler's count)


cdef inline bint begin_bucket_job(BucketJob* w, Py_ssize_t n, Py_ssize_t m, long slices,
                                  size_t key_size, size_t answer_size) noexcept nogil:
    """Room for the buckets of m needles in a row of n keys of key_size
    bytes, in `slices` slices: the most buckets a table of the row makes,
    and the needles' keys, 4-byte positions (and answers, where an answer
    is wider than a key: answer_size bytes), a line more per slice; False,
    nothing held, where m is 2^32 or more or out of memory."""
    cdef int shift = bucket_shift(key_size, table_stride(n * key_size))
    cdef Py_ssize_t count = (most_bins(n, key_size) >> shift) + 1
    cdef Py_ssize_t room = m + slices * LINE_NEEDLES
    cdef Py_ssize_t* offsets
    cdef long s
    if m > <Py_ssize_t>0xffffffff:  # positions are 4 bytes
        return False
    offsets = <Py_ssize_t*>malloc(slices * (2 * count + 1) * sizeof(Py_ssize_t))
    w.m, w.slices, w.key_size, w.answer_size, w.partitioned = m, slices, key_size, answer_size, 0
    w.slice = <Buckets*>malloc(slices * sizeof(Buckets))
    w.keys = scratch_malloc(room * key_size)
    w.at = <uint32_t*>scratch_malloc(room * sizeof(uint32_t))
    w.answers = w.keys if answer_size <= key_size else scratch_malloc(room * answer_size)
    w.answer_stride = max(key_size, answer_size)
    if w.slice == NULL or offsets == NULL:
        free(w.slice)
        w.slice = NULL
    else:
        for s in range(slices):
            w.slice[s].shift, w.slice[s].count = shift, count
            w.slice[s].offset = offsets + s * (2 * count + 1)
            w.slice[s].next = w.slice[s].offset + count + 1
    if w.slice != NULL and w.keys != NULL and w.at != NULL and w.answers != NULL:
        return True
    if w.slice == NULL:
        free(offsets)
    free_bucket_job(w)
    return False


cdef inline void free_bucket_job(BucketJob* w) noexcept nogil:
    """What begin_bucket_job holds (its blocks kept for later calls where
    scratch_free keeps them)."""
    cdef Py_ssize_t room = w.m + w.slices * LINE_NEEDLES
    if w.slice != NULL:
        free(w.slice[0].offset)
    free(w.slice)
    if w.answers != w.keys:
        scratch_free(w.answers, room * w.answer_size)
    scratch_free(w.keys, room * w.key_size)
    scratch_free(w.at, room * sizeof(uint32_t))
    w.slice, w.keys, w.at, w.answers = NULL, NULL, NULL, NULL


cdef inline Py_ssize_t slice_start(const BucketJob* w, long s) noexcept nogil:
    """Slice s's first needle."""
    return w.m * s // w.slices


cdef inline Py_ssize_t key_start(const BucketJob* w, long s) noexcept nogil:
    """Where slice s's partitioned keys start in w.keys (and its positions
    and answers in theirs): on a whole line of LINE_NEEDLES keys, as the
    partition's streaming stores need, past the keys of slice s - 1."""
    return (slice_start(w, s) & ~(<Py_ssize_t>LINE_NEEDLES - 1)) + s * LINE_NEEDLES


cdef inline bint partition_slice(BucketJob* w, long s, const BinTable* t, const key_t* v,
                                 Py_ssize_t m) noexcept nogil:
    """The first step for slice s, its m needles at v (partition_needles);
    False, nothing done, where the table is one bucket."""
    cdef Buckets* b = &w.slice[s]
    cdef Py_ssize_t lo = key_start(w, s)
    if t.bins >> b.shift == 0:
        return False
    b.count = (t.bins >> b.shift) + 1
    partition_needles(t, b, v, m, <key_t*>w.keys + lo, w.at + lo)
    return True


cdef inline Py_ssize_t first_bucket(const BucketJob* w, Py_ssize_t needles) noexcept nogil:
    """The first bucket with at least `needles` of all slices' needles
    before it (count, past the last, where none has)."""
    cdef Py_ssize_t c, before
    cdef long s
    for c in range(w.slice[0].count):
        before = 0
        for s in range(w.slices):
            before += w.slice[s].offset[c]
        if before >= needles:
            return c
    return w.slice[0].count


cdef inline void search_bucket_run(const key_t* a, Py_ssize_t na, Py_ssize_t n,
                                   const BucketJob* w, long run, const BinTable* t,
                                   idx_t* answers, const side_t* side,
                                   const InterpValues* interp) noexcept nogil:
    """The second step for run `run` of the buckets (the runs hold about
    equal shares of the needles): table_kernel over each bucket's needles,
    slice by slice, SEARCH_CHUNK at a time into a chunk, each chunk's
    answers then copied over its own keys' bytes where an answer is no
    wider than a key (each over its own key, whose bytes no other run
    reads: answers packed tighter would lie over other runs' keys), else
    apart: by memcpy, whose bytes may alias the keys, as stores of idx_t
    over them may not. While a bucket's needles are searched, the next
    bucket's lines are prefetched, a share with each chunk, so that its
    searches find them in cache. `answers` is w.answers, at the answers' C
    type. In interp mode (interp.fp set) each chunk's answers are turned
    into their values (interp_values, float keys of the answers' width),
    while the bucket's lines are in cache, and those are put in place."""
    cdef Py_ssize_t first = first_bucket(w, w.m * run // w.slices)
    cdef Py_ssize_t stop = (w.slice[0].count if run == w.slices - 1
                            else first_bucket(w, w.m * (run + 1) // w.slices))
    cdef const key_t* keys = <const key_t*>w.keys
    cdef char* answer_bytes = <char*>answers
    cdef idx_t chunk[SEARCH_CHUNK]
    cdef Py_ssize_t c, j, q, end, size, done, total
    cdef PrefetchSpan span[2]
    cdef long s
    cdef int k
    for c in range(first, stop):
        total = 0
        for s in range(w.slices):
            total += w.slice[s].offset[c + 1] - w.slice[s].offset[c]
        bucket_lines(a, na, t, &w.slice[0], c + 1, span)
        for k in range(2):
            span[k].next = <const char*>(<size_t>span[k].lo & ~<size_t>63)
        done = 0
        for s in range(w.slices):
            j = key_start(w, s) + w.slice[s].offset[c]
            end = key_start(w, s) + w.slice[s].offset[c + 1]
            while j < end:
                size = min(<Py_ssize_t>SEARCH_CHUNK, end - j)
                done += size
                prefetch_share(span, done, total)
                table_kernel(a, na, n, keys + j, size, chunk, t, side, fp_shadow(interp, a))
                if interp.fp != NULL:
                    if key_t is float and idx_t is int32_t:
                        interp_values(interp, a, n, keys + j, size, chunk, <float*>chunk)
                    elif key_t is double and idx_t is int64_t:
                        interp_values(interp, a, n, keys + j, size, chunk, <double*>chunk)
                if w.answer_stride == sizeof(idx_t):
                    memcpy(&answers[j], chunk, size * sizeof(idx_t))
                else:
                    for q in range(size):
                        memcpy(answer_bytes + (j + q) * w.answer_stride, &chunk[q],
                               sizeof(idx_t))
                j += size


cdef inline void place_slice(const BucketJob* w, long s, idx_t* out) noexcept nogil:
    """The third step for slice s, whose answers go to out[0:its needles]
    (place_answers)."""
    cdef Py_ssize_t lo = key_start(w, s)
    place_answers(&w.slice[s], <const char*>w.answers + lo * w.answer_stride, w.answer_stride,
                  w.at + lo, slice_start(w, s + 1) - slice_start(w, s), out)
