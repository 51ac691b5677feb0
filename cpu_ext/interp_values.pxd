# jnp.interp's values from the answers of a search: the searchsorted
# handler's interp mode (its `fp` operand), where each needle x of a row xp
# (n keys, n >= 1) gets, in place of its answer index = searchsorted(xp, x,
# 'right'), the value of jnp.interp's formula on its segment [lo, hi], hi =
# clip(index, 1, n - 1), lo = max(hi - 1, 0), with dx = xp[hi] - xp[lo],
# df = fp[hi] - fp[lo], in that order of operations. jax changed the formula
# in 0.12.1; the handler's `formula` attribute says which one:
#   FORMULA_EPSILON_STEPS (jax 0.10 to 0.12.0):
#     where(|dx| <= eps, fp[lo], fp[lo] + ((x - xp[lo]) / dx) * df)
#     with eps = np.spacing(finfo.eps);
#   FORMULA_ZERO_STEPS (jax 0.12.1 and on): a step only where dx == 0, which
#     is NaN at a NaN x, fp[hi] from xp[hi] on and fp[lo] before; elsewhere
#     fp[lo] + ((x - xp[lo]) / dx) * df, and where that is NaN (an infinite
#     knot or value) but x is not: fp[hi] at x == xp[hi], fp[lo] at x ==
#     xp[lo], else the line from the other end, fp[hi] + ((x - xp[hi]) / dx)
#     * df, or fp[lo] where that is NaN too and fp[lo] == fp[hi].
# Then fp[0] below xp[0] and fp[n - 1] above xp[n - 1] where asked (jnp's
# default `left` and `right`). The multiply-add is fused where XLA's code
# fuses it, where the CPU has FMA: so the values have jnp's bits.
#
# Each block of answers is turned into values while the search's lines of
# xp are still in cache (the searchsorted handler's chunks, the buckets'
# chunks), so that only fp's lines are fetched: in XLA, the formula's four
# gathers took a pass of their own, more than the search itself at N = M =
# 1e6 unsorted.
from libc.math cimport INFINITY
from libc.stdint cimport int32_t, int64_t

from search_kernels cimport idx_t, prefetch

cdef extern from *:
    """
    /* The formula over a block, branch-free so that it runs in SIMD lanes:
       gcc keeps a loop of selects after comparisons scalar unless it may
       assume no floating-point trap (clang assumes so by default). The
       comparisons are the quiet ones, as jnp's. */
    #if defined(__GNUC__) && !defined(__clang__)
    #define JAXSEARCH_LANES __attribute__((optimize("no-trapping-math")))
    #else
    #define JAXSEARCH_LANES
    #endif
    #define JAXSEARCH_MUL_ADD(a, b, c) ((c) + (a) * (b))
    /* jax 0.10 to 0.12.0: a step wherever |dx| <= EPS. */
    #define JAXSEARCH_EPSILON_STEPS(T, MADD, ABS, EPS)                           \
        for (k = 0; k < size; k++) {                                            \
            T dx = xh[k] - xl[k];                                               \
            int step = __builtin_islessequal(ABS(dx), (T)(EPS));                \
            T q = (x[k] - xl[k]) / (step ? (T)1 : dx);                          \
            T f = step ? fl[k] : MADD(q, fh[k] - fl[k], fl[k]);                 \
            f = __builtin_isless(x[k], low) ? f_low : f;                        \
            out[k] = __builtin_isgreater(x[k], high) ? f_high : f;              \
        }
    /* jax 0.12.1 and on: a step where dx == 0; the NaNs of an infinite knot
       or value (at an x that is not NaN) found in a pass of their own (in
       the formula's loop, gcc vectorises it no more) and mended one by
       one. */
    #define JAXSEARCH_ZERO_STEPS(T, MADD)                                        \
        for (k = 0; k < size; k++) {                                            \
            T dx = xh[k] - xl[k];                                               \
            int step = dx == (T)0;                                              \
            T q = (x[k] - xl[k]) / (step ? (T)1 : dx);                          \
            T f = MADD(q, fh[k] - fl[k], fl[k]);                                \
            T at = __builtin_isgreaterequal(x[k], xh[k]) ? fh[k] : fl[k];       \
            f = step ? (x[k] != x[k] ? (T)__builtin_nan("") : at) : f;          \
            f = __builtin_isless(x[k], low) ? f_low : f;                        \
            out[k] = __builtin_isgreater(x[k], high) ? f_high : f;              \
        }                                                                       \
        for (k = 0; k < size; k++)                                              \
            knots |= (out[k] != out[k]) & (x[k] == x[k]);                       \
        for (k = 0; knots && k < size; k++) {                                   \
            T dx = xh[k] - xl[k], other;                                        \
            if (out[k] == out[k] || x[k] != x[k] || dx == (T)0                  \
                    || __builtin_isless(x[k], low)                              \
                    || __builtin_isgreater(x[k], high))                         \
                continue;                                                       \
            other = MADD((x[k] - xh[k]) / dx, fh[k] - fl[k], fh[k]);            \
            if (other != other && fl[k] == fh[k])                               \
                other = fl[k];                                                  \
            out[k] = x[k] == xh[k] ? fh[k] : x[k] == xl[k] ? fl[k] : other;     \
        }
    #define JAXSEARCH_INTERP_BLOCK(NAME, T, FMA, ABS, EPS)                       \
    static JAXSEARCH_LANES void NAME(                                           \
            const T* x, const T* xl, const T* xh, const T* fl, const T* fh,     \
            long size, T low, T high, T f_low, T f_high, int fused,             \
            int zero_steps, T* out) {                                           \
        long k;                                                                 \
        int knots = 0;                                                          \
        if (zero_steps && fused) {                                              \
            JAXSEARCH_ZERO_STEPS(T, FMA)                                        \
        } else if (zero_steps) {                                                \
            JAXSEARCH_ZERO_STEPS(T, JAXSEARCH_MUL_ADD)                          \
        } else if (fused) {                                                     \
            JAXSEARCH_EPSILON_STEPS(T, FMA, ABS, EPS)                           \
        } else {                                                                \
            JAXSEARCH_EPSILON_STEPS(T, JAXSEARCH_MUL_ADD, ABS, EPS)             \
        }                                                                       \
    }
    JAXSEARCH_INTERP_BLOCK(jaxsearch_interp_f32, float, __builtin_fmaf, __builtin_fabsf,
                           0x1p-46f)
    JAXSEARCH_INTERP_BLOCK(jaxsearch_interp_f64, double, __builtin_fma, __builtin_fabs,
                           0x1p-104)
    """
    void formula_f32 "jaxsearch_interp_f32"(
        const float* x, const float* xl, const float* xh, const float* fl, const float* fh,
        long size, float low, float high, float f_low, float f_high, int fused,
        int zero_steps, float* out) noexcept nogil
    void formula_f64 "jaxsearch_interp_f64"(
        const double* x, const double* xl, const double* xh, const double* fl,
        const double* fh, long size, double low, double high, double f_low,
        double f_high, int fused, int zero_steps, double* out) noexcept nogil

