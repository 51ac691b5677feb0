# The XLA FFI handler for searchsorted on CPU, written against XLA's C API.
#
# Call signature (see jaxsearch/_cpu.py): two buffers a (..., n) and v (..., m)
# of one key dtype, one result (..., m) of int32 or int64; leading dimensions
# are batch dimensions that broadcast numpy-style (vmap passes an unbatched
# operand with size-1 batch dimensions, without copying it). Four int32
# attributes: `right` (0/1), `order` (ORDER_*), `kernel` (KERNEL_*) and
# `threads` (how many threads split each row's needles).
from cpython.pycapsule cimport PyCapsule_New
from cython.parallel cimport prange
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t,
                          uint8_t, uint16_t, uint32_t, uint64_t)
from libc.string cimport memcmp

from xla_ffi cimport *
from search_kernels cimport (key_t, idx_t, non_nan_prefix, is_sorted,
                             merge_kernel, runs_kernel, bisect_kernel)

# `order`: what is known of the needles' order.
cdef enum:
    ORDER_ANY = 0       # no promise: binary search
    ORDER_SORTED = 1    # the caller promised sorted needles
    ORDER_CHECK = 2     # check each row, merge if sorted

# `kernel`: which kernel serves sorted needles.
cdef enum:
    KERNEL_MERGE = 0
    KERNEL_RUNS = 1
    KERNEL_BISECT = 2

# Room for batch dimensions; vmap adds one per level of nesting.
cdef enum:
    MAX_BATCH_RANK = 32

ORDER_NAMES = {"any": ORDER_ANY, "sorted": ORDER_SORTED, "check": ORDER_CHECK}
KERNEL_NAMES = {"merge": KERNEL_MERGE, "runs": KERNEL_RUNS, "bisect": KERNEL_BISECT}


cdef extern from "<fenv.h>" nogil:
    ctypedef struct fenv_t:
        pass
    int fegetenv(fenv_t* env)
    int fesetenv(const fenv_t* env)


cdef struct Params:
    bint right
    int order
    int kernel
    int threads


cdef void search_row(const key_t* a, Py_ssize_t n, const key_t* v, Py_ssize_t m,
                     idx_t* out, Params params) noexcept nogil:
    cdef Py_ssize_t na = non_nan_prefix(a, n)
    cdef Py_ssize_t nv = m, j, lo, hi
    cdef int part
    cdef fenv_t caller_env, worker_env
    cdef bint right = params.right
    cdef int kernel = params.kernel
    cdef int threads = params.threads
    if params.order == ORDER_ANY or (params.order == ORDER_CHECK and not is_sorted(v, m)):
        kernel = KERNEL_BISECT
    if kernel != KERNEL_BISECT:
        # Sorted needles: their NaN tail is split off like a's.
        nv = non_nan_prefix(v, m)
        for j in range(nv, m):
            out[j] = <idx_t>(n if right else na)
    # XLA runs with denormals flushed to zero, and jnp compares that way: the
    # worker threads take the caller's floating-point mode for their part.
    fegetenv(&caller_env)
    # Every kernel serves any contiguous slice of the needles on its own.
    for part in prange(threads, num_threads=threads, schedule="static"):
        fegetenv(&worker_env)
        fesetenv(&caller_env)
        lo = nv * part // threads
        hi = nv * (part + 1) // threads
        if kernel == KERNEL_MERGE:
            merge_kernel(a, na, v + lo, hi - lo, out + lo, right)
        elif kernel == KERNEL_RUNS:
            runs_kernel(a, na, v + lo, hi - lo, out + lo, right)
        else:
            bisect_kernel(a, na, n, v + lo, hi - lo, out + lo, right)
        fesetenv(&worker_env)


