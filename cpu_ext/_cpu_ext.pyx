# jaxsearch's CPU extension: four XLA FFI handlers, written against XLA's C
# API, and the facts about them that the Python side reads
# (jaxsearch/core/cpu.py). meson.build compiles this module twice on x86-64:
# as _cpu_ext for any x86-64 CPU and as _cpu_ext_x86_64_v3 (which includes
# this file) for CPUs with AVX2, BMI2 and FMA; core/cpu.py asks this module's
# baseline build which one the CPU runs.
#
#   ffi_common.pxi            what the handlers share: the call's checks and
#                             attributes, its shape, the thread plan, XLA's
#                             thread pool
#   searchsorted_handler.pxi  searchsorted (kernels in search_kernels.pxd),
#                             and in interp mode jnp.interp (interp_values.pxd)
#   cumsum_handler.pxi        searchsorted_cumsum (kernels in cumsum_search.pxd)
#   histogram_handler.pxi     histogram counts (by search_kernels.pxd's search)
#   sort_handler.pxi          rows of keys sorted as jnp.sort sorts them
#                             (key_sort.pxd), for jnp's counting methods
#
# The files are included, not cimported, so that the handlers keep their
# module-level tables and the C compiler sees one module, as before the split.
from cpython.pycapsule cimport PyCapsule_New

cimport bucket_search
cimport cumsum_search

from cpu_features cimport cpu_runs_x86_64_v3

include "ffi_common.pxi"
include "searchsorted_handler.pxi"
include "cumsum_handler.pxi"
include "histogram_handler.pxi"
include "sort_handler.pxi"

ORDER_NAMES = {"any": ORDER_ANY, "sorted": ORDER_SORTED, "check": ORDER_CHECK}
KERNEL_NAMES = {"merge": KERNEL_MERGE, "runs": KERNEL_RUNS, "bisect": KERNEL_BISECT}
MAX_THREADS = MAX_CALL_THREADS
# The dtypes the kernels take as they are, by numpy's names.
KEY_DTYPE_NAMES = dtype_names(KEY_DTYPES, KEY_DTYPE_COUNT)
WEIGHT_DTYPE_NAMES = dtype_names(WEIGHT_DTYPES, WEIGHT_DTYPE_COUNT)
# The longest segment searchsorted_cumsum takes (its `segment` attribute).
MAX_SEGMENT = cumsum_search.MAX_SEGMENT
# Rows of fewer needles than this, two rows or more, are searched across
# rows, where the call has no `short_rows` attribute.
SHORT_ROW_NEEDLES = SHORT_ROW_LIMIT
# A single row of unsorted needles is searched by buckets from the call's
# `bucket_min_bytes` of `a` and, where the call has no `bucket_density`
# attribute, one needle per BUCKET_KEYS_PER_NEEDLE keys.
BUCKET_KEYS_PER_NEEDLE = bucket_search.BUCKET_DENSITY
# One row of needles in any order in this many keys or fewer is counted
# (count_kernel), where the call has no `count_keys` attribute.
COUNT_ROW_KEYS = COUNT_KEYS
# The most edges one histogram call takes.
MAX_HISTOGRAM_EDGES = HISTOGRAM_EDGE_LIMIT
# The fewest bytes of keys a row takes a bin table from, and the search's
# `table_check` attribute for its built-in rule of which rows are checked.
TABLE_ROW_MIN_BYTES = TABLE_MIN_BYTES
# Rows of fewer bytes of keys take a table of a bin per key (table_stride).
TABLE_FINE_ROW_BYTES = TABLE_PREFETCH_BYTES
BUILT_IN_TABLE_CHECK = TABLE_CHECK_BUILT_IN


def handler_capsule():
    """The searchsorted FFI handler as a PyCapsule, for jax.ffi.register_ffi_target."""
    return PyCapsule_New(<void*>searchsorted_handler, NULL, NULL)


def interp_handler_capsule():
    """The searchsorted FFI handler in interp mode as a PyCapsule."""
    return PyCapsule_New(<void*>interp_search_handler, NULL, NULL)


def cumsum_handler_capsule():
    """The searchsorted_cumsum FFI handler as a PyCapsule."""
    return PyCapsule_New(<void*>cumsum_handler, NULL, NULL)


def histogram_handler_capsule():
    """The histogram FFI handler as a PyCapsule."""
    return PyCapsule_New(<void*>histogram_handler, NULL, NULL)


def sort_handler_capsule():
    """The key sort FFI handler as a PyCapsule."""
    return PyCapsule_New(<void*>sort_handler, NULL, NULL)


def gathers_search(int key_bytes, long long keys):
    """Whether this build's binary search runs jnp's probes in SIMD gathers
    for `keys` keys of `key_bytes` bytes (gather_probes.pxd)."""
    return bool(gathers_take(key_bytes, keys))


def table_checked(int key_bytes, long long n, long long m):
    """Whether a binary-searched call of one row of m needles in n keys of
    key_bytes bytes, under the built-in rule (no `table_check` attribute),
    checks `a`: to take its bin table where the gathers serve, else the
    lower-bound search (table_rule)."""
    return bool(table_rule(key_bytes, n, 1, m, 1, TABLE_CHECK_BUILT_IN))


def runs_x86_64_v3():
    """Whether this CPU (and its OS) runs the x86-64-v3 build of this module:
    AVX, AVX2, BMI1, BMI2, FMA, F16C, LZCNT and MOVBE, with the AVX registers
    saved across context switches. False on any other architecture."""
    return bool(cpu_runs_x86_64_v3())


def fuses_madd():
    """Whether the interp mode fuses its multiply-add into one FMA, as XLA's
    code for this CPU does: where the CPU runs FMA (always off x86-64)."""
    return bool(FUSES_MADD)


def planned_threads(long rows, long n, long m, int threads, long min_parallel,
                    long short_rows=SHORT_ROW_LIMIT):
    """The threads one searchsorted call of `rows` rows of m needles in n keys runs on,
    given its `threads`, `min_parallel` and `short_rows` attributes: the plan
    the handler makes."""
    return call_threads(threads, search_parts(rows, n, m, threads, min_parallel, short_rows))
