"""searchsorted_cumsum against the float64 reference, numpy.searchsorted(
numpy.cumsum(w, dtype=float64), v), under its accuracy contract: an index
may differ only where the needle lies within one float32 ulp (float32
inputs) or 1e-12 relative (float64 inputs, against the exact running sum)
of the running sums in between."""

from __future__ import annotations

import bisect
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.lowering import on_abstract_gpu_if_needed
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxsearch
from jaxsearch.core import cumsum
from jaxsearch.core.implementations import CUMSUM_IMPLEMENTATIONS
from jaxsearch.tools.bench import resampling
from jaxsearch.tools.bench.resampling_accuracy import beyond_contract, float32_ulps

IMPLEMENTATIONS = (None, "cython", "xla")


def reference(w, v, side):
    """The float64 running sums, and numpy's indices in them."""
    prefix = np.cumsum(np.asarray(w, np.float64), dtype=np.float64)
    return prefix, np.searchsorted(prefix, np.asarray(v, np.float64).ravel(), side)


def check_float32(w, v, side="left", **kwargs):
    """searchsorted_cumsum on float32 inputs meets the contract; returns it."""
    out = jaxsearch.searchsorted_cumsum(w, v, side, **kwargs)
    assert out.shape == np.shape(v) and out.dtype == jnp.int32
    out = np.asarray(out).ravel()
    prefix, ref = reference(w, v, side)
    assert out.min(initial=0) >= 0 and out.max(initial=0) <= len(w)
    v32 = np.asarray(v, np.float32).ravel()
    assert beyond_contract(prefix, v32, out, ref, float32_ulps(prefix)) == 0
    return out


# Non-negative float32 weights with ties, zeros, tiny and large values; no
# subnormals (XLA flushes them to zero, numpy does not).
WEIGHT = st.one_of(
    st.sampled_from([0.0, 0.1, 0.25, 1.0, 3.0, 1e-30, 1e30, np.inf]),
    st.floats(0, 1e6, width=32, allow_subnormal=False))
NEEDLE = st.one_of(
    st.sampled_from([-np.inf, -1.0, 0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 1e30, np.inf, np.nan]),
    st.floats(-10, 1e7, width=32, allow_subnormal=False))
LENGTHS = st.sampled_from([1, 2, 3, 7, 64, 257, 1000])


@settings(max_examples=150, deadline=None)
@given(w=LENGTHS.flatmap(lambda n: st.lists(WEIGHT, min_size=n, max_size=n)),
       v=LENGTHS.flatmap(lambda m: st.lists(NEEDLE, min_size=m, max_size=m)),
       sort_v=st.booleans(), side=st.sampled_from(["left", "right"]),
       sorted_v=st.sampled_from([None, False, "promise"]),
       implementation=st.sampled_from(IMPLEMENTATIONS))
def test_float32_contract(w, v, sort_v, side, sorted_v, implementation):
    w = np.array(w, np.float32)
    v = np.array(v, np.float32)
    if sort_v or sorted_v == "promise":
        v = np.sort(v)  # NaN last
    check_float32(w, v, side, sorted_v=True if sorted_v == "promise" else sorted_v,
                  implementation=implementation)


# Examples enough to reach each implementation with each size and scheme
# several times; a failure prints its seed, which regenerates it.
@settings(max_examples=16, deadline=None)
@given(n=st.sampled_from([10**6 + 3, 1 << 20]), tiny=st.sampled_from([1e-30, 1e-12, 1e-7]),
       huge=st.sampled_from([1e3, 1e10, 1e30]), n_huge=st.integers(1, 5),
       scheme=st.sampled_from(resampling.SCHEMES), seed=st.integers(0, 2**32 - 1),
       implementation=st.sampled_from(IMPLEMENTATIONS))
def test_float32_adversarial_weights(n, tiny, huge, n_huge, scheme, seed, implementation):
    """Many tiny weights and a few huge ones, 1e6+ particles: a float32
    running sum loses the tiny ones; the contract holds, also for needles
    placed on the running sums themselves."""
    rng = np.random.default_rng(seed)
    w = (rng.random(n) * tiny).astype(np.float32)
    w[rng.integers(0, n, n_huge)] = huge
    total = np.sum(w, dtype=np.float64)
    v = (resampling.sorted_uniforms(scheme, n, rng) * total).astype(np.float32)
    prefix = np.cumsum(w, dtype=np.float64)
    v[::1000] = np.sort(prefix[rng.integers(0, n, len(v[::1000]))].astype(np.float32))
    check_float32(w, np.sort(v), "left", sorted_v=True, implementation=implementation)


