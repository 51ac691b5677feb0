# The XLA FFI handler for searchsorted on CPU, written against XLA's C API.
#
# Call signature (see jaxsearch/_cpu.py): two buffers a (..., n) and v (..., m)
# of one key dtype, one result (..., m) of int32 or int64; leading dimensions
# are batch dimensions that broadcast numpy-style (an unbatched operand comes
# with size-1 batch dimensions, without a copy). Five int32 attributes:
# `right` (0/1), `order` (ORDER_*), `kernel` (KERNEL_*), `threads` (at most
# this many threads) and `min_parallel` (needles per part, at least).
#
# Parallelism: the needles of all rows are cut into parts. The calling thread
# and up to threads - 1 tasks on XLA's own CPU thread pool claim parts from
# an atomic counter. The caller waits only for parts that were claimed, never
# for a task to start, so a busy machine costs no more than one thread.
from cpython.pycapsule cimport PyCapsule_New
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t,
                          uint8_t, uint16_t, uint32_t, uint64_t)
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, strlen

from xla_ffi cimport *
from search_kernels cimport (key_t, idx_t, side_t, trust_t, LeftSide, RightSide, Trusted,
                             Checked, is_nan, is_sorted, non_nan_prefix, merge_kernel,
                             runs_kernel, bisect_kernel)

# `order`: what is known of the needles' order.
cdef enum:
    ORDER_ANY = 0       # no promise: binary search
    ORDER_SORTED = 1    # the caller promised sorted needles
    ORDER_CHECK = 2     # each part checks its own needles (see search_sorted)

# `kernel`: which kernel serves sorted needles.
cdef enum:
    KERNEL_MERGE = 0
    KERNEL_RUNS = 1
    KERNEL_BISECT = 2

cdef enum:
    # The most threads one call may ask for (the `threads` attribute).
    MAX_CALL_THREADS = 1024

# Room for batch dimensions; vmap adds one per level of nesting.
cdef enum:
    MAX_BATCH_RANK = 32

# Parts per thread in a row: small parts balance the load, so the threads
# finish together (one part per thread left one waiting on the other for up
# to a part: 1.65x on two cores at N=M=1e7, 1.9-2.0x with 16).
cdef enum:
    PARTS_PER_THREAD = 16

ORDER_NAMES = {"any": ORDER_ANY, "sorted": ORDER_SORTED, "check": ORDER_CHECK}
KERNEL_NAMES = {"merge": KERNEL_MERGE, "runs": KERNEL_RUNS, "bisect": KERNEL_BISECT}
MAX_THREADS = MAX_CALL_THREADS

cdef extern from "<fenv.h>" nogil:
    ctypedef struct fenv_t:
        pass
    int fegetenv(fenv_t* env)
    int fesetenv(const fenv_t* env)

cdef extern from "<sched.h>" nogil:
    int sched_yield()

cdef extern from "<sys/mman.h>" nogil:
    int madvise(void* addr, size_t length, int advice)
    int MADV_HUGEPAGE

cdef extern from *:
    """
    static inline long jaxsearch_fetch_add(long* p, long v) {
        return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
    }
    static inline long jaxsearch_load(long* p) {
        return __atomic_load_n(p, __ATOMIC_ACQUIRE);
    }
    static inline void jaxsearch_store(long* p, long v) {
        __atomic_store_n(p, v, __ATOMIC_RELEASE);
    }
    """
    long fetch_add "jaxsearch_fetch_add"(long* p, long v) noexcept nogil
    long atomic_load "jaxsearch_load"(long* p) noexcept nogil
    void atomic_store "jaxsearch_store"(long* p, long v) noexcept nogil


cdef struct Job:
    # Shared by the caller and the pool tasks; freed by the last to let go.
    long refs
    long next_part
    long done_parts
    long parts
    long slices                     # parts per row
    fenv_t env                      # the caller's floating-point mode
    const XLA_FFI_Buffer* a_buf
    const XLA_FFI_Buffer* v_buf
    XLA_FFI_Buffer* out_buf
    int64_t rank                    # batch dimensions of the output
    int64_t n
    int64_t m
    int64_t a_stride[MAX_BATCH_RANK]
    int64_t v_stride[MAX_BATCH_RANK]
    bint right
    int order
    int kernel


