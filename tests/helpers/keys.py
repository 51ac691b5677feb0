"""Test data: random keys of every dtype, sorted the way jnp sorts."""

from __future__ import annotations

import jax
import numpy as np

# Every real dtype jnp.searchsorted accepts; the 64-bit ones need x64 mode.
DTYPES_32 = ["bool", "int8", "int16", "int32", "uint8", "uint16", "uint32",
             "float16", "bfloat16", "float32"]
DTYPES_64 = ["int64", "uint64", "float64"]


def numpy_dtype(name: str) -> np.dtype:
    return np.dtype(jax.numpy.dtype(name))


def random_keys(rng: np.random.Generator, n: int, dtype: str, *, specials: bool = True,
                distinct: int | None = None) -> np.ndarray:
    """n random keys of dtype, with duplicates; floats also get NaN, +-inf and
    +-0.0 when `specials`. `distinct` bounds how many different values appear."""
    dt = numpy_dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, n).astype(bool)
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        lo, hi = int(info.min), int(info.max)
        if distinct is not None:
            pool = rng.integers(lo, hi, distinct, endpoint=True, dtype=dt)
            return rng.choice(pool, n)
        keys = rng.integers(lo, hi, n, endpoint=True, dtype=dt)
        # Extremes of the dtype, where overflow would show.
        if n >= 4:
            keys[rng.integers(0, n, 4)] = [lo, hi, lo, hi]
        return keys
    values = rng.standard_normal(n) * 100
    if distinct is not None:
        values = rng.choice(values[:distinct], n) if n else values
    if specials and n >= 8:
        idx = rng.integers(0, n, 8)
        values[idx] = [np.nan, np.inf, -np.inf, 0.0, -0.0, np.nan, 0.0, -0.0]
    return values.astype(dt)


def sort_keys(x: np.ndarray) -> np.ndarray:
    """Sorted as jnp sorts: NaN last, -0.0 and 0.0 together."""
    # Through float32 for bfloat16, whose numpy sort does not put NaN last.
    order_keys = x.astype(np.float32) if x.dtype == jax.numpy.bfloat16 else x
    return x[np.argsort(order_keys, kind="stable")]