def exact_reference(k, scale, v, side):
    """Weights k * 2**scale (k: int64, exact in float64): the exact running
    sums rounded once to float64, and each needle's index among the exact
    sums (Python compares its ints with floats exactly)."""
    exact = np.cumsum(k, dtype=np.int64)
    prefix = np.ldexp(exact.astype(np.float64), scale)
    keys = exact.tolist()
    find = bisect.bisect_left if side == "left" else bisect.bisect_right
    ref = [len(keys) if np.isnan(x) else find(keys, float(np.ldexp(x, -scale))) for x in v]
    return prefix, np.array(ref, np.int64)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("side", ["left", "right"])
def test_float64_adversarial_against_the_exact_sum(x64, implementation, side):
    """float64: 1e6 tiny weights after a few huge ones. numpy's own float64
    running sum drops each tiny weight (so it strays beyond 1e-12 relative
    from the exact sum); searchsorted_cumsum stays within 1e-12."""
    rng = np.random.default_rng(7)
    n, scale = 10**6 + 5, -40
    k = rng.integers(1, 4, n).astype(np.int64)          # tiny: about 1e-12 each
    k[rng.integers(0, 100, 3)] = 1 << 55               # huge: about 3e4
    w = np.ldexp(k.astype(np.float64), scale)
    prefix, _ = exact_reference(k, scale, [], side)
    assert abs(np.cumsum(w)[-1] - prefix[-1]) > 1e-12 * prefix[-1]  # numpy strays
    v = np.sort(np.concatenate([rng.random(20000) * prefix[-1] * 1.01,
                                prefix[rng.integers(0, n, 2000)], [np.nan, np.inf, -1.0]]))
    prefix, ref = exact_reference(k, scale, v, side)
    out = np.asarray(jaxsearch.searchsorted_cumsum(w, v, side, sorted_v=True,
                                                   implementation=implementation))
    assert beyond_contract(prefix, v, out, ref, 1e-12 * np.abs(prefix)) == 0


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("sorted_v", [None, True, False])
def test_float32_inputs_with_x64(x64, implementation, sorted_v):
    rng = np.random.default_rng(3)
    w = rng.random(5000).astype(np.float32)
    v = np.sort(rng.random(3000) * 2600).astype(np.float32)
    check_float32(w, v, "right", sorted_v=sorted_v, implementation=implementation)


