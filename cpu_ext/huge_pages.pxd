# 2 MiB pages for large buffers: a fresh buffer comes on 4 KiB pages, and a
# 40 MB one then costs ~10,000 page faults on its first writes and a TLB
# miss per page after (numpy asks for huge pages for its own large arrays).
# And a few large scratch buffers kept from one call to the next
# (scratch_malloc): a fresh one's pages are zeroed by the kernel on their
# first writes, and the bucket search's 80 MB of scratch at N = M = 1e7 then
# spent a tenth of the call's time in the kernel's page clearing.
from posix.stdlib cimport posix_memalign
from libc.stdlib cimport free

cdef extern from "<sys/mman.h>" nogil:
    int madvise(void* addr, size_t length, int advice)
    int MADV_HUGEPAGE

cdef extern from *:
    """
    /* Scratch blocks kept between calls, one per slot, and their bytes in
       all; slots and count are changed by atomics, so that calls on several
       threads share them without a lock. */
    #define JAXSEARCH_SCRATCH_SLOTS 8
    static void* jaxsearch_scratch_slot[JAXSEARCH_SCRATCH_SLOTS];
    static size_t jaxsearch_scratch_kept;
    static inline void* jaxsearch_slot_take(int k) {
        return __atomic_exchange_n(&jaxsearch_scratch_slot[k], NULL, __ATOMIC_ACQ_REL);
    }
    static inline int jaxsearch_slot_fill(int k, void* p) {
        void* empty = NULL;
        return __atomic_compare_exchange_n(&jaxsearch_scratch_slot[k], &empty, p, 0,
                                           __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    static inline size_t jaxsearch_kept_add(size_t n) {
        return __atomic_add_fetch(&jaxsearch_scratch_kept, n, __ATOMIC_ACQ_REL);
    }
    """
    int SCRATCH_SLOTS "JAXSEARCH_SCRATCH_SLOTS"
    void* slot_take "jaxsearch_slot_take"(int k) noexcept nogil
    bint slot_fill "jaxsearch_slot_fill"(int k, void* p) noexcept nogil
    size_t kept_add "jaxsearch_kept_add"(size_t n) noexcept nogil


# 2 MiB, as a literal: Cython 3.3 crashes on a shift in an enum under
# overflowcheck (the debug_checks build).
cdef enum:
    HUGE_PAGE = 2097152
    # Scratch blocks kept between calls: of this size or more (malloc
    # reuses smaller ones itself), SCRATCH_KEPT_BYTES in all at most.
    SCRATCH_MIN_BYTES = 4194304  # 4 MiB
    SCRATCH_KEPT_BYTES = 268435456  # 256 MiB
    # A block's header: its size, on a line of its own.
    SCRATCH_HEAD = 64


cdef inline void advise_huge_pages(void* data, size_t nbytes) noexcept nogil:
    """Asks for 2 MiB pages under data[0:nbytes], before it is first
    written: only whole huge pages inside it, and only where there are two
    or more; an error (no THP) is harmless."""
    cdef size_t start = (<size_t>data + HUGE_PAGE - 1) & ~(<size_t>HUGE_PAGE - 1)
    cdef size_t stop = (<size_t>data + nbytes) & ~(<size_t>HUGE_PAGE - 1)
    if stop >= start + 2 * HUGE_PAGE:
        madvise(<void*>start, stop - start, MADV_HUGEPAGE)


cdef inline void* huge_malloc(size_t nbytes) noexcept nogil:
    """A block of nbytes on a 64-byte line (whole lines can then be written
    by streaming stores), with huge pages advised under it
    (advise_huge_pages); free it with free(); NULL when out of memory."""
    cdef void* p = NULL
    if posix_memalign(&p, 64, nbytes) != 0:
        return NULL
    advise_huge_pages(p, nbytes)
    return p


cdef inline void* scratch_malloc(size_t nbytes) noexcept nogil:
    """As huge_malloc, for scratch that a call frees with scratch_free:
    a block kept from an earlier call where one is large enough (and not
    over four times too large), else a fresh one; NULL when out of
    memory."""
    cdef char* p
    cdef int k
    if nbytes < SCRATCH_MIN_BYTES:
        return huge_malloc(nbytes)
    for k in range(SCRATCH_SLOTS):
        p = <char*>slot_take(k)
        if p == NULL:
            continue
        if nbytes <= (<size_t*>p)[0] <= 4 * nbytes:
            kept_add(-(<size_t*>p)[0])
            return p + SCRATCH_HEAD
        if not slot_fill(k, p):  # not this one: back in its slot, if still free
            kept_add(-(<size_t*>p)[0])
            free(p)
    p = <char*>huge_malloc(nbytes + SCRATCH_HEAD)
    if p == NULL:
        return NULL
    (<size_t*>p)[0] = nbytes
    return p + SCRATCH_HEAD


cdef inline void scratch_free(void* data, size_t nbytes) noexcept nogil:
    """Frees a block of nbytes from scratch_malloc, or keeps it for later
    calls where a slot is free and the kept blocks stay within
    SCRATCH_KEPT_BYTES."""
    cdef char* p = <char*>data - SCRATCH_HEAD
    cdef size_t size
    cdef int k
    if data == NULL or nbytes < SCRATCH_MIN_BYTES:
        free(data)
        return
    size = (<size_t*>p)[0]  # the block's own, where it was kept before
    if kept_add(size) <= SCRATCH_KEPT_BYTES:
        for k in range(SCRATCH_SLOTS):
            if slot_fill(k, p):
                return
    kept_add(-size)
    free(p)
