# The searchsorted_cumsum FFI handler: search in the running sum of weights
# w (..., n) for needles v (..., m) of w's dtype (float32 or float64), without
# materialising the running sum; one result (..., m) of int32 or int64, batch
# dimensions as the search's. Four int32 attributes: `order` (ORDER_*),
# `right` (0/1), `segment` (weights per segment, at most) and `threads`.
# Kernels in cumsum_search.pxd.
#
# Three phases, each cut into parts that the threads claim as the search's
# do; a thread waits between phases only for parts already claimed:
#   0. each part sums its segments of w (and, for order 'check', checks
#      its slice of the needles' order); the thread that finishes the last
#      part turns the sums into each segment's base, the running sum
#      before it;
#   1. each part merges its segments with their needles, or, in a row whose
#      needles are not sorted, writes its running sums into a buffer;
#   2. only for such rows: each part binary-searches a slice of needles in
#      the buffer.
#
# Included by _cpu_ext.pyx after ffi_common.pxi, whose parts it uses.
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport calloc, free, malloc

from xla_ffi cimport *
from search_kernels cimport (idx_t, side_t, LeftSide, RightSide, is_nan, non_nan_prefix,
                             in_order, lower_bound_kernel)
cimport cumsum_search
from cumsum_search cimport (weight_t, MERGE_BLOCK, as_double, segment_sum, needles_before,
                            needles_before_from, running_sums, merge_segment)

cdef enum:
    CUMSUM_PHASES = 3
    # Needles per part in phase 2, at least.
    CUMSUM_NEEDLE_GRAIN = 4096
    # Segments per part in phases 0 and 1.
    SEGMENTS_PER_PART = 4

# The weight dtypes the kernels take (cumsum_run_part gives each its C type).
cdef enum:
    WEIGHT_DTYPE_COUNT = 2

cdef NamedDtype WEIGHT_DTYPES[WEIGHT_DTYPE_COUNT]
WEIGHT_DTYPES[:] = [NamedDtype(XLA_FFI_DataType_F32, b"float32"),
                    NamedDtype(XLA_FFI_DataType_F64, b"float64")]


cdef struct CumsumAttrs:
    int32_t order
    int32_t right
    int32_t segment
    int32_t threads


cdef struct CumsumJob:
    # Shared by the caller and the pool tasks; freed by the last to let go.
    JobHead head
    long next_part[CUMSUM_PHASES]
    long done_parts[CUMSUM_PHASES]
    long bases_ready                # set once phase 0 and cumsum_bases are done
    long parts[CUMSUM_PHASES]
    long failed                     # phase 0's follow-up could not allocate
    Shape shape
    bint right
    int order
    int64_t segment                 # weights per segment (the last may be shorter)
    int64_t segments                # per row
    int64_t slices                  # parts per row in phases 0 and 1
    int64_t needle_slices           # parts per row in phase 2
    double* sums                    # rows x segments
    double* bases                   # rows x (segments + 1)
    long* unsorted                  # rows: 1 where the row's needles are not sorted
    double* prefix                  # rows x n running sums, where some row is unsorted


cdef void cumsum_sum_part(CumsumJob* job, long part, const weight_t* w,
                          const weight_t* v) noexcept nogil:
    """Phase 0: the part's segment sums, and the order of its needle slice."""
    cdef long row = part // job.slices, piece = part % job.slices
    cdef int64_t a_off, v_off, k, n = job.shape.n, m = job.shape.m, nv, lo, hi, t
    cdef int64_t first = piece * SEGMENTS_PER_PART
    cdef bint ok = True
    row_offsets(&job.shape, row, &a_off, &v_off)
    w += a_off
    v += v_off
    for k in range(first, min(first + SEGMENTS_PER_PART, job.segments)):
        job.sums[row * job.segments + k] = segment_sum(
            w + k * job.segment, min(job.segment, n - k * job.segment))
    if job.order != ORDER_CHECK:
        return
    # Sorted means a sorted non-NaN prefix, then NaNs only.
    lo = m * piece // job.slices
    hi = m * (piece + 1) // job.slices
    nv = non_nan_prefix(v, m)
    ok = in_order(v, max(lo, 1), min(hi, nv), False)
    for t in range(max(lo, nv), hi):
        ok &= is_nan(v[t])
    if not ok:
        atomic_store(&job.unsorted[row], 1)


