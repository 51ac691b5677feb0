"""The checked call's search, decided on the device (Pallas, Mosaic GPU backend).

As in `pallas_triton/checked.py`: one kernel takes the sortedness test's
result as an input, and each program reads it and runs either the merge
path's program or the binary search's, so the compiled program holds no
conditional for the host to wait on. The grid is the larger of the two
kernels' grids; a program past its own kernel's grid does nothing.

The two kinds may also want different warpgroups per program and blocks of
lanes of different sizes. The kernel runs the larger number of warpgroups,
and those past a kind's own count idle in that kind's programs. Each kind
reads `v` padded for its own blocks, as its own kernel pads it, so that its
answers are that kernel's exactly, even under a broken promise (where the
merge path's answers depend on the padding); where neither pads, the two
are one array.
"""

import functools

import jax
from jax.experimental import pallas as pl

from .._wrapper import checked_wrapper
from . import _common as mc
from . import binary_search, merge_path


def _checked_program(program, warpgroup, flag_ref, *refs, merge, merge_partitioned, merge_staged,
                     merge_programs, merge_warpgroups, bisect, bisect_programs,
                     bisect_warpgroups):
    # refs: the merge path's operands (its splits where `merge_partitioned`,
    # then a and its v), binary search's v, the output, then the merge
    # path's shared memory where `merge_staged`.
    splits_ref, a_ref, merge_v_ref, bisect_v_ref, o_ref, smem_ref = mc.with_absent(
        refs, first=merge_partitioned, last=merge_staged)
    merging = flag_ref[0] != 0

    @pl.when(merging & (program < merge_programs) & (warpgroup < merge_warpgroups))
    def _():
        merge(program, warpgroup, splits_ref, a_ref, merge_v_ref, o_ref, smem_ref)

    @pl.when((~merging) & (program < bisect_programs) & (warpgroup < bisect_warpgroups))
    def _():
        bisect(program, warpgroup, a_ref, bisect_v_ref, o_ref)


@checked_wrapper(kernels="the Pallas Mosaic GPU kernels",
                 interpreter="Mosaic GPU's interpreter (any backend)")
def mosaic_checked_searchsorted(a, v, merging, *, side, out_dtype, merge_config, bisect_config,
                                interpret):
    n, m = a.shape[0], v.shape[0]
    merge_lanes = merge_path.needle_lanes(merge_config, a.dtype, interpret)
    bisect_lanes = binary_search.needle_lanes(bisect_config, a.dtype, interpret)
    keys, merge_v = mc.kernel_operands(a, v, merge_lanes)
    _, bisect_v = mc.kernel_operands(a, v, bisect_lanes)
    merge_programs = merge_path.programs(n, merge_v.shape[0], merge_config)
    bisect_programs = binary_search.programs(n, bisect_v.shape[0], bisect_config)
    merge_warpgroups = merge_path.warpgroups(merge_config)
    bisect_warpgroups = binary_search.warpgroups(bisect_config)
    shared = merge_path.scratch(merge_config, merge_lanes, keys)
    kernel = functools.partial(
        _checked_program,
        merge=merge_path.program(merge_config, side, merge_lanes),
        merge_partitioned=merge_path.partitioned(merge_config),
        merge_staged=bool(shared),
        merge_programs=merge_programs,
        merge_warpgroups=merge_warpgroups,
        bisect=binary_search.program(bisect_config, side, bisect_lanes),
        bisect_programs=bisect_programs,
        bisect_warpgroups=bisect_warpgroups,
    )
    out = mc.call(
        mc.by_ids(kernel),
        merging,
        *merge_path.operands(keys, merge_v, merge_config, side, merge_lanes, interpret, merging),
        bisect_v,
        out_type=jax.ShapeDtypeStruct((max(merge_v.shape[0], bisect_v.shape[0]),), out_dtype),
        grid=max(merge_programs, bisect_programs),
        threads=max(merge_warpgroups, bisect_warpgroups),
        interpret=interpret,
        name="mosaic_checked_searchsorted",
        scratch=shared,
    )
    return out[:m]
