"""Pieces the Mosaic GPU kernels share: blocks of lanes, per-lane loads,
masked stores, the launch.

A Mosaic GPU program is one or more warpgroups of 128 CUDA threads; an array
of a block of needles is spread over a warpgroup's threads (the strided
layout, one element per thread per 128). Pallas' Mosaic GPU lowering loads
scalars at any index and slices at a dynamic start, but it takes no array of
indices (a per-lane gather fails with "int_indexer_shape non-empty" on jax
0.10 and 0.12) and has no masked store. Both come from `plgpu.inline_mgpu`,
a few lines of Mosaic GPU that walk the array's registers: one `memref.load`
per element for a gather, one `memref.store` under an `scf.if` per element
for a masked store. The interpreter (`interpret=True`) cannot run inline Mosaic GPU code, and its
ref reads take no index array either, so there a gather reads the whole ref
and indexes the array, and a masked store stores one element at a time
(the interpreter runs a program's warpgroups in threads of their own: a
read-modify-write of the block would race with the other warpgroup).

Every load gives sort keys (`_order`), computed from integers only: the
kernel reads floats as their bits (`as_kernel_operand`; a bitcast outside the
kernel costs nothing), since jax 0.12's Mosaic GPU lowers no scalar bitcast
("Scalars must be represented by non-vector types"). 8-bit integers widen to
16 bits, which keeps their order: Mosaic GPU refuses arithmetic on 8-bit
arrays ("Upcast to a 16- or 32-bit type"). Bool arrives as uint8.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, memref, scf, vector

from .._jax_private import mosaic_interpret_params
from .._order import bits_dtype, float_key

LANES = 128  # CUDA threads in a warpgroup.
WARPS_PER_WARPGROUP = 4
_PROGRAM_AXIS = "program"
_WARPGROUP_AXIS = "warpgroup"


def as_kernel_operand(x):
    """`x` as the kernel reads it: floats as their bits, bool as uint8
    (Mosaic GPU has no byte-wide bool in memory)."""
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint8)
    if jnp.issubdtype(x.dtype, jnp.floating):
        return lax.bitcast_convert_type(x, bits_dtype(x.dtype))
    return x


def _read_only_ref():
    """inline_mgpu's type for a ref its code only reads. From jax 0.12.1 a
    RefType says whether the code writes the ref, and is taken to unless
    told not to; a kernel may then not be handed that ref as an input."""
    if any(field.name == "write" for field in dataclasses.fields(plgpu.RefType)):
        return plgpu.RefType(write=False)
    return plgpu.RefType()


def _widen(x):
    """8-bit integers as 16-bit ones of the same signedness: the same order,
    and arithmetic Mosaic GPU can do."""
    if x.dtype.itemsize != 1:
        return x
    return x.astype(jnp.int16 if jnp.issubdtype(x.dtype, jnp.signedinteger) else jnp.uint16)


def _is_signed(dtype):
    """Mosaic GPU's signedness flag: None for floats."""
    if not jnp.issubdtype(dtype, jnp.integer):
        return None
    return bool(jnp.issubdtype(dtype, jnp.signedinteger))


def _elements(register):
    """The elements of one register of a fragmented array (a vector)."""
    [count] = ir.VectorType(register.type).shape
    return [
        vector.extract(register, dynamic_position=[], static_position=ir.DenseI64ArrayAttr.get([k]))
        for k in range(count)
    ]


def _as_index(value):
    return arith.index_cast(ir.IndexType.get(), value)


