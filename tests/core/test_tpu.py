"""On a TPU: jaxsearch against jnp on the same device, bit for bit.

On a TPU the primitive lowers to jnp's own search, so every answer, every
transform and every patched call site must give exactly what jnp gives
there: the dtypes a TPU takes (bfloat16 and 8-bit keys included), NaN,
infinities, signed zeros and subnormals, both sides, each promise, an
unsorted `a` under each method, vmap (a batch of short rows too), grad,
an export for the CPU and the TPU run here, and jnp's functions that
search, patched. Skipped on every other backend (marker `tpu`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.cpu_calls import seeded

import jaxsearch

pytestmark = [pytest.mark.tpu,
              pytest.mark.skipif(jax.default_backend() != "tpu", reason="needs a TPU backend")]

SHAPES = [(0, 5), (1, 100), (9, 1000), (200, 1), (10_000, 10_000), (1_000_000, 100_000)]
DTYPES = ["float32", "bfloat16", "int32", "uint8"]


def assert_same(got, want, what: str) -> None:
    """Equal dtypes, shapes and bytes, leaf by leaf."""
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.dtype, g.shape) == (w.dtype, w.shape), what
        assert g.tobytes() == w.tobytes(), what


def keys(rng: np.random.Generator, n: int, dtype: str, sort: bool = True) -> jax.Array:
    """n keys of `dtype`, the float edges first (NaN, +-inf, +-0, subnormals)."""
    if jnp.issubdtype(dtype, jnp.integer):
        info = jnp.iinfo(dtype)
        x = rng.integers(max(int(info.min), -10**6), min(int(info.max), 10**6), n)
    else:
        x = rng.uniform(-100, 100, n)
        if n >= 8:
            tiny = float(jnp.finfo(dtype).smallest_subnormal)
            x[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, tiny, -tiny, 2 * tiny]
    x = jnp.asarray(x, dtype=dtype)
    return jnp.sort(x) if sort else x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, m", SHAPES)
def test_searchsorted_as_jnp(dtype, n, m):
    rng = seeded("tpu", dtype, n, m)
    a = keys(rng, n, dtype)
    for v_sorted in (True, False):
        v = keys(rng, m, dtype, v_sorted)
        for side in ("left", "right"):
            want = jnp.searchsorted(a, v, side)
            for sorted_v in ((None, False, True) if v_sorted else (None, False)):
                assert_same(jaxsearch.searchsorted(a, v, side, sorted_v=sorted_v), want,
                            f"{dtype} {n} {m} v sorted {v_sorted} {side} sorted_v={sorted_v}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_unsorted_a_as_jnp(dtype):
    rng = seeded("tpu unsorted", dtype)
    a, v = keys(rng, 1000, dtype, False), keys(rng, 5000, dtype, False)
    for method in ("scan", "scan_unrolled", "sort", "compare_all"):
        assert_same(jaxsearch.searchsorted(a, v, method=method),
                    jnp.searchsorted(a, v, method=method), method)


def test_transforms_as_jnp():
    rng = seeded("tpu transforms")
    a = keys(rng, 10_000, "float32").reshape(100, 100)
    v = keys(rng, 700, "float32", False).reshape(100, 7)
    assert_same(jax.vmap(jaxsearch.searchsorted)(a, v), jax.vmap(jnp.searchsorted)(a, v), "vmap")
    short = jnp.sort(keys(rng, 80_000 * 9, "float32", False).reshape(80_000, 9), axis=1)
    one = keys(rng, 80_000, "float32", False).reshape(80_000, 1)
    assert_same(jax.vmap(jaxsearch.searchsorted)(short, one),
                jax.vmap(jnp.searchsorted)(short, one), "vmap of short rows")
    xp = jnp.sort(jnp.asarray(rng.uniform(0, 1, 1000), jnp.float32))
    fp = jnp.sin(xp)
    x = jnp.asarray(rng.uniform(-0.1, 1.1, 10_000), jnp.float32)
    assert_same(jaxsearch.interp(x, xp, fp), jax.jit(jnp.interp)(x, xp, fp), "interp")
    assert_same(jax.grad(lambda x: jaxsearch.interp(x, xp, fp).sum())(x),
                jax.grad(lambda x: jnp.interp(x, xp, fp).sum())(x), "grad of interp")
    assert_same(jaxsearch.digitize(x, xp), jnp.digitize(x, xp), "digitize")
    assert_same(jaxsearch.histogram(x, bins=50), jnp.histogram(x, bins=50), "histogram")
    exported = jax.export.export(jax.jit(jaxsearch.searchsorted), platforms=["cpu", "tpu"],
                                 disabled_checks=jaxsearch.export_disabled_checks())(a[0], v[0])
    assert_same(exported.call(a[0], v[0]), jnp.searchsorted(a[0], v[0]), "export run here")


def test_patched_sites_as_stock():
    rng = seeded("tpu patch")
    xp = jnp.sort(jnp.asarray(rng.uniform(0, 1, 1000), jnp.float32))
    fp = jnp.sin(xp)
    x = jnp.asarray(rng.uniform(-0.1, 1.1, 10_000), jnp.float32)
    w = jnp.asarray(rng.uniform(0, 1, 10_000), jnp.float32)
    u = jnp.sort(jnp.asarray(rng.uniform(0, 1, 10_000), jnp.float32)) * w.sum()
    key = jax.random.key(1)

    def sites():
        return {"searchsorted": jax.jit(jnp.searchsorted)(xp, x),
                "interp": jax.jit(jnp.interp)(x, xp, fp),
                "histogram": jax.jit(lambda x: jnp.histogram(x, bins=100))(x),
                "digitize": jax.jit(jnp.digitize)(x, xp),
                "choice": jax.jit(lambda p: jax.random.choice(key, 1000, (5000,), p=p))(
                    fp * fp + 1e-3),
                "sort method": jax.jit(lambda a, v: jnp.searchsorted(a, v, method="sort"))(
                    jnp.cumsum(w), u),
                "vmap interp": jax.vmap(jnp.interp, (0, None, None))(x.reshape(10, 1000), xp, fp)}

    stock = sites()
    with jaxsearch.patched():
        patched = sites()
    for name, want in stock.items():
        assert_same(patched[name], want, name)