cdef bint search_sorted(const key_t* a, Py_ssize_t na, Py_ssize_t n, const key_t* v,
                       Py_ssize_t m, idx_t* out, int kernel, const side_t* side,
                       const trust_t* trust) noexcept nogil:
    """Sorted needles by the merge or runs kernel, their NaN tail split off
    like a's. Returns False when a checking kernel found them out of order."""
    cdef Py_ssize_t nv = non_nan_prefix(v, m), j
    cdef bint tail_ok = True
    for j in range(nv, m):
        out[j] = <idx_t>(n if side_t is RightSide else na)
        if trust_t is Checked:
            tail_ok &= is_nan(v[j])
    if not tail_ok:
        return False
    if kernel == KERNEL_MERGE:
        if trust_t is Checked and not is_sorted(v, nv):
            return False
        merge_kernel(a, na, v, nv, out, side)
        return True
    return runs_kernel(a, na, v, nv, out, side, trust)


cdef void search_slice(const key_t* a, Py_ssize_t n, const key_t* v, Py_ssize_t m,
                       idx_t* out, const Job* job, const side_t* side) noexcept nogil:
    """One part: m needles against a whole row of `a`. Each part checks its
    own needles, so parts of one row may take different kernels."""
    cdef Py_ssize_t na = non_nan_prefix(a, n)
    cdef int kernel = KERNEL_BISECT if job.order == ORDER_ANY else job.kernel
    # Binary search answers any needles, so it needs no check.
    if kernel == KERNEL_BISECT:
        bisect_kernel(a, na, n, v, m, out, side)
    elif job.order == ORDER_SORTED:
        search_sorted(a, na, n, v, m, out, kernel, side, <const Trusted*>NULL)
    elif not search_sorted(a, na, n, v, m, out, kernel, side, <const Checked*>NULL):
        bisect_kernel(a, na, n, v, m, out, side)


cdef void row_offsets(const Job* job, long row, int64_t* a_off, int64_t* v_off) noexcept nogil:
    """Where output row `row` reads its row of `a` and of `v` (elements)."""
    cdef int64_t d, idx
    a_off[0] = 0
    v_off[0] = 0
    for d in range(job.rank - 1, -1, -1):
        idx = row % job.out_buf.dims[d]
        row = row // job.out_buf.dims[d]
        a_off[0] += idx * job.a_stride[d]
        v_off[0] += idx * job.v_stride[d]


cdef void run_typed(const Job* job, long part, const key_t* a, const key_t* v,
                    idx_t* out) noexcept nogil:
    cdef long row = part // job.slices, piece = part % job.slices
    cdef int64_t a_off, v_off
    cdef int64_t lo = job.m * piece // job.slices
    cdef int64_t hi = job.m * (piece + 1) // job.slices
    row_offsets(job, row, &a_off, &v_off)
    a += a_off
    v += v_off + lo
    out += row * job.m + lo
    if job.right:
        search_slice(a, job.n, v, hi - lo, out, job, <const RightSide*>NULL)
    else:
        search_slice(a, job.n, v, hi - lo, out, job, <const LeftSide*>NULL)


cdef void run_key(const Job* job, long part, const key_t* a, const key_t* v) noexcept nogil:
    if job.out_buf.dtype == XLA_FFI_DataType_S32:
        run_typed(job, part, a, v, <int32_t*>job.out_buf.data)
    else:
        run_typed(job, part, a, v, <int64_t*>job.out_buf.data)


