# jnp's probes (search_kernels.probe_lanes' recurrence: mid = (low + high)
# >> 1, then low = mid where a[mid] is counted, else high = mid) for 4-byte
# keys, GATHER_LANES needles at a time in AVX2 registers: each level loads
# eight lanes' keys with one gather and updates both bounds with two blends.
# The same probes, so the same answers as jnp on any `a`. Each lane may
# search a row of its own (a batch of short rows: gather_rows, row_block).
#
# Only the x86-64-v3 module (meson.build) has them: in the baseline module
# and on other architectures GATHER_PROBES is 0, the functions below are
# never called, and the scalar lanes serve. Against those lanes (one core,
# float32, Intel Xeon with AVX-512, C benchmark of both loops): N = 1e5 and
# 1e3 sorted needles 15.2 -> 4.8 us; N = 1e6, 1e4 sorted 252 -> 115 us; N =
# 1e7, 1e5 sorted 3.17 -> 1.53 ms; N = M = 1e6 random 28.6 -> 13.5 ms. The
# lower-bound search (lower_bound_kernel's scalar lanes) took 9.4 us, 198
# us, 2.52 ms and 20.4 ms there. 16, 32, 48 and 64 lanes: 64 was fastest,
# though its bounds do not all stay in registers.
from libc.stdint cimport INT32_MAX, int32_t, int64_t, uint32_t

