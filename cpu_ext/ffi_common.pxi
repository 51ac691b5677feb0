# What the FFI handlers share: the call's checks (version handshake, call
# frame, operands, attributes bound by name, dtypes), its shape and batch
# strides, the thread plan, and running parts on XLA's CPU thread pool.
from libc.stdint cimport INT32_MAX, INT32_MIN, int32_t, int64_t
from libc.stdio cimport snprintf
from libc.stdlib cimport calloc
from libc.string cimport memcmp, strlen

from xla_ffi cimport *
from huge_pages cimport advise_huge_pages

# `order`: what is known of the needles' order (and a's).
cdef enum:
    ORDER_ANY = 0       # no promise: binary search
    ORDER_SORTED = 1    # the caller promised sorted needles and a sorted `a`
    ORDER_CHECK = 2     # each part checks its own needles, each row of `a` once

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

# Room for an error message that names an attribute or a limit.
cdef enum:
    MESSAGE_SIZE = 160

cdef extern from "<fenv.h>" nogil:
    ctypedef struct fenv_t:
        pass
    int fegetenv(fenv_t* env)
    int fesetenv(const fenv_t* env)

cdef extern from "<sched.h>" nogil:
    int sched_yield()

cdef extern from *:
    """
    static inline long jaxsearch_fetch_add(long* p, long v) {
        return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
    }
    static inline long jaxsearch_load(const long* p) {
        return __atomic_load_n(p, __ATOMIC_ACQUIRE);
    }
    static inline void jaxsearch_store(long* p, long v) {
        __atomic_store_n(p, v, __ATOMIC_RELEASE);
    }
    """
    long fetch_add "jaxsearch_fetch_add"(long* p, long v) noexcept nogil
    long atomic_load "jaxsearch_load"(const long* p) noexcept nogil
    void atomic_store "jaxsearch_store"(long* p, long v) noexcept nogil


# ----------------------------------------------------------------------
# Dtypes

cdef struct NamedDtype:
    XLA_FFI_DataType ffi
    const char* name                # numpy's name for it


cdef bint dtype_in(XLA_FFI_DataType dtype, const NamedDtype* table, int count) noexcept nogil:
    cdef int k
    for k in range(count):
        if table[k].ffi == dtype:
            return True
    return False


cdef tuple dtype_names(const NamedDtype* table, int count):
    """numpy's names of a table's dtypes, in its order."""
    return tuple([table[k].name.decode() for k in range(count)])


cdef bint is_index_dtype(XLA_FFI_DataType dtype) noexcept nogil:
    """Whether an output of this dtype can hold the answers: int32 or int64."""
    return dtype == XLA_FFI_DataType_S32 or dtype == XLA_FFI_DataType_S64


# ----------------------------------------------------------------------
# The call: two operands a (..., n) and v (..., m), one result (..., m)

cdef struct Shape:
    # The call's buffers, and where each output row reads its operands' rows
    # (filled by plan_shape).
    const XLA_FFI_Buffer* a_buf
    const XLA_FFI_Buffer* v_buf
    XLA_FFI_Buffer* out_buf
    int64_t rank                    # batch dimensions of the output
    int64_t rows                    # the product of those dimensions
    int64_t n
    int64_t m
    int64_t a_stride[MAX_BATCH_RANK]
    int64_t v_stride[MAX_BATCH_RANK]


cdef bint batch_strides(const XLA_FFI_Buffer* buf, const XLA_FFI_Buffer* out_buf,
                        int64_t row_length, int64_t* strides) noexcept nogil:
    """An operand's stride (elements) along each batch dimension of the
    output, right-aligned as in numpy broadcasting, 0 where it broadcasts;
    False where its batch dimensions do not broadcast."""
    cdef int64_t rank = out_buf.rank - 1, d, db, step = row_length
    for d in range(rank - 1, -1, -1):
        db = d - (rank - (buf.rank - 1))
        strides[d] = 0
        if db >= 0:
            if buf.dims[db] == out_buf.dims[d]:
                strides[d] = step
            elif buf.dims[db] != 1:
                return False
            step *= buf.dims[db]
    return True


