"""The search handler's interp mode (cpu_ext/interp_values.pxd): one search
of x in xp whose answers become jnp.interp's values, through each route the
search can take (counted, probed, by the bin table a chunk at a time, by
buckets, merged in order), called directly with the route forced, and
through `jaxsearch.interp`. Every value must have jnp.interp's bits: the
installed jax's formula against jnp.interp itself, the other jax's (the
formula changed in jax 0.12.1) against jaxsearch's model of it, compiled by
XLA, which the installed jax's model matches in tests/core/test_interp.py."""

from __future__ import annotations

import functools
import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.cpu_calls import seeded
from helpers.served import assert_cpu_kernel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxsearch
from jaxsearch.core import cpu
from jaxsearch.core.interp import ZERO_STEPS, _formula
from jaxsearch.tuning import CpuConfig, use_cpu_config

pytestmark = pytest.mark.skipif(not cpu.AVAILABLE, reason="the CPU extension is unavailable")

SEARCH_INTERP = jax.jit(cpu.search_interp, static_argnames=(
    "clamp_left", "clamp_right", "zero_steps", "order", "kernel", "threads", "min_parallel",
    "bucket_min_bytes", "count_keys"))
CLAMPS = [(True, True), (False, True), (True, False), (False, False)]


def reference(x, xp, fp, clamp_left: bool, clamp_right: bool,
              zero_steps: bool = ZERO_STEPS) -> np.ndarray:
    """jnp.interp, compiled by XLA: fp[0] and fp[-1] beyond xp where
    clamped, else the end segments' lines. With the other jax's formula
    (`zero_steps`), jaxsearch's model of it."""
    if zero_steps != ZERO_STEPS:
        def model(x, xp, fp):
            return _formula(x, xp, fp, jnp.searchsorted(xp, x, "right"), clamp_left=clamp_left,
                            clamp_right=clamp_right, bound_x=(clamp_left, clamp_right),
                            zero_steps=zero_steps)
        return np.asarray(jax.jit(model)(x, xp, fp))
    left, right = (None if clamp else "extrapolate" for clamp in (clamp_left, clamp_right))
    return np.asarray(jax.jit(lambda x, xp, fp: jnp.interp(x, xp, fp, left, right))(x, xp, fp))


def assert_same_bits(got, want, message=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, message
    bits = np.dtype(f"u{got.dtype.itemsize}")
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=message)
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits), err_msg=message)


