"""Test data shared by the GPU kernels' tests, Pallas and native Triton."""

import jax.numpy as jnp
import numpy as np

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