cdef void run_part(const Job* job, long part) noexcept nogil:
    """The part's kernels, at the keys' type (checked by check_dtypes)."""
    cdef const void* a = job.a_buf.data
    cdef const void* v = job.v_buf.data
    cdef XLA_FFI_DataType dt = job.a_buf.dtype
    if dt == XLA_FFI_DataType_F32:
        run_key(job, part, <const float*>a, <const float*>v)
    elif dt == XLA_FFI_DataType_F64:
        run_key(job, part, <const double*>a, <const double*>v)
    elif dt == XLA_FFI_DataType_S32:
        run_key(job, part, <const int32_t*>a, <const int32_t*>v)
    elif dt == XLA_FFI_DataType_S64:
        run_key(job, part, <const int64_t*>a, <const int64_t*>v)
    elif dt == XLA_FFI_DataType_S8:
        run_key(job, part, <const int8_t*>a, <const int8_t*>v)
    elif dt == XLA_FFI_DataType_S16:
        run_key(job, part, <const int16_t*>a, <const int16_t*>v)
    # A bool is one byte holding 0 or 1, and False < True: compare as uint8.
    elif dt == XLA_FFI_DataType_U8 or dt == XLA_FFI_DataType_PRED:
        run_key(job, part, <const uint8_t*>a, <const uint8_t*>v)
    elif dt == XLA_FFI_DataType_U16:
        run_key(job, part, <const uint16_t*>a, <const uint16_t*>v)
    elif dt == XLA_FFI_DataType_U32:
        run_key(job, part, <const uint32_t*>a, <const uint32_t*>v)
    else:
        run_key(job, part, <const uint64_t*>a, <const uint64_t*>v)


cdef bint check_dtypes(const XLA_FFI_Buffer* a, const XLA_FFI_Buffer* v,
                       const XLA_FFI_Buffer* out) noexcept nogil:
    cdef XLA_FFI_DataType dt = a.dtype
    return (v.dtype == dt and (out.dtype == XLA_FFI_DataType_S32 or out.dtype == XLA_FFI_DataType_S64)
            and (dt == XLA_FFI_DataType_F32 or dt == XLA_FFI_DataType_F64
                 or dt == XLA_FFI_DataType_S8 or dt == XLA_FFI_DataType_S16
                 or dt == XLA_FFI_DataType_S32 or dt == XLA_FFI_DataType_S64
                 or dt == XLA_FFI_DataType_U8 or dt == XLA_FFI_DataType_U16
                 or dt == XLA_FFI_DataType_U32 or dt == XLA_FFI_DataType_U64
                 or dt == XLA_FFI_DataType_PRED))


cdef void work(Job* job) noexcept nogil:
    """Claims and runs parts until none is left (in the calling thread's
    floating-point mode)."""
    cdef long part = fetch_add(&job.next_part, 1)
    while part < job.parts:
        run_part(job, part)
        fetch_add(&job.done_parts, 1)
        part = fetch_add(&job.next_part, 1)


cdef void release(Job* job) noexcept nogil:
    if fetch_add(&job.refs, -1) == 1:
        free(job)


cdef void pool_task(void* data) noexcept nogil:
    """A pool thread's share: the parts, in the caller's floating-point mode
    (XLA runs with denormals flushed to zero, and jnp compares that way)."""
    cdef Job* job = <Job*>data
    cdef fenv_t own_env
    atomic_load(&job.refs)  # see start_tasks
    fegetenv(&own_env)
    fesetenv(&job.env)
    work(job)
    fesetenv(&own_env)
    release(job)