cdef void cumsum_bases(CumsumJob* job) noexcept nogil:
    """After phase 0: each segment's base, summed with compensation (so the
    bases are as accurate as double allows), then made non-decreasing so
    that the needles split into consecutive ranges even for negative
    weights; the buffer for unsorted rows; the parts of phases 1 and 2."""
    cdef int64_t row, k, unsorted_rows = 0
    cdef double hi, lo, x, t, b, prev
    cdef double* bases
    for row in range(job.shape.rows):
        bases = job.bases + row * (job.segments + 1)
        hi = lo = prev = bases[0] = 0.0
        for k in range(job.segments):
            x = job.sums[row * job.segments + k]
            t = hi + x                               # two-sum: hi + x = t + error
            lo += (hi - (t - (t - hi))) + (x - (t - hi))
            hi = t
            # Past an infinite (or NaN) sum the compensation is NaN: the
            # sum is what it is.
            b = hi + lo if hi - hi == 0.0 else hi
            # Non-decreasing in the total order (NaN last and sticky).
            if prev != prev or b < prev:
                b = prev
            bases[k + 1] = prev = b
        if job.order == ORDER_ANY:
            job.unsorted[row] = 1
        unsorted_rows += atomic_load(&job.unsorted[row])
    job.parts[1] = job.shape.rows * job.slices
    if unsorted_rows:
        job.prefix = <double*>malloc(sizeof(double) * job.shape.rows * job.shape.n)
        if job.prefix == NULL:
            job.failed = 1
            job.parts[1] = 0
            return
        job.parts[2] = job.shape.rows * job.needle_slices


cdef void cumsum_merge_part(CumsumJob* job, long part, const weight_t* w, const weight_t* v,
                            idx_t* out, const side_t* side) noexcept nogil:
    """Phase 1: the part's segments, each merged with its needles (or, in an
    unsorted row, its running sums written out)."""
    cdef long row = part // job.slices, piece = part % job.slices
    cdef int64_t a_off, v_off, n = job.shape.n, m = job.shape.m, k, start, count, lo, hi
    cdef int64_t first = piece * SEGMENTS_PER_PART
    cdef const double* bases = job.bases + row * (job.segments + 1)
    cdef bint unsorted = atomic_load(&job.unsorted[row]) != 0
    cdef bint right = side_t is RightSide
    cdef double sums[cumsum_search.MAX_SEGMENT]
    cdef double block[MERGE_BLOCK]
    row_offsets(&job.shape, row, &a_off, &v_off)
    w += a_off
    v += v_off
    out += row * m
    # A segment's needles lie between its base and the next (the first
    # segment also takes those before any sum, the last those after all);
    # neighbouring parts compute their shared bound alike.
    lo = 0 if first == 0 or unsorted else needles_before(v, m, bases[first], right)
    for k in range(first, min(first + SEGMENTS_PER_PART, job.segments)):
        start = k * job.segment
        count = min(job.segment, n - start)
        if unsorted:
            running_sums(w + start, count, bases[k], job.prefix + row * n + start)
            continue
        running_sums(w + start, count, bases[k], sums)
        if k == job.segments - 1:
            hi = m
        elif k == first + SEGMENTS_PER_PART - 1:
            hi = needles_before(v, m, bases[k + 1], right)  # the next part's lo
        else:
            hi = needles_before_from(v, lo, m, bases[k + 1], right)
        merge_segment(sums, count, v + lo, max(hi - lo, 0), out + lo, start, block, side)
        lo = max(lo, hi)


