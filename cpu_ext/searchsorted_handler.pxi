# The searchsorted FFI handler (see jaxsearch/core/cpu.py): two buffers a (..., n)
# and v (..., m) of one key dtype, one result (..., m) of int32 or int64;
# leading dimensions are batch dimensions that broadcast numpy-style (an
# unbatched operand comes with size-1 batch dimensions, without a copy). Ten
# int32 attributes: `bucket_density` (optional: the most keys per needle, in
# sixteenths, at which buckets may pay; BUCKET_DENSITY's where missing),
# `bucket_min_bytes` (bytes of `a` from which buckets may
# pay, see below), `count_keys` (optional: the most keys of a row whose
# needles in any order are counted, count_kernel; COUNT_KEYS where
# missing), `kernel` (KERNEL_*), `min_parallel` (needles per part, at
# least), `order` (ORDER_*), `right` (0/1), `short_rows` (optional: rows
# of fewer needles than this, two rows or more, are searched across rows;
# SHORT_ROW_LIMIT where missing), `table_check` (optional: which
# rows are checked for their bin tables, TABLE_CHECK_BUILT_IN) and `threads`
# (at most this many threads). Kernels in search_kernels.pxd and
# bin_table.pxd.
#
# The binary search answers as jnp's default method does, on any `a`; the
# merge and runs kernels and the lower-bound search, only where `a` is sorted
# (NaN last). So a call runs in two phases, each cut into parts:
#   0. the order of each distinct row of `a` (which may broadcast over many
#      rows of needles), in equal shares, flagging a row out of order: in a
#      checked call (ORDER_CHECK) whose kernel is the merge or runs, and in
#      any unpromised call where `a` is short against the needles (the
#      check then costs less than the lower-bound search saves);
#   1. the needles of all rows; a row whose `a` was flagged, or not checked,
#      is binary-searched by jnp's probes.
# A batch of short rows (under vmap, one needle or a few per row) takes
# neither phase's per-row work: with fewer than `short_rows` needles a
# row, phase 1's parts are runs of whole rows, searched by jnp's probes
# LANES rows in lock-step (probe_rows; GATHER_LANES rows in gathers,
# gather_rows; row_block for either where neither operand broadcasts, so
# that the rows lie end to end), and nothing is checked.
# Phase 0 also lists a row's descents, up to one per 64 keys (a float32
# running sum of weights has some), and flags the row only past them:
# merge_around_descents then answers its sorted needles as jnp does, merging
# all but the needles the descents could mislead, and the bin table
# (bin_table.pxd) its needles in any order, probing those needles as jnp
# does. The table of a row is built by the first part of phase 1 that
# searches needles out of order in it, so that sorted needles never pay
# for it; where every part of phase 1 will want it (needles in any order,
# or a binary-searched call), phase 0 fills it as it checks the row, each
# block of keys while in cache (check_part), one read of `a` less.
# One row of many needles out of order in a large `a` takes its table by
# buckets (bucket_search.pxd), in a part per thread in each of three
# phases: 1 partitions a slice of the needles, 2 searches a run of buckets
# (all slices' needles in them), 3 puts a slice's answers in place; a
# checked call's phase 0 then checks the needles' order too, so that sorted
# needles keep the merge's many parts (plan_buckets).
# In interp mode (a second handler, interp_search_handler, at the end of
# this file) a third buffer fp comes with one row a (xp) and one of needles
# v (x), and each answer becomes jnp.interp's value in the output, of a's
# float dtype (interp_values.pxd): those the bin table finds, a chunk of
# needles at a time, while the chunk's lines of `a` are in cache (fp's
# prefetched with them); those found by buckets, a chunk of a bucket at a
# time; the others, after their slice.
# The calling thread and up to threads - 1 tasks on XLA's own CPU thread pool
# claim parts from an atomic counter per phase. A thread waits between the
# phases and the caller at the end only for parts that were claimed, never
# for a task to start, so a busy machine costs no more than one thread.
#
# Included by _cpu_ext.pyx after ffi_common.pxi, whose parts it uses.
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t,
                          uint8_t, uint16_t, uint32_t, uint64_t)
from libc.stdlib cimport calloc, free, malloc

from xla_ffi cimport *
from search_kernels cimport (key_t, idx_t, side_t, trust_t, LeftSide, RightSide, Trusted,
                             Checked, is_nan, is_sorted, in_order, in_order_blocks, non_nan_prefix,
                             merge_kernel, runs_kernel, bisect_kernel, lower_bound_kernel,
                             order_descents, merge_around_descents, probe_levels, probe_rows,
                             gather_rows, row_block, gathers_serve,
                             count_kernel, CHECK_BLOCK, COUNT_KEYS, LANES)
from bin_table cimport (BinTable, TABLE_MIN_BYTES, TABLE_PREFETCH_BYTES, begin_bin_table,
                       build_bin_table, fill_samples, free_bin_table, table_kernel,
                       table_samples)
from bucket_search cimport (BucketJob, BUCKET_DENSITY, begin_bucket_job, free_bucket_job,
                            partition_slice, search_bucket_run, place_slice, slice_start,
                            buckets_pay)
from gather_probes cimport GATHER_LANES, gathers_take
from cpu_features cimport cpu_fuses_madd
from interp_values cimport FORMULA_ZERO_STEPS, InterpValues, fp_shadow, interp_values

# Asked of the CPU once, at import: cpuid may leave a virtual machine for
# its hypervisor, too slow for every interp call.
cdef bint FUSES_MADD = cpu_fuses_madd()

# `kernel`: which kernel serves sorted needles.
cdef enum:
    KERNEL_MERGE = 0
    KERNEL_RUNS = 1
    KERNEL_BISECT = 2

