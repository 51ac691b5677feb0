# What the CPU runs, asked of the CPU itself (cpuid, and xgetbv for what
# the OS saves). Not gcc's and clang's __builtin_cpu_supports: it reads a
# CPU model that compiler-rt's start-up code fills, and in the module zig's
# clang links for the wheels nothing fills it: it answered "no FMA" on a
# CPU with FMA.

cdef extern from *:
    """
    #if defined(__x86_64__) && defined(__GNUC__)
    #include <cpuid.h>
    /* leaf 1, ecx: the features that need the OS to save the AVX registers
       (OSXSAVE 27, AVX 28) and these, and whether it does: XCR0's SSE (bit
       1) and AVX (bit 2) state (OSXSAVE makes xgetbv legal). */
    static int jaxsearch_cpu_has_avx_and(unsigned leaf1_ecx) {
        unsigned a, b, c, d, xcr0, xcr0_high;
        leaf1_ecx |= 1u << 27 | 1u << 28;
        if (!__get_cpuid(1, &a, &b, &c, &d) || (c & leaf1_ecx) != leaf1_ecx) return 0;
        __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(xcr0_high) : "c"(0));
        return (xcr0 & 6u) == 6u;
    }

    /* Whether the CPU, and the OS's saving of its registers, run x86-64-v3
       code (what gcc and clang's -march=x86-64-v3 may emit). */
    static int jaxsearch_cpu_runs_x86_64_v3(void) {
        unsigned a, b, c, d;
        /* leaf 1, ecx: SSE3 0, SSSE3 9, FMA 12, CX16 13, SSE4.1 19,
           SSE4.2 20, MOVBE 22, POPCNT 23, F16C 29 */
        const unsigned leaf1_ecx = 1u | 1u << 9 | 1u << 12 | 1u << 13 | 1u << 19
            | 1u << 20 | 1u << 22 | 1u << 23 | 1u << 29;
        /* leaf 7, ebx: BMI1 3, AVX2 5, BMI2 8 */
        const unsigned leaf7_ebx = 1u << 3 | 1u << 5 | 1u << 8;
        /* leaf 0x80000001, ecx: LAHF/SAHF 0, LZCNT 5 */
        const unsigned ext1_ecx = 1u | 1u << 5;
        if (!jaxsearch_cpu_has_avx_and(leaf1_ecx)) return 0;
        if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || (b & leaf7_ebx) != leaf7_ebx) return 0;
        return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & ext1_ecx) == ext1_ecx;
    }

    /* Whether XLA's CPU code fuses a * b + c into one FMA on this CPU: it
       compiles for the host and contracts where the host runs FMA (leaf 1,
       ecx bit 12; on x86-64 a feature, elsewhere, as on aarch64, part of
       the base ISA). */
    static int jaxsearch_cpu_fuses_madd(void) { return jaxsearch_cpu_has_avx_and(1u << 12); }
    #else
    static int jaxsearch_cpu_runs_x86_64_v3(void) { return 0; }
    static int jaxsearch_cpu_fuses_madd(void) { return 1; }
    #endif
    """
    bint cpu_runs_x86_64_v3 "jaxsearch_cpu_runs_x86_64_v3"() noexcept nogil
    bint cpu_fuses_madd "jaxsearch_cpu_fuses_madd"() noexcept nogil