cdef const char* plan_shape(Shape* shape, const XLA_FFI_CallFrame* cf) noexcept nogil:
    """Takes the call's buffers, checks their shapes and fills the batch
    strides; an error message or NULL."""
    cdef const XLA_FFI_Buffer* a_buf = <const XLA_FFI_Buffer*>cf.args.args[0]
    cdef const XLA_FFI_Buffer* v_buf = <const XLA_FFI_Buffer*>cf.args.args[1]
    cdef XLA_FFI_Buffer* out_buf = <XLA_FFI_Buffer*>cf.rets.rets[0]
    cdef int64_t d
    shape.a_buf, shape.v_buf, shape.out_buf = a_buf, v_buf, out_buf
    shape.rank = out_buf.rank - 1
    if shape.rank < 0 or shape.rank > MAX_BATCH_RANK or a_buf.rank < 1 or v_buf.rank < 1:
        return b"jaxsearch: operand rank out of range"
    shape.n = a_buf.dims[a_buf.rank - 1]
    shape.m = out_buf.dims[shape.rank]
    if v_buf.dims[v_buf.rank - 1] != shape.m:
        return b"jaxsearch: needle and output shapes disagree"
    if a_buf.rank - 1 > shape.rank or v_buf.rank - 1 > shape.rank:
        return b"jaxsearch: operand has more batch dimensions than the output"
    shape.rows = 1
    for d in range(shape.rank):
        shape.rows *= out_buf.dims[d]
    if not batch_strides(a_buf, out_buf, shape.n, shape.a_stride):
        return b"jaxsearch: batch dimensions of a do not broadcast"
    if not batch_strides(v_buf, out_buf, shape.m, shape.v_stride):
        return b"jaxsearch: batch dimensions of v do not broadcast"
    return NULL


cdef void row_offsets(const Shape* shape, long row, int64_t* a_off,
                      int64_t* v_off) noexcept nogil:
    """Where output row `row` reads its row of `a` and of `v` (elements)."""
    cdef int64_t d, idx
    a_off[0] = 0
    v_off[0] = 0
    for d in range(shape.rank - 1, -1, -1):
        idx = row % shape.out_buf.dims[d]
        row = row // shape.out_buf.dims[d]
        a_off[0] += idx * shape.a_stride[d]
        v_off[0] += idx * shape.v_stride[d]


cdef struct RowCursor:
    # Output rows walked in order, their operands' offsets updated by adding
    # strides (row_offsets divides once per batch dimension, which costs more
    # than searching a short row).
    int64_t index[MAX_BATCH_RANK]
    int64_t a_off
    int64_t v_off


cdef void start_rows(const Shape* shape, long row, RowCursor* cursor) noexcept nogil:
    """`cursor` at output row `row`."""
    cdef int64_t d
    row_offsets(shape, row, &cursor.a_off, &cursor.v_off)
    for d in range(shape.rank - 1, -1, -1):
        cursor.index[d] = row % shape.out_buf.dims[d]
        row = row // shape.out_buf.dims[d]


cdef inline void next_row(const Shape* shape, RowCursor* cursor) noexcept nogil:
    """`cursor` on to the next output row (an odometer over the batch
    dimensions, last one fastest)."""
    cdef int64_t d = shape.rank - 1
    while d >= 0:
        cursor.index[d] += 1
        cursor.a_off += shape.a_stride[d]
        cursor.v_off += shape.v_stride[d]
        if cursor.index[d] < shape.out_buf.dims[d] or d == 0:
            return
        cursor.a_off -= shape.out_buf.dims[d] * shape.a_stride[d]
        cursor.v_off -= shape.out_buf.dims[d] * shape.v_stride[d]
        cursor.index[d] = 0
        d -= 1


cdef void advise_output_pages(XLA_FFI_Buffer* out) noexcept nogil:
    """Asks for 2 MiB pages under a large output, before it is first written
    (huge_pages.pxd): XLA's CPU buffers come on 4 KiB pages."""
    cdef size_t nbytes = (4 if out.dtype == XLA_FFI_DataType_S32
                          or out.dtype == XLA_FFI_DataType_F32 else 8)
    cdef int64_t d
    for d in range(out.rank):
        nbytes *= <size_t>out.dims[d]
    advise_huge_pages(out.data, nbytes)


# ----------------------------------------------------------------------
# The thread plan

