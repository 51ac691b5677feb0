# The searchsorted FFI handler (see jaxsearch/_cpu.py): two buffers a (..., n)
# and v (..., m) of one key dtype, one result (..., m) of int32 or int64;
# leading dimensions are batch dimensions that broadcast numpy-style (an
# unbatched operand comes with size-1 batch dimensions, without a copy). Five
# int32 attributes: `kernel` (KERNEL_*), `min_parallel` (needles per part, at
# least), `order` (ORDER_*), `right` (0/1) and `threads` (at most this many
# threads). Kernels in search_kernels.pxd.
#
# Parallelism: the needles of all rows are cut into parts. The calling thread
# and up to threads - 1 tasks on XLA's own CPU thread pool claim parts from
# an atomic counter. The caller waits only for parts that were claimed, never
# for a task to start, so a busy machine costs no more than one thread.
#
# Included by _cpu_ext.pyx after ffi_common.pxi, whose parts it uses.
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t,
                          uint8_t, uint16_t, uint32_t, uint64_t)
from libc.stdlib cimport free

from xla_ffi cimport *
from search_kernels cimport (key_t, idx_t, side_t, trust_t, LeftSide, RightSide, Trusted,
                             Checked, is_nan, is_sorted, non_nan_prefix, merge_kernel,
                             runs_kernel, bisect_kernel)

# `kernel`: which kernel serves sorted needles.
cdef enum:
    KERNEL_MERGE = 0
    KERNEL_RUNS = 1
    KERNEL_BISECT = 2

# The key dtypes the kernels take (run_part gives each its C type).
cdef enum:
    KEY_DTYPE_COUNT = 11

cdef NamedDtype KEY_DTYPES[KEY_DTYPE_COUNT]
KEY_DTYPES[:] = [
    NamedDtype(XLA_FFI_DataType_PRED, b"bool"),
    NamedDtype(XLA_FFI_DataType_S8, b"int8"), NamedDtype(XLA_FFI_DataType_S16, b"int16"),
    NamedDtype(XLA_FFI_DataType_S32, b"int32"), NamedDtype(XLA_FFI_DataType_S64, b"int64"),
    NamedDtype(XLA_FFI_DataType_U8, b"uint8"), NamedDtype(XLA_FFI_DataType_U16, b"uint16"),
    NamedDtype(XLA_FFI_DataType_U32, b"uint32"), NamedDtype(XLA_FFI_DataType_U64, b"uint64"),
    NamedDtype(XLA_FFI_DataType_F32, b"float32"), NamedDtype(XLA_FFI_DataType_F64, b"float64"),
]


cdef struct SearchAttrs:
    int32_t kernel
    int32_t min_parallel
    int32_t order
    int32_t right
    int32_t threads


cdef struct SearchJob:
    # Shared by the caller and the pool tasks; freed by the last to let go.
    JobHead head
    long next_part
    long done_parts
    long parts
    long slices                     # parts per row
    Shape shape
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
                       idx_t* out, const SearchJob* job, const side_t* side) noexcept nogil:
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


cdef void run_typed(const SearchJob* job, long part, const key_t* a, const key_t* v,
                    idx_t* out) noexcept nogil:
    cdef long row = part // job.slices, piece = part % job.slices
    cdef int64_t a_off, v_off
    cdef int64_t lo = job.shape.m * piece // job.slices
    cdef int64_t hi = job.shape.m * (piece + 1) // job.slices
    row_offsets(&job.shape, row, &a_off, &v_off)
    a += a_off
    v += v_off + lo
    out += row * job.shape.m + lo
    if job.right:
        search_slice(a, job.shape.n, v, hi - lo, out, job, <const RightSide*>NULL)
    else:
        search_slice(a, job.shape.n, v, hi - lo, out, job, <const LeftSide*>NULL)


cdef void run_key(const SearchJob* job, long part, const key_t* a, const key_t* v) noexcept nogil:
    if job.shape.out_buf.dtype == XLA_FFI_DataType_S32:
        run_typed(job, part, a, v, <int32_t*>job.shape.out_buf.data)
    else:
        run_typed(job, part, a, v, <int64_t*>job.shape.out_buf.data)


