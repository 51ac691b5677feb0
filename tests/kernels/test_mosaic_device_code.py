"""The Mosaic GPU kernels' device-only code, run on the CPU.

On a CPU, `interpret=True` replaces the inline Mosaic GPU of
`mosaic_gpu/_common.py` (the per-lane gather, the masked store and its
`start + iota` indices) with jnp, so `test_pallas_interpret.py` never runs
it, and `test_mosaic_compile.py` only compiles it. Here each kernel is
lowered for CUDA as a GPU would get it (no GPU needed on jax 0.10), and the
IR in its `mosaic_gpu` custom call runs in `helpers/mosaic_ir.py`'s
interpreter, thread by thread, with its own signedness and bounds checks:
a slip in the per-element indices, the store's mask or the loaded values'
signedness gives wrong answers or an out-of-bounds access here.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsearch.pallas_kernels as pk
from jaxsearch.pallas_kernels import BACKENDS

if BACKENDS["mosaic"].import_error:
    pytest.skip(BACKENDS["mosaic"].import_error, allow_module_level=True)
# The interpreter reads the MLIR that jax 0.10's Mosaic GPU emits; jax 0.12's
# spells some attributes otherwise (the gpu dimension attribute first).
if tuple(int(x) for x in jax.__version__.split(".")[:2]) >= (0, 11):
    pytest.skip(f"tests/helpers/mosaic_ir.py reads jax 0.10's Mosaic GPU IR, not jax "
                f"{jax.__version__}'s", allow_module_level=True)

from helpers.mosaic_ir import lowered_kernels  # noqa: E402  (jax's Mosaic GPU is there)
from helpers.tiers import full, tiered  # noqa: E402
from jax.experimental.pallas import mosaic_gpu as plgpu  # noqa: E402

from jaxsearch.pallas_kernels.mosaic_gpu import _common as mc  # noqa: E402

UNWRITTEN = -7777  # What the output holds where no lane stored.
LANES = 256  # Two registers per thread: a misaligned zip of them shows.
HAYSTACK = 50


def _gather_store_kernel(a_ref, index_ref, ok_ref, o_ref, *, dtype, start):
    """o[start + k] = key of a[clip(index[k])] for the lanes k where ok[k]."""
    lanes = mc.Lanes(LANES, dtype, interpret=False)
    keys = lanes.gather(a_ref)(lanes.load(index_ref, 0), None)
    lanes.store_where(o_ref, jnp.int32(start), keys, lanes.load(ok_ref, 0) != 0)


@functools.cache
def gather_store(dtype, start):
    """The lowered kernel of `_gather_store_kernel` (a is `HAYSTACK` of
    `dtype`, the output int32, `LANES + start + 3` long)."""
    kernel = functools.partial(_gather_store_kernel, dtype=np.dtype(dtype), start=start)

    def call(a, index, ok):
        return plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((LANES + start + 3,), jnp.int32),
                            grid=(1,), grid_names=("program",), num_threads=1,
                            thread_name="warpgroup")(a, index, ok)

    shapes = [jax.ShapeDtypeStruct((HAYSTACK,), dtype)] + 2 * [
        jax.ShapeDtypeStruct((LANES,), jnp.int32)]
    [lowered] = lowered_kernels(call, *shapes)
    return lowered


@pytest.mark.parametrize("start", [0, 5])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32"])
def test_inline_gather_and_masked_store(dtype, start):
    """Per lane: the gather reads a[index] (clamped) with the dtype's
    signedness (8-bit keys widen by sign or zero extension, and the int32
    output shows which), and the masked store writes lane k at start + k
    only where its own mask bit is set, leaving the rest alone."""
    kernel = gather_store(dtype, start)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(start)
    a = rng.integers(info.min, info.max, HAYSTACK, dtype=dtype, endpoint=True)
    a[:2] = info.min, info.max  # Where signed and unsigned readings differ.
    index = rng.integers(-5, HAYSTACK + 5, LANES).astype(np.int32)
    index[:4] = 0, 1, -1, HAYSTACK  # Both clamps.
    ok = rng.integers(0, 2, LANES).astype(np.int32)
    ok[:2] = 1, 0
    out = np.full(LANES + start + 3, UNWRITTEN, np.int32)
    kernel.run(a, index, ok, out)
    want = np.full_like(out, UNWRITTEN)
    keys = a[np.clip(index, 0, HAYSTACK - 1)].astype(np.int64).astype(np.int32)
    want[start:start + LANES] = np.where(ok != 0, keys, UNWRITTEN)
    np.testing.assert_array_equal(out, want)
    # One load per element of the gather, one store under an scf.if per element.
    assert kernel.block == (128, 1, 1)
    assert kernel.op_counts["memref.store"] == kernel.op_counts["scf.if"] == LANES // 128


# A merge-path config of two warpgroups, so that the warpgroup index counts.
CONFIGS = {pk.MERGE_PATH.name: pk.MergePathConfig(tile=256, num_warps=8),
           pk.BINARY_SEARCH.name: pk.BinarySearchConfig(block=256, num_warps=8)}


def _inputs(rng, dtype, n, m, *, sort_v):
    if np.dtype(dtype).kind == "f":
        specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)
        a = np.concatenate([rng.normal(size=n - 5).astype(dtype), specials])
        v = np.concatenate([rng.normal(size=m - 4).astype(dtype), specials[:4]])
    else:
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        v = np.concatenate([rng.integers(info.min, info.max, m - 2, dtype=dtype, endpoint=True),
                            np.array([info.min, info.max], dtype)])
    return np.sort(a), np.sort(v) if sort_v else rng.permutation(v)


# The quick tier runs the first merge case (tests/conftest.py).
@pytest.mark.parametrize("kind, dtype, side, partition", tiered([
    ("merge_path", "float32", "left", "once"),
    ("merge_path", "uint8", "right", "once"),
    ("merge_path", "int16", "right", "per_program"),
    ("binary_search", "int32", "right", None),
    ("binary_search", "uint16", "left", None),
    ("binary_search", "uint32", "right", None),
], lambda case: case[1] == "float32"))
def test_kernel_ir_gives_numpys_answers(kind, dtype, side, partition):
    """The whole kernel as the GPU runs it, inline gather and masked store
    included, on the CPU: the answers are numpy's. The merge path with
    partition='once' is two kernels: the partition pass, whose splits the
    merge kernel then reads."""
    n, m = 300, 200
    search = BACKENDS["mosaic"].kernel(pk.kernel_kind(kind))
    config = CONFIGS[kind]
    if partition:
        config = dataclasses.replace(config, partition=partition)
    fn = functools.partial(search, side=side, out_dtype=jnp.int32, config=config)
    *passes, kernel = lowered_kernels(
        fn, *(jax.ShapeDtypeStruct((size,), dtype) for size in (n, m)))
    assert len(passes) == (partition == "once")
    a, v = _inputs(np.random.default_rng(0), dtype, n, m, sort_v=kind == "merge_path")
    # The operands as `mc.kernel_operands` hands them to the kernels: v
    # padded to its length.
    padded = kernel.arguments[-2][0][0]
    a_in, v_in = (np.asarray(mc.as_kernel_operand(jnp.asarray(x))) for x in (a, v))
    v_in = np.concatenate([v_in, np.repeat(v_in[-1:], padded - m)])
    splits = [np.full(k.arguments[-1][0], UNWRITTEN, np.int32) for k in passes]
    for k, s in zip(passes, splits):
        k.run(a_in, v_in, s)
    out = np.full(padded, UNWRITTEN, np.int32)
    kernel.run(*splits, a_in, v_in, out)
    np.testing.assert_array_equal(out[:m], np.searchsorted(a, v, side=side))


@full  # seconds a case in the IR interpreter (tests/conftest.py)
@pytest.mark.parametrize("merging, dtype, side", [
    (1, "float32", "left"),
    (1, "int16", "right"),
    (0, "uint16", "right"),
    (0, "int32", "left"),
])
def test_checked_kernel_ir_runs_the_kind_its_flag_picks(merging, dtype, side):
    """The checked kernel as the GPU runs it, its two kinds in different
    warpgroups and blocks of lanes (the merge's 2 warpgroups of 256 needles,
    binary search's 1 of 512): each flag gives numpy's answers, sorted
    needles for the merge and unsorted ones for binary search, and the
    partition pass before it writes nothing where the flag is 0."""
    n, m = 300, 200
    fn = functools.partial(BACKENDS["mosaic"].checked, side=side, out_dtype=jnp.int32,
                           merge_config=pk.MergePathConfig(tile=256, num_warps=8),
                           bisect_config=pk.BinarySearchConfig(block=512))
    partition, kernel = lowered_kernels(
        fn, *(jax.ShapeDtypeStruct((size,), dtype) for size in (n, m)),
        jax.ShapeDtypeStruct((), jnp.int32))
    assert kernel.block == (256, 1, 1)
    a, v = _inputs(np.random.default_rng(1), dtype, n, m, sort_v=bool(merging))
    # The operands as the checked call hands them over: the flag, a, and v
    # padded for each kind's blocks of lanes.
    flag = np.array([merging], np.int32)
    a_in, v_in = (np.asarray(mc.as_kernel_operand(jnp.asarray(x))) for x in (a, v))
    merge_v, bisect_v = (
        np.concatenate([v_in, np.repeat(v_in[-1:], kernel.arguments[k][0][0] - m)])
        for k in (-3, -2))
    splits = np.full(partition.arguments[-1][0], UNWRITTEN, np.int32)
    partition.run(flag, a_in, merge_v, splits)
    assert merging or (splits == UNWRITTEN).all()
    out = np.full(kernel.arguments[-1][0], UNWRITTEN, np.int32)
    kernel.run(flag, splits, a_in, merge_v, bisect_v, out)
    np.testing.assert_array_equal(out[:m], np.searchsorted(a, v, side=side))


@pytest.mark.parametrize("n, staged", [(300, True), (200, False)])
def test_merge_program_probes_its_slice_of_a_in_shared_memory(n, staged):
    """Where `a` holds a block of lanes or more, each merge program copies
    its slice of `a` to shared memory first, and its binary search probes
    only there: its per-element loads from global memory are the two splits
    the partition pass wrote. Where `a` is shorter, it probes `a` in global
    memory. (test_kernel_ir_gives_numpys_answers runs the staged kernel.)"""
    config = CONFIGS[pk.MERGE_PATH.name]  # two warpgroups of 256 needles
    fn = functools.partial(BACKENDS["mosaic"].kernel(pk.MERGE_PATH), side="left",
                           out_dtype=jnp.int32, config=config)
    _, kernel = lowered_kernels(fn, *(jax.ShapeDtypeStruct((size,), jnp.int32)
                                      for size in (n, 100)))
    shared = kernel.op_counts.get("memref.load (shared)", 0)
    split_loads = 2
    assert (shared > 0) == staged
    assert (kernel.op_counts["memref.load"] - shared == split_loads) == staged
