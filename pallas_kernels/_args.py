"""Argument checks shared by every kernel wrapper, Pallas and native Triton."""

import jax
import jax.numpy as jnp

from ._order import SIDES, check_dtype


def validate(a, v, side, out_dtype):
    """Checks the wrapper arguments; returns `out_dtype` as a numpy dtype."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"a and v must be 1-D, got shapes {a.shape}, {v.shape}")
    if a.dtype != v.dtype:
        raise TypeError(f"a and v must share a dtype, got {a.dtype}, {v.dtype}")
    check_dtype(a.dtype)
    out_dtype = jnp.dtype(out_dtype)
    if out_dtype not in (jnp.dtype(jnp.int32), jnp.dtype(jnp.int64)):
        raise TypeError(f"out_dtype must be int32 or int64, got {out_dtype}")
    if out_dtype == jnp.int64 and not jax.config.jax_enable_x64:
        raise TypeError("out_dtype int64 needs jax_enable_x64")
    return out_dtype


def resolve_config(config, cls, default, n, m, dtype):
    """`config`, or `default(n, m, dtype)` when it is None; a TypeError when
    it is not a `cls`."""
    if config is None:
        return default(n, m, dtype)
    if not isinstance(config, cls):
        raise TypeError(f"config must be a {cls.__name__}, got {config!r}")
    return config