ctypedef fused real_t:
    float
    double

cdef enum:
    # The handler's `formula` attribute: jnp.interp's formula of which jax.
    FORMULA_EPSILON_STEPS = 0   # jax 0.10 to 0.12.0
    FORMULA_ZERO_STEPS = 1      # jax 0.12.1 and on


cdef enum:
    # Answers turned into values at a time: their segments' ends gathered
    # on the stack, then the formula over them in SIMD lanes.
    INTERP_BLOCK = 256


cdef struct InterpValues:
    # The handler's interp mode: fp (n values of the keys' dtype), NULL
    # where the call searches only.
    const void* fp
    bint clamp_left     # below xp[0], fp[0]
    bint clamp_right    # above xp[n - 1], fp[n - 1]
    bint fused          # the multiply-add in one FMA (cpu_features.cpu_fuses_madd)
    bint zero_steps     # FORMULA_ZERO_STEPS, else FORMULA_EPSILON_STEPS


cdef inline Py_ssize_t fp_shadow(const InterpValues* interp, const void* a) noexcept nogil:
    """Bytes from a key of the row `a` to its value in fp, the prefetch
    shadow that table_kernel takes in interp mode; 0 where the call only
    searches."""
    return <const char*>interp.fp - <const char*>a if interp.fp != NULL else 0


cdef inline int64_t segment_end(int64_t found, int64_t n) noexcept nogil:
    """jnp's hi: clip(found, 1, n - 1), which is 0 for n = 1."""
    return min(max(found, <int64_t>1), n - 1)


cdef inline bint far_apart(const idx_t* found, int64_t size) noexcept nogil:
    """Whether the answers found[0:size] lie far apart (needles out of
    order), so that their lines of fp are worth prefetching."""
    return size > 0 and not 0 <= found[size - 1] - found[0] <= 4 * size


cdef inline void prefetch_values(const real_t* fp, int64_t n, const idx_t* found,
                                 int64_t size) noexcept nogil:
    """The lines of fp that the answers found[0:size] read, where far apart."""
    cdef int64_t k
    if far_apart(found, size):
        for k in range(size):
            prefetch(&fp[segment_end(found[k], n)])


cdef inline void interp_values(const InterpValues* p, const real_t* xp, int64_t n,
                               const real_t* x, int64_t size, const idx_t* found,
                               real_t* out) noexcept nogil:
    """out[k] = the value at x[k] from its answer found[k], k < size; `out`
    may be `found` itself (each answer is read before its value is
    written). Where a block's answers lie far apart (needles out of order),
    its lines of fp are prefetched while the block before is read."""
    cdef const real_t* fp = <const real_t*>p.fp
    cdef real_t xl[INTERP_BLOCK]
    cdef real_t xh[INTERP_BLOCK]
    cdef real_t fl[INTERP_BLOCK]
    cdef real_t fh[INTERP_BLOCK]
    cdef real_t low = xp[0] if p.clamp_left else -INFINITY
    cdef real_t high = xp[n - 1] if p.clamp_right else INFINITY
    cdef int64_t start = 0, block, k, i, j
    prefetch_values(fp, n, found, min(<int64_t>INTERP_BLOCK, size))
    while start < size:
        block = min(<int64_t>INTERP_BLOCK, size - start)
        prefetch_values(fp, n, found + start + block,
                        min(<int64_t>INTERP_BLOCK, size - start - block))
        for k in range(block):
            j = segment_end(found[start + k], n)
            i = max(j - 1, <int64_t>0)
            xl[k], xh[k], fl[k], fh[k] = xp[i], xp[j], fp[i], fp[j]
        if real_t is float:
            formula_f32(x + start, xl, xh, fl, fh, block, low, high, fp[0], fp[n - 1],
                        p.fused, p.zero_steps, out + start)
        else:
            formula_f64(x + start, xl, xh, fl, fh, block, low, high, fp[0], fp[n - 1],
                        p.fused, p.zero_steps, out + start)
        start += block
