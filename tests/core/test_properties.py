"""Property-based differential tests: jaxsearch against jnp (the oracle) and numpy.

The CI profile runs a few hundred examples. For the long profile set
JAXSEARCH_HYPOTHESIS_PROFILE=long (20,000 examples a test, or
JAXSEARCH_HYPOTHESIS_EXAMPLES of them):

    JAXSEARCH_HYPOTHESIS_PROFILE=long pytest tests/core/test_properties.py
"""

from __future__ import annotations

import contextlib
import os

import jax
import jax.numpy as jnp
import numpy as np
from helpers.keys import DTYPES_32, DTYPES_64, numpy_dtype, sort_keys
from helpers.served import assert_cpu_kernel
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import jaxsearch
from jaxsearch import tuning
from jaxsearch.core import api, cpu

settings.register_profile("ci", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
LONG_EXAMPLES = int(os.environ.get("JAXSEARCH_HYPOTHESIS_EXAMPLES", 20_000))
settings.register_profile("long", max_examples=LONG_EXAMPLES, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("JAXSEARCH_HYPOTHESIS_PROFILE", "ci"))

# Lengths are drawn from a few buckets so that jit compiles a bounded number
# of shapes, yet cover empty, tiny, ragged and multi-chunk sizes: past the
# order check's 1024-needle blocks (1025, 4099) and, with the small
# min_parallel of a drawn CpuConfig, rows cut into parts over several
# threads. Hypothesis draws at most 8,192 bytes an example (a list of ~1000
# values), so past SMALL elements the values come from a numpy Generator
# seeded by a drawn seed: `note` prints what regenerates a failing case.
LENGTHS = st.sampled_from([0, 1, 2, 3, 7, 16, 31, 64, 100, 257, 1000, 1025, 4099, 20_011])
SMALL = 64
# The Pallas kernels in interpret mode compile for seconds per shape: fewer,
# and small, but 300 needles and keys span several 256-element tiles of the
# merge path (its tile for small inputs, `configs.default_merge_path_config`)
# and several 128-needle blocks of the binary search.
PALLAS_LENGTHS = st.sampled_from([0, 1, 7, 100, 300])
PALLAS_EXAMPLES = {"ci": 24, "long": LONG_EXAMPLES // 20}[
    os.environ.get("JAXSEARCH_HYPOTHESIS_PROFILE", "ci")]
# CPU configs that force each kernel for sorted needles, on several threads
# in parts of a few needles; None: the tuning cache answers.
FORCE = {"bisect": dict(bisect_ratio=1e-9), "runs": dict(bisect_ratio=1e9, runs_ratio=1e-9),
         "merge": dict(bisect_ratio=1e9, runs_ratio=1e9)}
ORDER = {None: "check", True: "sorted", False: "any"}


@st.composite
def cpu_configs(draw):
    kernel = draw(st.sampled_from([None, *FORCE]))
    if kernel is None:
        return None
    return tuning.CpuConfig(threads=draw(st.sampled_from([2, 3, 4])),
                            min_parallel=draw(st.sampled_from([1, 7, 100, 1000])),
                            **FORCE[kernel])


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
    seed = draw(st.integers(0, 2**32 - 1))
    note(f"dtype={dtype} n={n} m={m} seed={seed}")
    a = np.array(values(draw, value, n, seeded(seed, 0, pool, lo, hi)), dtype=object)
    v = np.array(values(draw, value, m, seeded(seed, 1, pool, lo, hi)), dtype=object)
    a = sort_keys(np.asarray(a.astype(np.float64) if dt.kind == "f" else a, dtype=dt))
    v = np.asarray(v.astype(np.float64) if dt.kind == "f" else v, dtype=dt)
    sorted_v = draw(st.sampled_from([None, True, False]))
    if sorted_v is True or draw(st.booleans()):
        v = sort_keys(v)
    v_shape = draw(st.sampled_from([(m,), (1, m), (m, 1)]))
    return dict(a=a, v=v.reshape(v_shape), side=draw(st.sampled_from(["left", "right"])),
                sorted_v=sorted_v, implementation=draw(st.sampled_from(implementations)),
                cpu_config=draw(cpu_configs()) if "cython" in implementations else None)


def seeded(seed: int, stream: int, pool: list, lo: int, hi: int):
    """`take(k)`: k values from the generator of (seed, stream), mostly from
    the pool (duplicates and specials), some integers in [lo, hi]."""
    def take(k: int) -> list:
        rng = np.random.default_rng([seed, stream])
        picks = np.asarray(pool, dtype=object)[rng.integers(0, len(pool), k)]
        if pool == [False, True]:  # bool: the pool is every value
            return list(picks)
        ints = rng.integers(lo, hi, k, endpoint=True)
        return [p if f else int(i) for f, p, i in zip(rng.random(k) < 0.7, picks, ints)]

    return take


def values(draw, value, k: int, take) -> list:
    """k values: drawn by Hypothesis (so that it shrinks them) up to SMALL,
    else from the seeded generator."""
    return draw(st.lists(value, min_size=k, max_size=k)) if k <= SMALL else take(k)


def check(p):
    a, v = jnp.asarray(p["a"]), jnp.asarray(p["v"])
    config = p["cpu_config"]
    with tuning.use_cpu_config(config) if config else contextlib.nullcontext():
        got = jaxsearch.searchsorted(a, v, p["side"], sorted_v=p["sorted_v"],
                                     implementation=p["implementation"])
        if config is not None:
            check_kernel_ran(a, v, p, config)
    want = jnp.searchsorted(a, v, p["side"])
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    if p["a"].dtype != jnp.bfloat16:
        np.testing.assert_array_equal(np.asarray(got), np.searchsorted(p["a"], p["v"], p["side"]))


def check_kernel_ran(a, v, p, config):
    """Where the CPU kernels search, the one the forced config names ran,
    with its threads and parts."""
    n, m = a.shape[0], v.size
    if p["implementation"] == "xla" or api.default_implementation(n, m, a.dtype) != "cython" \
            or not n or not m:
        return
    kernel = tuning.choose_cpu_kernel(n, m, config)
    parts = cpu.planned_threads(m, threads=config.threads, min_parallel=config.min_parallel)
    note(f"{config}: kernel {kernel} on {parts} threads")
    assert_cpu_kernel(lambda a, v: jaxsearch.searchsorted(
        a, v, p["side"], sorted_v=p["sorted_v"], implementation=p["implementation"]), a, v,
        kernel=kernel, order=ORDER[p["sorted_v"]])


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
