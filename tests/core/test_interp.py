"""Differential tests of jaxsearch.interp against jnp.interp: the same dtype,
shape and bits."""

from __future__ import annotations

import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.keys import sort_keys
from helpers.tiers import tiered
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxsearch

EDGES = [None, "extrapolate", -7.5]
SORTED_X = [None, True, False]


def assert_same_bits(got, want):
    """Equal dtype, shape and bit patterns (every NaN counts as equal)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "c":
        got, want = got.view(got.real.dtype), want.view(want.real.dtype)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    bits = np.dtype(f"u{got.dtype.itemsize}")
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits))


def reference(x, xp, fp, left=None, right=None, period=None):
    """jnp.interp, called inside a jit of its own. Called directly, jnp.interp
    of jax 0.10 to 0.12.0 reuses the executable compiled for a call with a
    value for `left` and `right=None` in a later call with `left=None` and a
    value for `right` of the same avals: the value lands on the wrong side."""
    return jax.jit(lambda x, xp, fp: jnp.interp(x, xp, fp, left, right, period))(x, xp, fp)


def check(x, xp, fp, left=None, right=None, period=None, **kwargs):
    got = jaxsearch.interp(x, xp, fp, left, right, period, **kwargs)
    assert_same_bits(got, reference(x, xp, fp, left, right, period))
    return got


def test_jnp_top_level_cache_mixes_up_left_and_right():
    """The reason for `reference`, where jax has the bug (before 0.12.1);
    jaxsearch.interp never mixes the sides up."""
    x, xp, fp = jnp.array([-10.0, 0.0, 10.0]), jnp.array([-1.0, 1.0]), jnp.array([5.0, 6.0])
    jnp.interp(x, xp, fp, -7.5, None)
    direct = jnp.interp(x, xp, fp, None, -7.5)
    fixed = jaxsearch.interp(x, xp, fp, None, -7.5)
    assert fixed[0] == 5.0 and fixed[2] == -7.5
    assert_same_bits(fixed, reference(x, xp, fp, None, -7.5))
    if jax.__version_info__ < (0, 12, 1):
        assert direct[0] == -7.5 and direct[2] == 6.0
    else:
        assert_same_bits(direct, fixed)


def make_xp(rng, n: int, dtype, repeats: bool = False) -> np.ndarray:
    """n increasing abscissae; with `repeats`, many equal neighbours."""
    xp = rng.uniform(-50, 50, n)
    if repeats:
        xp = np.round(xp / 10) * 10
    return np.sort(xp).astype(dtype)


def make_x(rng, shape, dtype, sort: bool) -> np.ndarray:
    """Values inside, at and beyond the abscissae' range, with NaN and +-inf;
    sorted as jnp sorts (NaN last) when `sort`."""
    x = rng.uniform(-70, 70, int(np.prod(shape)))
    if x.size >= 8:
        x[rng.integers(0, x.size, 8)] = [np.nan, np.inf, -np.inf, 0.0, -0.0, -50, 50, np.nan]
    x = x.astype(dtype)
    return (sort_keys(x) if sort else x).reshape(shape)


def make_fp(rng, n: int, dtype) -> np.ndarray:
    fp = rng.standard_normal(n) * 10
    if np.issubdtype(dtype, np.complexfloating):
        fp = fp + 1j * rng.standard_normal(n)
    return fp.astype(dtype)


# The cube of (left, right, sorted_x). The quick tier takes a Latin square of
# it, in which every pair of values of two of them meets once; the full
# tier, the whole cube.
EDGE_CASES = tiered([(left, right, sorted_x) for left in EDGES for right in EDGES
                     for sorted_x in SORTED_X],
                    lambda case: (EDGES.index(case[0]) + EDGES.index(case[1])
                                  + SORTED_X.index(case[2])) % 3 == 0)


@pytest.mark.parametrize("left, right, sorted_x", EDGE_CASES)
@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_edges_and_orders(x64, left, right, sorted_x):
    rng = np.random.default_rng(zlib.crc32(repr((str(left), str(right), sorted_x)).encode()))
    real = np.float64 if x64 else np.float32
    cplx = np.complex128 if x64 else np.complex64
    with jax.enable_x64(x64):
        for n, shape, fp_dtype, repeats in ((1, (9,), real, False),
                                            (2, (50,), cplx, False),
                                            (40, (3000,), real, True),
                                            (3000, (4, 250), real, False),
                                            (257, (3, 2, 40), cplx, True)):
            xp = make_xp(rng, n, real, repeats)
            x = make_x(rng, shape, real, sort=sorted_x is not False)
            check(jnp.asarray(x), jnp.asarray(xp), jnp.asarray(make_fp(rng, n, fp_dtype)),
                  left, right, sorted_x=sorted_x)


@pytest.mark.parametrize("period", [2 * np.pi, -5.0, 7, 0.0])
@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_period(x64, period):
    """xp in any order, wrapped; left and right ignored; a sorted x, whose
    order the wrapping breaks, with each sorted_x."""
    rng = np.random.default_rng(11)
    real = np.float64 if x64 else np.float32
    with jax.enable_x64(x64):
        for n, shape, orders in ((1, (20,), [None]), (300, (2, 500), SORTED_X)):
            xp = jnp.asarray(rng.uniform(-20, 20, n).astype(real))
            fp = jnp.asarray(make_fp(rng, n, real))
            x = jnp.asarray(make_x(rng, shape, real, sort=True))
            for sorted_x in orders:
                check(x, xp, fp, period=period, sorted_x=sorted_x)
        check(x, xp, fp.astype(jnp.complex64), "extrapolate", 3.0, period=period)


def cast(values: np.ndarray, dtype: str) -> jax.Array:
    """Float64 values in `dtype`, cast by numpy: integers and bool get finite
    values (unsigned ones and bool non-negative), so a sorted array stays
    sorted."""
    dt = jnp.dtype(dtype)
    if dt.kind in "biu":
        values = np.nan_to_num(values, nan=0.0, posinf=100.0, neginf=-100.0)
        values = np.clip(values, 0, None) if dt.kind in "bu" else values
    return jnp.asarray(values.astype(dt))


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_dtypes_promote_as_in_jnp(x64):
    rng = np.random.default_rng(12)
    xp = make_xp(rng, 30, np.float64)
    x = make_x(rng, (200,), np.float64, sort=True)
    fp = make_fp(rng, 30, np.float64)
    types = ["bool", "int8", "uint8", "int32", "float16", "float32"] + \
        (["int64", "uint64", "float64", "complex128"] if x64 else [])
    with jax.enable_x64(x64):
        for t in types:
            # x and xp promote together, fp on its own; integers become floats.
            if t != "complex128":  # x must be real
                check(cast(x, t), jnp.asarray(xp), jnp.asarray(fp))
            if t not in ("bool", "complex128"):  # xp must stay sorted, and real
                check(jnp.asarray(x), cast(xp, t), jnp.asarray(fp))
            if jnp.issubdtype(t, jnp.inexact):
                check(jnp.asarray(x), jnp.asarray(xp), cast(fp, t))
            else:
                # fp converted in the same fusion as the formula: there XLA
                # contracts fp0 + q * df into one FMA in jnp's program, not
                # in ours (whose search is a custom call): the last bit or so
                # differs.
                args = (jnp.asarray(x), jnp.asarray(xp), cast(fp, t))
                got, want = jaxsearch.interp(*args), reference(*args)
                assert got.dtype == want.dtype
                np.testing.assert_allclose(got, want, rtol=0,
                                           atol=8 * jnp.finfo(got.dtype).eps * np.abs(fp).max())
        # Scalars and numpy values for x, left and right; arrays for left and
        # right that broadcast against x.
        jxp, jfp = jnp.asarray(xp).astype(jnp.float16), jnp.asarray(fp).astype(jnp.float16)
        check(2.5, jxp, jfp)
        check(np.float32(-60.0), jxp, jfp, 1, np.float64(2.0))
        check(jnp.asarray(x).reshape(2, 100), jxp, jfp, jnp.arange(100.0), jnp.ones((2, 1)))
        check(jnp.asarray(x), jxp, jfp, np.float32(-1.0), right=jnp.float16(5.0))


def test_degenerate_abscissae_and_values():
    rng = np.random.default_rng(13)
    x = jnp.asarray(make_x(rng, (400,), np.float32, sort=True))
    for xp in ([0.0, 0.0, 0.0], [-1.0, -1.0, 3.0, 3.0], [1.0, 1.0 + 2**-23],
               [-np.inf, 0.0, np.inf], [0.0, 1.0, np.nan]):
        fp = jnp.asarray(make_fp(rng, len(xp), np.float32))
        for edge in (None, "extrapolate"):
            check(x, jnp.asarray(xp, jnp.float32), fp, edge, edge)
    xp = jnp.asarray(make_xp(rng, 9, np.float32))
    fp = jnp.asarray([0.0, np.inf, -np.inf, np.nan, 1.0, 1e38, -1e38, 2.0, 3.0], jnp.float32)
    check(x, xp, fp, "extrapolate", "extrapolate")
    check(xp, xp, fp)  # x exactly at the abscissae
    check(jnp.zeros((0, 4)), xp, fp)


@pytest.mark.parametrize("call, error", [
    (lambda: jaxsearch.interp(1.0, jnp.zeros(0), jnp.zeros(0)), IndexError),
    (lambda: jaxsearch.interp(jnp.zeros(0), jnp.zeros(0), jnp.zeros(0)), TypeError),
    (lambda: jaxsearch.interp(jnp.ones(2), jnp.arange(3.0), jnp.arange(4.0)), ValueError),
    (lambda: jaxsearch.interp(2.0, 3.0, 4.0), ValueError),
    (lambda: jaxsearch.interp(jnp.ones(2), jnp.ones((2, 2)), jnp.ones((2, 2))), ValueError),
    (lambda: jaxsearch.interp(jnp.ones(2), jnp.arange(3.0), jnp.arange(3.0), "flat"),
     ValueError),
    (lambda: jaxsearch.interp(jnp.ones(2), jnp.arange(3.0), jnp.arange(3.0), None, "clip"),
     ValueError),
    (lambda: jaxsearch.interp(jnp.ones(2) + 1j, jnp.arange(3.0), jnp.arange(3.0)), ValueError),
    (lambda: jaxsearch.interp(jnp.ones(2), jnp.arange(3.0) + 0j, jnp.arange(3.0)), ValueError),
    (lambda: jaxsearch.interp(jnp.ones(2), jnp.arange(3.0), jnp.arange(3.0),
                              period=jnp.ones(2)), ValueError),
    (lambda: jaxsearch.interp(jnp.ones(3), jnp.arange(3.0), jnp.arange(3.0),
                              left=jnp.ones(2)), ValueError),
    (lambda: jaxsearch.interp([1.0], jnp.arange(3.0), jnp.arange(3.0)), TypeError),
    (lambda: jaxsearch.interp(jnp.ones(2), jnp.arange(3.0), None), TypeError),
    (lambda: jaxsearch.interp(jnp.ones(2), jnp.arange(3.0), jnp.arange(3.0), sorted_x=1),
     TypeError),
])
def test_errors_as_in_jnp(call, error):
    with pytest.raises(error):
        call()


def test_bfloat16_abscissae_as_in_jnp():
    """bfloat16 abscissae need numpy's finfo of bfloat16, which ml_dtypes
    gives from 0.7 on: jaxsearch raises where jnp raises (ValueError before),
    and answers as jnp does where it answers."""
    args = (jnp.ones(2, jnp.bfloat16), jnp.arange(3, dtype=jnp.bfloat16), jnp.arange(3.0))
    try:
        want = jnp.interp(*args)
    except ValueError:
        with pytest.raises(ValueError):
            jaxsearch.interp(*args)
    else:
        np.testing.assert_array_equal(jaxsearch.interp(*args), want)


def test_errors_jnp_raises_too():
    """The error cases above that jnp has, raised by jnp with the same types."""
    x, xp = jnp.ones(2), jnp.arange(3.0)
    for args, kwargs, error in (((1.0, jnp.zeros(0), jnp.zeros(0)), {}, IndexError),
                                ((x, jnp.zeros(0), jnp.zeros(0)), {}, TypeError),
                                ((x, xp, xp, "flat"), {}, ValueError),
                                ((x + 1j, xp, xp), {}, ValueError),
                                ((x, xp, xp), {"period": jnp.ones(2)}, ValueError),
                                (([1.0], xp, xp), {}, TypeError)):
        for fn in (jaxsearch.interp, jnp.interp):
            with pytest.raises(error):
                fn(*args, **kwargs)


def test_jit_vmap_and_grad():
    rng = np.random.default_rng(14)
    xp = jnp.asarray(np.stack([make_xp(rng, 64, np.float32, repeats=r) for r in (False, True)]))
    fp = jnp.asarray(np.stack([make_fp(rng, 64, np.float32) for _ in range(2)]))
    # Finite, for finite gradients to compare.
    x = jnp.asarray(np.stack([np.sort(np.nan_to_num(make_x(rng, (500,), np.float32, False)))
                              for _ in range(2)]))

    def ours(x, xp, fp):
        return jaxsearch.interp(x, xp, fp, "extrapolate", sorted_x=True)

    def theirs(x, xp, fp):
        return jnp.interp(x, xp, fp, "extrapolate")

    assert_same_bits(jax.jit(jax.vmap(ours))(x, xp, fp), jax.vmap(theirs)(x, xp, fp))
    assert_same_bits(jax.vmap(ours, (0, None, None))(x, xp[0], fp[0]),
                     jax.vmap(theirs, (0, None, None))(x, xp[0], fp[0]))
    assert_same_bits(jax.vmap(jax.vmap(ours, (None, 0, 0)), (0, None, None))(x, xp, fp),
                     jax.vmap(jax.vmap(theirs, (None, 0, 0)), (0, None, None))(x, xp, fp))
    periodic = jax.vmap(lambda x, xp, fp: jaxsearch.interp(x, xp, fp, period=30.0))
    assert_same_bits(periodic(x, xp, fp),
                     jax.vmap(lambda x, xp, fp: jnp.interp(x, xp, fp, period=30.0))(x, xp, fp))

    for argnums in (0, 1, 2):
        got = jax.jit(jax.grad(lambda *a: jnp.sum(ours(*a) ** 2), argnums))(x[1], xp[1], fp[1])
        want = jax.grad(lambda *a: jnp.sum(theirs(*a) ** 2), argnums)(x[1], xp[1], fp[1])
        # Scatter-adds of many float32 terms: the order of the sums may differ.
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)
    # Forward mode too, and a gradient through the fill value.
    tangents = (jnp.ones(500), jnp.zeros(64), jnp.ones(64))
    assert_same_bits(jax.jvp(ours, (x[0], xp[0], fp[0]), tangents)[1],
                     jax.jvp(theirs, (x[0], xp[0], fp[0]), tangents)[1])
    fill = jax.grad(lambda v: jnp.sum(jaxsearch.interp(x[0], xp[0], fp[0], v, v)))(2.0)
    assert fill == jax.grad(lambda v: jnp.sum(jnp.interp(x[0], xp[0], fp[0], v, v)))(2.0)


REALS = st.one_of(st.sampled_from([-np.inf, -3.0, -0.0, 0.0, 0.5, 3.0, np.inf, np.nan]),
                  st.floats(-20, 20, width=32))


@st.composite
def problems(draw):
    n = draw(st.sampled_from([1, 2, 3, 8, 50]))
    m = draw(st.sampled_from([0, 1, 5, 100]))
    xp = np.sort(np.array(draw(st.lists(st.floats(-10, 10, width=32) | st.sampled_from(
        [-1.0, 0.0, 1.0]), min_size=n, max_size=n)), np.float32))
    fp = np.array(draw(st.lists(REALS, min_size=n, max_size=n)), np.float32)
    x = np.array(draw(st.lists(REALS, min_size=m, max_size=m)), np.float32)
    sorted_x = draw(st.sampled_from([None, True, False]))
    if sorted_x or draw(st.booleans()):
        x = sort_keys(x)
    edges = st.sampled_from([None, "extrapolate", 1.5, -np.inf])
    period = draw(st.sampled_from([None, None, 4.0]))
    return x, xp, fp, draw(edges), draw(edges), period, sorted_x


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_matches_jnp_property(problem):
    x, xp, fp, left, right, period, sorted_x = problem
    check(jnp.asarray(x), jnp.asarray(xp), jnp.asarray(fp), left, right, period,
          sorted_x=sorted_x)