def make_xp(rng, n: int, dtype, kind: str) -> np.ndarray:
    """n abscissae: sorted with ties ("sorted"), sorted but for a few small
    descents ("descents": the table's marked bins), or in any order."""
    xp = np.sort(np.round(rng.standard_normal(n) * 100, 1)).astype(dtype)
    if kind == "descents":
        at = rng.choice(np.arange(1, n), max(1, n // 5000), replace=False)
        xp[at] = np.nextafter(xp[at - 1], -np.inf)
    elif kind == "any order":
        xp = rng.permutation(xp)
    return xp


def make_x(rng, m: int, xp: np.ndarray, sort: bool) -> np.ndarray:
    """m values: keys of xp, values between and beyond them, NaN and inf."""
    finite = xp[np.isfinite(xp)]
    x = np.concatenate([rng.choice(finite, m // 3),
                        rng.uniform(finite.min() - 50, finite.max() + 50, m - m // 3)])
    x = x.astype(xp.dtype)
    x[rng.integers(0, m, 4)] = [np.nan, np.inf, -np.inf, np.nan]
    x = rng.permutation(x)
    if sort:
        x = np.sort(x)  # NaN last, as the kernels take sorted needles
    return x


def make_fp(rng, n: int, dtype) -> np.ndarray:
    fp = (rng.standard_normal(n) * 10).astype(dtype)
    fp[rng.integers(0, n, 2)] = [np.inf, -1e30]
    return fp


# Each route: n keys, m values, xp's kind, x sorted or not, the order and
# kernel, and the config fields that force it.
ROUTES = {
    "counted": (20, 5000, "sorted", False, "any", "merge", {}),
    "probed, xp in any order": (3000, 5000, "any order", False, "check", "merge", {}),
    "bin table": (100_000, 60_000, "sorted", False, "any", "merge", {}),
    "bin table, descents": (100_000, 60_000, "descents", False, "check", "merge", {}),
    "buckets": (100_000, 60_000, "sorted", False, "any", "merge", {"bucket_min_bytes": 0}),
    "buckets, checked": (100_000, 60_000, "descents", False, "check", "merge",
                         {"bucket_min_bytes": 0}),
    "merged": (100_000, 60_000, "sorted", True, "sorted", "merge", {}),
    "merged, checked": (100_000, 60_000, "descents", True, "check", "merge", {}),
    "runs": (5000, 60_000, "sorted", True, "check", "runs", {}),
    "one key": (1, 1000, "sorted", False, "any", "merge", {}),
}


@functools.cache
def route_case(route: str, dtype: str):
    n, m, kind, sort, *_ = ROUTES[route]
    rng = seeded(route, dtype)
    xp = make_xp(rng, n, dtype, kind)
    return make_x(rng, m, xp, sort), xp, make_fp(rng, n, dtype)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_routes_give_jnp_values(route, dtype):
    _, _, _, _, order, kernel, fields = ROUTES[route]
    with jax.enable_x64(dtype == "float64"):
        x, xp, fp = map(jnp.asarray, route_case(route, dtype))
        for clamp_left, clamp_right in CLAMPS:
            want = reference(x, xp, fp, clamp_left, clamp_right)
            for threads in (1, 3):
                got = SEARCH_INTERP(xp, x, fp, clamp_left=clamp_left, clamp_right=clamp_right,
                                    zero_steps=ZERO_STEPS, order=order, kernel=kernel,
                                    threads=threads, min_parallel=1024, **fields)
                assert_same_bits(got, want, f"clamps {clamp_left, clamp_right}, "
                                            f"{threads} threads")


def test_interp_takes_the_buckets_and_the_table():
    """jaxsearch.interp on unsorted x, by the bin table and (with a config
    that lets any row take them) by buckets: one interp-mode call each, with
    jnp.interp's bits."""
    x, xp, fp = map(jnp.asarray, route_case("bin table", "float32"))
    for config in (CpuConfig(), CpuConfig(bucket_min_bytes=0)):
        with use_cpu_config(config):
            def f(x, xp, fp):
                return jaxsearch.interp(x, xp, fp)
            assert_cpu_kernel(f, x, xp, fp, target=cpu.INTERP_TARGET_NAME, order="check")
            assert_same_bits(jax.jit(f)(x, xp, fp), reference(x, xp, fp, True, True))


def test_fuses_where_xla_fuses():
    """The mode fuses its multiply-add where XLA's code for this CPU does:
    a product whose low bits a separate add rounds away. (The CPU's answer,
    not the compiler's: in the wheel's baseline module, built by zig's
    clang, __builtin_cpu_supports said no FMA on a CPU with FMA.)"""
    a, c = np.float32(1 + 2**-12), np.float32(-1)
    exact = float(np.float64(a) * np.float64(a) + np.float64(c))
    xla = float(jax.jit(lambda a, c: a * a + c)(a, c))
    assert xla in (exact, float(a * a + c))
    module = importlib.import_module(cpu.EXTENSION_MODULE)
    assert module.fuses_madd() == (xla == exact)


def test_operands_are_checked():
    """The handler refuses what it does not take, with XLA's error."""
    x, xp = jnp.linspace(0, 1, 10), jnp.linspace(0, 1, 5)
    call = jax.ffi.ffi_call(cpu.INTERP_TARGET_NAME, jax.ShapeDtypeStruct(x.shape, x.dtype))
    attributes = cpu._search_attributes(side="right", order="any", kernel="merge",
                                        threads=1, min_parallel=1)
    for operands, fill, formula in (((xp, x, xp[:4]), 1, 0),
                                    ((xp, x, xp.astype(jnp.int32)), 1, 0),
                                    ((xp, x, xp), 2, 0), ((xp, x, xp), 1, 2)):
        with pytest.raises(Exception, match="jaxsearch"):
            np.asarray(call(*operands, clamp_left=np.int32(fill), clamp_right=np.int32(1),
                            formula=np.int32(formula), **attributes))
    # and takes what it does
    np.asarray(call(xp, x, xp, clamp_left=np.int32(1), clamp_right=np.int32(1),
                    formula=np.int32(1), **attributes))


@st.composite
def problems(draw):
    n = draw(st.sampled_from([1, 2, 5, 33, 300]))
    m = draw(st.sampled_from([1, 7, 200]))
    values = st.floats(-5, 5, width=32) | st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan])
    knots = st.floats(-4, 4, width=32) | st.sampled_from([-1.0, 1.0, np.inf, -np.inf])
    xp = np.array(draw(st.lists(knots, min_size=n, max_size=n)), np.float32)
    if draw(st.booleans()):
        xp = np.sort(xp)
    x = np.array(draw(st.lists(values, min_size=m, max_size=m)), np.float32)
    fp = np.array(draw(st.lists(values, min_size=n, max_size=n)), np.float32)
    order = draw(st.sampled_from(["any", "check", "sorted"]))
    if order == "sorted":  # a promise: sorted x (NaN last) in a sorted xp
        xp, x = np.sort(xp), np.sort(x)
    return (x, xp, fp, order, draw(st.sampled_from(CLAMPS)), draw(st.sampled_from([1, 2])),
            draw(st.booleans()))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_matches_jnp_property(problem):
    """Either jax's formula (zero_steps), infinite knots and values included."""
    x, xp, fp, order, (clamp_left, clamp_right), threads, zero_steps = problem
    got = SEARCH_INTERP(jnp.asarray(xp), jnp.asarray(x), jnp.asarray(fp), clamp_left=clamp_left,
                        clamp_right=clamp_right, zero_steps=zero_steps, order=order,
                        kernel="merge", threads=threads, min_parallel=1)
    assert_same_bits(got, reference(x, xp, fp, clamp_left, clamp_right, zero_steps))