cdef const char* search_batch(const XLA_FFI_Buffer* a_buf, const XLA_FFI_Buffer* v_buf,
                              XLA_FFI_Buffer* out_buf, const key_t* a, const key_t* v,
                              idx_t* out, Params params) noexcept nogil:
    """Runs search_row over the broadcast batch; returns an error message or NULL."""
    cdef int64_t rank = out_buf.rank - 1
    cdef int64_t n = a_buf.dims[a_buf.rank - 1]
    cdef int64_t m = out_buf.dims[rank]
    cdef int64_t a_stride[MAX_BATCH_RANK]
    cdef int64_t v_stride[MAX_BATCH_RANK]
    cdef int64_t rows = 1, row, rest, idx, a_off, v_off, d, da, dv, step_a, step_v
    if rank < 0 or rank > MAX_BATCH_RANK:
        return b"jaxsearch: output rank out of range"
    if v_buf.rank < 1 or v_buf.dims[v_buf.rank - 1] != m or a_buf.rank < 1:
        return b"jaxsearch: needle and output shapes disagree"
    if a_buf.rank - 1 > rank or v_buf.rank - 1 > rank:
        return b"jaxsearch: operand has more batch dimensions than the output"
    # Batch strides, right-aligned as in numpy broadcasting; 0 where broadcast.
    step_a = n
    step_v = m
    for d in range(rank - 1, -1, -1):
        rows *= out_buf.dims[d]
        da = d - (rank - (a_buf.rank - 1))
        dv = d - (rank - (v_buf.rank - 1))
        a_stride[d] = 0
        v_stride[d] = 0
        if da >= 0:
            if a_buf.dims[da] == out_buf.dims[d]:
                a_stride[d] = step_a
            elif a_buf.dims[da] != 1:
                return b"jaxsearch: batch dimensions of a do not broadcast"
            step_a *= a_buf.dims[da]
        if dv >= 0:
            if v_buf.dims[dv] == out_buf.dims[d]:
                v_stride[d] = step_v
            elif v_buf.dims[dv] != 1:
                return b"jaxsearch: batch dimensions of v do not broadcast"
            step_v *= v_buf.dims[dv]
    for row in range(rows):
        rest = row
        a_off = 0
        v_off = 0
        for d in range(rank - 1, -1, -1):
            idx = rest % out_buf.dims[d]
            rest = rest // out_buf.dims[d]
            a_off += idx * a_stride[d]
            v_off += idx * v_stride[d]
        search_row(a + a_off, n, v + v_off, m, out + row * m, params)
    return NULL


cdef const char* search_key(const XLA_FFI_Buffer* a_buf, const XLA_FFI_Buffer* v_buf,
                            XLA_FFI_Buffer* out_buf, const key_t* a, const key_t* v,
                            Params params) noexcept nogil:
    if out_buf.dtype == XLA_FFI_DataType_S32:
        return search_batch(a_buf, v_buf, out_buf, a, v, <int32_t*>out_buf.data,
                            params)
    if out_buf.dtype == XLA_FFI_DataType_S64:
        return search_batch(a_buf, v_buf, out_buf, a, v, <int64_t*>out_buf.data,
                            params)
    return b"jaxsearch: the output must be int32 or int64"


cdef const char* dispatch_dtype(const XLA_FFI_Buffer* a_buf, const XLA_FFI_Buffer* v_buf,
                                XLA_FFI_Buffer* out_buf, Params params) noexcept nogil:
    cdef const void* a = a_buf.data
    cdef const void* v = v_buf.data
    cdef XLA_FFI_DataType dt = a_buf.dtype
    if v_buf.dtype != dt:
        return b"jaxsearch: a and v must have the same dtype"
    if dt == XLA_FFI_DataType_F32:
        return search_key(a_buf, v_buf, out_buf, <const float*>a, <const float*>v, params)
    if dt == XLA_FFI_DataType_F64:
        return search_key(a_buf, v_buf, out_buf, <const double*>a, <const double*>v, params)
    if dt == XLA_FFI_DataType_S32:
        return search_key(a_buf, v_buf, out_buf, <const int32_t*>a, <const int32_t*>v, params)
    if dt == XLA_FFI_DataType_S64:
        return search_key(a_buf, v_buf, out_buf, <const int64_t*>a, <const int64_t*>v, params)
    if dt == XLA_FFI_DataType_S8:
        return search_key(a_buf, v_buf, out_buf, <const int8_t*>a, <const int8_t*>v, params)
    if dt == XLA_FFI_DataType_S16:
        return search_key(a_buf, v_buf, out_buf, <const int16_t*>a, <const int16_t*>v, params)
    # A bool is one byte holding 0 or 1, and False < True: compare as uint8.
    if dt == XLA_FFI_DataType_U8 or dt == XLA_FFI_DataType_PRED:
        return search_key(a_buf, v_buf, out_buf, <const uint8_t*>a, <const uint8_t*>v, params)
    if dt == XLA_FFI_DataType_U16:
        return search_key(a_buf, v_buf, out_buf, <const uint16_t*>a, <const uint16_t*>v, params)
    if dt == XLA_FFI_DataType_U32:
        return search_key(a_buf, v_buf, out_buf, <const uint32_t*>a, <const uint32_t*>v, params)
    if dt == XLA_FFI_DataType_U64:
        return search_key(a_buf, v_buf, out_buf, <const uint64_t*>a, <const uint64_t*>v, params)
    return b"jaxsearch: unsupported key dtype (convert float16/bfloat16 to float32 first)"


