# The histogram FFI handler: values v (n,) counted by the bin jnp.histogram
# gives each, in one pass, with no index written out. Operands edges (e,) and
# v (n,), one dtype (float32 or float64); one result (e + 1,) of int32 or
# int64: out[k] counts the values whose searchsorted(edges, x, 'right') is k
# (jnp's probes, so that any edges count as jnp's would; for edges in
# order, NaN last, the cheaper lower-bound search, which answers alike
# there; for edges about evenly spaced, each value's bin guessed from its
# offset and corrected against the edges), except that a value
# equal to the last edge counts at e - 1 (the last bin is closed). Bin k of
# the histogram is out[k + 1]; out[0] and out[e] hold what lies outside.
# One int32 attribute: `threads`.
#
# The threads claim slices of v, each thread counts into its own row of
# counters, and the thread that finishes the last slice adds the rows up.
#
# Included by _cpu_ext.pyx after ffi_common.pxi, whose parts it uses.
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport calloc, free

from xla_ffi cimport *
from search_kernels cimport RightSide, bisect_kernel, in_order, lower_bound_kernel

cdef enum:
    # Values per slice, at least.
    HISTOGRAM_GRAIN = 16384
    # Values searched at a time, their bins held on the stack.
    HISTOGRAM_BLOCK = 256
    # The most edges a call takes: each thread's counters stay small (8 bytes
    # an edge), and past a few thousand the search is not in cache anyway.
    HISTOGRAM_EDGE_LIMIT = 65536

cdef enum:
    HISTOGRAM_DTYPE_COUNT = 2

cdef NamedDtype HISTOGRAM_DTYPES[HISTOGRAM_DTYPE_COUNT]
HISTOGRAM_DTYPES[:] = [NamedDtype(XLA_FFI_DataType_F32, b"float32"),
                       NamedDtype(XLA_FFI_DataType_F64, b"float64")]

ctypedef fused value_t:
    float
    double


cdef struct HistogramJob:
    # Shared by the caller and the pool tasks; freed by the last to let go.
    JobHead head
    long next_part
    long done_parts
    long parts
    long next_slot                  # each thread takes its row of counters
    long slots                      # rows of counters: the threads at most
    long summed                     # set once the counts are in the output
    XLA_FFI_DataType dtype          # the operands'
    bint sorted_edges               # in order, NaN last
    double scale                    # > 0: (e - 1) / (last - first), edges even
    const void* edges
    const void* v
    XLA_FFI_Buffer* out_buf
    int64_t e
    int64_t n
    int64_t* counts                 # slots x (e + 1)


cdef inline int32_t even_guess(double first, int64_t e, double scale, double x) noexcept nogil:
    """How many of e evenly spaced edges from `first`, scale = (e - 1) /
    (last - first), are <= x, computed (NaN: e)."""
    cdef double t = (x - first) * scale
    # Clamped as a double, so the conversion is in range; NaN fails t < e.
    t = t if t < e else e
    t = t if t >= 0 else -1
    return <int32_t>t + 1 if x == x else <int32_t>e


cdef void even_guesses(double first, int64_t e, double scale, const value_t* v,
                       int64_t size, int32_t* guesses) noexcept nogil:
    """even_guess of each of v[:size], branch-free, so that it vectorises."""
    cdef int64_t k
    for k in range(size):
        guesses[k] = even_guess(first, e, scale, v[k])


cdef inline int64_t even_bin(const value_t* edges, int64_t e, value_t x,
                             int64_t g) noexcept nogil:
    """For sorted finite edges: how many are <= x, from the guess g
    (even_guess) corrected against them. Where the edges are about even
    (`even_scale`), the guess is a step or two off at most; else the
    correction walks further, still to the right answer. (A NaN's guess, e,
    is its answer: no comparison with it moves g.)"""
    g = min(g, e)
    while g > 0 and edges[g - 1] > x:
        g -= 1
    while g < e and edges[g] <= x:
        g += 1
    return g


cdef double even_scale(const value_t* edges, int64_t e) noexcept nogil:
    """(e - 1) / (last - first) where the edges are finite and distinct and
    even_bin's guess lands within one of each edge's own bin; else 0."""
    cdef double first = edges[0], last = edges[e - 1], scale
    cdef int64_t k, g
    if e < 2 or not (last > first) or last - first > 1e308 or first - first != 0.0:
        return 0.0
    scale = (e - 1) / (last - first)
    for k in range(e):
        g = even_guess(first, e, scale, edges[k])
        if (k > 0 and not edges[k - 1] < edges[k]) or not -1 <= g - (k + 1) <= 1:
            return 0.0
    return scale


cdef void count_slice(const value_t* edges, int64_t e, bint sorted_edges, double scale,
                      const value_t* v, int64_t lo, int64_t hi, int64_t* counts) noexcept nogil:
    """Adds the bins of v[lo:hi] to `counts`."""
    cdef int32_t bins[HISTOGRAM_BLOCK]
    cdef value_t last = edges[e - 1]
    cdef int64_t j = lo, k, size
    if scale > 0:
        # The count in the same loop as the correction: 12% faster than a
        # second loop over the block's bins (the other searches' loop below).
        while j < hi:
            size = min(<int64_t>HISTOGRAM_BLOCK, hi - j)
            even_guesses(edges[0], e, scale, v + j, size, bins)
            for k in range(size):
                counts[e - 1 if v[j + k] == last else even_bin(edges, e, v[j + k], bins[k])] += 1
            j += size
        return
    while j < hi:
        size = min(<int64_t>HISTOGRAM_BLOCK, hi - j)
        if sorted_edges:
            lower_bound_kernel(edges, e, v + j, size, bins, <const RightSide*>NULL)
        else:
            bisect_kernel(edges, e, v + j, size, bins, <const RightSide*>NULL)
        for k in range(size):
            counts[e - 1 if v[j + k] == last else bins[k]] += 1
        j += size


