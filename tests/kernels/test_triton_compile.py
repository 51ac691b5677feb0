"""Every native Triton kernel config compiles for sm_90 (H100/H200), no GPU.

`triton.compile` with an explicit `GPUTarget("cuda", 90, 32)` runs the
pipeline that jax-triton runs when it lowers a `triton_call` (Triton IR, GPU
IR, LLVM IR, PTX) and then ptxas, on any machine. Each case compiles the
kernel exactly as the wrappers would launch it: the constexprs come from the
wrappers' own launch description, the scalar arguments get the types
jax-triton gives them (i32, u32 or i64 by value, and a constexpr for a value
of 1), and pointers the 16-byte alignment jax-triton assumes; a merge-path
config that partitions first compiles the partition kernel too. A config
that does not compile, or spills registers (ptxas's spill warning made an
error), is a failing test. The tuning space also compiles for ROCm (gfx942,
MI300), the other platform the kernels serve, where a kernel with scratch
(private segment) memory, spilled registers, fails. Without triton the
file skips. Run as a script (`PYTHONPATH=tests python
tests/kernels/test_triton_compile.py`), it prints each kernel's registers:
sm_90's from ptxas, gfx942's VGPRs, AGPRs, SGPRs and scratch bytes.

Marked `gpu`: every tuning config gives exact answers through jax-triton on
a real GPU.
"""

import contextlib
import dataclasses
import io
import os
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import gfx942
from helpers.kernel_cases import SAMPLE_CONFIGS
from helpers.tiers import full

import jaxsearch.pallas_kernels as pk
from jaxsearch.pallas_kernels.triton import searchsorted as triton_searchsorted
from jaxsearch.pallas_kernels.triton import (
    triton_available,
    triton_binary_search_searchsorted,
    triton_merge_path_searchsorted,
)

triton = pytest.importorskip(
    "triton",
    reason="triton is not installed (pip install triton): "
    "nothing to compile the native kernels with",
)
if os.environ.get("TRITON_INTERPRET") == "1":
    pytest.skip(
        "TRITON_INTERPRET=1: Triton would build interpreted kernels", allow_module_level=True
    )

from triton.backends.compiler import GPUTarget  # noqa: E402  (once triton is there)

from jaxsearch.keys import INT32_MAX  # noqa: E402

_Launch = triton_searchsorted._Launch
SM90 = GPUTarget("cuda", 90, 32)
GFX942 = GPUTarget("hip", "gfx942", 64)
# Shared memory per block: Hopper's largest (with the opt-in); MI300's LDS.
MAX_SHARED_BYTES = {"cuda": 227 * 1024, "hip": gfx942.LDS_BYTES}

TRITON_TYPES = {
    "bool": "u8",  # The wrappers pass bool as uint8.
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
    "float64": "fp64",
}
DTYPES = list(TRITON_TYPES)


# A compile tier: the full tier (tests/conftest.py).
pytestmark = [pytest.mark.usefixtures("fresh_triton_cache"), full]


def scalar_type(value):
    """The Triton type jax-triton gives a Python int argument."""
    if value < 2**31:
        return "i32"
    return "u32" if value < 2**32 else "i64"


def compile_launch(
    config, n, m, *, dtype="float32", side="left", out_dtype="int32", rows=1, target=SM90,
    partition=False, bisect_config=None,
):
    """Compiles the kernel that writes the answers as the wrapper launches
    it for these sizes, or with `partition` the merge path's partition
    kernel launched before it (where `config.partition` is 'once'). With
    `bisect_config`, the checked call's kernels, `config` its merge path's."""
    spec = _Launch(pk.kernel_kind(config.kind), config, side, np.dtype(out_dtype),
                   interpret=False)
    if bisect_config is not None:
        spec = triton_searchsorted._CheckedLaunch(
            spec, _Launch(pk.BINARY_SEARCH, bisect_config, side, np.dtype(out_dtype), False))
    # The partition's splits, in the merge path's index type.
    splits = "*i64" if n + m + getattr(config, "tile", 0) > INT32_MAX else "*i32"
    pointer = "*" + TRITON_TYPES[dtype]
    types = {"a_ptr": pointer, "v_ptr": pointer, "o_ptr": "*" + TRITON_TYPES[out_dtype],
             "s_ptr": splits, "f_ptr": "*i32"}
    if partition:
        assert spec.partitioned
        name, (_, _, _, constexprs) = spec.partition_kernel_name, spec.partition(n, m)
        num_warps, num_stages = triton_searchsorted._PARTITION_WARPS, 1
    else:
        name, (_, constexprs) = spec.kernel_name, spec.grid_and_constexprs(n, m)
        num_warps, num_stages = spec.launch_options.values()
    kernel = spec.kernel(name)
    # The checked kernels' flags: one per row (the vmap of a batched flag).
    scalars = {"n": n, "m": m, "a_stride": n if rows > 1 else 0, "v_stride": m if rows > 1 else 0,
               "f_stride": int(rows > 1)}
    for scalar, value in scalars.items():
        if scalar not in kernel.arg_names:
            continue
        if value == 1:  # jax-triton makes a scalar equal to 1 a constexpr.
            constexprs[scalar] = 1
        else:
            types[scalar] = scalar_type(value)
    signature = {
        arg: "constexpr" if arg in constexprs else types[arg] for arg in kernel.arg_names
    }
    assert set(constexprs) <= set(signature)
    aligned = [["tt.divisibility", 16]]
    attrs = {
        (i,): aligned
        for i, arg in enumerate(kernel.arg_names)
        if signature[arg].startswith("*")
    }
    source = triton.compiler.ASTSource(
        fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs
    )
    options = {"num_warps": num_warps, "num_stages": num_stages, "num_ctas": 1,
               "enable_fp_fusion": True}  # As jax-triton compiles.
    if target.backend == "cuda":
        options["ptx_options"] = PTXAS_SPILLS_FATAL
    compiled = triton.compile(source, target=target, options=options)
    if target.backend == "cuda":
        ptx = compiled.asm["ptx"]
        assert f".visible .entry {name}" in ptx
        assert f".target sm_{target.arch}" in ptx
        assert compiled.asm["cubin"]
    else:
        assert name in compiled.asm["amdgcn"]
        assert compiled.asm["hsaco"]
        assert not gfx942.resources(compiled).spills, f"{name} spills to scratch"
    assert compiled.metadata.num_warps == num_warps
    assert compiled.metadata.shared <= MAX_SHARED_BYTES[target.backend]
    return compiled