cdef XLA_FFI_Error* error(const XLA_FFI_CallFrame* cf, const char* message) noexcept nogil:
    cdef XLA_FFI_Error_Create_Args args
    args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE
    args.extension_start = NULL
    args.message = message
    args.errc = XLA_FFI_Error_Code_INVALID_ARGUMENT
    return cf.api.XLA_FFI_Error_Create(&args)


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


cdef const char* ATTRS_EXPECTED = b"jaxsearch: expected int32 attributes kernel, order, right, threads"


cdef XLA_FFI_Error* searchsorted_handler(XLA_FFI_CallFrame* cf) noexcept nogil:
    cdef const XLA_FFI_Extension_Base* ext = cf.extension_start
    cdef int32_t values[4]
    cdef int64_t k
    cdef const XLA_FFI_Scalar* scalar
    cdef const char* message
    cdef Params params
    if ext != NULL and ext.type == XLA_FFI_Extension_Metadata:
        return fill_metadata(cf, <XLA_FFI_Metadata_Extension*>ext)
    if cf.struct_size < XLA_FFI_CallFrame_STRUCT_SIZE:
        return error(cf, b"jaxsearch: XLA call frame older than this build")
    if cf.stage != XLA_FFI_ExecutionStage_EXECUTE:
        return NULL
    if cf.args.size != 2 or cf.rets.size != 1:
        return error(cf, b"jaxsearch: expected two operands and one result")
    if (cf.args.types[0] != XLA_FFI_ArgType_BUFFER or cf.args.types[1] != XLA_FFI_ArgType_BUFFER
            or cf.rets.types[0] != XLA_FFI_RetType_BUFFER):
        return error(cf, b"jaxsearch: operands and result must be buffers")
    # Attributes come sorted by name: kernel, order, right, threads.
    if cf.attrs.size != 4:
        return error(cf, ATTRS_EXPECTED)
    for k in range(4):
        scalar = <const XLA_FFI_Scalar*>cf.attrs.attrs[k]
        if cf.attrs.types[k] != XLA_FFI_AttrType_SCALAR or scalar.dtype != XLA_FFI_DataType_S32:
            return error(cf, b"jaxsearch: attributes must be int32 scalars")
        values[k] = (<const int32_t*>scalar.value)[0]
    if not (attr_is(cf.attrs.names[0], b"kernel", 6) and attr_is(cf.attrs.names[1], b"order", 5)
            and attr_is(cf.attrs.names[2], b"right", 5) and attr_is(cf.attrs.names[3], b"threads", 7)):
        return error(cf, ATTRS_EXPECTED)
    if values[3] < 1 or values[3] > 1024:
        return error(cf, b"jaxsearch: threads must be in [1, 1024]")
    params.kernel, params.order, params.right, params.threads = values[0], values[1], values[2] != 0, values[3]
    message = dispatch_dtype(<const XLA_FFI_Buffer*>cf.args.args[0],
                             <const XLA_FFI_Buffer*>cf.args.args[1],
                             <XLA_FFI_Buffer*>cf.rets.rets[0], params)
    return error(cf, message) if message != NULL else NULL


def handler_capsule():
    """The FFI handler as a PyCapsule, for jax.ffi.register_ffi_target."""
    return PyCapsule_New(<void*>searchsorted_handler, NULL, NULL)


def ffi_api_version():
    """The (major, minor) XLA FFI API version of the headers this was built with."""
    return (XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR)