cdef void cumsum_bisect_part(CumsumJob* job, long part, const weight_t* v, idx_t* out,
                             const side_t* side) noexcept nogil:
    """Phase 2: a slice of an unsorted row's needles, binary-searched in its
    running sums. Those are sorted (NaN last) where no weight is negative, so
    the lanes share one interval length (lower_bound_kernel: 1.1-1.5x faster
    than jnp's probes here); past a negative weight the answers, unspecified,
    stay in [0, n]."""
    cdef long row = part // job.needle_slices, piece = part % job.needle_slices
    cdef int64_t a_off, v_off, n = job.shape.n, m = job.shape.m, j, size
    cdef int64_t lo = m * piece // job.needle_slices, hi = m * (piece + 1) // job.needle_slices
    cdef const double* sums = job.prefix + row * n
    cdef double block[MERGE_BLOCK]
    if not atomic_load(&job.unsorted[row]):
        return
    row_offsets(&job.shape, row, &a_off, &v_off)
    v += v_off
    out += row * m
    j = lo
    while j < hi:
        size = min(<int64_t>MERGE_BLOCK, hi - j)
        lower_bound_kernel(sums, n, as_double(v + j, size, block), size, out + j, side)
        j += size


cdef void cumsum_run_typed(CumsumJob* job, int phase, long part, const weight_t* w,
                           const weight_t* v, idx_t* out) noexcept nogil:
    if phase == 0:
        cumsum_sum_part(job, part, w, v)
    elif phase == 1:
        if job.right:
            cumsum_merge_part(job, part, w, v, out, <const RightSide*>NULL)
        else:
            cumsum_merge_part(job, part, w, v, out, <const LeftSide*>NULL)
    elif job.right:
        cumsum_bisect_part(job, part, v, out, <const RightSide*>NULL)
    else:
        cumsum_bisect_part(job, part, v, out, <const LeftSide*>NULL)


cdef void cumsum_run_weight(CumsumJob* job, int phase, long part, const weight_t* w,
                            const weight_t* v) noexcept nogil:
    if job.shape.out_buf.dtype == XLA_FFI_DataType_S32:
        cumsum_run_typed(job, phase, part, w, v, <int32_t*>job.shape.out_buf.data)
    else:
        cumsum_run_typed(job, phase, part, w, v, <int64_t*>job.shape.out_buf.data)


cdef void cumsum_run_part(CumsumJob* job, int phase, long part) noexcept nogil:
    """The part at the C type of its weights, one of WEIGHT_DTYPES."""
    if job.shape.a_buf.dtype == XLA_FFI_DataType_F32:
        cumsum_run_weight(job, phase, part, <const float*>job.shape.a_buf.data,
                          <const float*>job.shape.v_buf.data)
    else:
        cumsum_run_weight(job, phase, part, <const double*>job.shape.a_buf.data,
                          <const double*>job.shape.v_buf.data)


cdef bint phase_over(CumsumJob* job, int phase) noexcept nogil:
    """Phase 0 is over once the bases are; the later phases' part counts are
    set by then."""
    if phase == 0:
        return atomic_load(&job.bases_ready) != 0
    return atomic_load(&job.done_parts[phase]) >= job.parts[phase]


cdef void cumsum_work(void* data) noexcept nogil:
    """Claims and runs parts, phase by phase. The thread that finishes a
    phase's last part runs what follows it and marks the phase ready; the
    others wait for that, never for a part nobody has claimed."""
    cdef CumsumJob* job = <CumsumJob*>data
    cdef int phase
    cdef long part
    for phase in range(CUMSUM_PHASES):
        part = fetch_add(&job.next_part[phase], 1)
        while part < job.parts[phase]:
            cumsum_run_part(job, phase, part)
            if fetch_add(&job.done_parts[phase], 1) == job.parts[phase] - 1 and phase == 0:
                cumsum_bases(job)
                atomic_store(&job.bases_ready, 1)
            part = fetch_add(&job.next_part[phase], 1)
        while not phase_over(job, phase):
            sched_yield()


