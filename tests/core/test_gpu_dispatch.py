"""Which GPU implementation the cuda lowering picks, and what happens when
jax has lost Pallas' Triton backend (simulated by blocking its import)."""

import textwrap
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest
from helpers.processes import run_python

import jaxsearch
from jaxsearch import tuning
from jaxsearch.core import gpu
from jaxsearch.pallas_kernels import backends
from jaxsearch.tuning import cache

TESTS = Path(__file__).resolve().parents[1]  # where `helpers` is


@pytest.fixture
def gpu_status(monkeypatch):
    """Set which GPU implementations report themselves runnable."""
    def set_status(**ok):
        monkeypatch.setattr(gpu, "status", lambda name, interpret=False: (
            ok.get(name, False), "" if ok.get(name) else f"{name} missing"))
        gpu._fallback_warning.cache_clear()
    return set_status


def test_choose_prefers_pallas_then_mosaic_then_triton(gpu_status):
    gpu_status(pallas=True, mosaic=True, triton=True)
    assert gpu.choose(1000, 1000, np.float32) == "pallas"
    gpu_status(pallas=False, mosaic=True, triton=True)
    assert gpu.choose(1000, 1000, np.float32) == "mosaic"
    gpu_status(pallas=False, triton=True)
    assert gpu.choose(1000, 1000, np.float32) == "triton"


@pytest.mark.skipif(not gpu.status("mosaic", interpret=True)[0], reason="no Mosaic GPU here")
@pytest.mark.parametrize("capability, runs", [((8, 0), False), ((8, 9), False), ((9, 0), True),
                                              ((10, 0), True), (None, True)])
def test_mosaic_needs_compute_capability_9(monkeypatch, capability, runs):
    # Where Backend.status looks it up.
    monkeypatch.setattr(backends, "compute_capability", lambda: capability)
    ok, reason = gpu.status("mosaic")
    assert ok == runs
    assert runs or f"has {capability[0]}.{capability[1]}" in reason
    # Its interpreter runs anywhere.
    assert gpu.status("mosaic", interpret=True)[0]


def test_compute_capability_of_the_device_compiled_for():
    # No GPU in this process (JAX_PLATFORMS=cpu, or none installed): unknown.
    if jax.default_backend() == "cpu":
        assert gpu.compute_capability() is None
    else:
        major, minor = gpu.compute_capability()
        assert (major, minor) >= (1, 0)


def test_choose_follows_the_tuning_cache(gpu_status, monkeypatch):
    gpu_status(pallas=True, triton=True)
    monkeypatch.setattr(cache, "gpu_config", lambda kernel, n, m, dtype: (
        {"name": "triton"} if kernel == tuning.IMPLEMENTATION_KERNEL else None))
    assert gpu.choose(1000, 1000, np.float32) == "triton"


def test_choose_warns_once_and_names_what_to_install(gpu_status):
    gpu_status()
    with pytest.warns(RuntimeWarning, match="pallas: pallas missing; mosaic: mosaic missing; "
                                            "triton: triton missing"):
        assert gpu.choose(10, 10, np.float32) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gpu.choose(10, 10, np.float32) is None


def test_triton_implementation_unavailable_is_a_clear_error(gpu_status):
    gpu_status(pallas=True)
    with pytest.raises(ValueError, match="implementation='triton' cannot run here"):
        jaxsearch.searchsorted(np.arange(4.0), 1.0, implementation="triton")


WITHOUT_PALLAS_TRITON = textwrap.dedent("""
    import sys, warnings
    sys.modules["jax.experimental.pallas.triton"] = None  # as if jax had dropped it
    sys.path.insert(0, {tests!r})
    import jax, jax.numpy as jnp, numpy as np
    import jaxsearch
    from jaxsearch.core import gpu
    from jaxsearch.pallas_kernels import BACKENDS, MERGE_PATH
    from helpers.lowering import lower_for_cuda, mosaic_calls, triton_calls
    ok, reason = gpu.status("pallas")
    assert not ok and "Pallas Triton backend" in reason
    assert callable(BACKENDS["triton"].kernel(MERGE_PATH))
    a, v = jnp.arange(100.0), jnp.linspace(-1.0, 101.0, 7)
    # The CPU path is untouched.
    np.testing.assert_array_equal(jaxsearch.searchsorted(a, v), jnp.searchsorted(a, v))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lowered = lower_for_cuda(lambda a, v: jaxsearch.searchsorted(a, v), a, v)
    print("triton calls:", len(triton_calls(lowered)))
    print("native triton calls:", lowered.as_text().count("@triton_kernel_call"))
    print("mosaic calls:", len(mosaic_calls(lowered)))
    print("warnings:", [str(w.message) for w in caught])
""")


def test_cuda_dispatch_without_pallas_triton_backend():
    done = run_python("-c", WITHOUT_PALLAS_TRITON.format(tests=str(TESTS)))
    assert done.returncode == 0, done.stderr[-3000:]
    if gpu.status("mosaic")[0]:  # Mosaic GPU (the lowering assumes sm_90 here)
        assert "mosaic calls: 0" not in done.stdout
        assert "triton calls: 0\nnative triton calls: 0" in done.stdout
        assert "no GPU kernel can run here" not in done.stdout
    elif gpu.status("triton")[0]:  # jax-triton works here: native Triton
        assert "native triton calls: 0" not in done.stdout
    else:  # here: jnp on the GPU, with a warning that says what to install
        assert "triton calls: 0\nnative triton calls: 0" in done.stdout
        assert "no GPU kernel can run here" in done.stdout and "pip install" in done.stdout


TRITON_THROUGH_THE_API = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    import jaxsearch
    rng = np.random.default_rng(0)
    for dtype in ("float32", "int8", "uint32", "bfloat16", "bool"):
        a = jnp.sort(jnp.asarray(rng.integers(0, 50, 300)).astype(dtype))
        v = jnp.asarray(rng.integers(-5, 55, 77)).astype(dtype)
        for side in ("left", "right"):
            for vv, sorted_v in ((jnp.sort(v), True), (v, None), (v, False)):
                got = jaxsearch.searchsorted(a, vv, side, sorted_v=sorted_v,
                                             implementation="triton")
                want = jnp.searchsorted(a, vv, side)
                assert got.dtype == want.dtype, (dtype, got.dtype)
                np.testing.assert_array_equal(got, want, err_msg=f"{dtype} {side} {sorted_v}")
    print("checked")
""")


def test_triton_implementation_through_the_api_in_interpret_mode():
    """implementation="triton" on a CPU backend: Triton's interpreter."""
    pytest.importorskip("triton", reason="the native Triton kernels need triton")
    pytest.importorskip("torch", reason="Triton's interpreter needs torch")
    done = run_python("-c", TRITON_THROUGH_THE_API, env={"TRITON_INTERPRET": "1"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "checked" in done.stdout