@pytest.mark.parametrize("segment", [1, 3, 64])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("order", ["sorted", "check", "any"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_kernel_segments_and_threads(segment, threads, order, side):
    """Short segments and several threads on small inputs: every segment
    boundary, phase and part; NaN weights and needles included."""
    rng = np.random.default_rng(segment * 10 + threads)
    w = rng.random(2000).astype(np.float32)
    w[rng.random(2000) < 0.2] = 0.0
    w[1900] = np.nan
    prefix = np.cumsum(w, dtype=np.float64)
    v = np.concatenate([rng.random(3000) * prefix[1899] * 1.1, prefix[:1900:7],
                        [np.nan] * 5]).astype(np.float32)
    v = np.sort(v) if order != "any" else rng.permutation(v)
    out = cumsum.search(jnp.asarray(w), jnp.asarray(v), side=side, order=order,
                         out_dtype=np.int32, segment=segment, threads=threads)
    ref = np.searchsorted(prefix, v.astype(np.float64), side)
    assert beyond_contract(prefix, v, np.asarray(out), ref, float32_ulps(prefix)) == 0


def test_check_order_finds_unsorted_needles():
    rng = np.random.default_rng(0)
    w = rng.random(10**5).astype(np.float32)
    v = np.sort(rng.random(10**5) * 5e4).astype(np.float32)
    v[[10, 60000]] = v[[60000, 10]]  # out of order in two parts
    check_float32(w, v, sorted_v=None)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("sorted_v", [None, True, False])
def test_negative_weights_stay_in_bounds(implementation, sorted_v):
    rng = np.random.default_rng(1)
    for n in (1, 5, 5000):
        w = (rng.standard_normal(n) * 10).astype(np.float32)
        w[::17] = -np.inf
        v = np.sort(rng.standard_normal(3000) * 30).astype(np.float32)
        out = np.asarray(jaxsearch.searchsorted_cumsum(w, v, sorted_v=sorted_v,
                                                       implementation=implementation))
        assert out.shape == v.shape and out.min() >= 0 and out.max() <= n
    # A broken promise on the needles too.
    out = np.asarray(jaxsearch.searchsorted_cumsum(w, v[::-1], sorted_v=True,
                                                   implementation=implementation))
    assert out.min() >= 0 and out.max() <= len(w)


def test_jit_uses_the_custom_call_on_cpu():
    f = jax.jit(functools.partial(jaxsearch.searchsorted_cumsum, sorted_v=True))
    w, v = jnp.ones(100), jnp.linspace(0, 100, 50)
    assert "jaxsearch_searchsorted_cumsum_cpu" in f.lower(w, v).as_text()
    np.testing.assert_array_equal(f(w, v), np.searchsorted(np.cumsum(np.ones(100)),
                                                           np.linspace(0, 100, 50)))


def test_export_for_cpu_and_cuda():
    """One artifact for both platforms (per-platform lowering rules; jax 0.12
    lowers for cuda only on an abstract GPU here); run here on CPU."""
    f = jax.jit(functools.partial(jaxsearch.searchsorted_cumsum, sorted_v=True))
    w, v = jnp.ones(1000), jnp.linspace(0, 1000, 300)
    exported = on_abstract_gpu_if_needed(lambda: jax.export.export(
        f, platforms=["cpu", "cuda"], disabled_checks=jaxsearch.export_disabled_checks())(w, v))
    assert "jaxsearch_searchsorted_cumsum_cpu" in exported.mlir_module()
    np.testing.assert_array_equal(exported.call(w, v), f(w, v))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_vmap_batched_w_v_and_both(implementation):
    rng = np.random.default_rng(2)
    w = rng.random((4, 300)).astype(np.float32)
    v = np.sort(rng.random((4, 200)) * 160, axis=1).astype(np.float32)
    f = functools.partial(jaxsearch.searchsorted_cumsum, sorted_v=True,
                          implementation=implementation)

    def expected(wr, vr):
        return reference(wr, vr, "left")[1]

    np.testing.assert_array_equal(jax.vmap(f)(w, v), [expected(a, b) for a, b in zip(w, v)])
    np.testing.assert_array_equal(jax.vmap(f, (None, 0))(w[0], v),
                                  [expected(w[0], b) for b in v])
    np.testing.assert_array_equal(jax.vmap(f, (0, None))(w, v[0]),
                                  [expected(a, v[0]) for a in w])
    nested = jax.vmap(jax.vmap(f, (None, 0)), (0, None))(w, v)
    np.testing.assert_array_equal(nested, [[expected(a, b) for b in v] for a in w])


def test_grad_is_zero():
    def loss(w, v):
        return jnp.sum(jaxsearch.searchsorted_cumsum(w, v).astype(jnp.float32) * w[0] * v[0])

    gw, gv = jax.grad(loss, argnums=(0, 1))(jnp.ones(10), jnp.linspace(0.5, 9.5, 4))
    assert not np.any(gw[1:]) and not np.any(gv[1:])


def test_dtypes_shapes_and_empty():
    w = np.array([1, 0, 2, 3])
    v = np.array([[0.5, 1.0], [3.0, 7.0]])
    for wd in (np.int32, np.float16, jnp.bfloat16, np.float32):
        out = jaxsearch.searchsorted_cumsum(jnp.asarray(w, wd), v)
        assert out.shape == (2, 2) and out.dtype == jnp.int32
        np.testing.assert_array_equal(out, np.searchsorted(np.cumsum(w), v))
    # No weights: every needle goes before the (empty) running sum, on each
    # side and route, as numpy's searchsorted of an empty array says.
    for side in ("left", "right"):
        for implementation in CUMSUM_IMPLEMENTATIONS:
            out = jaxsearch.searchsorted_cumsum(jnp.zeros(0), v, side,
                                                implementation=implementation)
            assert out.shape == (2, 2) and out.dtype == jnp.int32
            np.testing.assert_array_equal(out, np.searchsorted(np.zeros(0), v, side))
    assert jaxsearch.searchsorted_cumsum(w, jnp.zeros((3, 0))).shape == (3, 0)
    assert int(jaxsearch.searchsorted_cumsum(w, 2.5)) == 2


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(side="middle"), ValueError, "side"),
    (dict(implementation="cuda"), ValueError, "implementation"),
    (dict(sorted_v="yes"), TypeError, "sorted_v"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        jaxsearch.searchsorted_cumsum(jnp.ones(3), jnp.ones(2), **kwargs)


def test_bad_inputs():
    with pytest.raises(ValueError, match="1-dimensional"):
        jaxsearch.searchsorted_cumsum(jnp.ones((2, 3)), jnp.ones(2))
    with pytest.raises(TypeError, match="real"):
        jaxsearch.searchsorted_cumsum(jnp.ones(3, jnp.complex64), jnp.ones(2))
    with pytest.raises(TypeError):
        jaxsearch.searchsorted_cumsum(None, jnp.ones(2))


@pytest.mark.parametrize("side", ["left", "right"])
def test_pallas_route_in_interpret_mode(side):
    """implementation="pallas" on CPU: the compensated running sum searched
    by the Pallas merge path in interpret mode."""
    rng = np.random.default_rng(5)
    w = rng.random(100).astype(np.float32)
    v = np.sort(np.concatenate([rng.random(60) * 55, [np.nan]])).astype(np.float32)
    check_float32(w, v, side, sorted_v=True, implementation="pallas")
