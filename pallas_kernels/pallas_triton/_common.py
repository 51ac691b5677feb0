"""Pieces both Pallas Triton kernels share: masked loads, needle blocks, the
launch. The searches themselves are in `_bisect`, shared with Mosaic GPU."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from .._order import sort_key


def zero_of(ref):
    """The `other` of a masked load: a zero of the ref's dtype, never promoted."""
    return np.zeros((), ref.dtype)


def gather(ref, index, active):
    """Loads `ref[index]` where `active`, with `index` clamped into the ref."""
    index = jnp.clip(index, 0, ref.shape[0] - 1)
    return pltriton.load(ref.at[index], mask=active, other=zero_of(ref))


def resolve_needles(v_ref, o_ref, start, count, *, block, resolve):
    """Writes `resolve` of the needles `v[start:start + min(count, block)]`.

    `resolve(v_key, valid)` maps the keys of a block of needles (`valid` marks
    the real ones) to their answers. Loads and stores are coalesced and masked;
    `start` must lie in [0, len(v)) when `count` > 0.
    """
    valid = jnp.arange(block, dtype=count.dtype) < count
    needles = pltriton.load(v_ref.at[pl.ds(start, block)], mask=valid, other=zero_of(v_ref))
    answer = resolve(sort_key(needles), valid)
    pltriton.store(o_ref.at[pl.ds(start, block)], answer.astype(o_ref.dtype), mask=valid)


def by_program_id(body):
    """`body(program, *refs)` as a kernel of `*refs`: `program` is its
    index along grid axis 0."""
    return lambda *refs: body(pl.program_id(0), *refs)


def launch_program(body, operands, config, grid, *, out_dtype, interpret, name):
    """`launch` of one kind's search: `body(program, *operand_refs, o_ref)`
    over `grid` programs, with `config`'s warps and pipeline stages."""
    return launch(by_program_id(body), *operands, out_dtype=out_dtype, grid=grid,
                  num_warps=config.num_warps, num_stages=config.num_stages,
                  interpret=interpret, name=name)


def launch(kernel, *operands, out_dtype, grid, num_warps, num_stages, interpret, name):
    """Runs `kernel(*operand_refs, o_ref)` on the Triton backend; the last
    operand is the needles, whose shape the answers take.

    No BlockSpecs: every program sees the whole of each operand and the
    output, and under `vmap` the batching rule of `pallas_call` adds a grid
    axis and hands each program one batch row.
    """
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(operands[-1].shape, out_dtype),
        grid=(grid,),
        compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
        interpret=interpret,
        name=name,
    )(*operands)