cdef int64_t slices_per_row(int64_t m, int threads, int64_t min_parallel) noexcept nogil:
    """Parts a row of m needles is cut into: slices of at least
    `min_parallel` needles, at most PARTS_PER_THREAD per thread."""
    return max(1, min(<int64_t>threads * PARTS_PER_THREAD, m // max(min_parallel, 1)))


cdef long call_threads(int threads, long parts) noexcept nogil:
    """Threads that work on a call of `parts` parts: the caller, and one
    pool task per further part, up to `threads` in all."""
    return max(1, min(<long>threads, parts))


def planned_threads(long rows, long m, int threads, long min_parallel):
    """The threads one call of `rows` rows of m needles runs on, given its
    `threads` and `min_parallel` attributes: the plan the kernel makes."""
    return call_threads(threads, rows * slices_per_row(m, threads, min_parallel))


cdef const char* plan(Job* job, int threads, int64_t min_parallel) noexcept nogil:
    """Checks shapes, fills the batch strides and cuts the work into parts."""
    cdef const XLA_FFI_Buffer* a_buf = job.a_buf
    cdef const XLA_FFI_Buffer* v_buf = job.v_buf
    cdef const XLA_FFI_Buffer* out_buf = job.out_buf
    cdef int64_t rows = 1, d, da, dv, step_a, step_v
    job.rank = out_buf.rank - 1
    if job.rank < 0 or job.rank > MAX_BATCH_RANK or a_buf.rank < 1 or v_buf.rank < 1:
        return b"jaxsearch: operand rank out of range"
    job.n = a_buf.dims[a_buf.rank - 1]
    job.m = out_buf.dims[job.rank]
    if v_buf.dims[v_buf.rank - 1] != job.m:
        return b"jaxsearch: needle and output shapes disagree"
    if a_buf.rank - 1 > job.rank or v_buf.rank - 1 > job.rank:
        return b"jaxsearch: operand has more batch dimensions than the output"
    # Batch strides, right-aligned as in numpy broadcasting; 0 where broadcast.
    step_a = job.n
    step_v = job.m
    for d in range(job.rank - 1, -1, -1):
        rows *= out_buf.dims[d]
        da = d - (job.rank - (a_buf.rank - 1))
        dv = d - (job.rank - (v_buf.rank - 1))
        job.a_stride[d] = 0
        job.v_stride[d] = 0
        if da >= 0:
            if a_buf.dims[da] == out_buf.dims[d]:
                job.a_stride[d] = step_a
            elif a_buf.dims[da] != 1:
                return b"jaxsearch: batch dimensions of a do not broadcast"
            step_a *= a_buf.dims[da]
        if dv >= 0:
            if v_buf.dims[dv] == out_buf.dims[d]:
                job.v_stride[d] = step_v
            elif v_buf.dims[dv] != 1:
                return b"jaxsearch: batch dimensions of v do not broadcast"
            step_v *= v_buf.dims[dv]
    job.slices = slices_per_row(job.m, threads, min_parallel)
    job.parts = rows * job.slices
    return NULL


cdef enum:
    HUGE_PAGE = 1 << 21


cdef void advise_huge_pages(XLA_FFI_Buffer* out) noexcept nogil:
    """Asks for 2 MiB pages under a large output, before it is first written.

    XLA's CPU buffers come on 4 KiB pages (numpy asks for huge pages for its
    own large arrays). A fresh 40 MB output then costs ~10,000 page faults
    and a TLB miss per page while the merge streams through it. Only whole
    huge pages inside the buffer are advised; an error (no THP) is harmless.
    """
    cdef size_t nbytes = (4 if out.dtype == XLA_FFI_DataType_S32 else 8)
    cdef int64_t d
    cdef size_t start, stop
    for d in range(out.rank):
        nbytes *= <size_t>out.dims[d]
    start = (<size_t>out.data + HUGE_PAGE - 1) & ~(<size_t>HUGE_PAGE - 1)
    stop = (<size_t>out.data + nbytes) & ~(<size_t>HUGE_PAGE - 1)
    if stop >= start + 2 * HUGE_PAGE:
        madvise(<void*>start, stop - start, MADV_HUGEPAGE)


cdef XLA_FFI_Error* error(const XLA_FFI_CallFrame* cf, const char* message) noexcept nogil:
    cdef XLA_FFI_Error_Create_Args args
    args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE
    args.extension_start = NULL
    args.message = message
    args.errc = XLA_FFI_Error_Code_INVALID_ARGUMENT
    return cf.api.XLA_FFI_Error_Create(&args)


cdef bint schedule(const XLA_FFI_CallFrame* cf, void (*task)(void* data) noexcept nogil,
                   void* job) noexcept nogil:
    """Puts one task(job) on XLA's thread pool; False where there is none."""
    cdef XLA_FFI_ThreadPool_Schedule_Args args
    cdef XLA_FFI_Error_Destroy_Args destroy
    cdef XLA_FFI_Error* err
    args.struct_size = XLA_FFI_ThreadPool_Schedule_Args_STRUCT_SIZE
    args.extension_start = NULL
    args.ctx = cf.ctx
    args.task = task
    args.data = job
    err = cf.api.XLA_FFI_ThreadPool_Schedule(&args)
    if err == NULL:
        return True
    destroy.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE
    destroy.extension_start = NULL
    destroy.error = err
    cf.api.XLA_FFI_Error_Destroy(&destroy)
    return False


cdef void start_tasks(const XLA_FFI_CallFrame* cf, void (*task)(void* data) noexcept nogil,
                      void* job, long* refs, fenv_t* env, long tasks) noexcept nogil:
    """Puts up to `tasks` task(job) on XLA's thread pool, each holding a
    reference to the job (the caller holds one more), with the caller's
    floating-point mode saved in `env` for them.

    The job must be filled in: `refs` is stored last, with release order,
    and each task loads it with acquire order before it reads the job, so the
    hand-over holds by these atomics, whatever order XLA's pool keeps
    (ThreadSanitizer reported a plain store racing with a task's read)."""
    cdef long t
    tasks = max(tasks, 0)
    if tasks:
        fegetenv(env)
    atomic_store(refs, 1 + tasks)
    for t in range(tasks):
        if not schedule(cf, task, job):
            fetch_add(refs, -(tasks - t))
            break


cdef const char* search(const XLA_FFI_CallFrame* cf, const int32_t* attrs) noexcept nogil:
    """Runs the whole call; returns an error message or NULL."""
    cdef Job* job
    cdef const char* message
    cdef int threads = attrs[4]
    if not check_dtypes(<const XLA_FFI_Buffer*>cf.args.args[0],
                        <const XLA_FFI_Buffer*>cf.args.args[1],
                        <const XLA_FFI_Buffer*>cf.rets.rets[0]):
        return b"jaxsearch: a and v need one supported key dtype; the output int32 or int64"
    if threads < 1 or threads > MAX_CALL_THREADS:
        return b"jaxsearch: threads must be in [1, MAX_THREADS]"
    job = <Job*>malloc(sizeof(Job))
    if job == NULL:
        return b"jaxsearch: out of memory"
    job.a_buf = <const XLA_FFI_Buffer*>cf.args.args[0]
    job.v_buf = <const XLA_FFI_Buffer*>cf.args.args[1]
    job.out_buf = <XLA_FFI_Buffer*>cf.rets.rets[0]
    job.kernel, job.order, job.right = attrs[0], attrs[2], attrs[3] != 0
    message = plan(job, threads, attrs[1])
    if message != NULL:
        free(job)
        return message
    job.done_parts = 0
    advise_huge_pages(job.out_buf)
    job.next_part = 0
    start_tasks(cf, pool_task, job, &job.refs, &job.env, call_threads(threads, job.parts) - 1)
    work(job)
    # Parts claimed by pool tasks may still be running; unstarted tasks are
    # not waited for (they find no part left, and the last one frees the job).
    while atomic_load(&job.done_parts) < job.parts:
        sched_yield()
    release(job)
    return NULL


cdef XLA_FFI_Error* fill_metadata(const XLA_FFI_CallFrame* cf,
                                  XLA_FFI_Metadata_Extension* ext) noexcept nogil:
    """XLA's version handshake. The handler uses nothing newer than API 0.1,
    so it reports the runtime's minor version when that is older than the
    header's: a newer build never locks out an older jaxlib."""
    cdef XLA_FFI_Metadata* md = ext.metadata
    cdef int minor = XLA_FFI_API_MINOR
    if cf.api != NULL and cf.api.api_version.major_version == XLA_FFI_API_MAJOR:
        minor = min(minor, cf.api.api_version.minor_version)
    md.api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE
    md.api_version.extension_start = NULL
    md.api_version.major_version = XLA_FFI_API_MAJOR
    md.api_version.minor_version = minor
    md.traits = 0
    return NULL


cdef bint attr_is(const XLA_FFI_ByteSpan* name, const char* expected, size_t length) noexcept nogil:
    return name.len == length and memcmp(name.ptr, expected, length) == 0


# Attribute names in the order XLA passes them (sorted).
cdef const char* ATTR_NAMES[5]
ATTR_NAMES[:] = [b"kernel", b"min_parallel", b"order", b"right", b"threads"]
cdef const char* ATTRS_EXPECTED = \
    b"jaxsearch: expected int32 attributes kernel, min_parallel, order, right, threads"


cdef const char* read_call(const XLA_FFI_CallFrame* cf, const char** names, int count,
                           const char* expected, int32_t* attrs) noexcept nogil:
    """Checks a call of two buffers and one result with `count` int32
    attributes named `names` (sorted), read into `attrs`; an error message
    or NULL."""
    cdef int k
    cdef const XLA_FFI_Scalar* scalar
    if cf.args.size != 2 or cf.rets.size != 1:
        return b"jaxsearch: expected two operands and one result"
    if (cf.args.types[0] != XLA_FFI_ArgType_BUFFER or cf.args.types[1] != XLA_FFI_ArgType_BUFFER
            or cf.rets.types[0] != XLA_FFI_RetType_BUFFER):
        return b"jaxsearch: operands and result must be buffers"
    if cf.attrs.size != count:
        return expected
    for k in range(count):
        scalar = <const XLA_FFI_Scalar*>cf.attrs.attrs[k]
        if (cf.attrs.types[k] != XLA_FFI_AttrType_SCALAR or scalar.dtype != XLA_FFI_DataType_S32
                or not attr_is(cf.attrs.names[k], names[k], strlen(names[k]))):
            return expected
        attrs[k] = (<const int32_t*>scalar.value)[0]
    return NULL


cdef enum:
    MAX_ATTRS = 8


cdef XLA_FFI_Error* handle(XLA_FFI_CallFrame* cf, const char** names, int count,
                           const char* expected,
                           const char* (*run)(const XLA_FFI_CallFrame*, const int32_t*)
                           noexcept nogil) noexcept nogil:
    """What every handler does: the version handshake, the checks of the
    call, then `run` with the attributes."""
    cdef const XLA_FFI_Extension_Base* ext = cf.extension_start
    cdef int32_t attrs[MAX_ATTRS]
    cdef const char* message
    if ext != NULL and ext.type == XLA_FFI_Extension_Metadata:
        return fill_metadata(cf, <XLA_FFI_Metadata_Extension*>ext)
    if cf.struct_size < XLA_FFI_CallFrame_STRUCT_SIZE:
        return error(cf, b"jaxsearch: XLA call frame older than this build")
    if cf.stage != XLA_FFI_ExecutionStage_EXECUTE:
        return NULL
    message = read_call(cf, names, count, expected, attrs)
    if message == NULL:
        message = run(cf, attrs)
    return error(cf, message) if message != NULL else NULL


cdef XLA_FFI_Error* searchsorted_handler(XLA_FFI_CallFrame* cf) noexcept nogil:
    return handle(cf, ATTR_NAMES, 5, ATTRS_EXPECTED, search)


def handler_capsule():
    """The FFI handler as a PyCapsule, for jax.ffi.register_ffi_target."""
    return PyCapsule_New(<void*>searchsorted_handler, NULL, NULL)


# ======================================================================
# searchsorted_cumsum: search in the running sum of weights w (..., n) for
# needles v (..., m) of w's dtype (float32 or float64), without
# materialising the running sum. Kernels in cumsum_search.pxd.
#
# Three phases, each cut into parts that the threads claim as above; a
# thread waits between phases only for parts already claimed:
#   0. each part sums its segments of w (and, for order 'check', checks
#      its slice of the needles' order); the thread that finishes the last
#      part turns the sums into each segment's base, the running sum
#      before it;
#   1. each part merges its segments with their needles, or, in a row whose
#      needles are not sorted, writes its running sums into a buffer;
#   2. only for such rows: each part binary-searches a slice of needles in
#      the buffer.
# Int32 attributes: `order` (ORDER_*), `right` (0/1), `segment` (weights
# per segment, at most) and `threads`.
# ======================================================================
from cumsum_search cimport (weight_t, MAX_SEGMENT, MERGE_BLOCK, as_double, segment_sum,
                            needles_before, running_sums, merge_segment)
from search_kernels cimport in_order

cdef enum:
    CUMSUM_PHASES = 3
    # Needles per part in phase 2, at least.
    CUMSUM_NEEDLE_GRAIN = 4096
    # Segments per part in phases 0 and 1.
    SEGMENTS_PER_PART = 4

cdef struct CumsumJob:
    Job shape                       # buffers, n, m, batch strides (from plan)
    long refs
    long next_part[CUMSUM_PHASES]
    long done_parts[CUMSUM_PHASES]
    long bases_ready                # set once phase 0 and cumsum_bases are done
    long parts[CUMSUM_PHASES]
    long failed                     # phase 0's follow-up could not allocate
    int64_t rows
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
    if job.shape.order != ORDER_CHECK:
        return
    # Sorted means a sorted non-NaN prefix, then NaNs only.
    lo = m * piece // job.slices
    hi = m * (piece + 1) // job.slices
    nv = non_nan_prefix(v, m)
    ok = in_order(v, max(lo, 1), min(hi, nv))
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
    for row in range(job.rows):
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
        if job.shape.order == ORDER_ANY:
            job.unsorted[row] = 1
        unsorted_rows += atomic_load(&job.unsorted[row])
    job.parts[1] = job.rows * job.slices
    if unsorted_rows:
        job.prefix = <double*>malloc(sizeof(double) * job.rows * job.shape.n)
        if job.prefix == NULL:
            job.failed = 1
            job.parts[1] = 0
            return
        job.parts[2] = job.rows * job.needle_slices


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
    cdef double sums[MAX_SEGMENT]
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
        hi = m if k == job.segments - 1 else needles_before(v, m, bases[k + 1], right)
        merge_segment(sums, count, v + lo, max(hi - lo, 0), out + lo, start, block, side)
        lo = max(lo, hi)


cdef void cumsum_bisect_part(CumsumJob* job, long part, const weight_t* v, idx_t* out,
                             const side_t* side) noexcept nogil:
    """Phase 2: a slice of an unsorted row's needles, binary-searched in its
    running sums."""
    cdef long row = part // job.needle_slices, piece = part % job.needle_slices
    cdef int64_t a_off, v_off, n = job.shape.n, m = job.shape.m, j, size
    cdef int64_t lo = m * piece // job.needle_slices, hi = m * (piece + 1) // job.needle_slices
    cdef const double* sums = job.prefix + row * n
    cdef Py_ssize_t na = non_nan_prefix(sums, n)
    cdef double block[MERGE_BLOCK]
    if not atomic_load(&job.unsorted[row]):
        return
    row_offsets(&job.shape, row, &a_off, &v_off)
    v += v_off
    out += row * m
    j = lo
    while j < hi:
        size = min(<int64_t>MERGE_BLOCK, hi - j)
        bisect_kernel(sums, na, n, as_double(v + j, size, block), size, out + j, side)
        j += size


cdef void cumsum_run_typed(CumsumJob* job, int phase, long part, const weight_t* w,
                           const weight_t* v, idx_t* out) noexcept nogil:
    if phase == 0:
        cumsum_sum_part(job, part, w, v)
    elif phase == 1:
        if job.shape.right:
            cumsum_merge_part(job, part, w, v, out, <const RightSide*>NULL)
        else:
            cumsum_merge_part(job, part, w, v, out, <const LeftSide*>NULL)
    elif job.shape.right:
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


cdef void cumsum_work(CumsumJob* job) noexcept nogil:
    """Claims and runs parts, phase by phase. The thread that finishes a
    phase's last part runs what follows it and marks the phase ready; the
    others wait for that, never for a part nobody has claimed."""
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


cdef void free_cumsum_job(CumsumJob* job) noexcept nogil:
    free(job.prefix)
    free(job.unsorted)
    free(job.sums)
    free(job)


cdef void cumsum_release(CumsumJob* job) noexcept nogil:
    if fetch_add(&job.refs, -1) == 1:
        free_cumsum_job(job)


cdef void cumsum_pool_task(void* data) noexcept nogil:
    """A pool thread's share, in the caller's floating-point mode."""
    cdef CumsumJob* job = <CumsumJob*>data
    cdef fenv_t own_env
    atomic_load(&job.refs)  # see start_tasks
    fegetenv(&own_env)
    fesetenv(&job.shape.env)
    cumsum_work(job)
    fesetenv(&own_env)
    cumsum_release(job)


cdef const char* cumsum_plan(CumsumJob* job, int threads, int64_t segment) noexcept nogil:
    """Shapes and strides (as the search's), the segments and the parts."""
    cdef const char* message = plan(&job.shape, threads, 1)
    cdef int64_t d, per_row
    if message != NULL:
        return message
    if job.shape.n < 1 or job.shape.m < 1:
        return b"jaxsearch: searchsorted_cumsum needs at least one weight and one needle"
    job.rows = 1
    for d in range(job.shape.rank):
        job.rows *= job.shape.out_buf.dims[d]
    job.segment = segment
    job.segments = (job.shape.n + segment - 1) // segment
    job.slices = (job.segments + SEGMENTS_PER_PART - 1) // SEGMENTS_PER_PART
    per_row = job.shape.m // CUMSUM_NEEDLE_GRAIN
    job.needle_slices = max(1, min(<int64_t>threads * PARTS_PER_THREAD, per_row))
    job.parts[0] = job.rows * job.slices
    job.sums = <double*>malloc(sizeof(double) * job.rows * (2 * job.segments + 1))
    job.unsorted = <long*>calloc(job.rows, sizeof(long))
    if job.sums == NULL or job.unsorted == NULL:
        return b"jaxsearch: out of memory"
    job.bases = job.sums + job.rows * job.segments
    return NULL


cdef const char* cumsum_search(const XLA_FFI_CallFrame* cf, const int32_t* attrs) noexcept nogil:
    """Runs the whole call; returns an error message or NULL."""
    cdef CumsumJob* job
    cdef const char* message
    cdef const XLA_FFI_Buffer* w = <const XLA_FFI_Buffer*>cf.args.args[0]
    cdef const XLA_FFI_Buffer* v = <const XLA_FFI_Buffer*>cf.args.args[1]
    cdef XLA_FFI_Buffer* out = <XLA_FFI_Buffer*>cf.rets.rets[0]
    cdef int threads = attrs[3]
    if not ((w.dtype == XLA_FFI_DataType_F32 or w.dtype == XLA_FFI_DataType_F64)
            and v.dtype == w.dtype
            and (out.dtype == XLA_FFI_DataType_S32 or out.dtype == XLA_FFI_DataType_S64)):
        return b"jaxsearch: w and v need one dtype, float32 or float64; the output int32 or int64"
    if threads < 1 or threads > MAX_CALL_THREADS:
        return b"jaxsearch: threads must be in [1, MAX_THREADS]"
    if attrs[2] < 1 or attrs[2] > MAX_SEGMENT:
        return b"jaxsearch: segment must be in [1, 4096]"
    job = <CumsumJob*>calloc(1, sizeof(CumsumJob))
    if job == NULL:
        return b"jaxsearch: out of memory"
    job.shape.a_buf, job.shape.v_buf, job.shape.out_buf = w, v, out
    job.shape.order, job.shape.right = attrs[0], attrs[1] != 0
    message = cumsum_plan(job, threads, attrs[2])
    if message != NULL or job.parts[0] == 0:  # an error, or an empty batch
        free_cumsum_job(job)
        return message
    advise_huge_pages(out)
    start_tasks(cf, cumsum_pool_task, job, &job.refs, &job.shape.env,
                min(<long>threads, job.parts[0]) - 1)
    # Returns once every phase is done: pool tasks that start later find
    # nothing left, and the last one to let go frees the job.
    cumsum_work(job)
    message = NULL
    if job.failed:
        message = b"jaxsearch: out of memory"
    cumsum_release(job)
    return message


cdef const char* CUMSUM_ATTR_NAMES[4]
CUMSUM_ATTR_NAMES[:] = [b"order", b"right", b"segment", b"threads"]
cdef const char* CUMSUM_ATTRS_EXPECTED = \
    b"jaxsearch: expected int32 attributes order, right, segment, threads"


cdef XLA_FFI_Error* cumsum_handler(XLA_FFI_CallFrame* cf) noexcept nogil:
    return handle(cf, CUMSUM_ATTR_NAMES, 4, CUMSUM_ATTRS_EXPECTED, cumsum_search)


def cumsum_handler_capsule():
    """The searchsorted_cumsum FFI handler as a PyCapsule."""
    return PyCapsule_New(<void*>cumsum_handler, NULL, NULL)
# ======================================================================