cdef enum:
    # 0: the checks; 1: the search (with buckets, the partition); 2 and 3,
    # with buckets only: the buckets' runs, the answers put in place.
    SEARCH_PHASES = 4
    # Keys of `a` per part of the order check, at least.
    CHECK_GRAIN = 65536  # 2**16 (a literal: with debug_checks, Cython 3.3 cannot
                         # generate an enum value from a shift)
    # A binary-searched call checks `a` (to take the lower-bound search on
    # a sorted row) where it has at most this many keys of `a` to read per
    # needle (tables_pay).
    BISECT_CHECK_RATIO = 16
    # Where jnp's probes run in gathers (tables_pay): rows of `a` below
    # GATHER_CHECK_MIN_BYTES are checked where they have at least
    # SMALL_ROW_NEEDLES needles per key (and take a table: TABLE_MIN_BYTES),
    # rows below LARGE_ROW_BYTES where they have at most GATHER_CHECK_RATIO
    # keys per needle, larger rows at most LARGE_ROW_CHECK_RATIO.
    GATHER_CHECK_MIN_BYTES = 2097152  # 2 MiB
    SMALL_ROW_NEEDLES = 4
    LARGE_ROW_BYTES = 16777216  # 16 MiB
    GATHER_CHECK_RATIO = 16
    LARGE_ROW_CHECK_RATIO = 48
    # The `table_check` attribute's value for the rule above; any other
    # (>= 0) replaces the rule where the gathers take the row: a row of
    # TABLE_MIN_BYTES or more is checked where it has at most table_check
    # / 16 keys per needle (CpuConfig.table_check_ratio, tuned per machine).
    TABLE_CHECK_BUILT_IN = -1
    # Descents listed per row of `a`: at most one per KEYS_PER_DESCENT keys,
    # so that the lists (3 int64 per descent) take 3/8 of a byte per key.
    KEYS_PER_DESCENT = 64
    # Keys of a block out of order that the check looks at together, to find
    # its descents.
    DESCENT_PIECE = 64
    # Rows of fewer needles than this, in a call of several rows, are
    # searched across rows (probe_rows): within one row, so few needles
    # leave the search lanes empty and the per-row setup (check, table,
    # parts) costs more than the search. Float32 under vmap, 2 cores: per
    # row, 20,000 rows of 16 keys and 16 needles took 1.4-2.1x jnp's time;
    # across rows 0.45-0.6x (docs/performance.md, Shapes). The built-in
    # value of the call's `short_rows` (CpuConfig.short_row_needles).
    SHORT_ROW_LIMIT = 64
    # Interp mode: needles in any order searched by the bin table, then
    # turned into values, at a time (answers_to_values), while their lines
    # of `a` are in cache.
    INTERP_CHUNK = 1024

# What a search of a slice leaves in `out` (search_slice).
cdef enum:
    ANSWERS_NONE = 0        # nothing: its needles were partitioned into buckets
    ANSWERS_INDICES = 1     # their answers
    ANSWERS_VALUES = 2      # interp mode: their values

# The key dtypes the kernels take (run_part gives each its C type).
cdef enum:
    KEY_DTYPE_COUNT = 11

cdef NamedDtype KEY_DTYPES[KEY_DTYPE_COUNT]
KEY_DTYPES[:] = [
    NamedDtype(XLA_FFI_DataType_PRED, b"bool"),
    NamedDtype(XLA_FFI_DataType_S8, b"int8"), NamedDtype(XLA_FFI_DataType_S16, b"int16"),
    NamedDtype(XLA_FFI_DataType_S32, b"int32"), NamedDtype(XLA_FFI_DataType_S64, b"int64"),
    NamedDtype(XLA_FFI_DataType_U8, b"uint8"), NamedDtype(XLA_FFI_DataType_U16, b"uint16"),
    NamedDtype(XLA_FFI_DataType_U32, b"uint32"), NamedDtype(XLA_FFI_DataType_U64, b"uint64"),
    NamedDtype(XLA_FFI_DataType_F32, b"float32"), NamedDtype(XLA_FFI_DataType_F64, b"float64"),
]


# A row's bin table, built in phase 1 by the parts that want it (row_table).
cdef enum:
    TABLE_PENDING = 0
    TABLE_BUILT = 1
    TABLE_NONE = 2
    TABLE_FILLING = 3
    # Shares of a table's entries, claimed by the parts that want it.
    TABLE_PIECES = 16


cdef struct SearchAttrs:
    int32_t bucket_density
    int32_t bucket_min_bytes
    int32_t count_keys
    int32_t kernel
    int32_t min_parallel
    int32_t order
    int32_t right
    int32_t short_rows
    int32_t table_check
    int32_t threads
    int32_t clamp_left      # interp mode's
    int32_t clamp_right
    int32_t formula


cdef struct SearchJob:
    # Shared by the caller and the pool tasks; freed by the last to let go.
    JobHead head
    long next_part[SEARCH_PHASES]
    long done_parts[SEARCH_PHASES]
    long parts[SEARCH_PHASES]
    long slices                     # phase 1's parts per row
    int64_t rows_per_part           # short rows: phase 1's rows per part; 0: not short
    long check_slices               # phase 0's parts per row of a
    long* unsorted                  # rows of a: 1 where out of order; NULL: none checked
    long* descent_counts            # rows of a: descents listed; NULL: none listed
    int64_t* descents               # rows of a: descent_room positions t, a[t - 1] > a[t]
    int64_t* peaks                  # rows of a: descent_room each (order_descents)
    int64_t* valleys
    long* checks_left               # rows of a: phase 0's parts not done yet
    BinTable* tables                # rows of a: each row's bin table; NULL: none planned
    long* table_claims              # rows of a: parts that wanted the table
    long* table_states              # rows of a: TABLE_PENDING, TABLE_FILLING, TABLE_BUILT or TABLE_NONE
    long* table_pieces              # rows of a: shares claimed; then, rows of a: shares filled
    long* check_fills               # rows of a: phase 0's claims of the table; NULL: no fill
    long* fill_states               # rows of a: TABLE_PENDING, TABLE_FILLING (by phase 0) or TABLE_NONE
    int64_t table_rows
    long descent_room
    bint buckets                    # unsorted needles by buckets (bucket_search.pxd)
    BucketJob bucket_job            # their scratch and steps, where buckets
    long bucket_slices              # with buckets: parts of phases 1 to 3 (a row)
    long v_check_slices             # phase 0's parts that check the needles' order
    long v_unsorted                 # 1 where they found it broken
    long checks_to_go               # phase 0's parts not done (the last settles the buckets)
    Shape shape
    bint right
    int order
    int kernel
    int32_t table_check             # the attribute (TABLE_CHECK_BUILT_IN)
    int32_t count_keys              # the attribute (COUNT_KEYS)
    InterpValues interp             # interp mode (interp_values.pxd): fp NULL where not


cdef bint search_sorted(const key_t* a, Py_ssize_t n, const key_t* v,
                       Py_ssize_t m, idx_t* out, int kernel, const SearchJob* job,
                       int64_t a_row, Py_ssize_t descent_count, const side_t* side,
                       const trust_t* trust) noexcept nogil:
    """Sorted needles in a sorted `a` by the merge or runs kernel, the NaN
    tails of both split off; for the merge, `a` may have the descents listed.
    Returns False when a checking kernel found the needles out of order, or
    ran out of memory."""
    cdef int64_t at = a_row * job.descent_room
    cdef Py_ssize_t na = non_nan_prefix(a, n), nv = non_nan_prefix(v, m), j
    cdef bint tail_ok = True
    for j in range(nv, m):
        out[j] = <idx_t>(n if side_t is RightSide else na)
        if trust_t is Checked:
            tail_ok &= is_nan(v[j])
    if not tail_ok:
        return False
    if kernel == KERNEL_MERGE:
        if trust_t is Checked and not is_sorted(v, nv):
            return False
        if descent_count == 0:
            merge_kernel(a, na, v, nv, out, side)
            return True
        return merge_around_descents(a, na, n, v, nv, out, job.descents + at, job.peaks + at,
                                     job.valleys + at, descent_count, side)
    return runs_kernel(a, na, v, nv, out, side, trust)


