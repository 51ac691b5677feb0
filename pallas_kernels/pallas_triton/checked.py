"""The checked call's search, decided on the device (Pallas, Triton backend).

`searchsorted(a, v)` with `sorted_v=None` merges where `a` and `v` are both
sorted and binary-searches elsewhere. A `lax.cond` on that test would make
XLA read the predicate back on the host before it launches a branch. Here
one kernel takes the test's result as an input instead: each program reads
it and runs either the merge path's program or the binary search's, so the
compiled program holds no conditional and never waits on the host. The grid
is the larger of the two kernels' grids; a program past its own kernel's
grid does nothing. Answers are those of the kernel the flag picks.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from .._wrapper import resolve_config, validate
from ..configs import BINARY_SEARCH, MERGE_PATH
from . import _common, binary_search, merge_path


def _checked_kernel(flag_ref, *refs, merge, merge_programs, bisect, bisect_programs):
    # refs: the merge path's operands (its splits, where it partitions
    # first, then a and v), then the output.
    merging = jnp.max(flag_ref[...]) != 0
    # Read here, not in the branches: Pallas' interpreter replaces the
    # program id at the kernel's top level only.
    program = pl.program_id(0)

    @pl.when(merging & (program < merge_programs))
    def _():
        merge(program, *refs)

    @pl.when((~merging) & (program < bisect_programs))
    def _():
        bisect(program, *refs[-3:])


@functools.partial(jax.jit, static_argnames=("side", "out_dtype", "merge_config",
                                             "bisect_config", "interpret"))
def checked_searchsorted(a, v, merging, *, side, out_dtype, merge_config=None,
                         bisect_config=None, interpret=False):
    """`jnp.searchsorted(a, v, side)` by the merge path where `merging` holds
    and by binary search where it does not, in one kernel that reads
    `merging` on the device.

    Args:
      a: 1-D array, the haystack; sorted wherever `merging` holds.
      v: 1-D array of the same dtype, the needles; sorted wherever `merging`
        holds.
      merging: int32 array of shape (1,): nonzero for the merge path (both
        `a` and `v` sorted), 0 for binary search (jnp's probes: jnp's
        answers on any `a`).
      side: 'left' or 'right'.
      out_dtype: int32 or int64 (int64 needs jax_enable_x64).
      merge_config: a MergePathConfig; None picks `default_merge_path_config`.
      bisect_config: a BinarySearchConfig; None picks
        `default_binary_search_config`.
      interpret: run the kernel in the Pallas interpreter (any backend).

    Returns:
      Array of shape (len(v),) and dtype `out_dtype`, as the kernel `merging`
      picks answers.
    """
    out_dtype = validate(a, v, side, out_dtype)
    n, m = a.shape[0], v.shape[0]
    if n == 0 or m == 0:
        return jnp.zeros((m,), out_dtype)
    merge_config = resolve_config(MERGE_PATH, merge_config, n, m, a.dtype, name="merge_config")
    bisect_config = resolve_config(BINARY_SEARCH, bisect_config, n, m, a.dtype,
                                   name="bisect_config")
    merge_programs = merge_path.programs(n, m, merge_config)
    bisect_programs = binary_search.programs(n, m, bisect_config)
    kernel = functools.partial(
        _checked_kernel,
        merge=merge_path.program(merge_config, side),
        merge_programs=merge_programs,
        bisect=binary_search.program(bisect_config, side),
        bisect_programs=bisect_programs,
    )
    merging = jnp.asarray(merging, jnp.int32).reshape(1)
    return _common.launch(
        kernel,
        merging,
        *merge_path.operands(a, v, merge_config, side, interpret, merging),
        out_dtype=out_dtype,
        grid=max(merge_programs, bisect_programs),
        # The larger of the two: each program's body was laid out for its own.
        num_warps=max(merge_config.num_warps, bisect_config.num_warps),
        num_stages=max(merge_config.num_stages, bisect_config.num_stages),
        interpret=interpret,
        name="checked_searchsorted",
    )