cdef extern from *:
    """
    #if defined(__AVX2__)
    #include <immintrin.h>
    #define JAXSEARCH_GATHER_PROBES 1
    /* Keys as they compare: floats as they are; unsigned keys with the
       sign bit flipped, so that a signed compare orders them. */
    #define JAXSEARCH_AS_IS(x) (x)
    #define JAXSEARCH_FLIP(x) _mm256_xor_si256((x), _mm256_set1_epi32((int)0x80000000u))
    /* All ones in the lanes where key y is counted for needle x. */
    #define JAXSEARCH_F32_LEFT(y, x) _mm256_castps_si256(_mm256_cmp_ps( \\
        _mm256_castsi256_ps(y), _mm256_castsi256_ps(x), _CMP_LT_OQ))
    #define JAXSEARCH_F32_RIGHT(y, x) _mm256_castps_si256(_mm256_cmp_ps( \\
        _mm256_castsi256_ps(y), _mm256_castsi256_ps(x), _CMP_LE_OQ))
    #define JAXSEARCH_I32_LEFT(y, x) _mm256_cmpgt_epi32((x), (y))
    #define JAXSEARCH_I32_RIGHT(y, x) _mm256_xor_si256(_mm256_cmpgt_epi32((y), (x)), \\
                                                       _mm256_set1_epi32(-1))
    /* out[k] for the needle v[k] in the row a[starts[k]:starts[k] + n], k <
       64 (every row at a when starts is NULL), starts[k] + n < 2^31 (so
       low + high fits in 32 unsigned bits and every mid in a signed gather
       index). The bounds run from starts[k]: (low + high) >> 1 then lies
       starts[k] past the row's own mid, and the probes are the row's. */
    #define JAXSEARCH_GATHER(NAME, KEY, PREPARE, COUNTED) \\
    static inline void NAME(const KEY* a, const int32_t* starts, int32_t n, int levels, \\
                            const KEY* v, int32_t* out) { \\
        __m256i low[8], high[8], x[8], mid, c; \\
        int q, level; \\
        for (q = 0; q < 8; q++) { \\
            low[q] = starts ? _mm256_loadu_si256((const __m256i*)(starts + 8 * q)) \\
                            : _mm256_setzero_si256(); \\
            high[q] = _mm256_add_epi32(low[q], _mm256_set1_epi32(n)); \\
            x[q] = PREPARE(_mm256_loadu_si256((const __m256i*)(v + 8 * q))); \\
        } \\
        for (level = 0; level < levels; level++) { \\
            for (q = 0; q < 8; q++) { \\
                mid = _mm256_srli_epi32(_mm256_add_epi32(low[q], high[q]), 1); \\
                c = COUNTED(PREPARE(_mm256_i32gather_epi32((const int*)a, mid, 4)), x[q]); \\
                low[q] = _mm256_blendv_epi8(low[q], mid, c); \\
                high[q] = _mm256_blendv_epi8(mid, high[q], c); \\
            } \\
        } \\
        for (q = 0; q < 8; q++) \\
            _mm256_storeu_si256((__m256i*)(out + 8 * q), starts ? _mm256_sub_epi32(high[q], \\
                _mm256_loadu_si256((const __m256i*)(starts + 8 * q))) : high[q]); \\
    }
    /* The windows of 64 needles in a bin table (bin_table.pxd), their
       bins known: bin_window and aside_flag of bin_table.pxd, which the
       scalar lanes still take, in eight lanes at a time (one needle at a
       time, they took most of table_block's time on keys in cache). first
       = max(start[b] - back, 0) and last = start[b + 1], entries without
       their mark bit (& position). Stores each needle's flag (the entry's
       mark bit, and 1 for a NaN float) in aside[k], and in lo[k] its
       window's first key, moved left so that the window of *width keys
       (the widest, at most na) ends by na; returns the flags' union. */
    static inline uint32_t jaxsearch_table_windows(int floats, const void* v,
            const int32_t* bins, const uint32_t* start, uint32_t position_bits,
            uint32_t mark, int32_t back, int32_t na, int32_t* lo, uint32_t* aside,
            int32_t* width) {
        const __m256i position = _mm256_set1_epi32((int)position_bits);
        const __m256i marked = _mm256_set1_epi32((int)mark);
        const __m256i one = _mm256_set1_epi32(1);
        __m256i first[8], widest = one, flags = _mm256_setzero_si256(), b, entry, last, flag;
        __m128i half;
        __m256 x;
        int32_t w;
        int q;
        for (q = 0; q < 8; q++) {
            b = _mm256_loadu_si256((const __m256i*)(bins + 8 * q));
            entry = _mm256_i32gather_epi32((const int*)start, b, 4);
            last = _mm256_and_si256(_mm256_i32gather_epi32((const int*)start + 1, b, 4), position);
            flag = _mm256_and_si256(entry, marked);
            if (floats) {
                x = _mm256_loadu_ps((const float*)v + 8 * q);
                flag = _mm256_or_si256(flag, _mm256_and_si256(
                    _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)), one));
            }
            _mm256_storeu_si256((__m256i*)(aside + 8 * q), flag);
            flags = _mm256_or_si256(flags, flag);
            first[q] = _mm256_max_epi32(_mm256_sub_epi32(_mm256_and_si256(entry, position),
                                                         _mm256_set1_epi32(back)),
                                        _mm256_setzero_si256());
            widest = _mm256_max_epi32(widest, _mm256_add_epi32(_mm256_sub_epi32(last, first[q]),
                                                               one));
        }
        half = _mm_max_epi32(_mm256_castsi256_si128(widest), _mm256_extracti128_si256(widest, 1));
        half = _mm_max_epi32(half, _mm_shuffle_epi32(half, 0x4e));
        half = _mm_max_epi32(half, _mm_shuffle_epi32(half, 0xb1));
        w = _mm_cvtsi128_si32(half);
        w = w < na ? w : na;
        for (q = 0; q < 8; q++)
            _mm256_storeu_si256((__m256i*)(lo + 8 * q),
                                _mm256_min_epi32(first[q], _mm256_set1_epi32(na - w)));
        *width = w;
        half = _mm_or_si128(_mm256_castsi256_si128(flags), _mm256_extracti128_si256(flags, 1));
        half = _mm_or_si128(half, _mm_shuffle_epi32(half, 0x4e));
        half = _mm_or_si128(half, _mm_shuffle_epi32(half, 0xb1));
        return (uint32_t)_mm_cvtsi128_si32(half);
    }
    #else
    #define JAXSEARCH_GATHER_PROBES 0
    #define JAXSEARCH_GATHER(NAME, KEY, PREPARE, COUNTED) \\
    static inline void NAME(const KEY* a, const int32_t* starts, int32_t n, int levels, \\
                            const KEY* v, int32_t* out) {}
    static inline uint32_t jaxsearch_table_windows(int floats, const void* v,
            const int32_t* bins, const uint32_t* start, uint32_t position_bits,
            uint32_t mark, int32_t back, int32_t na, int32_t* lo, uint32_t* aside,
            int32_t* width) { return 0; }
    #endif
    JAXSEARCH_GATHER(jaxsearch_gather_f32_left, float, JAXSEARCH_AS_IS, JAXSEARCH_F32_LEFT)
    JAXSEARCH_GATHER(jaxsearch_gather_f32_right, float, JAXSEARCH_AS_IS, JAXSEARCH_F32_RIGHT)
    JAXSEARCH_GATHER(jaxsearch_gather_i32_left, int32_t, JAXSEARCH_AS_IS, JAXSEARCH_I32_LEFT)
    JAXSEARCH_GATHER(jaxsearch_gather_i32_right, int32_t, JAXSEARCH_AS_IS, JAXSEARCH_I32_RIGHT)
    JAXSEARCH_GATHER(jaxsearch_gather_u32_left, uint32_t, JAXSEARCH_FLIP, JAXSEARCH_I32_LEFT)
    JAXSEARCH_GATHER(jaxsearch_gather_u32_right, uint32_t, JAXSEARCH_FLIP, JAXSEARCH_I32_RIGHT)
    /* One entry for the six: `kind` (GATHER_*) and `right` are constants at
       every call, so the compiler keeps only the function they pick. */
    static inline void jaxsearch_gather(int kind, int right, const void* a,
                                        const int32_t* starts, int32_t n, int levels,
                                        const void* v, int32_t* out) {
        if (kind == 0 && right)
            jaxsearch_gather_f32_right((const float*)a, starts, n, levels, (const float*)v, out);
        else if (kind == 0)
            jaxsearch_gather_f32_left((const float*)a, starts, n, levels, (const float*)v, out);
        else if (kind == 1 && right)
            jaxsearch_gather_i32_right((const int32_t*)a, starts, n, levels, (const int32_t*)v,
                                       out);
        else if (kind == 1)
            jaxsearch_gather_i32_left((const int32_t*)a, starts, n, levels, (const int32_t*)v,
                                      out);
        else if (right)
            jaxsearch_gather_u32_right((const uint32_t*)a, starts, n, levels,
                                       (const uint32_t*)v, out);
        else
            jaxsearch_gather_u32_left((const uint32_t*)a, starts, n, levels, (const uint32_t*)v,
                                      out);
    }
    """
    bint GATHER_PROBES "JAXSEARCH_GATHER_PROBES"
    void gather "jaxsearch_gather"(int kind, bint right, const void* a, const int32_t* starts,
                                   int32_t n, int levels, const void* v,
                                   int32_t* out) noexcept nogil
    uint32_t table_windows "jaxsearch_table_windows"(
        bint floats, const void* v, const int32_t* bins, const uint32_t* start,
        uint32_t position_bits, uint32_t mark, int32_t back, int32_t na, int32_t* lo,
        uint32_t* aside, int32_t* width) noexcept nogil

cdef enum:
    # Needles per call of gather: eight vectors of eight.
    GATHER_LANES = 64
    # gather's `kind`: the keys' type.
    GATHER_F32 = 0
    GATHER_I32 = 1
    GATHER_U32 = 2


cdef inline bint gathers_take(int key_bytes, int64_t keys) noexcept nogil:
    """Whether gather answers for keys of this size (float32, int32 and
    uint32 are the 4-byte key types), `keys` of them from its `a` to the
    last row's end."""
    return GATHER_PROBES and key_bytes == 4 and keys < INT32_MAX
