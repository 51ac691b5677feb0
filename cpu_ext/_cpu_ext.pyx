# jaxsearch's CPU extension: three XLA FFI handlers, written against XLA's C
# API, and the facts about them that the Python side reads (jaxsearch/_cpu.py).
#
#   ffi_common.pxi            what both handlers share: the call's checks and
#                             attributes, its shape, the thread plan, XLA's
#                             thread pool
#   searchsorted_handler.pxi  searchsorted (kernels in search_kernels.pxd)
#   cumsum_handler.pxi        searchsorted_cumsum (kernels in cumsum_search.pxd)
#   histogram_handler.pxi     histogram counts (by search_kernels.pxd's search)
#
# The files are included, not cimported, so that the handlers keep their
# module-level tables and the C compiler sees one module, as before the split.
from cpython.pycapsule cimport PyCapsule_New

cimport cumsum_search

include "ffi_common.pxi"
include "searchsorted_handler.pxi"
include "cumsum_handler.pxi"
include "histogram_handler.pxi"

ORDER_NAMES = {"any": ORDER_ANY, "sorted": ORDER_SORTED, "check": ORDER_CHECK}
KERNEL_NAMES = {"merge": KERNEL_MERGE, "runs": KERNEL_RUNS, "bisect": KERNEL_BISECT}
MAX_THREADS = MAX_CALL_THREADS
# The dtypes the kernels take as they are, by numpy's names.
KEY_DTYPE_NAMES = dtype_names(KEY_DTYPES, KEY_DTYPE_COUNT)
WEIGHT_DTYPE_NAMES = dtype_names(WEIGHT_DTYPES, WEIGHT_DTYPE_COUNT)
# The longest segment searchsorted_cumsum takes (its `segment` attribute).
MAX_SEGMENT = cumsum_search.MAX_SEGMENT
# The most edges one histogram call takes.
MAX_HISTOGRAM_EDGES = HISTOGRAM_EDGE_LIMIT


def handler_capsule():
    """The searchsorted FFI handler as a PyCapsule, for jax.ffi.register_ffi_target."""
    return PyCapsule_New(<void*>searchsorted_handler, NULL, NULL)


def cumsum_handler_capsule():
    """The searchsorted_cumsum FFI handler as a PyCapsule."""
    return PyCapsule_New(<void*>cumsum_handler, NULL, NULL)


def histogram_handler_capsule():
    """The histogram FFI handler as a PyCapsule."""
    return PyCapsule_New(<void*>histogram_handler, NULL, NULL)


def planned_threads(long rows, long m, int threads, long min_parallel):
    """The threads one searchsorted call of `rows` rows of m needles runs on,
    given its `threads` and `min_parallel` attributes: the plan the handler
    makes."""
    return call_threads(threads, rows * slices_per_row(m, threads, min_parallel))
