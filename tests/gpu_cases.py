"""Test data and cases shared by the GPU kernels' tests, Pallas and native Triton."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

X64_DTYPES = ["int64", "uint64", "float64"]
DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "uint8",
    "uint16",
    "uint32",
    "float16",
    "bfloat16",
    "float32",
] + X64_DTYPES


def sample(rng, dtype, size):
    """Sorted values with many duplicates; floats add +-inf, +-0.0 and NaN."""
    dtype = jnp.dtype(dtype)
    if dtype == jnp.bool_:
        return np.sort(rng.integers(0, 2, size).astype(bool))
    if jnp.issubdtype(dtype, jnp.integer):
        info = np.iinfo(dtype)
        x = rng.integers(-20 if info.min < 0 else 0, 20, size).astype(dtype)
        x = np.where(rng.random(size) < 0.05, info.max, x)
        return np.sort(np.where(rng.random(size) < 0.05, info.min, x))
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -1.5])
    x = np.where(
        rng.random(size) < 0.4, rng.choice(specials, size), np.round(rng.normal(size=size) * 4, 1)
    )
    # Sort before the cast: numpy misplaces NaN when sorting bfloat16.
    return np.sort(x).astype(dtype)


def expected(a, v, side):
    """numpy's answer; floats compared in float64 (exact for every float)."""
    if jnp.issubdtype(a.dtype, jnp.floating):
        a, v = a.astype(np.float64), v.astype(np.float64)
    return np.searchsorted(a, v, side=side)


def assert_in_range(result, n):
    # An unwritten answer would hold garbage (the interpreters fill INT_MIN).
    assert result.min(initial=0) >= 0 and result.max(initial=0) <= n


def unsorted_cases(rng):
    """Inputs that break the sortedness promise, each way it can be broken."""
    sorted_a = np.sort(rng.normal(size=300)).astype(np.float32)
    random_a = rng.normal(size=300).astype(np.float32)
    sorted_v = np.sort(rng.normal(size=500)).astype(np.float32)
    random_v = rng.normal(size=500).astype(np.float32)
    nan_v = np.where(rng.random(500) < 0.2, np.nan, sorted_v).astype(np.float32)
    return [
        (sorted_a, random_v),
        (sorted_a, sorted_v[::-1]),
        (random_a, random_v),
        (random_a, sorted_v),
        (sorted_a[::-1], sorted_v),
        (sorted_a, nan_v),
    ]


# ---------------------------------------------------------------------------
# Cases that both GPU implementations must pass. Each takes `search(kernel, a,
# v, side, out_dtype="int32")`, which runs one of the KERNELS of the calling
# test file (Pallas in-process, native Triton in its interpreter worker) on
# numpy arrays and returns a numpy array.

SIDES = ("left", "right")

# Tile edges, both skews, single elements (tiles are 128 in the tests).
SIZES = [(1, 1), (1, 300), (300, 1), (128, 128), (129, 127), (3000, 5), (5, 3000)]


def check_dtype(search, kernel, dtype):
    rng = np.random.default_rng(0)
    a, v = sample(rng, dtype, 300), sample(rng, dtype, 201)
    out_dtype = "int64" if dtype in X64_DTYPES else "int32"
    for side in SIDES:
        result = search(kernel, a, v, side, out_dtype=out_dtype)
        assert result.dtype == out_dtype
        np.testing.assert_array_equal(result, expected(a, v, side))
        with jax.enable_x64(dtype in X64_DTYPES):
            np.testing.assert_array_equal(
                result, jnp.searchsorted(jnp.asarray(a), jnp.asarray(v), side=side)
            )


def check_size(search, kernel, n, m):
    rng = np.random.default_rng(n * 10_000 + m)
    a = np.sort(rng.integers(0, 1000, n)).astype(np.int32)
    v = np.sort(rng.integers(-10, 1010, m)).astype(np.int32)
    for side in SIDES:
        np.testing.assert_array_equal(search(kernel, a, v, side), expected(a, v, side))


def check_subnormals_keep_ieee_order(search, kernel):
    # The kernels compare bits, as numpy does; XLA:CPU flushes subnormals in
    # float compares, so jnp.searchsorted there treats them as zero.
    tiny = np.float32(1e-45)
    a = np.array([-tiny, -0.0, 0.0, tiny, 2 * tiny], np.float32)
    v = np.array([-2 * tiny, -tiny, 0.0, tiny, 1.0], np.float32)
    for side in SIDES:
        np.testing.assert_array_equal(search(kernel, a, v, side), np.searchsorted(a, v, side=side))


def check_int32_inputs_both_answer_widths(search, kernel):
    rng = np.random.default_rng(2)
    a = np.sort(rng.integers(0, 100, 300)).astype(np.int32)
    v = np.sort(rng.integers(0, 100, 200)).astype(np.int32)
    for out_dtype in ("int32", "int64"):
        result = search(kernel, a, v, "left", out_dtype=out_dtype)
        assert result.dtype == out_dtype
        np.testing.assert_array_equal(result, expected(a, v, "left"))


def check_broken_promises_stay_in_range(search, kernel):
    rng = np.random.default_rng(3)
    for a, v in unsorted_cases(rng):
        for side in SIDES:
            assert_in_range(search(kernel, a, v, side), len(a))


def check_binary_search_any_needles(search, kernel="binary"):
    rng = np.random.default_rng(4)
    a = sample(rng, "float32", 300)
    v = rng.permutation(sample(rng, "float32", 500))
    for side in SIDES:
        np.testing.assert_array_equal(search(kernel, a, v, side), expected(a, v, side))


def check_argument_errors(merge_path, binary_search, config_types):
    """Bad arguments to the two wrappers raise, naming what is wrong.

    `config_types` is (MergePathConfig, BinarySearchConfig).
    """
    merge_config, binary_config = config_types
    f32 = jnp.ones(4, jnp.float32)
    call = functools.partial(merge_path, out_dtype=jnp.int32)
    with pytest.raises(ValueError, match="side"):
        call(f32, f32, side="middle")
    with pytest.raises(TypeError, match="share a dtype"):
        call(f32, f32.astype(jnp.int32), side="left")
    with pytest.raises(ValueError, match="1-D"):
        call(f32[None], f32, side="left")
    with pytest.raises(TypeError, match="unsupported dtype"):
        call(f32.astype(jnp.complex64), f32.astype(jnp.complex64), side="left")
    with pytest.raises(TypeError, match="out_dtype"):
        call(f32, f32, side="left", out_dtype=jnp.float32)
    with pytest.raises(TypeError, match="MergePathConfig"):
        call(f32, f32, side="left", config=binary_config())
    with pytest.raises(TypeError, match="BinarySearchConfig"):
        binary_search(f32, f32, side="left", out_dtype=jnp.int32, config=merge_config())
