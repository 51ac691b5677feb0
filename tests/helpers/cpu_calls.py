"""The CPU extension's search called directly (kernel, order and threads
forced), and jnp's default method as the reference it must match."""

from __future__ import annotations

import zlib

import jax
import jax.numpy as jnp
import numpy as np

import jaxsearch
from jaxsearch.core import cpu
from jaxsearch.tuning import CpuConfig, use_cpu_config

SIDES = ("left", "right")
CPU_SEARCH = jax.jit(cpu.search, static_argnames=("side", "order", "kernel", "out_dtype",
                                                  "threads", "min_parallel", "bucket_min_bytes",
                                                  "table_check_ratio",
                                                  "bucket_keys_per_needle", "count_keys",
                                                  "short_row_needles"))


def lowered_unsorted_call(config: CpuConfig) -> str:
    """The text of `jaxsearch.searchsorted(a, v, sorted_v=False)` lowered
    under `config`, where the custom call's attributes show."""
    a, v = jnp.linspace(0, 1, 1000), jnp.linspace(1, 0, 100)
    with use_cpu_config(config):
        return jax.jit(lambda a, v: jaxsearch.searchsorted(a, v, sorted_v=False)).lower(
            a, v).as_text()


def seeded(*labels: object) -> np.random.Generator:
    """A generator of the case's own, the same in every run."""
    return np.random.default_rng(zlib.crc32("-".join(map(str, labels)).encode()))


def like_jnp(a: np.ndarray, v: np.ndarray, side: str) -> np.ndarray:
    """jnp's default method, row by row: a (..., n) and v (..., m) broadcast
    over their batch dimensions."""
    batch = np.broadcast_shapes(a.shape[:-1], v.shape[:-1])
    a = np.broadcast_to(a, batch + a.shape[-1:]).reshape(-1, a.shape[-1])
    v = np.broadcast_to(v, batch + v.shape[-1:]).reshape(-1, v.shape[-1])
    rows = jax.vmap(lambda a, v: jnp.searchsorted(a, v, side=side, method="scan"))(
        jnp.asarray(a), jnp.asarray(v))
    return np.asarray(rows).reshape(batch + v.shape[-1:])


def cpu_search(a, v, side, order, kernel, threads, min_parallel, **fields) -> np.ndarray:
    """The extension's int32 answers for a and v, kernel and order forced
    (and any of `cpu.search`'s tuned arguments, as `fields`)."""
    return np.asarray(CPU_SEARCH(jnp.asarray(a), jnp.asarray(v), side=side, order=order,
                                 kernel=kernel, out_dtype=np.dtype(np.int32), threads=threads,
                                 min_parallel=min_parallel, **fields))
