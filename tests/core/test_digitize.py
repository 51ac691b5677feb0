"""Differential tests of jaxsearch.digitize against jnp.digitize (and numpy)."""

from __future__ import annotations

import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.keys import numpy_dtype, random_keys, sort_keys
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxsearch

DTYPES = ["bool", "int8", "uint8", "int32", "float16", "bfloat16", "float32"]
DTYPES_64 = ["int64", "uint64", "float64"]
BINS = ["rising", "falling", "constant", "repeats"]
SORTED_X = [None, True, False]
# (len(bins), x.shape)
SHAPES = [(1, (5,)), (40, (1000,)), (3000, (7, 300)), (257, (2, 3, 50))]


def check(x, bins, right=False, **kwargs):
    """jaxsearch's answer is jnp's: values, dtype and shape."""
    got = jaxsearch.digitize(x, bins, right, **kwargs)
    want = jnp.digitize(x, bins, right)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    return got


def make_bins(rng, kind: str, n: int, dtype: str) -> np.ndarray:
    """Monotonic bin edges without NaN (a NaN edge makes jnp's bins unsorted)."""
    keys = random_keys(rng, n, dtype, specials=False,
                       distinct=max(2, n // 4) if kind == "repeats" else None)
    if kind == "constant":
        keys = np.full(n, keys[0])
    keys = sort_keys(keys)
    return keys[::-1].copy() if kind == "falling" else keys


def make_x(rng, shape, dtype: str, sort: bool) -> np.ndarray:
    """Values with NaN, +-inf and +-0.0 among them; sorted as jnp sorts (NaN
    last) when `sort`."""
    x = random_keys(rng, int(np.prod(shape)), dtype)
    return (sort_keys(x) if sort else x).reshape(shape)


@pytest.mark.parametrize("sorted_x", SORTED_X)
@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("kind", BINS)
@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_bins_sides_and_orders(x64, kind, right, sorted_x):
    rng = np.random.default_rng(zlib.crc32(repr((kind, right, sorted_x)).encode()))
    # Every dtype for bins in order (under x64 the 64-bit ones and float32);
    # constant and repeated bins in two.
    dtypes = (DTYPES_64 + ["float32"] if x64 else DTYPES) if kind in ("rising", "falling") \
        else ["int32", "float64" if x64 else "float32"]
    with jax.enable_x64(x64):
        for k, dtype in enumerate(dtypes):
            # Two of the shapes each (jit compiles every one): a single bin,
            # skews both ways, N-d x.
            for n, shape in SHAPES[k % 2::2]:
                bins = make_bins(rng, kind, n, dtype)
                x = make_x(rng, shape, dtype, sort=sorted_x is not False)
                got = check(jnp.asarray(x), jnp.asarray(bins), right, sorted_x=sorted_x)
                if dtype != "bfloat16" and kind != "constant":  # numpy calls constant rising
                    np.testing.assert_array_equal(np.asarray(got), np.digitize(x, bins, right))


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_mixed_dtypes_scalars_and_empties(x64):
    rng = np.random.default_rng(3)
    with jax.enable_x64(x64):
        bins = jnp.asarray(make_bins(rng, "rising", 30, "float32"))
        x = jnp.asarray(make_x(rng, (200,), "int32", sort=True))
        check(x, bins)
        check(x.astype(jnp.float16), bins.astype(jnp.int8), sorted_x=True)
        check(x.astype(jnp.complex64), bins)  # complex x: jnp compares lexicographically
        for scalar in (2.5, 3, np.float32(-1.0), jnp.float32(np.nan)):
            check(scalar, bins)
        check(2.5, np.asarray(bins)[::-1])
        check(jnp.zeros((0, 3)), bins)
        check(x, jnp.zeros(0))
        check(jnp.zeros((0,)), jnp.zeros(0), True)
        check(1.0, jnp.zeros(0))


def test_method_forwards_to_jnp():
    rng = np.random.default_rng(4)
    bins = jnp.asarray(make_bins(rng, "falling", 50, "float32"))
    x = jnp.asarray(make_x(rng, (300,), "float32", sort=False))
    for method in ("scan", "scan_unrolled", "sort", "compare_all"):
        got = jaxsearch.digitize(x, bins, True, method=method)
        np.testing.assert_array_equal(got, jnp.digitize(x, bins, True, method=method))


@pytest.mark.parametrize("call, error", [
    (lambda: jaxsearch.digitize(jnp.ones(3), jnp.ones((2, 2))), ValueError),
    (lambda: jaxsearch.digitize(jnp.ones(3), 1.0), ValueError),
    (lambda: jaxsearch.digitize([1.0], jnp.arange(3)), TypeError),
    (lambda: jaxsearch.digitize(jnp.ones(3), [1, 2]), TypeError),
    (lambda: jaxsearch.digitize(jnp.ones(3), jnp.arange(3), method="bisect"), ValueError),
    (lambda: jaxsearch.digitize(jnp.ones(3), jnp.arange(3), sorted_x="yes"), TypeError),
])
def test_errors(call, error):
    with pytest.raises(error):
        call()


@pytest.mark.parametrize("fn", [jaxsearch.digitize, jnp.digitize])
def test_traced_right_fails_as_in_jnp(fn):
    """`right` must be concrete; jnp and jaxsearch refuse a traced one alike."""
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        jax.jit(lambda r: fn(jnp.ones(3), jnp.arange(3.0), r))(True)


def test_jit_vmap_and_grad():
    rng = np.random.default_rng(5)
    rising = make_bins(rng, "rising", 64, "float32")
    bins = jnp.asarray(np.stack([rising, rising[::-1], np.full(64, rising[3])]))
    x = jnp.asarray(np.stack([make_x(rng, (500,), "float32", sort=True) for _ in range(3)]))

    ours = jax.jit(jax.vmap(lambda x, b: jaxsearch.digitize(x, b, sorted_x=True)))(x, bins)
    np.testing.assert_array_equal(ours, jax.vmap(jnp.digitize)(x, bins))
    # Batched x over shared bins, and nested vmap.
    np.testing.assert_array_equal(jax.vmap(jaxsearch.digitize, (0, None))(x, bins[1]),
                                  jax.vmap(jnp.digitize, (0, None))(x, bins[1]))
    nested = jax.vmap(jax.vmap(jaxsearch.digitize, (0, None)), (None, 0))(x, bins)
    np.testing.assert_array_equal(
        nested, jax.vmap(jax.vmap(jnp.digitize, (0, None)), (None, 0))(x, bins))

    def loss(fn, x, b):
        return jnp.sum(jnp.where(jnp.isnan(x), 0.0, fn(x, b) * x))

    for argnums in (0, 1):
        got = jax.grad(lambda x, b: loss(jaxsearch.digitize, x, b), argnums)(x[0], bins[1])
        want = jax.grad(lambda x, b: loss(jnp.digitize, x, b), argnums)(x[0], bins[1])
        np.testing.assert_array_equal(got, want)


@st.composite
def problems(draw):
    dtype = draw(st.sampled_from(["int8", "int32", "float32"]))
    dt = numpy_dtype(dtype)
    pool = [-np.inf, -2.0, -0.0, 0.0, 1.0, 1.5, np.inf, np.nan] if dt.kind == "f" else \
        [int(np.iinfo(dt).min), -1, 0, 1, 2, int(np.iinfo(dt).max)]
    value = st.one_of(st.sampled_from(pool), st.integers(-20, 20))
    n = draw(st.sampled_from([0, 1, 2, 5, 33]))
    m = draw(st.sampled_from([0, 1, 4, 100]))
    bins = np.asarray(np.array(draw(st.lists(value, min_size=n, max_size=n)), dtype=object)
                      .astype(np.float64 if dt.kind == "f" else object), dtype=dt)
    bins = sort_keys(bins[~np.isnan(bins)] if dt.kind == "f" else bins)
    if draw(st.booleans()):
        bins = bins[::-1]
    x = np.asarray(np.array(draw(st.lists(value, min_size=m, max_size=m)), dtype=object)
                   .astype(np.float64 if dt.kind == "f" else object), dtype=dt)
    sorted_x = draw(st.sampled_from([None, True, False]))
    if sorted_x or draw(st.booleans()):
        x = sort_keys(x)
    return x, bins.copy(), draw(st.booleans()), sorted_x


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_matches_jnp_property(problem):
    x, bins, right, sorted_x = problem
    check(jnp.asarray(x), jnp.asarray(bins), right, sorted_x=sorted_x)
