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

import jax.numpy as jnp
from jax.experimental import pallas as pl

from .._wrapper import checked_wrapper
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


@checked_wrapper(kernels="the Pallas Triton kernels",
                 interpreter="the Pallas interpreter (any backend)")
def checked_searchsorted(a, v, merging, *, side, out_dtype, merge_config, bisect_config,
                         interpret):
    n, m = a.shape[0], v.shape[0]
    merge_programs = merge_path.programs(n, m, merge_config)
    bisect_programs = binary_search.programs(n, m, bisect_config)
    kernel = functools.partial(
        _checked_kernel,
        merge=merge_path.program(merge_config, side),
        merge_programs=merge_programs,
        bisect=binary_search.program(bisect_config, side),
        bisect_programs=bisect_programs,
    )
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
