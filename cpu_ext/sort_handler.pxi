# The key sort FFI handler: each row of `a` (..., n) sorted as jnp.sort
# sorts it (key_sort.pxd), into a result of a's dtype and shape. The
# patch's "sort" and "compare_all" methods search it: their answers count
# the keys before each needle whatever a's order. One int32 attribute:
# `threads`. The threads claim rows.
#
# Included by _cpu_ext.pyx after ffi_common.pxi, whose parts it uses.
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free

from xla_ffi cimport *
from key_sort cimport sort_row
from search_kernels cimport key_t


cdef struct SortJob:
    # Shared by the caller and the pool tasks; freed by the last to let go.
    JobHead head
    long next_row
    long done_rows
    long rows
    long failed                     # set where a merge sort's scratch failed
    XLA_FFI_DataType dtype
    int64_t n
    const char* a
    char* out


cdef bint sort_typed_rows(SortJob* job, const key_t* a, key_t* out) noexcept nogil:
    """Claims rows and sorts each into `out`; False
    where a merge sort's scratch could not be had."""
    cdef key_t* scratch = NULL
    cdef bint ok = True
    cdef long row = fetch_add(&job.next_row, 1)
    while row < job.rows:
        ok = sort_row(a + row * job.n, out + row * job.n, job.n, &scratch) and ok
        fetch_add(&job.done_rows, 1)
        row = fetch_add(&job.next_row, 1)
    free(scratch)
    return ok


cdef bint sort_rows(SortJob* job) noexcept nogil:
    """sort_typed_rows at the C type of the keys, one of KEY_DTYPES."""
    cdef XLA_FFI_DataType dt = job.dtype
    if dt == XLA_FFI_DataType_F32:
        return sort_typed_rows(job, <const float*>job.a, <float*>job.out)
    if dt == XLA_FFI_DataType_F64:
        return sort_typed_rows(job, <const double*>job.a, <double*>job.out)
    if dt == XLA_FFI_DataType_S8:
        return sort_typed_rows(job, <const int8_t*>job.a, <int8_t*>job.out)
    if dt == XLA_FFI_DataType_S16:
        return sort_typed_rows(job, <const int16_t*>job.a, <int16_t*>job.out)
    if dt == XLA_FFI_DataType_S32:
        return sort_typed_rows(job, <const int32_t*>job.a, <int32_t*>job.out)
    if dt == XLA_FFI_DataType_S64:
        return sort_typed_rows(job, <const int64_t*>job.a, <int64_t*>job.out)
    # A bool is one byte holding 0 or 1, and False < True: sort as uint8.
    if dt == XLA_FFI_DataType_U8 or dt == XLA_FFI_DataType_PRED:
        return sort_typed_rows(job, <const uint8_t*>job.a, <uint8_t*>job.out)
    if dt == XLA_FFI_DataType_U16:
        return sort_typed_rows(job, <const uint16_t*>job.a, <uint16_t*>job.out)
    if dt == XLA_FFI_DataType_U32:
        return sort_typed_rows(job, <const uint32_t*>job.a, <uint32_t*>job.out)
    return sort_typed_rows(job, <const uint64_t*>job.a, <uint64_t*>job.out)


cdef void sort_work(void* data) noexcept nogil:
    cdef SortJob* job = <SortJob*>data
    if not sort_rows(job):
        atomic_store(&job.failed, 1)


cdef void free_sort_job(void* data) noexcept nogil:
    free(data)


cdef const char* check_sort_operands(const XLA_FFI_CallFrame* cf, const NamedDtype* dtypes,
                                     int count, const char* dtype_error) noexcept nogil:
    """One operand buffer of one dtype of `dtypes`, and a result buffer of
    its dtype and shape."""
    cdef const XLA_FFI_Buffer* a
    cdef const XLA_FFI_Buffer* out
    cdef int64_t d
    if cf.args.size != 1 or cf.rets.size != 1:
        return b"jaxsearch: the key sort takes one operand and gives one result"
    if cf.args.types[0] != XLA_FFI_ArgType_BUFFER or cf.rets.types[0] != XLA_FFI_RetType_BUFFER:
        return b"jaxsearch: operands and result must be buffers"
    a = <const XLA_FFI_Buffer*>cf.args.args[0]
    out = <const XLA_FFI_Buffer*>cf.rets.rets[0]
    if not dtype_in(a.dtype, dtypes, count) or out.dtype != a.dtype:
        return dtype_error
    if a.rank < 1 or out.rank != a.rank:
        return b"jaxsearch: the key sort's result has its operand's shape, of rank 1 or more"
    for d in range(a.rank):
        if a.dims[d] != out.dims[d]:
            return b"jaxsearch: the key sort's result has its operand's shape, of rank 1 or more"
    return NULL


cdef const char* sort_call(const XLA_FFI_CallFrame* cf, char* message_buf) noexcept nogil:
    """Sorts the rows on this thread and the pool's; an error message or NULL."""
    cdef const XLA_FFI_Buffer* a = <const XLA_FFI_Buffer*>cf.args.args[0]
    cdef XLA_FFI_Buffer* out = <XLA_FFI_Buffer*>cf.rets.rets[0]
    cdef int32_t threads
    cdef Attr table[1]
    cdef SortJob* job
    cdef const char* message
    cdef int64_t d
    table[0] = int32_in(b"threads", &threads, 1, MAX_CALL_THREADS)
    message = read_attrs(cf, table, 1, message_buf)
    if message != NULL:
        return message
    job = <SortJob*>new_job(sizeof(SortJob), sort_work, free_sort_job)
    if job == NULL:
        return b"jaxsearch: out of memory"
    job.dtype = a.dtype
    job.a, job.out = <const char*>a.data, <char*>out.data
    job.n = a.dims[a.rank - 1]
    job.rows = 1
    for d in range(a.rank - 1):
        job.rows *= a.dims[d]
    if job.n == 0:
        job.rows = 0
    start_tasks(cf, &job.head, call_threads(threads, job.rows) - 1)
    sort_work(job)
    # Rows claimed by pool tasks may still be sorting.
    while atomic_load(&job.done_rows) < job.rows:
        sched_yield()
    message = NULL
    if atomic_load(&job.failed):
        message = b"jaxsearch: out of memory"
    release(&job.head)
    return message


cdef XLA_FFI_Error* sort_handler(XLA_FFI_CallFrame* cf) noexcept nogil:
    return handle(cf, KEY_DTYPES, KEY_DTYPE_COUNT,
                  b"jaxsearch: the key sort takes a supported key dtype and gives the same",
                  check_sort_operands, sort_call)