cdef void run_part(const SearchJob* job, long part) noexcept nogil:
    """The part's kernels at the C type of its keys, one of KEY_DTYPES."""
    cdef const void* a = job.shape.a_buf.data
    cdef const void* v = job.shape.v_buf.data
    cdef XLA_FFI_DataType dt = job.shape.a_buf.dtype
    if dt == XLA_FFI_DataType_F32: run_key(job, part, <const float*>a, <const float*>v)
    elif dt == XLA_FFI_DataType_F64: run_key(job, part, <const double*>a, <const double*>v)
    elif dt == XLA_FFI_DataType_S32: run_key(job, part, <const int32_t*>a, <const int32_t*>v)
    elif dt == XLA_FFI_DataType_S64: run_key(job, part, <const int64_t*>a, <const int64_t*>v)
    elif dt == XLA_FFI_DataType_S8: run_key(job, part, <const int8_t*>a, <const int8_t*>v)
    elif dt == XLA_FFI_DataType_S16: run_key(job, part, <const int16_t*>a, <const int16_t*>v)
    # A bool is one byte holding 0 or 1, and False < True: compare as uint8.
    elif dt == XLA_FFI_DataType_U8 or dt == XLA_FFI_DataType_PRED:
        run_key(job, part, <const uint8_t*>a, <const uint8_t*>v)
    elif dt == XLA_FFI_DataType_U16: run_key(job, part, <const uint16_t*>a, <const uint16_t*>v)
    elif dt == XLA_FFI_DataType_U32: run_key(job, part, <const uint32_t*>a, <const uint32_t*>v)
    else: run_key(job, part, <const uint64_t*>a, <const uint64_t*>v)


cdef void search_work(void* data) noexcept nogil:
    """Claims and runs parts until none is left (in the calling thread's
    floating-point mode)."""
    cdef SearchJob* job = <SearchJob*>data
    cdef long part = fetch_add(&job.next_part, 1)
    while part < job.parts:
        run_part(job, part)
        fetch_add(&job.done_parts, 1)
        part = fetch_add(&job.next_part, 1)


cdef const char* search_plan(SearchJob* job, const XLA_FFI_CallFrame* cf, int threads,
                             int64_t min_parallel) noexcept nogil:
    """The call's shape, cut into parts."""
    cdef const char* message = plan_shape(&job.shape, cf)
    if message != NULL:
        return message
    job.slices = slices_per_row(job.shape.m, threads, min_parallel)
    job.parts = job.shape.rows * job.slices
    return NULL


cdef const char* read_search_attrs(const XLA_FFI_CallFrame* cf, SearchAttrs* attrs,
                                   char* message_buf) noexcept nogil:
    """The attributes the top of this file lists, into `attrs`."""
    cdef Attr table[5]
    table[:] = [any_int32(b"kernel", &attrs.kernel),
                any_int32(b"min_parallel", &attrs.min_parallel),
                any_int32(b"order", &attrs.order),
                any_int32(b"right", &attrs.right),
                Attr(b"threads", &attrs.threads, 1, MAX_CALL_THREADS)]
    return read_attrs(cf, table, sizeof(table) // sizeof(Attr), message_buf)


cdef const char* search_call(const XLA_FFI_CallFrame* cf, char* message_buf) noexcept nogil:
    """Runs a searchsorted call: its plan, then its parts on this thread and
    the pool's, until every claimed part is done; an error message or NULL."""
    cdef SearchAttrs attrs
    cdef SearchJob* job
    cdef const char* message = read_search_attrs(cf, &attrs, message_buf)
    if message != NULL:
        return message
    job = <SearchJob*>new_job(sizeof(SearchJob), search_work, free)
    if job == NULL:
        return b"jaxsearch: out of memory"
    job.kernel, job.order, job.right = attrs.kernel, attrs.order, attrs.right != 0
    message = search_plan(job, cf, attrs.threads, attrs.min_parallel)
    if message != NULL:
        free(job)
        return message
    advise_huge_pages(job.shape.out_buf)
    start_tasks(cf, &job.head, call_threads(attrs.threads, job.parts) - 1)
    search_work(job)
    # Parts claimed by pool tasks may still be running; unstarted tasks are
    # not waited for (they find no part left, and the last one frees the job).
    while atomic_load(&job.done_parts) < job.parts:
        sched_yield()
    release(&job.head)
    return NULL


cdef XLA_FFI_Error* searchsorted_handler(XLA_FFI_CallFrame* cf) noexcept nogil:
    return handle(cf, KEY_DTYPES, KEY_DTYPE_COUNT,
                  b"jaxsearch: a and v need one supported key dtype; the output int32 or int64",
                  search_call)