@dataclasses.dataclass(frozen=True)
class Lanes:
    """A block of `size` needles, spread over one warpgroup.

    Attributes:
      size: elements per block, a multiple of 128.
      dtype: the dtype searched (the kernel reads it as `as_kernel_operand`
        gives it); every load returns its sort keys.
      interpret: whether the kernel runs in the interpreter.
    """

    size: int
    dtype: jnp.dtype
    interpret: bool

    def __post_init__(self):
        if self.size % LANES:
            raise ValueError(f"a block of lanes must hold a multiple of {LANES}, got {self.size}")

    @property
    def layout(self):
        return plgpu.Layout.WG_STRIDED((self.size,), vec_size=1)

    def _fix_layout(self, x):
        # Every block array takes one layout, so that they combine; the
        # interpreter has no layouts.
        return x if self.interpret else plgpu.layout_cast(x, self.layout)

    def iota(self, dtype):
        """0, 1, ..., size - 1."""
        return self._fix_layout(lax.broadcasted_iota(dtype, (self.size,), 0))

    def full(self, value, dtype):
        """`value` (a scalar) in every lane."""
        return self._fix_layout(jnp.full((self.size,), value, dtype))

    def key(self, x):
        """The sort keys of elements read from a kernel operand."""
        if jnp.issubdtype(self.dtype, jnp.floating):
            return float_key(x, self.dtype)
        return _widen(x)

    def load(self, ref, start):
        """Keys of `ref[start:start + size]`; the slice must lie in the ref."""
        return self.key(self._fix_layout(ref[pl.ds(start, self.size)]))

    def scalar(self, ref):
        """`load(i, active)` for `_bisect` with a scalar `i`: the key of one
        element, at `i` clamped into the ref (every thread reads the same)."""
        return lambda i, active: self.key(ref[jnp.clip(i, 0, ref.shape[0] - 1)])

    def gather(self, ref):
        """`load(index, active)` for `_bisect`: per lane, the key of
        `ref[index]` with `index` clamped into the ref."""

        def load(index, active):
            del active  # Clamped, every load is in bounds.
            return self.key(self._gather(ref, jnp.clip(index, 0, ref.shape[0] - 1)))

        return load

    def _gather(self, ref, index):
        index = self._fix_layout(index)
        if self.interpret:
            return ref[...][index]
        return self._inline_gather(ref, index)

    def key_dtype(self, operand_dtype):
        """The dtype of the keys of a kernel operand of `operand_dtype`."""
        return jax.eval_shape(self.key, jax.ShapeDtypeStruct((self.size,), operand_dtype)).dtype

    def stage(self, ref, start, smem, offset, count):
        """Copies the keys of `ref[start:start + count]` (a slice in the ref;
        `count` static, at least `size`) to `smem[offset:offset + count]`,
        coalesced, and returns `load(index, active)` for `_bisect` that
        reads the key of `ref[index]` from there, `index` clamped into the
        slice: one shared-memory load per probe, no key to compute."""
        for block in range(-(-count // self.size)):
            # The last block moves back to end with the slice, as blocks of
            # needles do at the end of `v`.
            at = min(block * self.size, count - self.size)
            smem[pl.ds(offset + at, self.size)] = self.load(ref, start + at)
        # The warpgroup's threads read each other's keys.
        plgpu.commit_smem()

        def load(index, active):
            del active  # Clamped, every load is in the slice.
            return self._gather(smem, offset + jnp.clip(index - start, 0, count - 1))

        return load

    def _inline_gather(self, ref, index):
        is_signed = _is_signed(ref.dtype)

        @plgpu.inline_mgpu(
            arg_types=(_read_only_ref(), self.layout),
            return_type=plgpu.ShapeDtypeStruct((self.size,), ref.dtype, layout=self.layout),
        )
        def gather(ctx, memory, index):
            del ctx
            return index.foreach(
                lambda i, _: memref.load(memory, [_as_index(i)]),
                create_array=True,
                is_signed=is_signed,
            )

        return gather(ref, index)

    def store(self, ref, start, values):
        """`ref[start:start + size] = values`; the slice must lie in the ref."""
        ref[pl.ds(start, self.size)] = self._fix_layout(values.astype(ref.dtype))

    def store_where(self, ref, start, values, valid):
        """`ref[start + k] = values[k]` for the lanes k where `valid`; the
        others keep what another program writes there."""
        values = self._fix_layout(values.astype(ref.dtype))
        if self.interpret:

            def store_one(k, carry):
                @pl.when(valid[k])
                def _():
                    ref[start + k] = values[k]

                return carry

            lax.fori_loop(np.int32(0), np.int32(self.size), store_one, ())
            return
        index = self._fix_layout(start + self.iota(start.dtype))

        @plgpu.inline_mgpu(arg_types=(plgpu.RefType(), self.layout, self.layout, self.layout))
        def masked_store(ctx, memory, index, values, valid):
            del ctx
            for registers in zip(index.registers.flat, values.registers.flat, valid.registers.flat):
                for i, value, ok in zip(*map(_elements, registers)):
                    branch = scf.IfOp(ok)
                    with ir.InsertionPoint(branch.then_block):
                        memref.store(value, memory, [_as_index(i)])
                        scf.yield_([])

        masked_store(ref, index, values, self._fix_layout(valid))


def program_id(dtype):
    """This program's index along the grid, as `dtype`."""
    return lax.axis_index(_PROGRAM_AXIS).astype(dtype)


def warpgroup_id(dtype):
    """This warpgroup's index within its program, as `dtype`."""
    return lax.axis_index(_WARPGROUP_AXIS).astype(dtype)


def by_ids(body):
    """`body(program, warpgroup, *refs)` as a kernel of `*refs`: `program`
    and `warpgroup` are its indices along the grid and within the program
    (int32)."""
    return lambda *refs: body(program_id(jnp.int32), warpgroup_id(jnp.int32), *refs)


def with_absent(refs, *, first, last):
    """A kernel's `refs` with None in place of an optional first (last) ref
    it was not given (`first`, `last`: whether it was), to unpack by name:
    a ref too many or too few then fails."""
    return (*(() if first else (None,)), *refs, *(() if last else (None,)))


def warpgroups(num_warps, needles):
    """Warpgroups per program for a config's `num_warps`, at most one per 128
    of its `needles`."""
    return max(1, min(num_warps // WARPS_PER_WARPGROUP, needles // LANES))


def padded_length(m, lanes):
    """len(v) as the kernel sees it: at least one block of lanes."""
    return max(m, lanes.size)


def window(start, size, extent):
    """The start of the block of `size` that holds `start` and lies in
    [0, extent) (extent >= size): blocks at the end move back."""
    return jnp.minimum(start, extent - size)


def kernel_operands(a, v, lanes):
    """(a, v) as every kernel reads them (`as_kernel_operand`), a `v` shorter
    than a block of lanes with its last element repeated up to
    `padded_length` (still sorted if `v` is), so that every block lies
    inside it."""
    m = v.shape[0]
    tail = padded_length(m, lanes) - m
    if tail:
        v = jnp.concatenate([v, jnp.broadcast_to(v[-1:], (tail,))])
    return as_kernel_operand(a), as_kernel_operand(v)


def shared(size, dtype):
    """A program's shared memory of `size` elements of `dtype`, for `call`'s
    `scratch`."""
    return plgpu.SMEM((size,), dtype)


def call(kernel, *operands, out_type, grid, threads, interpret, name, scratch=()):
    """Runs `kernel(*refs, o_ref, *scratch_refs)` with Mosaic GPU over a grid
    of `grid` programs of `threads` warpgroups each; every program sees the
    whole of each operand and of the output (in global memory), and has its
    own `scratch` (`shared`). Under `vmap`, `plgpu.kernel`'s batching rule
    adds a grid axis and hands each program one batch row."""
    return plgpu.kernel(
        kernel,
        out_type=out_type,
        scratch_types=tuple(scratch),
        grid=(grid,),
        grid_names=(_PROGRAM_AXIS,),
        num_threads=threads,
        thread_name=_WARPGROUP_AXIS,
        interpret=mosaic_interpret_params() if interpret else False,
        kernel_name=name,
    )(*operands)


def launch(kernel, *operands, needles, out_dtype, grid, threads, interpret, name, scratch=()):
    """Runs a search, `kernel(*refs, o_ref, *scratch_refs)`, on `operands`,
    the last of them `v` as `kernel_operands` gives it; returns the answers
    for its first `needles` needles (those of the caller's `v`)."""
    padded = operands[-1].shape[0]
    out = call(kernel, *operands, out_type=jax.ShapeDtypeStruct((padded,), out_dtype), grid=grid,
               threads=threads, interpret=interpret, name=name, scratch=scratch)
    return out[:needles]
