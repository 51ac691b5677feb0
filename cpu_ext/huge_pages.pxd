# 2 MiB pages for large buffers: a fresh buffer comes on 4 KiB pages, and a
# 40 MB one then costs ~10,000 page faults on its first writes and a TLB
# miss per page after (numpy asks for huge pages for its own large arrays).
from posix.stdlib cimport posix_memalign

cdef extern from "<sys/mman.h>" nogil:
    int madvise(void* addr, size_t length, int advice)
    int MADV_HUGEPAGE

# 2 MiB, as a literal: Cython 3.3 crashes on a shift in an enum under
# overflowcheck (the debug_checks build).
cdef enum:
    HUGE_PAGE = 2097152


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
