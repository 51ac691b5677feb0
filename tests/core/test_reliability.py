"""Reliability: threads, leaks, inputs past the int32 range, errors that leave no state."""

from __future__ import annotations

import concurrent.futures
import resource
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsearch

THREADS = 8


def _rss_mib() -> float:
    """Resident set size now, in MiB (Linux: /proc; elsewhere the peak)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() / 2**20
    except OSError:
        scale = 1 if sys.platform == "darwin" else 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def test_threads_share_and_own_inputs():
    """8 Python threads call the jitted and the eager function at once, each
    checking its own answers, on shared and on private inputs."""
    rng = np.random.default_rng(0)
    shared_a = np.sort(rng.standard_normal(20_000).astype(np.float32))
    jitted = jax.jit(jaxsearch.searchsorted, static_argnames=("side", "sorted_v"))

    def worker(seed: int) -> int:
        r = np.random.default_rng(seed)
        # Sizes from small sets, so that most calls hit jit's cache.
        own_a = np.sort(r.standard_normal(int(r.choice([1, 100, 4999]))).astype(np.float32))
        checked = 0
        for step in range(30):
            a = shared_a if step % 2 else own_a
            v = r.standard_normal(int(r.choice([0, 17, 1000, 2999]))).astype(np.float32)
            if step % 3:
                v = np.sort(v)
            side = "right" if step % 4 == 0 else "left"
            fn = jitted if step % 5 else jaxsearch.searchsorted
            got = np.asarray(fn(a, v, side=side, sorted_v=None))
            np.testing.assert_array_equal(got, np.searchsorted(a, v, side))
            checked += 1
        return checked

    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        done = list(pool.map(worker, range(THREADS)))
    assert done == [30] * THREADS


def test_no_leak_over_many_calls():
    """10,000 calls over a cycle of shapes and promises, after each has
    compiled once: no array stays alive, and resident memory grows by less
    than a quarter of what leaking one output per call would add."""
    rng = np.random.default_rng(1)
    problems = []
    for n, m in [(10, 10), (1000, 3), (7, 900), (4096, 4096), (333, 12), (1, 1), (50, 0)]:
        a = jnp.asarray(np.sort(rng.standard_normal(n)).astype(np.float32))
        v = jnp.asarray(np.sort(rng.standard_normal(m)).astype(np.float32))
        problems.append((a, v, np.searchsorted(np.asarray(a), np.asarray(v))))
    for a, v, want in problems:  # warm-up: compile every shape and promise once
        for sorted_v in (True, None, False):
            np.testing.assert_array_equal(jaxsearch.searchsorted(a, v, sorted_v=sorted_v), want)
    calls = 10_000
    # The int32 outputs of one cycle of calls, per call.
    output_bytes = sum(4 * v.size for _, v, _ in problems) / len(problems)
    live_before = len(jax.live_arrays())
    before = _rss_mib()
    for call in range(calls):
        a, v, want = problems[call % len(problems)]
        got = jaxsearch.searchsorted(a, v, sorted_v=(True, None, False)[call % 3])
        if call % 997 == 0:
            np.testing.assert_array_equal(got, want)
    got.block_until_ready()
    growth = _rss_mib() - before
    print(f"resident memory growth over {calls:,} calls: {growth:.2f} MiB")
    assert len(jax.live_arrays()) <= live_before + 1, "arrays outlived their calls"  # +1: got
    bound = calls * output_bytes / 4 / 2**20
    assert growth < bound, (f"resident memory grew by {growth:.1f} MiB over {calls:,} calls "
                            f"(one leaked output per call: {4 * bound:.1f} MiB)")


def test_bad_input_leaves_no_state():
    """A rejected call changes nothing: the next good call is right."""
    a, v = jnp.arange(10.0), jnp.array([2.5, 7.0])
    for bad in (dict(side="middle"), dict(sorted_v="no"), dict(implementation="tpu"),
                dict(method="bogus")):
        with pytest.raises((ValueError, TypeError)):
            jaxsearch.searchsorted(a, v, **bad)
        np.testing.assert_array_equal(jaxsearch.searchsorted(a, v), jnp.searchsorted(a, v))
    with pytest.raises(ValueError, match="1-dimensional"):
        jaxsearch.searchsorted(jnp.ones((2, 3)), v)
    with pytest.raises(TypeError):
        jaxsearch.searchsorted(jnp.arange(3.0), "abc")


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64")
def test_index_dtype_past_int32_without_x64_matches_jnp():
    """len(a) > int32 max: jnp's error without x64, int64 indices with it
    (shapes only: nothing is allocated)."""
    a = jax.ShapeDtypeStruct((2**31 + 5,), jnp.int8)
    v = jax.ShapeDtypeStruct((10,), jnp.int8)
    with pytest.raises(OverflowError) as want:
        jax.eval_shape(jnp.searchsorted, a, v)
    with pytest.raises(OverflowError) as got:
        jax.eval_shape(jaxsearch.searchsorted, a, v)
    assert str(got.value) == str(want.value)
    with jax.enable_x64(True):
        assert jax.eval_shape(jaxsearch.searchsorted, a, v).dtype == jnp.int64


def test_haystack_past_int32(x64):
    """len(a) >= 2**31 int8 keys (2 GiB): int64 indices that match numpy on
    sampled needles."""
    n = 2**31 + 1000
    counts = np.random.default_rng(2).multinomial(n, np.ones(256) / 256)
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), counts)
    v = np.sort(np.random.default_rng(3).integers(-128, 128, 1000).astype(np.int8))
    ja = jax.device_put(a)
    for side in ("left", "right"):
        for sorted_v in (True, False):
            got = jaxsearch.searchsorted(ja, v, side, sorted_v=sorted_v)
            assert got.dtype == jnp.int64
            np.testing.assert_array_equal(np.asarray(got), np.searchsorted(a, v, side))