# ptxas fails on a kernel that spills registers to local memory, instead of
# running it slowly.
PTXAS_SPILLS_FATAL = "--warn-on-spills --warning-as-error"

# Native Triton serves every config of the tuning space by a kernel of its
# own: the partition pass or not, and each method ('serial' included).
NATIVE_SPACE = pk.tuning_space()
# The configs that run the partition kernel first.
PARTITIONED_SPACE = [c for c in NATIVE_SPACE if getattr(c, "partition", None) == "once"]


@pytest.mark.parametrize("index, config", list(enumerate(NATIVE_SPACE)), ids=str)
def test_tuning_space_compiles(index, config):
    """Every config the autotuner may pick, at N = M = 1e8 float32."""
    compile_launch(config, 10**8, 10**8, side=("left", "right")[index % 2])


@pytest.mark.parametrize("index, config", list(enumerate(NATIVE_SPACE)), ids=str)
def test_tuning_space_compiles_for_rocm(index, config):
    compile_launch(config, 10**8, 10**8, side=("left", "right")[index % 2], target=GFX942)


@pytest.mark.parametrize("target", [SM90, GFX942], ids=["sm_90", "gfx942"])
@pytest.mark.parametrize("n", [10**8, 2**32 + 5], ids=["i32", "i64"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_partition_compiles(side, n, target):
    """The partition kernel, as the partitioned configs launch it, at int32
    and int64 (WIDE) positions; it differs between them only in TILE."""
    compile_launch(PARTITIONED_SPACE[0], n, 10**8, side=side, target=target, partition=True)


# The sizes of the dtype matrix: past N + M of about 2**21 the default
# merge-path config is the serial merge after the partition.
DTYPE_N, DTYPE_M = 10**6, 3 * 10**5


def compile_dtype(config, dtype, target, **kwargs):
    """`compile_launch` at the dtype matrix's sizes, int64 answers for
    64-bit keys."""
    wide = dtype in ("int64", "uint64", "float64")
    compile_launch(config, DTYPE_N, DTYPE_M, dtype=dtype, side="right",
                   out_dtype="int64" if wide else "int32", target=target, **kwargs)


@pytest.mark.parametrize("target", [SM90, GFX942], ids=["sm_90", "gfx942"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ["partition", "merge_path", "binary_search"])
def test_every_dtype_compiles(kernel, dtype, target):
    """Each kernel for each key dtype, at the default config."""
    config = (
        pk.default_binary_search_config if kernel == "binary_search"
        else pk.default_merge_path_config
    )(DTYPE_N, DTYPE_M, dtype)
    compile_dtype(config, dtype, target, partition=kernel == "partition")


@pytest.mark.parametrize("target", [SM90, GFX942], ids=["sm_90", "gfx942"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ["partition", "partitioned", "per_program"])
def test_checked_compiles_for_every_dtype(kernel, dtype, target):
    """The checked call's kernels for each key dtype, at the default config
    pair: the gated partition pass, the kernel that reads its splits, and
    the kernel whose merge programs search their own (the per-program twin)."""
    merge = pk.default_merge_path_config(DTYPE_N, DTYPE_M, dtype)
    if kernel == "per_program":
        merge = dataclasses.replace(merge, partition="per_program")
    compile_dtype(merge, dtype, target, partition=kernel == "partition",
                  bisect_config=pk.default_binary_search_config(DTYPE_N, DTYPE_M, dtype))


@pytest.mark.parametrize("n", [2**31 + 5, 2**32 + 5], ids=["u32", "i64"])
@pytest.mark.parametrize("config", SAMPLE_CONFIGS, ids=str)
def test_int64_positions_compile(config, n):
    """Past 2**31 elements the kernels index in int64 (WIDE); jax-triton
    passes such sizes as u32 or i64 scalars."""
    compiled = compile_launch(config, n, 1000, out_dtype="int64")
    assert compiled.asm["ptx"]


@pytest.mark.parametrize("rows", [1, 2])
@pytest.mark.parametrize("config", SAMPLE_CONFIGS, ids=str)
def test_scalars_of_one_compile(config, rows):
    """Sizes and strides of 1 reach the kernels as constexprs (jax-triton's
    specialisation): one-element inputs and batches of them still compile,
    the partition kernel too."""
    partitioned = getattr(config, "partition", None) == "once"
    for partition in {False, partitioned}:
        for n, m in ((1, 1), (1, 1000), (1000, 1)):
            compile_launch(config, n, m, rows=rows, partition=partition)


@pytest.mark.parametrize("rows", [1, 2])
def test_checked_scalars_of_one_compile(rows):
    """The checked call's kernels with sizes and strides of 1 as constexprs,
    the flags' stride of 1 (a flag per row under vmap) among them."""
    bisect = pk.BinarySearchConfig(block=256)
    for merge in (pk.MergePathConfig(tile=256), pk.MergePathConfig(tile=256,
                                                                   partition="per_program")):
        for partition in {False, merge.partition == "once"}:
            for n, m in ((1, 1), (1, 1000), (1000, 1)):
                compile_launch(merge, n, m, rows=rows, partition=partition, bisect_config=bisect)


# ---------------------------------------------------------------------------
# On a GPU: the compiled kernels through jax-triton.

ON_GPU = jax.default_backend() == "gpu"


def sorted_floats(rng, size):
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])
    x = np.where(
        rng.random(size) < 0.1, rng.choice(specials, size), np.round(rng.normal(size=size) * 100, 1)
    )
    return np.sort(x).astype(np.float32)


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a GPU backend")
@pytest.mark.parametrize("index, config", list(enumerate(NATIVE_SPACE)), ids=str)
def test_tuning_space_on_device(index, config):
    """Every config the autotuner may pick gives exact answers on the GPU."""
    available, reason = triton_available()
    if not available:
        pytest.skip(reason)
    rng = np.random.default_rng(7)
    a, v = sorted_floats(rng, 100_003), sorted_floats(rng, 70_001)
    fn = (
        triton_merge_path_searchsorted
        if config.kind == "merge_path"
        else triton_binary_search_searchsorted
    )
    side = ("left", "right")[index % 2]
    result = fn(jnp.asarray(a), jnp.asarray(v), side=side, out_dtype=jnp.int32, config=config)
    np.testing.assert_array_equal(
        result, np.searchsorted(a.astype(np.float64), v.astype(np.float64), side=side)
    )


# ---------------------------------------------------------------------------
# Run as a script: each kernel's registers and scratch, as a table.


def ptxas_registers(config, partition):
    """Registers per thread that ptxas reports for the kernel on sm_90."""
    from helpers.h200 import parse_ptxas

    log = io.StringIO()
    with contextlib.redirect_stdout(log):  # Triton prints ptxas -v's report.
        triton.knobs.nvidia.dump_ptxas_log = True
        try:
            compile_launch(config, 10**8, 10**8, partition=partition)
        finally:
            triton.knobs.nvidia.dump_ptxas_log = False
    [report] = parse_ptxas(log.getvalue()).values()
    return report["registers"]


def print_resources():
    """A Markdown table: per config of the tuning space (and the partition
    kernel), N = M = 1e8 float32, side='left', the sm_90 registers per thread
    and the gfx942 VGPRs, AGPRs, SGPRs and scratch bytes per lane."""
    print("| kernel | config | sm_90 regs | gfx942 VGPR | AGPR | SGPR | scratch |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    cases = [(c, False) for c in NATIVE_SPACE] + [(PARTITIONED_SPACE[0], True)]
    for config, partition in cases:
        spec = _Launch(pk.kernel_kind(config.kind), config, "left", np.dtype("int32"), False)
        name = "partition_kernel" if partition else spec.kernel_name
        amd = gfx942.resources(compile_launch(config, 10**8, 10**8, target=GFX942,
                                           partition=partition))
        fields = {k: v for k, v in vars(config).items() if v is not None}
        print(f"| {name} | {fields} | {ptxas_registers(config, partition)} | {amd.vgprs} "
              f"| {amd.agprs} | {amd.sgprs} | {amd.scratch} |")


if __name__ == "__main__":
    # A fresh cache, so that ptxas runs (and reports) for every kernel.
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
    print_resources()
