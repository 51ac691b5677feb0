"""Property-based differential tests: jaxsearch against jnp (the oracle) and numpy.

The CI profile runs a few hundred examples. For the long profile set
JAXSEARCH_HYPOTHESIS_PROFILE=long (20,000 examples a test, or
JAXSEARCH_HYPOTHESIS_EXAMPLES of them):

    JAXSEARCH_HYPOTHESIS_PROFILE=long pytest tests/core/test_properties.py
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
from helpers.keys import DTYPES_32, DTYPES_64, numpy_dtype, sort_keys
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxsearch

settings.register_profile("ci", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
LONG_EXAMPLES = int(os.environ.get("JAXSEARCH_HYPOTHESIS_EXAMPLES", 20_000))
settings.register_profile("long", max_examples=LONG_EXAMPLES, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("JAXSEARCH_HYPOTHESIS_PROFILE", "ci"))

# Lengths are drawn from a few buckets so that jit compiles a bounded number
# of shapes, yet cover empty, tiny, ragged and multi-chunk sizes.
LENGTHS = st.sampled_from([0, 1, 2, 3, 7, 16, 31, 64, 100, 257, 1000, 4099])
# The Pallas kernels in interpret mode compile for seconds per shape: fewer.
PALLAS_LENGTHS = st.sampled_from([0, 1, 7, 100])
PALLAS_EXAMPLES = {"ci": 12, "long": LONG_EXAMPLES // 20}[
    os.environ.get("JAXSEARCH_HYPOTHESIS_PROFILE", "ci")]


def pool_values(dtype: str) -> list:
    """Values that stress comparisons: extremes, duplicates, NaN, +-inf, -0.0."""
    dt = numpy_dtype(dtype)
    if dt == np.bool_:
        return [False, True]
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        return [int(info.min), int(info.min) + 1, -1 if info.min < 0 else 2, 0, 1,
                int(info.max) - 1, int(info.max)]
    return [-np.inf, -1e30 if dt.itemsize >= 4 else -6e4, -1.5, -0.0, 0.0, 0.5, 1.0,
            3.25, np.inf, np.nan]


@st.composite
def problems(draw, dtypes, lengths=LENGTHS, implementations=(None, "cython", "xla")):
    dtype = draw(st.sampled_from(dtypes))
    pool = pool_values(dtype)
    # Mostly values from the pool, some random: heavy duplicates and specials.
    dt = numpy_dtype(dtype)
    lo, hi = (max(-100, int(np.iinfo(dt).min)), 100) if dt.kind in "iu" else (-100, 100)
    value = st.sampled_from(pool) if dt == np.bool_ else \
        st.one_of(st.sampled_from(pool), st.integers(lo, hi))
    n, m = draw(lengths), draw(lengths)
    a = np.array(draw(st.lists(value, min_size=n, max_size=n)), dtype=object)
    v = np.array(draw(st.lists(value, min_size=m, max_size=m)), dtype=object)
    a = sort_keys(np.asarray(a.astype(np.float64) if dt.kind == "f" else a, dtype=dt))
    v = np.asarray(v.astype(np.float64) if dt.kind == "f" else v, dtype=dt)
    sorted_v = draw(st.sampled_from([None, True, False]))
    if sorted_v is True or draw(st.booleans()):
        v = sort_keys(v)
    v_shape = draw(st.sampled_from([(m,), (1, m), (m, 1)]))
    return dict(a=a, v=v.reshape(v_shape), side=draw(st.sampled_from(["left", "right"])),
                sorted_v=sorted_v, implementation=draw(st.sampled_from(implementations)))


def check(p):
    a, v = jnp.asarray(p["a"]), jnp.asarray(p["v"])
    got = jaxsearch.searchsorted(a, v, p["side"], sorted_v=p["sorted_v"],
                                 implementation=p["implementation"])
    want = jnp.searchsorted(a, v, p["side"])
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    if p["a"].dtype != jnp.bfloat16:
        np.testing.assert_array_equal(np.asarray(got), np.searchsorted(p["a"], p["v"], p["side"]))


@given(problems(DTYPES_32))
def test_matches_jnp_and_numpy(p):
    check(p)


@given(problems(DTYPES_64))
def test_matches_jnp_and_numpy_x64(p):
    with jax.enable_x64(True):
        check(p)


@settings(max_examples=PALLAS_EXAMPLES)
@given(problems(DTYPES_32, PALLAS_LENGTHS, ("pallas",)))
def test_pallas_interpret_matches_jnp_and_numpy(p):
    check(p)