cdef void histogram_part(HistogramJob* job, long part, int64_t* counts) noexcept nogil:
    """One slice of the values, at the C type of the operands."""
    cdef int64_t lo = job.n * part // job.parts, hi = job.n * (part + 1) // job.parts
    if job.dtype == XLA_FFI_DataType_F32:
        count_slice(<const float*>job.edges, job.e, job.sorted_edges, job.scale, <const float*>job.v,
                    lo, hi, counts)
    else:
        count_slice(<const double*>job.edges, job.e, job.sorted_edges, job.scale, <const double*>job.v,
                    lo, hi, counts)


cdef void sum_counts(HistogramJob* job) noexcept nogil:
    """The threads' counters added up, into the output."""
    cdef int64_t k, total
    cdef long s
    for k in range(job.e + 1):
        total = 0
        for s in range(job.slots):
            total += job.counts[s * (job.e + 1) + k]
        if job.out_buf.dtype == XLA_FFI_DataType_S32:
            (<int32_t*>job.out_buf.data)[k] = <int32_t>total
        else:
            (<int64_t*>job.out_buf.data)[k] = total


cdef void histogram_work(void* data) noexcept nogil:
    """Claims and counts slices into this thread's counters; the thread that
    finishes the last slice adds every thread's counters into the output
    (the slices' done count, taken with acquire-release order, makes their
    counts visible to it)."""
    cdef HistogramJob* job = <HistogramJob*>data
    cdef long slot = fetch_add(&job.next_slot, 1)
    cdef long part = fetch_add(&job.next_part, 1)
    while part < job.parts:
        histogram_part(job, part, job.counts + slot * (job.e + 1))
        if fetch_add(&job.done_parts, 1) == job.parts - 1:
            sum_counts(job)
            atomic_store(&job.summed, 1)
        part = fetch_add(&job.next_part, 1)


cdef void free_histogram_job(void* data) noexcept nogil:
    cdef HistogramJob* job = <HistogramJob*>data
    free(job.counts)
    free(job)


cdef const char* histogram_plan(HistogramJob* job, const XLA_FFI_CallFrame* cf,
                                int threads) noexcept nogil:
    """The call's shapes, its slices and the threads' counters."""
    cdef const XLA_FFI_Buffer* edges = <const XLA_FFI_Buffer*>cf.args.args[0]
    cdef const XLA_FFI_Buffer* v = <const XLA_FFI_Buffer*>cf.args.args[1]
    cdef XLA_FFI_Buffer* out = <XLA_FFI_Buffer*>cf.rets.rets[0]
    if edges.rank != 1 or v.rank != 1 or out.rank != 1 or out.dims[0] != edges.dims[0] + 1:
        return b"jaxsearch: histogram takes edges (e,) and values (n,), and gives (e + 1,)"
    if not 1 <= edges.dims[0] <= HISTOGRAM_EDGE_LIMIT:
        return b"jaxsearch: histogram takes 1 to 65536 edges"
    job.dtype, job.edges, job.v, job.out_buf = edges.dtype, edges.data, v.data, out
    job.e, job.n = edges.dims[0], v.dims[0]
    if job.dtype == XLA_FFI_DataType_F32:
        job.sorted_edges = in_order(<const float*>job.edges, 1, job.e, True)
        job.scale = even_scale(<const float*>job.edges, job.e)
    else:
        job.sorted_edges = in_order(<const double*>job.edges, 1, job.e, True)
        job.scale = even_scale(<const double*>job.edges, job.e)
    job.parts = slices_per_row(job.n, threads, HISTOGRAM_GRAIN)
    job.slots = call_threads(threads, job.parts)
    job.counts = <int64_t*>calloc(job.slots * (job.e + 1), sizeof(int64_t))
    if job.counts == NULL:
        return b"jaxsearch: out of memory"
    return NULL


cdef const char* histogram_call(const XLA_FFI_CallFrame* cf, char* message_buf) noexcept nogil:
    """Runs a histogram call on this thread and the pool's; an error message
    or NULL."""
    cdef int32_t threads
    cdef Attr table[1]
    cdef HistogramJob* job
    cdef const char* message
    table[0] = int32_in(b"threads", &threads, 1, MAX_CALL_THREADS)
    message = read_attrs(cf, table, 1, message_buf)
    if message != NULL:
        return message
    job = <HistogramJob*>new_job(sizeof(HistogramJob), histogram_work, free_histogram_job)
    if job == NULL:
        return b"jaxsearch: out of memory"
    message = histogram_plan(job, cf, threads)
    if message != NULL:
        free_histogram_job(job)
        return message
    start_tasks(cf, &job.head, job.slots - 1)
    histogram_work(job)
    # The last slice may be another thread's: its sum is awaited, not redone.
    while not atomic_load(&job.summed):
        sched_yield()
    release(&job.head)
    return NULL


cdef XLA_FFI_Error* histogram_handler(XLA_FFI_CallFrame* cf) noexcept nogil:
    return handle(cf, HISTOGRAM_DTYPES, HISTOGRAM_DTYPE_COUNT, b"jaxsearch: histogram edges and "
                  b"values need one dtype, float32 or float64; the output int32 or int64",
                  check_operands, histogram_call)