cdef const BinTable* row_table(const SearchJob* job, int64_t a_row, const key_t* a,
                               Py_ssize_t na, Py_ssize_t descent_count) noexcept nogil:
    """The row's bin table, or NULL where none was planned or it does not
    pay. Where phase 0 filled it (check_fill_table) and the row has no
    descents, it is done. Else the first part to want it begins it (or
    builds it again, over phase 0's fill); where the row has no descents,
    every part that wants it then fills shares of its entries until none is
    left (N = M/10 = 1e7 unsorted: 12.1 -> 10.8 ms, where one thread built
    it as the others waited), else the first part builds it alone."""
    cdef BinTable* table
    cdef long state, piece
    cdef Py_ssize_t samples
    cdef bint filled
    if job.tables == NULL:
        return NULL
    table = &job.tables[a_row]
    if fetch_add(&job.table_claims[a_row], 1) == 0:
        # Phase 0 is over: its fill, where it began one, is whole.
        filled = job.check_fills != NULL and job.fill_states[a_row] == TABLE_FILLING
        state = TABLE_NONE
        if descent_count == 0 and filled:
            state = TABLE_BUILT
        elif descent_count == 0:
            if begin_bin_table(table, a, na):
                state = TABLE_FILLING
        else:
            if filled:  # in shares, which a row with descents does not take
                free_bin_table(table)
            if build_bin_table(table, a, na, job.descents + a_row * job.descent_room,
                               descent_count):
                state = TABLE_BUILT
        atomic_store(&job.table_states[a_row], state)
    state = wait_while(&job.table_states[a_row], TABLE_PENDING)
    if state == TABLE_FILLING:
        samples = table_samples(table, na)
        piece = fetch_add(&job.table_pieces[a_row], 1)
        while piece < TABLE_PIECES:
            # One of TABLE_PIECES equal shares of the samples (never an empty last one).
            fill_samples(table, a, na, samples * piece // TABLE_PIECES,
                         samples * (piece + 1) // TABLE_PIECES)
            if fetch_add(&job.table_pieces[a_row + job.table_rows], 1) == TABLE_PIECES - 1:
                atomic_store(&job.table_states[a_row], TABLE_BUILT)
            piece = fetch_add(&job.table_pieces[a_row], 1)
        state = wait_while(&job.table_states[a_row], TABLE_FILLING)
    return table if state == TABLE_BUILT else NULL


cdef long wait_while(long* state, long value) noexcept nogil:
    """The state once it is no longer `value`."""
    cdef long now = atomic_load(state)
    while now == value:
        sched_yield()
        now = atomic_load(state)
    return now


cdef int search_any_needles(const key_t* a, Py_ssize_t n, const key_t* v, Py_ssize_t m,
                            idx_t* out, const SearchJob* job, int64_t a_row, long piece,
                            Py_ssize_t descent_count, const side_t* side) noexcept nogil:
    """Needles in any order (slice `piece` of the row's), in a row of `a`
    sorted but for the descents listed: counted in a short row; else by its
    bin table where there is one (with buckets, only partitioned here: the
    later phases search and place them), else by the lower-bound search, or
    jnp's probes where there are descents. What `out` holds (ANSWERS_*): in
    interp mode, the table's answers become values a chunk at a time, while
    their lines of `a` are in cache."""
    cdef Py_ssize_t na
    cdef const BinTable* table
    cdef Py_ssize_t j, chunk
    if n <= job.count_keys and descent_count == 0:
        count_kernel(a, n, v, m, out, side)
        return ANSWERS_INDICES
    na = non_nan_prefix(a, n)
    table = row_table(job, a_row, a, na, descent_count)
    if table != NULL:
        # The job is shared, and its bucket_job's scratch and count are
        # written by the parts (each its own slice): const here only to the
        # parts' plain fields (the job is on the heap).
        if job.buckets and partition_slice(<BucketJob*>&job.bucket_job, piece, table, v, m):
            fetch_add(<long*>&job.bucket_job.partitioned, 1)
            return ANSWERS_NONE
        if job.interp.fp == NULL:
            table_kernel(a, na, n, v, m, out, table, side)
            return ANSWERS_INDICES
        j = 0
        while j < m:
            chunk = min(<Py_ssize_t>INTERP_CHUNK, m - j)
            table_kernel(a, na, n, v + j, chunk, out + j, table, side, fp_shadow(&job.interp, a))
            answers_to_values(job, a, v + j, chunk, out + j)
            j += chunk
        return ANSWERS_VALUES
    elif descent_count == 0:
        lower_bound_kernel(a, n, v, m, out, side)
    else:
        bisect_kernel(a, n, v, m, out, side)
    return ANSWERS_INDICES


cdef int search_slice(const key_t* a, Py_ssize_t n, const key_t* v, Py_ssize_t m,
                      idx_t* out, const SearchJob* job, bint a_sorted, int64_t a_row,
                      long piece, Py_ssize_t descent_count, const side_t* side) noexcept nogil:
    """One part: m needles against a whole row of `a`, known sorted (or
    sorted but for the descents listed) or not. Each part checks its own
    needles (unless phase 0 did), so parts of one row may take different
    kernels. What `out` holds (ANSWERS_*)."""
    # jnp's probes answer any needles in any `a`, so they need no check.
    if not a_sorted:
        bisect_kernel(a, n, v, m, out, side)
    # With buckets every slice is partitioned, sorted or not (phase 0 found
    # the needles out of order, or they were not promised).
    elif job.kernel == KERNEL_BISECT or job.order == ORDER_ANY or job.buckets:
        return search_any_needles(a, n, v, m, out, job, a_row, piece, descent_count, side)
    # Needles that phase 0 found sorted need no check of their own.
    elif job.order == ORDER_SORTED or (needles_found_sorted(job) and descent_count == 0):
        search_sorted(a, n, v, m, out, job.kernel, job, a_row, 0, side, <const Trusted*>NULL)
    # The runs kernel takes no descents.
    elif ((descent_count > 0 and job.kernel == KERNEL_RUNS)
          or not search_sorted(a, n, v, m, out, job.kernel, job, a_row, descent_count, side,
                               <const Checked*>NULL)):
        return search_any_needles(a, n, v, m, out, job, a_row, piece, descent_count, side)
    return ANSWERS_INDICES


cdef bint list_descents(const SearchJob* job, long row, const key_t* a, int64_t lo,
                        int64_t hi) noexcept nogil:
    """Lists the descents t in [lo, hi) of the row (a[t - 1] > a[t], a[t] not
    a NaN), in pieces of DESCENT_PIECE checked vectorised first; False where
    the row is to be flagged: too many, or one after a NaN."""
    cdef int64_t stop, t
    cdef long slot
    while lo < hi:
        stop = min(lo + DESCENT_PIECE, hi)
        if not in_order(a, lo, stop, True):
            for t in range(lo, stop):
                if a[t - 1] <= a[t] or is_nan(a[t]):
                    continue
                slot = fetch_add(&job.descent_counts[row], 1)
                if is_nan(a[t - 1]) or slot >= job.descent_room:
                    return False
                job.descents[row * job.descent_room + slot] = t
        lo = stop
    return True


cdef void check_needles_part(const SearchJob* job, long piece, const key_t* v) noexcept nogil:
    """Phase 0, where the job plans buckets for needles out of order
    (plan_buckets): one share of the needles' order, flagged where broken."""
    cdef int64_t lo = max(job.shape.m * piece // job.v_check_slices, <int64_t>1)
    cdef int64_t hi = job.shape.m * (piece + 1) // job.v_check_slices
    if not in_order_blocks(v, lo, hi, True):
        # The job is shared, and this flag one of its atomics: const here
        # only to the parts' plain fields (the job is on the heap).
        atomic_store(<long*>&job.v_unsorted, 1)


cdef void check_part(const SearchJob* job, long part, const key_t* a) noexcept nogil:
    """Phase 0: one share of a row of `a`, whose pairs (a[t - 1], a[t]) for
    t in [lo, hi) must be in jnp's order; the row is flagged where not, or,
    where the job lists descents, where list_descents gives up. Where the
    job fills tables in phase 0, each block checked also fills its share
    of the row's table (check_fill_table)."""
    cdef long row = part // job.check_slices, piece = part % job.check_slices
    cdef int64_t n = job.shape.n
    cdef int64_t lo = max(n * piece // job.check_slices, <int64_t>1)
    cdef int64_t hi = n * (piece + 1) // job.check_slices
    cdef int64_t stop
    cdef long count
    cdef BinTable* table = NULL
    cdef Py_ssize_t na = 0, samples = 0
    a += row * n
    if job.descent_counts == NULL:
        if not in_order_blocks(a, lo, hi, True):
            atomic_store(&job.unsorted[row], 1)
        return
    if job.check_fills != NULL:
        table = check_fill_table(job, row, a, &na)
        samples = table_samples(table, na) if table != NULL else 0
    while lo < hi:
        stop = min(lo + CHECK_BLOCK, hi)
        if not in_order(a, lo, stop, True) and not list_descents(job, row, a, lo, stop):
            atomic_store(&job.unsorted[row], 1)
            return
        if table != NULL:
            # The samples at positions [lo, stop), from position 0 in the
            # row's first block (its pairs start at t = 1).
            fill_samples(table, a, na, min(samples_from(table, lo if lo > 1 else 0), samples),
                         min(samples_from(table, stop), samples))
        lo = stop
    # The last share of the row to be checked orders its descents.
    if fetch_add(&job.checks_left[row], -1) == 1:
        count = atomic_load(&job.descent_counts[row])
        if count > 0 and not atomic_load(&job.unsorted[row]):
            order_descents(a, job.descents + row * job.descent_room, count,
                           job.peaks + row * job.descent_room,
                           job.valleys + row * job.descent_room)


cdef inline int64_t samples_from(const BinTable* t, int64_t position) noexcept nogil:
    """The table's samples before `position`: those at the keys before it."""
    return (position + t.stride - 1) // t.stride


cdef BinTable* check_fill_table(const SearchJob* job, long row, const key_t* a,
                                Py_ssize_t* na) noexcept nogil:
    """Phase 0's table of a row, begun by the first part to check the row,
    as row_table would begin it (the same na; a row found out of order
    never uses it), or NULL where it does not pay; *na then holds its keys
    without a NaN. Only its entries' shares are filled in phase 0:
    row_table takes them where the row has no descents."""
    cdef long state
    na[0] = non_nan_prefix(a, job.shape.n)
    # The job is shared, and these its atomics: const here only to the
    # parts' plain fields (the job is on the heap).
    if fetch_add(<long*>&job.check_fills[row], 1) == 0:
        state = TABLE_FILLING if begin_bin_table(&job.tables[row], a, na[0]) else TABLE_NONE
        atomic_store(<long*>&job.fill_states[row], state)
    state = wait_while(<long*>&job.fill_states[row], TABLE_PENDING)
    return &job.tables[row] if state == TABLE_FILLING else NULL


cdef void run_typed(const SearchJob* job, long part, const key_t* a, const key_t* v,
                    idx_t* out) noexcept nogil:
    """Phase 1: one slice of a row's needles."""
    cdef long row = part // job.slices, piece = part % job.slices
    cdef int64_t a_off, v_off, a_row
    cdef int64_t lo = job.shape.m * piece // job.slices
    cdef int64_t hi = job.shape.m * (piece + 1) // job.slices
    cdef bint a_sorted
    cdef int answers
    cdef Py_ssize_t descent_count = 0
    row_offsets(&job.shape, row, &a_off, &v_off)
    # a_off // n is the row of `a` (its rows are contiguous, n keys each).
    a_row = a_off // job.shape.n
    if job.unsorted != NULL:
        a_sorted = not atomic_load(&job.unsorted[a_row])
    else:  # unchecked: promised, or too short to be out of order, or unknown
        a_sorted = job.order == ORDER_SORTED or job.shape.n <= 1
    if a_sorted and job.descent_counts != NULL:
        descent_count = atomic_load(&job.descent_counts[a_row])
    a += a_off
    v += v_off + lo
    out += row * job.shape.m + lo
    if job.right:
        answers = search_slice(a, job.shape.n, v, hi - lo, out, job, a_sorted, a_row, piece,
                               descent_count, <const RightSide*>NULL)
    else:
        answers = search_slice(a, job.shape.n, v, hi - lo, out, job, a_sorted, a_row, piece,
                               descent_count, <const LeftSide*>NULL)
    # In interp mode, the answers of a slice searched in order (or in a row
    # in cache) become values after it, while its lines of `a` are in cache;
    # a slice partitioned, by bucket in phase 2.
    if job.interp.fp != NULL and answers == ANSWERS_INDICES:
        answers_to_values(job, a, v, hi - lo, out)


cdef void answers_to_values(const SearchJob* job, const key_t* a, const key_t* v, int64_t m,
                            idx_t* out) noexcept nogil:
    """Interp mode: out[0:m], the answers of needles v[0:m] in the row a,
    turned into their values in place (interp_values), where the keys are
    floats of the answers' width, as the mode's output is."""
    if key_t is float and idx_t is int32_t:
        interp_values(&job.interp, a, job.shape.n, v, m, out, <float*>out)
    elif key_t is double and idx_t is int64_t:
        interp_values(&job.interp, a, job.shape.n, v, m, out, <double*>out)


cdef void run_short_rows(const SearchJob* job, long part, const key_t* a, const key_t* v,
                         idx_t* out) noexcept nogil:
    """Phase 1 of a batch of short rows: `part`'s run of whole rows, LANES
    at a time, or GATHER_LANES where the probes run in gathers (the last
    group repeats its last row)."""
    cdef int64_t first = part * job.rows_per_part
    cdef int64_t count = min(job.rows_per_part, job.shape.rows - first), r, k
    cdef int64_t m = job.shape.m
    cdef bint gathers = gathers_serve(a, operand_rows(job.shape.a_buf) * job.shape.n)
    cdef int64_t lanes = GATHER_LANES if gathers else LANES
    cdef RowCursor cursor
    cdef const key_t* a_rows[GATHER_LANES]
    cdef const key_t* v_rows[GATHER_LANES]
    cdef idx_t* out_rows[GATHER_LANES]
    out += first * m
    # Neither operand broadcast: each row's operands lie where its output does.
    if (operand_rows(job.shape.a_buf) == job.shape.rows
            and operand_rows(job.shape.v_buf) == job.shape.rows):
        a += first * job.shape.n
        v += first * m
        if job.right:
            row_block(a, v, out, job.shape.n, m, count, <const RightSide*>NULL)
        else:
            row_block(a, v, out, job.shape.n, m, count, <const LeftSide*>NULL)
        return
    start_rows(&job.shape, first, &cursor)
    r = 0
    while r < count:
        for k in range(lanes):
            if r < count:
                a_rows[k], v_rows[k], out_rows[k] = a + cursor.a_off, v + cursor.v_off, out + r * m
                next_row(&job.shape, &cursor)
                r += 1
            else:
                a_rows[k], v_rows[k], out_rows[k] = a_rows[k - 1], v_rows[k - 1], out_rows[k - 1]
        if gathers and job.right:
            gather_rows(a, a_rows, v_rows, out_rows, job.shape.n, m, <const RightSide*>NULL)
        elif gathers:
            gather_rows(a, a_rows, v_rows, out_rows, job.shape.n, m, <const LeftSide*>NULL)
        elif job.right:
            probe_rows(a_rows, v_rows, out_rows, job.shape.n, m, <const RightSide*>NULL)
        else:
            probe_rows(a_rows, v_rows, out_rows, job.shape.n, m, <const LeftSide*>NULL)


cdef void run_buckets(const SearchJob* job, long run, const key_t* a,
                      idx_t* answers) noexcept nogil:
    """Phase 2: one run of the row's buckets (search_bucket_run), where
    every slice was partitioned in phase 1 (else phase 1 answered them)."""
    cdef const BinTable* table = &job.tables[0]
    cdef Py_ssize_t na
    if not all_partitioned(job):
        return
    na = non_nan_prefix(a, job.shape.n)
    if job.right:
        search_bucket_run(a, na, job.shape.n, &job.bucket_job, run, table, answers,
                          <const RightSide*>NULL, &job.interp)
    else:
        search_bucket_run(a, na, job.shape.n, &job.bucket_job, run, table, answers,
                          <const LeftSide*>NULL, &job.interp)


cdef void place_bucket_slice(const SearchJob* job, long piece, idx_t* out) noexcept nogil:
    """Phase 3: the answers of one slice of the row's needles put in place,
    where every slice was partitioned in phase 1."""
    if all_partitioned(job):
        place_slice(&job.bucket_job, piece, out + slice_start(&job.bucket_job, piece))


cdef bint all_partitioned(const SearchJob* job) noexcept nogil:
    """After phase 1: whether it partitioned every slice of the needles
    (each takes the same table, so either all or none)."""
    return atomic_load(<long*>&job.bucket_job.partitioned) == job.bucket_job.slices


cdef bint narrow_answers(const SearchJob* job) noexcept nogil:
    """Whether the answers are int32 (else int64): an int32 output, or in
    interp mode a float32 one, whose values replace the answers in place."""
    cdef XLA_FFI_DataType dtype = job.shape.out_buf.dtype
    return dtype == XLA_FFI_DataType_S32 or dtype == XLA_FFI_DataType_F32


cdef void run_key(const SearchJob* job, int phase, long part, const key_t* a,
                  const key_t* v) noexcept nogil:
    # Phase 0's last v_check_slices parts check the needles (plan_buckets).
    if phase == 0 and part >= job.parts[0] - job.v_check_slices:
        check_needles_part(job, part - (job.parts[0] - job.v_check_slices), v)
    elif phase == 0:
        check_part(job, part, a)
    elif phase == 2 and narrow_answers(job):
        run_buckets(job, part, a, <int32_t*>job.bucket_job.answers)
    elif phase == 2:
        run_buckets(job, part, a, <int64_t*>job.bucket_job.answers)
    elif phase == 3 and narrow_answers(job):
        place_bucket_slice(job, part, <int32_t*>job.shape.out_buf.data)
    elif phase == 3:
        place_bucket_slice(job, part, <int64_t*>job.shape.out_buf.data)
    elif job.rows_per_part and narrow_answers(job):
        run_short_rows(job, part, a, v, <int32_t*>job.shape.out_buf.data)
    elif job.rows_per_part:
        run_short_rows(job, part, a, v, <int64_t*>job.shape.out_buf.data)
    elif narrow_answers(job):
        run_typed(job, part, a, v, <int32_t*>job.shape.out_buf.data)
    else:
        run_typed(job, part, a, v, <int64_t*>job.shape.out_buf.data)


cdef void run_part(const SearchJob* job, int phase, long part) noexcept nogil:
    """The part of the phase at the C type of its keys, one of KEY_DTYPES."""
    cdef const void* a = job.shape.a_buf.data
    cdef const void* v = job.shape.v_buf.data
    cdef XLA_FFI_DataType dt = job.shape.a_buf.dtype
    if dt == XLA_FFI_DataType_F32:
        run_key(job, phase, part, <const float*>a, <const float*>v)
    elif dt == XLA_FFI_DataType_F64:
        run_key(job, phase, part, <const double*>a, <const double*>v)
    elif dt == XLA_FFI_DataType_S32:
        run_key(job, phase, part, <const int32_t*>a, <const int32_t*>v)
    elif dt == XLA_FFI_DataType_S64:
        run_key(job, phase, part, <const int64_t*>a, <const int64_t*>v)
    elif dt == XLA_FFI_DataType_S8:
        run_key(job, phase, part, <const int8_t*>a, <const int8_t*>v)
    elif dt == XLA_FFI_DataType_S16:
        run_key(job, phase, part, <const int16_t*>a, <const int16_t*>v)
    # A bool is one byte holding 0 or 1, and False < True: compare as uint8.
    elif dt == XLA_FFI_DataType_U8 or dt == XLA_FFI_DataType_PRED:
        run_key(job, phase, part, <const uint8_t*>a, <const uint8_t*>v)
    elif dt == XLA_FFI_DataType_U16:
        run_key(job, phase, part, <const uint16_t*>a, <const uint16_t*>v)
    elif dt == XLA_FFI_DataType_U32:
        run_key(job, phase, part, <const uint32_t*>a, <const uint32_t*>v)
    else:
        run_key(job, phase, part, <const uint64_t*>a, <const uint64_t*>v)


cdef void use_buckets(SearchJob* job) noexcept nogil:
    """The needles are searched by buckets (bucket_search.pxd), in a part
    per thread in each of phases 1 to 3, where their scratch is to be had
    (else as without buckets)."""
    cdef long slices = min(job.slices, job.bucket_slices)
    cdef size_t answer_size = 4 if narrow_answers(job) else 8
    if not begin_bucket_job(&job.bucket_job, job.shape.n, job.shape.m, slices,
                            key_bytes(job.shape.a_buf.dtype), answer_size):
        return
    job.buckets = True
    job.slices = slices
    job.parts[1] = job.parts[2] = job.parts[3] = job.shape.rows * job.slices


cdef void settle_buckets(SearchJob* job) noexcept nogil:
    """After phase 0's checks: buckets where the needles are out of order
    (else they are known sorted: needles_found_sorted)."""
    if atomic_load(&job.v_unsorted):
        use_buckets(job)


cdef bint needles_found_sorted(const SearchJob* job) noexcept nogil:
    """In phase 1: whether phase 0 checked the needles' order and found it
    kept (NaN last), so that they are merged unchecked."""
    return job.v_check_slices > 0 and not atomic_load(&job.v_unsorted)


cdef void plan_buckets(SearchJob* job, int threads, int64_t bucket_min_bytes,
                       int64_t bucket_density) noexcept nogil:
    """Buckets for a checked row whose needles may be out of order, where
    they pay (buckets_pay): at once where the needles were not promised
    sorted, else once phase 0 has also checked their order (one read of
    them more; sorted needles keep the merge and its many parts)."""
    if job.order == ORDER_SORTED or job.shape.rows != 1 or not buckets_pay(
            job.shape.n, key_bytes(job.shape.a_buf.dtype), job.shape.m, bucket_min_bytes,
            bucket_density):
        return
    job.bucket_slices = threads
    if job.order == ORDER_ANY:
        use_buckets(job)
        return
    job.v_check_slices = slices_per_row(job.shape.m, threads, CHECK_GRAIN)
    job.parts[0] += job.v_check_slices
    job.checks_to_go = job.parts[0]


cdef int key_bytes(XLA_FFI_DataType dtype) noexcept nogil:
    """The bytes of a key of one of KEY_DTYPES."""
    if dtype == XLA_FFI_DataType_F64 or dtype == XLA_FFI_DataType_S64 \
            or dtype == XLA_FFI_DataType_U64:
        return 8
    if dtype == XLA_FFI_DataType_F32 or dtype == XLA_FFI_DataType_S32 \
            or dtype == XLA_FFI_DataType_U32:
        return 4
    if dtype == XLA_FFI_DataType_S16 or dtype == XLA_FFI_DataType_U16:
        return 2
    return 1


cdef void wait_for_parts(SearchJob* job, int phase) noexcept nogil:
    """Until every part of the phase is done (each one claimed already)."""
    while atomic_load(&job.done_parts[phase]) < job.parts[phase]:
        sched_yield()


cdef void search_work(void* data) noexcept nogil:
    """Claims and runs parts, phase by phase, until none is left (in the
    calling thread's floating-point mode). Phase 1 starts once every part of
    phase 0 is done: all of them are claimed by then, so this waits only for
    claimed parts."""
    cdef SearchJob* job = <SearchJob*>data
    cdef int phase
    cdef long part
    for phase in range(SEARCH_PHASES):
        part = fetch_add(&job.next_part[phase], 1)
        while part < job.parts[phase]:
            run_part(job, phase, part)
            # The last check of a job that plans buckets settles them, before
            # phase 1 reads its parts.
            if phase == 0 and job.v_check_slices and fetch_add(&job.checks_to_go, -1) == 1:
                settle_buckets(job)
            fetch_add(&job.done_parts[phase], 1)
            part = fetch_add(&job.next_part[phase], 1)
        # Each phase starts once the one before is done, but for a last one.
        if phase + 1 < SEARCH_PHASES and (phase == 0 or job.parts[phase + 1] > 0):
            wait_for_parts(job, phase)


cdef void free_search_job(void* data) noexcept nogil:
    cdef SearchJob* job = <SearchJob*>data
    cdef int64_t row
    free(job.unsorted)
    free(job.descent_counts)
    free(job.descents)  # and the peaks and valleys after them
    free(job.checks_left)
    if job.tables != NULL:
        for row in range(job.table_rows):
            free_bin_table(&job.tables[row])
    free(job.tables)
    free(job.table_claims)  # and the states and pieces after them
    if job.buckets:
        free_bucket_job(&job.bucket_job)
    free(job)


cdef int64_t operand_rows(const XLA_FFI_Buffer* buf) noexcept nogil:
    """The rows of an operand: the product of its batch dimensions."""
    cdef int64_t rows = 1, d
    for d in range(buf.rank - 1):
        rows *= buf.dims[d]
    return rows


cdef bint short_rows(int64_t rows, int64_t m, int64_t limit) noexcept nogil:
    """Whether a call of `rows` rows of m needles takes the short-row route,
    with the call's `short_rows` limit."""
    return rows > 1 and 0 < m < limit


cdef long search_parts(int64_t rows, int64_t n, int64_t m, int threads,
                       int64_t min_parallel, int64_t short_limit) noexcept nogil:
    """Phase 1's parts for `rows` rows of m needles in n keys. Short rows are
    cut into runs of whole rows, as many as a row would be cut into whose
    needles were the rows' probes (each probe of a short row is a fresh
    miss, as a needle of a long row costs about one)."""
    if short_rows(rows, m, short_limit):
        return slices_per_row(rows * m * probe_levels(n), threads, min_parallel)
    return rows * slices_per_row(m, threads, min_parallel)


cdef bint tables_pay(const SearchJob* job, int64_t a_rows) noexcept nogil:
    """table_rule for the call's shape, a_rows of its rows of `a` distinct."""
    return table_rule(key_bytes(job.shape.a_buf.dtype), job.shape.n, a_rows, job.shape.m,
                      job.shape.rows, job.table_check)


cdef bint table_rule(int key_size, int64_t n, int64_t a_rows, int64_t m, int64_t rows,
                     int64_t table_check) noexcept nogil:
    """Whether a binary-searched call of `rows` rows of m needles in n keys
    of key_size bytes (a_rows of its rows of `a` distinct; `table_check`
    its attribute) checks `a`, so that its sorted rows
    take the lower-bound search or their bin tables: where it has at most
    BISECT_CHECK_RATIO keys of `a` to read per needle. Where jnp's probes
    run in gathers (gather_probes.pxd), faster than the lower-bound search,
    only the table can pay for the check. There, unsorted float32 needles
    on two cores (Intel Xeon), the table (searched by gathers too) against
    the gathers: N = 1e5 1.2-1.8x their time from M = N/16 to N/5, 1.12x at
    N, 0.86x at 4N, 0.80x at 20N; N = 1e6 1.30x at N/16, 0.98x at N/10, 0.75x
    at N/5, 0.62x at N; N = 1e7 0.60x at N/16. Measured later on two cores of
    an AMD EPYC, the table paid further. The default call, table against
    gathers, sorted / unsorted needles: float32 N = 1e6 0.51x / 0.59x at M = N/10,
    0.85x / 0.72x at N/17, 1.17x / 0.82x at N/24, 1.31x / 1.17x at N/33;
    N = 3e6 0.50x / 0.66x at N/24, 0.69x / 0.91x at N/48; N = 1e7 0.75x /
    0.62x at N/33, 0.76x / 0.82x at N/50, 0.87x / 1.12x at N/67, 1.01x /
    1.02x at N/100; N = 3e7 0.73x / 0.59x at N/48, 0.97x / 0.77x at N/96.
    int32 N = 3e6 0.71x / 0.67x at N/24, 1.43x / 1.11x at N/48; N = 1e7
    0.70x / 0.86x at N/50, 1.09x / 0.95x at N/100. Hence 16 keys per
    needle under 16 MiB and 48 above."""
    cdef int64_t row_bytes = n * key_size
    cdef int64_t ratio = BISECT_CHECK_RATIO
    if gathers_take(key_size, n):
        if table_check != TABLE_CHECK_BUILT_IN:
            # The tuned ratio, in sixteenths of a key per needle.
            return (row_bytes >= TABLE_MIN_BYTES
                    and <double>n * a_rows * 16 <= <double>table_check * m * rows)
        if row_bytes < GATHER_CHECK_MIN_BYTES:
            return row_bytes >= TABLE_MIN_BYTES and m * rows >= SMALL_ROW_NEEDLES * n * a_rows
        ratio = GATHER_CHECK_RATIO if row_bytes < LARGE_ROW_BYTES else LARGE_ROW_CHECK_RATIO
    return n * a_rows <= ratio * m * rows


cdef const char* search_plan(SearchJob* job, const XLA_FFI_CallFrame* cf, int threads,
                             int64_t min_parallel, int64_t bucket_min_bytes,
                             int64_t bucket_density, int64_t short_limit) noexcept nogil:
    """The call's shape, cut into parts, phase 0's where `a` is checked (see
    the top of this file; a row of one key, or with no needle to answer,
    needs no check). `short_limit` is the call's `short_rows`."""
    cdef const char* message = plan_shape(&job.shape, cf)
    cdef int64_t a_rows, row
    cdef bint check
    if message != NULL:
        return message
    job.parts[1] = search_parts(job.shape.rows, job.shape.n, job.shape.m, threads, min_parallel,
                                short_limit)
    if short_rows(job.shape.rows, job.shape.m, short_limit):
        job.rows_per_part = (job.shape.rows + job.parts[1] - 1) // job.parts[1]
        return NULL
    job.slices = slices_per_row(job.shape.m, threads, min_parallel)
    a_rows = operand_rows(job.shape.a_buf)
    if job.shape.n <= 1 or job.shape.m == 0:
        check = False
    elif job.order == ORDER_SORTED:
        # A sorted `a` promised: checked only for its tables where the
        # gathers would search it, as phase 0 fills them while it checks
        # (N = 1e7 with 1e6 sorted float32 needles, 2 cores, Intel Xeon:
        # 8.8 ms, the gathers 11.7; other keys were not measured).
        check = (job.kernel == KERNEL_BISECT and tables_pay(job, a_rows)
                 and gathers_take(key_bytes(job.shape.a_buf.dtype), job.shape.n))
    else:
        # Checked where the kernel is the merge or runs, needles promised
        # in any order too: an unpromised call checks `a` there (to merge),
        # and then searches needles it finds unsorted through the bin table,
        # so a promise of unsorted needles that skipped the check took
        # longer than no promise (float32, 2 cores, AMD EPYC: N = M = 1e4
        # 0.076 ms against 0.049, N = M = 1e5 0.56 against 0.33, N = 3e5,
        # M = 1e5 0.78 against 0.45).
        # One row of count_keys keys or fewer is checked whatever the
        # needles: the check reads it once, and, sorted, it is counted
        # (count_kernel) where jnp's probes would search it. 1e6 unsorted
        # float32 needles (sorted_v=False), 2 cores, Intel Xeon: N = 9, 1.13-
        # 1.18 -> 0.54 ms; N = 32, 1.49-1.56 -> 1.33 ms. Not where each
        # needle row has a row of `a` of its own: 20,000 rows of 16 keys and
        # 100 needles under vmap took 1.08x the probes' time.
        check = (job.kernel != KERNEL_BISECT
                 or (a_rows == 1 and job.shape.n <= job.count_keys)
                 or tables_pay(job, a_rows))
    if check:
        job.check_slices = slices_per_row(job.shape.n, threads, CHECK_GRAIN)
        job.parts[0] = a_rows * job.check_slices
        job.unsorted = <long*>calloc(max(a_rows, <int64_t>1), sizeof(long))
        if job.unsorted == NULL:
            return b"jaxsearch: out of memory"
        job.descent_room = job.shape.n // KEYS_PER_DESCENT
        if job.descent_room > 0:
            job.descent_counts = <long*>calloc(a_rows, sizeof(long))
            job.checks_left = <long*>malloc(a_rows * sizeof(long))
            job.descents = <int64_t*>malloc(3 * a_rows * job.descent_room * sizeof(int64_t))
            if job.descent_counts == NULL or job.checks_left == NULL or job.descents == NULL:
                return b"jaxsearch: out of memory"
            job.peaks = job.descents + a_rows * job.descent_room
            job.valleys = job.peaks + a_rows * job.descent_room
            for row in range(a_rows):
                job.checks_left[row] = job.check_slices
        # Room for each row's bin table, built where it pays (build_bin_table).
        job.table_rows = a_rows
        job.tables = <BinTable*>calloc(a_rows, sizeof(BinTable))
        job.table_claims = <long*>calloc(6 * a_rows, sizeof(long))
        if job.tables == NULL or job.table_claims == NULL:
            return b"jaxsearch: out of memory"
        job.table_states = job.table_claims + a_rows
        job.table_pieces = job.table_states + a_rows
        # Every part of phase 1 will want the table: phase 0 fills it.
        if job.descent_room > 0 and (job.order == ORDER_ANY or job.kernel == KERNEL_BISECT):
            job.check_fills = job.table_pieces + 2 * a_rows
            job.fill_states = job.check_fills + a_rows
        plan_buckets(job, threads, bucket_min_bytes, bucket_density)
    return NULL


cdef const char* read_search_attrs(const XLA_FFI_CallFrame* cf, SearchAttrs* attrs,
                                   bint interp, char* message_buf) noexcept nogil:
    """The attributes the top of this file lists, into `attrs`, and in
    interp mode `clamp_left`, `clamp_right` and `formula` too."""
    cdef Attr table[13]
    attrs.table_check = TABLE_CHECK_BUILT_IN
    attrs.bucket_density = 16 * BUCKET_DENSITY
    attrs.count_keys = COUNT_KEYS
    attrs.short_rows = SHORT_ROW_LIMIT
    table[:] = [Attr(b"bucket_density", &attrs.bucket_density, 0, INT32_MAX, True),
                int32_in(b"bucket_min_bytes", &attrs.bucket_min_bytes, 0, INT32_MAX),
                Attr(b"count_keys", &attrs.count_keys, 0, INT32_MAX, True),
                any_int32(b"kernel", &attrs.kernel),
                any_int32(b"min_parallel", &attrs.min_parallel),
                any_int32(b"order", &attrs.order),
                any_int32(b"right", &attrs.right),
                Attr(b"short_rows", &attrs.short_rows, 0, INT32_MAX, True),
                Attr(b"table_check", &attrs.table_check, TABLE_CHECK_BUILT_IN, INT32_MAX, True),
                int32_in(b"threads", &attrs.threads, 1, MAX_CALL_THREADS),
                int32_in(b"clamp_left", &attrs.clamp_left, 0, 1),
                int32_in(b"clamp_right", &attrs.clamp_right, 0, 1),
                int32_in(b"formula", &attrs.formula, 0, 1)]
    return read_attrs(cf, table, 13 if interp else 10, message_buf)


cdef const char* search_call(const XLA_FFI_CallFrame* cf, char* message_buf) noexcept nogil:
    return run_search(cf, False, message_buf)


cdef const char* interp_search_call(const XLA_FFI_CallFrame* cf,
                                    char* message_buf) noexcept nogil:
    return run_search(cf, True, message_buf)


cdef const char* run_search(const XLA_FFI_CallFrame* cf, bint interp,
                            char* message_buf) noexcept nogil:
    """Runs a searchsorted call (in interp mode where `interp`): its plan,
    then its parts on this thread and the pool's, until every claimed part
    is done; an error message or NULL."""
    cdef SearchAttrs attrs
    cdef SearchJob* job
    cdef int phase
    cdef const char* message = read_search_attrs(cf, &attrs, interp, message_buf)
    if message != NULL:
        return message
    job = <SearchJob*>new_job(sizeof(SearchJob), search_work, free_search_job)
    if job == NULL:
        return b"jaxsearch: out of memory"
    job.kernel, job.order, job.right = attrs.kernel, attrs.order, attrs.right != 0
    job.table_check, job.count_keys = attrs.table_check, attrs.count_keys
    if interp:
        job.interp.fp = (<const XLA_FFI_Buffer*>cf.args.args[2]).data
        job.interp.clamp_left, job.interp.clamp_right = attrs.clamp_left, attrs.clamp_right
        job.interp.fused = FUSES_MADD
        job.interp.zero_steps = attrs.formula == FORMULA_ZERO_STEPS
    message = search_plan(job, cf, attrs.threads, attrs.min_parallel, attrs.bucket_min_bytes,
                          attrs.bucket_density, attrs.short_rows)
    if message != NULL:
        free_search_job(job)
        return message
    advise_output_pages(job.shape.out_buf)
    start_tasks(cf, &job.head, call_threads(attrs.threads, job.parts[1]) - 1)
    search_work(job)
    # Parts claimed by pool tasks may still be running; unstarted tasks are
    # not waited for (they find no part left, and the last one frees the job).
    for phase in range(1, SEARCH_PHASES):
        wait_for_parts(job, phase)
    release(&job.head)
    return NULL


cdef XLA_FFI_Error* searchsorted_handler(XLA_FFI_CallFrame* cf) noexcept nogil:
    return handle(cf, KEY_DTYPES, KEY_DTYPE_COUNT,
                  b"jaxsearch: a and v need one supported key dtype; the output int32 or int64",
                  check_operands, search_call)


# Interp mode (interp_values.pxd): jnp.interp(v, a, fp) where `right` is 1,
# as one search whose answers become values. Three buffers a (n,), v (m,)
# and fp (n,) of one float dtype, n >= 1; one result (m,) of that dtype;
# the search's attributes, `clamp_left` and `clamp_right` (0 or 1), and
# `formula` (interp_values.pxd: FORMULA_EPSILON_STEPS or FORMULA_ZERO_STEPS).
cdef NamedDtype INTERP_DTYPES[2]
INTERP_DTYPES[:] = [NamedDtype(XLA_FFI_DataType_F32, b"float32"),
                    NamedDtype(XLA_FFI_DataType_F64, b"float64")]


cdef const char* check_interp_operands(const XLA_FFI_CallFrame* cf, const NamedDtype* dtypes,
                                       int count, const char* dtype_error) noexcept nogil:
    """Buffers a (n,), v (m,), fp (n,) of one dtype of `dtypes` (else
    `dtype_error`), n >= 1, and a result (m,) of that dtype."""
    cdef const XLA_FFI_Buffer* buf[4]
    cdef int k
    if cf.args.size != 3 or cf.rets.size != 1:
        return b"jaxsearch: interp takes a, v and fp and gives one result"
    for k in range(3):
        if cf.args.types[k] != XLA_FFI_ArgType_BUFFER:
            return b"jaxsearch: operands and result must be buffers"
        buf[k] = <const XLA_FFI_Buffer*>cf.args.args[k]
    if cf.rets.types[0] != XLA_FFI_RetType_BUFFER:
        return b"jaxsearch: operands and result must be buffers"
    buf[3] = <const XLA_FFI_Buffer*>cf.rets.rets[0]
    if not dtype_in(buf[0].dtype, dtypes, count):
        return dtype_error
    for k in range(1, 4):
        if buf[k].dtype != buf[0].dtype:
            return dtype_error
    for k in range(4):
        if buf[k].rank != 1:
            return b"jaxsearch: interp takes a (n,), v (m,), fp (n,) and gives (m,)"
    if buf[0].dims[0] < 1 or buf[2].dims[0] != buf[0].dims[0] or buf[3].dims[0] != buf[1].dims[0]:
        return b"jaxsearch: interp takes a (n,), v (m,), fp (n,) and gives (m,)"
    return NULL


cdef XLA_FFI_Error* interp_search_handler(XLA_FFI_CallFrame* cf) noexcept nogil:
    return handle(cf, INTERP_DTYPES, 2,
                  b"jaxsearch: interp's a, v, fp and output need one dtype, float32 or float64",
                  check_interp_operands, interp_search_call)