cdef int64_t slices_per_row(int64_t m, int threads, int64_t min_parallel) noexcept nogil:
    """Parts a row of m needles is cut into: slices of at least
    `min_parallel` needles, at most PARTS_PER_THREAD per thread."""
    return max(1, min(<int64_t>threads * PARTS_PER_THREAD, m // max(min_parallel, 1)))


cdef long call_threads(int threads, long parts) noexcept nogil:
    """Threads that work on a call of `parts` parts: the caller, and one
    pool task per further part, up to `threads` in all."""
    return max(1, min(<long>threads, parts))


# ----------------------------------------------------------------------
# XLA's thread pool

cdef bint schedule(const XLA_FFI_CallFrame* cf, void (*task)(void* job) noexcept nogil,
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


cdef struct JobHead:
    # What the caller and the pool tasks share of a job: the first member of
    # each handler's job struct, so that a pointer to the job points to it.
    long refs                       # holders: the caller and each task
    fenv_t env                      # the caller's floating-point mode
    void (*work)(void* job) noexcept nogil      # claims and runs parts
    void (*destroy)(void* job) noexcept nogil   # frees the job


cdef void* new_job(size_t size, void (*work)(void* job) noexcept nogil,
                   void (*destroy)(void* job) noexcept nogil) noexcept nogil:
    """A zeroed job of `size` bytes, a JobHead first; NULL when out of memory."""
    cdef JobHead* head = <JobHead*>calloc(1, size)
    if head != NULL:
        head.work, head.destroy = work, destroy
    return head


cdef void release(JobHead* head) noexcept nogil:
    """Lets go of a job; the last holder frees it."""
    if fetch_add(&head.refs, -1) == 1:
        head.destroy(head)


cdef void pool_task(void* job) noexcept nogil:
    """A pool thread's share of a job, in the caller's floating-point mode
    (XLA runs with denormals flushed to zero, and jnp compares that way)."""
    cdef JobHead* head = <JobHead*>job
    cdef fenv_t own_env
    atomic_load(&head.refs)  # see start_tasks
    fegetenv(&own_env)
    fesetenv(&head.env)
    head.work(job)
    fesetenv(&own_env)
    release(head)


cdef void start_tasks(const XLA_FFI_CallFrame* cf, JobHead* head, long tasks) noexcept nogil:
    """Puts up to `tasks` pool tasks on XLA's thread pool, each holding a
    reference to the job (the caller holds one more), with the caller's
    floating-point mode saved for them.

    The job must be filled in: `refs` is stored last, with release order,
    and each task loads it with acquire order before it reads the job, so the
    hand-over holds by these atomics, whatever order XLA's pool keeps
    (ThreadSanitizer reported a plain store racing with a task's read)."""
    cdef long t
    tasks = max(tasks, 0)
    if tasks:
        fegetenv(&head.env)
    atomic_store(&head.refs, 1 + tasks)
    for t in range(tasks):
        if not schedule(cf, pool_task, head):
            fetch_add(&head.refs, -(tasks - t))
            break


# ----------------------------------------------------------------------
# The handler's frame: handshake, checks, attributes, errors

cdef struct Attr:
    # One int32 attribute a handler takes: the call's attribute of this
    # name is read into `value`, and must lie in [lo, hi]. An optional one
    # may be missing (a program lowered by an older jaxsearch), and `value`
    # then keeps what the handler put there.
    const char* name
    int32_t* value
    int32_t lo
    int32_t hi
    bint optional


cdef Attr int32_in(const char* name, int32_t* value, int32_t lo, int32_t hi) noexcept nogil:
    """A required attribute in [lo, hi]."""
    return Attr(name, value, lo, hi, False)


cdef Attr any_int32(const char* name, int32_t* value) noexcept nogil:
    """A required attribute that may take any value."""
    return int32_in(name, value, INT32_MIN, INT32_MAX)


cdef bint name_is(const XLA_FFI_ByteSpan* name, const char* expected) noexcept nogil:
    return name.len == strlen(expected) and memcmp(name.ptr, expected, name.len) == 0


cdef const char* read_attrs(const XLA_FFI_CallFrame* cf, Attr* table, int count,
                            char* message_buf) noexcept nogil:
    """Fills each of the `count` entries of `table` from the call's int32
    scalar attribute of its name, checked against the entry's bounds (an
    optional entry may be missing); the call may have no other attribute.
    An error message (in `message_buf`, MESSAGE_SIZE bytes) or NULL.

    XLA passes the attributes sorted by name, but nothing here relies on
    that; their names are byte spans, not NUL-terminated."""
    cdef const XLA_FFI_ByteSpan* name
    cdef const XLA_FFI_Scalar* scalar
    cdef unsigned long read = 0     # bit t: table[t] has been read
    cdef int64_t k
    cdef int t
    for k in range(cf.attrs.size):
        name = cf.attrs.names[k]
        t = 0
        while t < count and not name_is(name, table[t].name):
            t += 1
        if t == count:
            snprintf(message_buf, MESSAGE_SIZE, b"jaxsearch: unexpected attribute %.*s",
                     <int>name.len, name.ptr)
            return message_buf
        scalar = <const XLA_FFI_Scalar*>cf.attrs.attrs[k]
        if cf.attrs.types[k] != XLA_FFI_AttrType_SCALAR or scalar.dtype != XLA_FFI_DataType_S32:
            snprintf(message_buf, MESSAGE_SIZE,
                     b"jaxsearch: attribute %s must be an int32 scalar", table[t].name)
            return message_buf
        table[t].value[0] = (<const int32_t*>scalar.value)[0]
        if not table[t].lo <= table[t].value[0] <= table[t].hi:
            snprintf(message_buf, MESSAGE_SIZE, b"jaxsearch: %s must be in [%d, %d]",
                     table[t].name, <int>table[t].lo, <int>table[t].hi)
            return message_buf
        read |= (<unsigned long>1) << t
    for t in range(count):
        if not read & ((<unsigned long>1) << t) and not table[t].optional:
            snprintf(message_buf, MESSAGE_SIZE, b"jaxsearch: missing int32 attribute %s",
                     table[t].name)
            return message_buf
    return NULL


cdef XLA_FFI_Error* error(const XLA_FFI_CallFrame* cf, const char* message) noexcept nogil:
    """XLA's error for `message` (which XLA copies)."""
    cdef XLA_FFI_Error_Create_Args args
    args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE
    args.extension_start = NULL
    args.message = message
    args.errc = XLA_FFI_Error_Code_INVALID_ARGUMENT
    return cf.api.XLA_FFI_Error_Create(&args)


cdef XLA_FFI_Error* fill_metadata(const XLA_FFI_CallFrame* cf,
                                  XLA_FFI_Metadata_Extension* ext) noexcept nogil:
    """XLA's version handshake. The handlers use nothing newer than API 0.1,
    so they report the runtime's minor version when that is older than the
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


cdef const char* check_operands(const XLA_FFI_CallFrame* cf, const NamedDtype* dtypes, int count,
                                const char* dtype_error) noexcept nogil:
    """Two operand buffers of one dtype of `dtypes` (else `dtype_error`) and
    a result buffer of int32 or int64, as every handler takes."""
    cdef XLA_FFI_DataType dtype
    if cf.args.size != 2 or cf.rets.size != 1:
        return b"jaxsearch: expected two operands and one result"
    if (cf.args.types[0] != XLA_FFI_ArgType_BUFFER or cf.args.types[1] != XLA_FFI_ArgType_BUFFER
            or cf.rets.types[0] != XLA_FFI_RetType_BUFFER):
        return b"jaxsearch: operands and result must be buffers"
    dtype = (<const XLA_FFI_Buffer*>cf.args.args[0]).dtype
    if not (dtype_in(dtype, dtypes, count)
            and (<const XLA_FFI_Buffer*>cf.args.args[1]).dtype == dtype
            and is_index_dtype((<const XLA_FFI_Buffer*>cf.rets.rets[0]).dtype)):
        return dtype_error
    return NULL


# A handler's check of its operands and result against its dtypes (else
# `dtype_error`): an error message or NULL.
ctypedef const char* (*OperandCheck)(const XLA_FFI_CallFrame* cf, const NamedDtype* dtypes,
                                     int count, const char* dtype_error) noexcept nogil


# A handler's own work: reads its attributes and runs the call; an error
# message (possibly in `message_buf`, MESSAGE_SIZE bytes) or NULL.
ctypedef const char* (*CallRunner)(const XLA_FFI_CallFrame* cf,
                                   char* message_buf) noexcept nogil


cdef XLA_FFI_Error* handle(XLA_FFI_CallFrame* cf, const NamedDtype* dtypes, int count,
                           const char* dtype_error, OperandCheck check,
                           CallRunner run) noexcept nogil:
    """What every handler does: the version handshake, the checks of the
    call frame and of its operands (`check`: check_operands for the
    searches), then `run`, whose message becomes XLA's error."""
    cdef const XLA_FFI_Extension_Base* ext = cf.extension_start
    cdef char message_buf[MESSAGE_SIZE]
    cdef const char* message
    if ext != NULL and ext.type == XLA_FFI_Extension_Metadata:
        return fill_metadata(cf, <XLA_FFI_Metadata_Extension*>ext)
    if cf.struct_size < XLA_FFI_CallFrame_STRUCT_SIZE:
        return error(cf, b"jaxsearch: XLA call frame older than this build")
    if cf.stage != XLA_FFI_ExecutionStage_EXECUTE:
        return NULL
    message = check(cf, dtypes, count, dtype_error)
    if message == NULL:
        message = run(cf, message_buf)
    return error(cf, message) if message != NULL else NULL