cdef void free_cumsum_job(void* data) noexcept nogil:
    cdef CumsumJob* job = <CumsumJob*>data
    free(job.prefix)
    free(job.unsorted)
    free(job.sums)
    free(job)


cdef const char* cumsum_plan(CumsumJob* job, const XLA_FFI_CallFrame* cf, int threads,
                             int64_t segment) noexcept nogil:
    """The call's shape (as the search's), the segments and the parts."""
    cdef const char* message = plan_shape(&job.shape, cf)
    if message != NULL:
        return message
    if job.shape.n < 1 or job.shape.m < 1:
        return b"jaxsearch: searchsorted_cumsum needs at least one weight and one needle"
    job.segment = segment
    job.segments = (job.shape.n + segment - 1) // segment
    job.slices = (job.segments + SEGMENTS_PER_PART - 1) // SEGMENTS_PER_PART
    job.needle_slices = slices_per_row(job.shape.m, threads, CUMSUM_NEEDLE_GRAIN)
    job.parts[0] = job.shape.rows * job.slices
    job.sums = <double*>malloc(sizeof(double) * job.shape.rows * (2 * job.segments + 1))
    job.unsorted = <long*>calloc(job.shape.rows, sizeof(long))
    if job.sums == NULL or job.unsorted == NULL:
        return b"jaxsearch: out of memory"
    job.bases = job.sums + job.shape.rows * job.segments
    return NULL


cdef const char* read_cumsum_attrs(const XLA_FFI_CallFrame* cf, CumsumAttrs* attrs,
                                   char* message_buf) noexcept nogil:
    """The attributes the top of this file lists, into `attrs`."""
    cdef Attr table[4]
    table[:] = [any_int32(b"order", &attrs.order),
                any_int32(b"right", &attrs.right),
                int32_in(b"segment", &attrs.segment, 1, cumsum_search.MAX_SEGMENT),
                int32_in(b"threads", &attrs.threads, 1, MAX_CALL_THREADS)]
    return read_attrs(cf, table, sizeof(table) // sizeof(Attr), message_buf)


cdef const char* cumsum_call(const XLA_FFI_CallFrame* cf, char* message_buf) noexcept nogil:
    """Runs a searchsorted_cumsum call: its plan, then its phases on this
    thread and the pool's; an error message or NULL."""
    cdef CumsumAttrs attrs
    cdef CumsumJob* job
    cdef const char* message = read_cumsum_attrs(cf, &attrs, message_buf)
    if message != NULL:
        return message
    job = <CumsumJob*>new_job(sizeof(CumsumJob), cumsum_work, free_cumsum_job)
    if job == NULL:
        return b"jaxsearch: out of memory"
    job.order, job.right = attrs.order, attrs.right != 0
    message = cumsum_plan(job, cf, attrs.threads, attrs.segment)
    if message != NULL or job.parts[0] == 0:  # an error, or an empty batch
        free_cumsum_job(job)
        return message
    advise_output_pages(job.shape.out_buf)
    start_tasks(cf, &job.head, call_threads(attrs.threads, job.parts[0]) - 1)
    # Returns once every phase is done: pool tasks that start later find
    # nothing left, and the last one to let go frees the job.
    cumsum_work(job)
    message = NULL
    if job.failed:
        message = b"jaxsearch: out of memory"
    release(&job.head)
    return message


cdef XLA_FFI_Error* cumsum_handler(XLA_FFI_CallFrame* cf) noexcept nogil:
    return handle(cf, WEIGHT_DTYPES, WEIGHT_DTYPE_COUNT, b"jaxsearch: w and v need one dtype, "
                  b"float32 or float64; the output int32 or int64", check_operands,
                  cumsum_call)
