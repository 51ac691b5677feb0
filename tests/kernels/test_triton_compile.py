"""Every native Triton kernel config compiles for sm_90 (H100/H200), no GPU.

`triton.compile` with an explicit `GPUTarget("cuda", 90, 32)` runs the
pipeline that jax-triton runs when it lowers a `triton_call` (Triton IR, GPU
IR, LLVM IR, PTX) and then ptxas, on any machine. Each case compiles the
kernel exactly as the wrappers would launch it: the constexprs come from the
wrappers' own launch description, the scalar arguments get the types
jax-triton gives them (i32, u32 or i64 by value, and a constexpr for a value
of 1), and pointers the 16-byte alignment jax-triton assumes. A config that
does not compile is a failing test. The tuning space also compiles for
ROCm (gfx942, MI300), the other platform the kernels serve. Without triton
the file skips.

Marked `gpu`: every tuning config gives exact answers through jax-triton on
a real GPU.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.kernel_cases import SAMPLE_CONFIGS

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

_Launch = triton_searchsorted._Launch
SM90 = GPUTarget("cuda", 90, 32)
GFX942 = GPUTarget("hip", "gfx942", 64)
# Shared memory per block: Hopper's largest (with the opt-in); MI300's LDS.
MAX_SHARED_BYTES = {"cuda": 227 * 1024, "hip": 64 * 1024}

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


@pytest.fixture(scope="module", autouse=True)
def fresh_triton_cache(tmp_path_factory):
    """A cache of our own, so that every case really compiles."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton_cache")))
        yield


def scalar_type(value):
    """The Triton type jax-triton gives a Python int argument."""
    if value < 2**31:
        return "i32"
    return "u32" if value < 2**32 else "i64"


def compile_launch(
    config, n, m, *, dtype="float32", side="left", out_dtype="int32", rows=1, target=SM90
):
    """Compiles the kernel as the wrapper launches it for these sizes."""
    kind = config.kind
    spec = _Launch(pk.kernel_kind(kind), config, side, np.dtype(out_dtype), interpret=False)
    kernel = spec.kernel()
    _, constexprs = spec.grid_and_constexprs(n, m)
    pointer = "*" + TRITON_TYPES[dtype]
    types = {"a_ptr": pointer, "v_ptr": pointer, "o_ptr": "*" + TRITON_TYPES[out_dtype]}
    scalars = {"n": n, "m": m, "a_stride": n if rows > 1 else 0, "v_stride": m if rows > 1 else 0}
    for name, value in scalars.items():
        if value == 1:  # jax-triton makes a scalar equal to 1 a constexpr.
            constexprs[name] = 1
        else:
            types[name] = scalar_type(value)
    signature = {
        name: "constexpr" if name in constexprs else types[name] for name in kernel.arg_names
    }
    assert set(signature) == set(types) | set(constexprs)
    aligned = [[["tt.divisibility", 16]]]
    attrs = {
        (i,): aligned[0]
        for i, name in enumerate(kernel.arg_names)
        if signature[name].startswith("*")
    }
    source = triton.compiler.ASTSource(
        fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs
    )
    compiled = triton.compile(
        source,
        target=target,
        options={
            "num_warps": config.num_warps,
            "num_stages": config.num_stages,
            "num_ctas": 1,
            "enable_fp_fusion": True,
        },
    )  # As jax-triton compiles.
    if target.backend == "cuda":
        ptx = compiled.asm["ptx"]
        assert f".visible .entry {kind}_kernel" in ptx
        assert f".target sm_{target.arch}" in ptx
        assert compiled.asm["cubin"]
    else:
        assert f"{kind}_kernel" in compiled.asm["amdgcn"]
        assert compiled.asm["hsaco"]
    assert compiled.metadata.num_warps == config.num_warps
    assert compiled.metadata.shared <= MAX_SHARED_BYTES[target.backend]
    return compiled


# The tuning space as native Triton sees it: it has no partition pass and
# bisects where a config says 'serial', so a merge config's per-program and
# serial twins compile to kernels already in the list.
NATIVE_SPACE = [c for c in pk.tuning_space() if getattr(c, "partition", "once") == "once"
                and getattr(c, "method", "") != "serial"]


@pytest.mark.parametrize("index, config", list(enumerate(NATIVE_SPACE)), ids=str)
def test_tuning_space_compiles(index, config):
    """Every config the autotuner may pick, at N = M = 1e8 float32."""
    compile_launch(config, 10**8, 10**8, side=("left", "right")[index % 2])


@pytest.mark.parametrize("index, config", list(enumerate(NATIVE_SPACE)), ids=str)
def test_tuning_space_compiles_for_rocm(index, config):
    compile_launch(config, 10**8, 10**8, side=("left", "right")[index % 2], target=GFX942)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["merge_path", "binary_search"])
def test_every_dtype_compiles(kind, dtype):
    n, m = 10**6, 3 * 10**5
    config = (
        pk.default_merge_path_config if kind == "merge_path" else pk.default_binary_search_config
    )(n, m, dtype)
    wide = dtype in ("int64", "uint64", "float64")
    compile_launch(config, n, m, dtype=dtype, side="right", out_dtype="int64" if wide else "int32")


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
    """Sizes and strides of 1 reach the kernel as constexprs (jax-triton's
    specialisation): one-element inputs and batches of them still compile."""
    compile_launch(config, 1, 1, rows=rows)
    compile_launch(config, 1, 1000, rows=rows)
    compile_launch(config, 1000, 1, rows=rows)


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
