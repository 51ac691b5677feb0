"""Each public function runs jaxsearch's kernels where it claims to, and
hands the call to jnp where it says it does, read from the compiled program
(`helpers.served`): a function answering through jnp gives jnp's answers,
so only this tells a silent fallback from the fast path."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.lowering import TRITON_TARGET, on_abstract_gpu_if_needed
from helpers.served import assert_cpu_kernel, assert_gpu_kernels, assert_jnp, served

import jaxsearch
from jaxsearch import tuning
from jaxsearch.core import cpu, gpu

SORTED_V = [None, True, False]
ORDER = {None: "check", True: "sorted", False: "any"}
# The kernels a call runs: the checked call runs the backend's checked kernel
# (both kinds behind a flag read on the device).
KINDS = {None: {"checked"}, True: {"merge_path"}, False: {"binary_search"}}

A = jnp.linspace(-1.0, 1.0, 100)
V = jnp.linspace(-1.5, 1.5, 60)
W = jnp.full(100, 0.01)


@pytest.mark.parametrize("implementation", [None, "cython"])
@pytest.mark.parametrize("sorted_v", SORTED_V)
def test_searchsorted_runs_the_cpu_kernel(sorted_v, implementation):
    def f(a, v):
        return jaxsearch.searchsorted(a, v, sorted_v=sorted_v, implementation=implementation)

    assert_cpu_kernel(f, A, V, order=ORDER[sorted_v])
    np.testing.assert_array_equal(f(A, V), jnp.searchsorted(A, V))


@pytest.mark.parametrize("n, m", [(10, 20_000), (20_000, 20_000), (20_000, 50)])
def test_each_kernels_regime_runs_that_kernel(n, m):
    """The default call picks the kernel the tuning in force names for these
    sizes (the shipped cache's; conftest isolates the user's), and the
    three regimes of `test_checked_order` reach three different kernels."""
    a, v = jnp.linspace(0.0, 1.0, n), jnp.linspace(0.0, 1.0, m)
    config, source = tuning.resolve_cpu_config(n, m, np.float32)
    want = tuning.choose_cpu_kernel(n, m, config)
    assert want == {(10, 20_000): "runs", (20_000, 20_000): "merge", (20_000, 50): "bisect"}[
        (n, m)], f"the config in force ({source}) moved this regime: {config}"
    assert_cpu_kernel(lambda a, v: jaxsearch.searchsorted(a, v), a, v, kernel=want,
                      order="check")


@pytest.mark.parametrize("kernel", cpu.KERNELS)
def test_use_cpu_config_picks_the_kernel(kernel):
    """A config override reaches the custom call: the kernel and threads."""
    ratios = {"bisect": dict(bisect_ratio=1e-9), "runs": dict(bisect_ratio=1e9, runs_ratio=1e-9),
              "merge": dict(bisect_ratio=1e9, runs_ratio=1e9)}[kernel]
    with tuning.use_cpu_config(tuning.CpuConfig(threads=3, min_parallel=7, **ratios)):
        s = assert_cpu_kernel(lambda a, v: jaxsearch.searchsorted(a, v, sorted_v=True), A, V,
                              kernel=kernel, order="sorted")
    assert "threads = 3 : i32" in s.text and "min_parallel = 7 : i32" in s.text


def test_vmap_and_sorter_keep_the_cpu_kernel():
    batched = jnp.stack([A, A + 1])
    assert_cpu_kernel(jax.vmap(lambda a: jaxsearch.searchsorted(a, V)), batched)
    order = jnp.argsort(-A)
    assert_cpu_kernel(lambda a, v, s: jaxsearch.searchsorted(a, v, sorter=s), A[::-1], V, order)


@pytest.mark.parametrize("implementation", ["pallas", "mosaic"])
@pytest.mark.parametrize("sorted_v", SORTED_V)
def test_gpu_implementations_run_their_kernels(sorted_v, implementation):
    """On a CPU backend, in their interpreter: merge path for sorted needles,
    binary search for any, for the checked call the backend's checked
    kernel."""
    ok, reason = gpu.status(implementation, interpret=True)
    if not ok:
        pytest.skip(reason)
    assert_gpu_kernels(lambda a, v: jaxsearch.searchsorted(
        a, v, sorted_v=sorted_v, implementation=implementation), A, V,
        kinds=KINDS[sorted_v], backend=implementation)


def test_triton_implementation_is_checked_elsewhere():
    """Triton's interpreter needs TRITON_INTERPRET=1 before triton imports:
    `test_gpu_dispatch` runs it in a process of its own; here only that it
    refuses clearly where it cannot run."""
    ok, reason = gpu.status("triton", interpret=True)
    if ok:
        pytest.skip("triton can run: tests/core/test_gpu_dispatch.py covers it")
    with pytest.raises(ValueError, match="triton"):
        jaxsearch.searchsorted(A, V, implementation="triton")


def test_default_call_lowered_for_cuda_runs_the_gpu_kernels():
    lowered = on_abstract_gpu_if_needed(lambda: jax.jit(jaxsearch.searchsorted).trace(
        A, V).lower(lowering_platforms=("cuda",)).as_text())
    assert TRITON_TARGET in lowered and cpu.TARGET_NAME not in lowered


@pytest.mark.parametrize("sorted_x", SORTED_V)
@pytest.mark.parametrize("right", [False, True])
def test_digitize_runs_the_cpu_kernel(sorted_x, right):
    def f(x, bins):
        return jaxsearch.digitize(x, bins, right, sorted_x=sorted_x)

    assert_cpu_kernel(f, V, A, order=ORDER[sorted_x])
    assert_cpu_kernel(f, V, A[::-1], order=ORDER[sorted_x])  # falling bins
    np.testing.assert_array_equal(f(V, A), jnp.digitize(V, A, right))


@pytest.mark.parametrize("period", [None, 0.7])
@pytest.mark.parametrize("sorted_x", SORTED_V)
def test_interp_runs_the_cpu_kernel(sorted_x, period):
    def f(x, xp, fp):
        return jaxsearch.interp(x, xp, fp, period=period, sorted_x=sorted_x)

    # With a period, x is wrapped and its order checked (False stays False).
    order = ORDER[sorted_x] if period is None else ("any" if sorted_x is False else "check")
    # One call, the search in interp mode, and no gather of jnp's formula.
    s = assert_cpu_kernel(f, V, A, A ** 2, target=cpu.INTERP_TARGET_NAME, order=order)
    assert s.targets == {cpu.INTERP_TARGET_NAME}, s
    assert "gather" not in s.text, s
    np.testing.assert_allclose(f(V, A, A ** 2), jnp.interp(V, A, A ** 2, period=period),
                               rtol=1e-6)


@pytest.mark.parametrize("implementation", [None, "cython"])
@pytest.mark.parametrize("sorted_v", SORTED_V)
def test_searchsorted_cumsum_runs_the_cpu_kernel(sorted_v, implementation):
    def f(w, v):
        return jaxsearch.searchsorted_cumsum(w, v, sorted_v=sorted_v,
                                             implementation=implementation)

    assert_cpu_kernel(f, W, V, target=cpu.CUMSUM_TARGET_NAME, order=ORDER[sorted_v])


@pytest.mark.parametrize("sorted_v", SORTED_V)
def test_searchsorted_cumsum_pallas_runs_the_gpu_kernels(sorted_v):
    def f(w, v):
        return jaxsearch.searchsorted_cumsum(w, v, sorted_v=sorted_v, implementation="pallas")

    s = served(f, W, V)
    assert {kind for _, kind in s.gpu_kernels} == KINDS[sorted_v], s
    assert not s.calls, s


def test_searchsorted_cumsum_xla_is_jnp():
    assert_jnp(lambda w, v: jaxsearch.searchsorted_cumsum(w, v, implementation="xla"), W, V)


# ------------------------------------------------ hand-offs to jnp, on purpose


@pytest.mark.parametrize("method", jaxsearch.JNP_METHODS)
def test_method_hands_searchsorted_and_digitize_to_jnp(method):
    assert_jnp(lambda a, v: jaxsearch.searchsorted(a, v, method=method), A, V)
    assert_jnp(lambda x, bins: jaxsearch.digitize(x, bins, method=method), V, A)


def test_implementation_xla_is_jnp():
    assert_jnp(lambda a, v: jaxsearch.searchsorted(a, v, implementation="xla"), A, V)


@pytest.mark.parametrize("dtype", [jnp.complex64, jnp.float8_e4m3fn])
def test_dtypes_without_kernels_are_jnp(dtype):
    a, v = A.astype(dtype), V.astype(dtype)
    assert_jnp(lambda a, v: jaxsearch.searchsorted(a, v), a, v)
    np.testing.assert_array_equal(jaxsearch.searchsorted(a, v), jnp.searchsorted(a, v))


@pytest.mark.parametrize("name", ["searchsorted", "digitize", "interp", "searchsorted_cumsum"])
def test_lowered_for_tpu_is_jnp(name):
    """No TPU kernel: lowered for TPU (on this machine, without one), jnp's."""
    f = {"searchsorted": lambda a, v: jaxsearch.searchsorted(a, v),
         "digitize": lambda a, v: jaxsearch.digitize(v, a),
         "interp": lambda a, v: jaxsearch.interp(v, a, a),
         "searchsorted_cumsum": lambda a, v: jaxsearch.searchsorted_cumsum(a + 2, v)}[name]
    s = assert_jnp(f, A, V, platform="tpu")
    assert "stablehlo.while" in s.text  # jnp's scan
