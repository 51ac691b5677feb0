"""Every kernel config lowers to valid Triton IR for CUDA, without a GPU.

`jax.jit(f).trace(...).lower(lowering_platforms=("cuda",))` runs the Pallas
Triton lowering on any machine. The result holds a `__gpu$xla.gpu.triton`
custom call whose backend config carries the Triton module as MLIR bytecode;
we parse it with jaxlib's Triton dialect bindings and run the MLIR verifier.
A config that does not lower or verify fails here, before any GPU sees it.
"""

import jax
import jax.numpy as jnp
import pytest
from helpers.kernel_cases import SAMPLE_CONFIGS
from helpers.lowering import (
    backend_config,
    lower_for_cuda,
    triton_calls,
    triton_dialect,
    verified_triton_module,
)
from jax._src.lib.mlir import ir

import jaxsearch.pallas_kernels as pk
from jaxsearch.pallas_kernels import BACKENDS, kernel_kind

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*Pallas Triton backend is deprecated:DeprecationWarning"
)

N, M = 1000, 777  # Ragged against every tile and block size.


def check_lowering(fn, a, v, *, grid, config):
    """Lowers for CUDA and checks the Triton calls it must contain: the
    search's, after the merge path's partition pass where `config` has one
    (verified too); returns the search's Triton IR."""
    *passes, call = triton_calls(lower_for_cuda(fn, a, v))
    assert len(passes) == (config.kind == "merge_path" and config.partition == "once")
    search = backend_config(call)

    def i32(name):
        return ir.IntegerAttr(search[name]).value

    assert (i32("grid_x"), i32("grid_y"), i32("grid_z")) == grid
    assert i32("num_warps") == config.num_warps
    assert i32("num_stages") == config.num_stages
    if triton_dialect is None:
        pytest.skip("jaxlib has no Triton dialect bindings to verify the IR")
    for op in passes:
        text = verified_triton_module(ir.StringAttr(backend_config(op)["ir"]).value_bytes)
        assert "tt.func" in text and "tt.store" in text
    text = verified_triton_module(ir.StringAttr(search["ir"]).value_bytes)
    assert "tt.func" in text and "tt.store" in text
    return text


def kernel_for(config, side, out_dtype=jnp.int32):
    fn = BACKENDS["pallas"].kernel(kernel_kind(config.kind))
    return lambda a, v: fn(a, v, side=side, out_dtype=out_dtype, config=config)


def programs(config, n=N, m=M):
    size = config.tile if config.kind == "merge_path" else config.block
    extent = n + m if config.kind == "merge_path" else m
    return -(-extent // size)


@pytest.mark.parametrize("config", pk.tuning_space(), ids=str)
def test_every_tuning_config_lowers(config):
    for side, dtype in (("left", jnp.float32), ("right", jnp.int32)):
        a = jax.ShapeDtypeStruct((N,), dtype)
        v = jax.ShapeDtypeStruct((M,), dtype)
        check_lowering(
            kernel_for(config, side),
            a,
            v,
            grid=(programs(config), 1, 1),
            config=config,
        )


LOWERING_DTYPES = [
    "bool",
    "int8",
    "uint16",
    "uint32",
    "float16",
    "bfloat16",
    "int64",
    "uint64",
    "float64",
]


@pytest.mark.parametrize("config", SAMPLE_CONFIGS, ids=str)
@pytest.mark.parametrize("dtype", LOWERING_DTYPES)
def test_dtypes_lower(config, dtype):
    x64 = jnp.dtype(dtype).itemsize == 8
    with jax.enable_x64(x64):
        a = jax.ShapeDtypeStruct((N,), dtype)
        v = jax.ShapeDtypeStruct((M,), dtype)
        out_dtype = jnp.int64 if x64 else jnp.int32
        text = check_lowering(
            kernel_for(config, "left", out_dtype),
            a,
            v,
            grid=(programs(config), 1, 1),
            config=config,
        )
    # Loop counters stay 32-bit under x64 too (the sizes fit in int32).
    loops = [line for line in text.splitlines() if "scf.for" in line]
    assert loops and all(line.endswith(": i32 {") for line in loops)
    assert f"!tt.ptr<{'i64' if x64 else 'i32'}>" in text  # The output.


@pytest.mark.parametrize("config", SAMPLE_CONFIGS, ids=str)
def test_vmap_lowers_to_a_batch_grid_axis(config):
    batch = 5
    a = jax.ShapeDtypeStruct((batch, N), jnp.float32)
    v = jax.ShapeDtypeStruct((batch, M), jnp.float32)
    check_lowering(
        jax.vmap(kernel_for(config, "right")),
        a,
        v,
        grid=(programs(config), batch, 1),
        config=config,
    )
    # Unbatched `a`: still one launch, no copy of `a` per batch row.
    a = jax.ShapeDtypeStruct((N,), jnp.float32)
    check_lowering(
        jax.vmap(kernel_for(config, "right"), in_axes=(None, 0)),
        a,
        v,
        grid=(programs(config), batch, 1),
        config=config,
    )


def test_default_configs_lower_for_large_inputs():
    # 1e8 elements: the sizes of the GPU benchmark, lowered without data.
    n = m = 10**8
    a = jax.ShapeDtypeStruct((n,), jnp.float32)
    for config in (
        pk.default_merge_path_config(n, m, jnp.float32),
        pk.default_binary_search_config(n, m, jnp.float32),
    ):
        check_lowering(
            kernel_for(config, "left"),
            a,
            a,
            grid=(programs(config, n, m), 1, 1),
            config=config,
        )


@pytest.mark.parametrize("config", SAMPLE_CONFIGS, ids=str)
def test_64_bit_indices_lower(config):
    # Past 2**31 - 1 positions the kernels index with int64 (x64 mode only).
    n, m = 2**31, 1000
    with jax.enable_x64(True):
        a = jax.ShapeDtypeStruct((n,), jnp.int8)
        v = jax.ShapeDtypeStruct((m,), jnp.int8)
        text = check_lowering(
            kernel_for(config, "right", jnp.int64),
            a,
            v,
            grid=(programs(config, n, m), 1, 1),
            config=config,
        )
    assert "tt.get_program_id x : i32" in text and "arith.extsi" in text
    # Without x64, answers that fit in int32: the merge path refuses where
    # N + M passes int32, binary search only where N or M does (it counts
    # positions in `a` and `v` apart), so the longest `a` lowers in int32.
    longest = jax.ShapeDtypeStruct((2**31 - 1,), jnp.int8)
    if config.kind == "merge_path":
        with pytest.raises(ValueError, match="jax_enable_x64"):
            lower_for_cuda(kernel_for(config, "right"), longest, v)
        return
    text = check_lowering(kernel_for(config, "right"), longest, v,
                          grid=(programs(config, 2**31 - 1, m), 1, 1),
                          config=config,)
    assert "arith.extsi" not in text
    with pytest.raises(ValueError, match="jax_enable_x64"):
        lower_for_cuda(kernel_for(config, "right"), v, longest)
