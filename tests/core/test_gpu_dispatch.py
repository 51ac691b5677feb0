"""Which GPU implementation the cuda lowering picks, and what happens when
jax has lost Pallas' Triton backend (simulated by blocking its import)."""

import textwrap
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.processes import run_python
from helpers.served import assert_gpu_kernels, served

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
    text = lowered.as_text()
    print("conditionals:", text.count("stablehlo.case") + text.count("stablehlo.if"))
    print("mosaic checked kernel:", "mosaic_checked_searchsorted" in text)
    print("warnings:", [str(w.message) for w in caught])
""")


def test_cuda_dispatch_without_pallas_triton_backend():
    """Without Pallas Triton the default call lowers for cuda to Mosaic GPU,
    where it can run: the sortedness test goes to its checked kernel, and
    the program holds no conditional for the host to wait on."""
    done = run_python("-c", WITHOUT_PALLAS_TRITON.format(tests=str(TESTS)))
    assert done.returncode == 0, done.stderr[-3000:]
    if gpu.status("mosaic")[0]:  # Mosaic GPU (the lowering assumes sm_90 here)
        assert "mosaic calls: 0" not in done.stdout
        assert "triton calls: 0\nnative triton calls: 0" in done.stdout
        assert "no GPU kernel can run here" not in done.stdout
        assert "conditionals: 0\nmosaic checked kernel: True" in done.stdout, done.stdout
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


TRITON_CHECKED = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    import jaxsearch
    from jaxsearch.pallas_kernels.triton import searchsorted as ts
    loaded = []
    load = ts._load_kernel
    ts._load_kernel = lambda name: loaded.append(name) or load(name)
    rng = np.random.default_rng(1)
    a = jnp.sort(jnp.asarray(rng.integers(0, 50, 300), jnp.float32))
    v = jnp.asarray(rng.integers(-5, 55, 77), jnp.float32)
    f = jax.jit(lambda a, v: jaxsearch.searchsorted(a, v, implementation="triton"))
    # The program as compiled: the interpreter's callbacks, no conditional.
    text = f.lower(a, v).as_text()
    assert "stablehlo.case" not in text and "stablehlo.if" not in text, text
    assert "callback" in text, text
    for vv in (jnp.sort(v), v):
        for side in ("left", "right"):
            got = jaxsearch.searchsorted(a, vv, side, implementation="triton")
            np.testing.assert_array_equal(got, jnp.searchsorted(a, vv, side))
    assert loaded and set(loaded) <= {"checked_kernel", "checked_partitioned_kernel",
                                      "checked_partition_kernel"}, loaded
    print("checked kernel")
""")


def test_triton_checked_call_reads_the_test_on_the_device():
    """implementation="triton", sorted_v=None: the sortedness test goes to
    native Triton's checked kernel, no lax.cond in the program, and jnp's
    answers on sorted and unsorted needles (Triton's interpreter)."""
    pytest.importorskip("triton", reason="the native Triton kernels need triton")
    pytest.importorskip("torch", reason="Triton's interpreter needs torch")
    done = run_python("-c", TRITON_CHECKED, env={"TRITON_INTERPRET": "1"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "checked kernel" in done.stdout


# ------------------------------------------------------- routing by shape


def test_route_sends_sorted_needles_to_binary_search_past_the_ratio(monkeypatch):
    """Sorted needles (promised or checked) take the merge path up to
    N = gpu_bisect_ratio * M, binary search past it, with nothing checked."""
    ratio = tuning.DEFAULT_GPU_BISECT_RATIO
    m = 1000
    for order in ("sorted", "check"):
        assert gpu.route(order, int(ratio * m), m, np.float32, "pallas") == order
        assert gpu.route(order, int(ratio * m) + 1, m, np.float32, "pallas") == "any"
    assert gpu.route("any", 10, 10**6, np.float32, "pallas") == "any"
    # A ratio from the tuning cache moves the crossover.
    monkeypatch.setattr(tuning, "gpu_bisect_ratio", lambda n, m, dtype: 2.0)
    assert gpu.route("check", 2 * m, m, np.float32, "pallas") == "check"
    assert gpu.route("check", 2 * m + 1, m, np.float32, "pallas") == "any"


def test_gpu_bisect_ratio_reads_the_cache_and_refuses_nonsense(monkeypatch):
    for cached, want in (({"bisect_ratio": 12.5}, 12.5), ({"bisect_ratio": 3}, 3.0)):
        monkeypatch.setattr(cache, "gpu_config", lambda *args, c=cached: c)
        assert tuning.gpu_bisect_ratio(10, 10, np.float32) == want
    for bad in ({"bisect_ratio": -1.0}, {"bisect_ratio": "64"}, {"bisect_ratio": True}, {}):
        monkeypatch.setattr(cache, "gpu_config", lambda *args, c=bad: c)
        with pytest.warns(RuntimeWarning, match="bisect_ratio"):
            assert tuning.gpu_bisect_ratio(10, 10, np.float32) == tuning.DEFAULT_GPU_BISECT_RATIO
    monkeypatch.setattr(cache, "gpu_config", lambda *args: None)
    assert tuning.gpu_bisect_ratio(10, 10, np.float32) == tuning.DEFAULT_GPU_BISECT_RATIO


def test_route_by_the_positions_each_kernel_indexes():
    """Without x64: a merge past int32 positions (N + M) goes to binary
    search, which counts in `a` and `v` apart; needles past int32 go to jnp.
    With x64 every route stays."""
    half = 2**30 + 5
    assert gpu.route("sorted", half, half, np.int8, "pallas") == "any"
    assert gpu.route("check", half, half, np.int8, "pallas") == "any"
    assert gpu.route("any", 10, 2**31, np.int8, "pallas") is None
    assert gpu.route("any", 2**31 - 1, 10**6, np.int8, "pallas") == "any"
    with jax.enable_x64(True):
        assert gpu.route("check", half, half, np.int8, "pallas") == "check"
        assert gpu.route("any", 10, 2**31, np.int8, "pallas") == "any"


@pytest.mark.parametrize("sorted_v", [True, None])
def test_few_sorted_needles_run_binary_search_unchecked(sorted_v):
    """N = 100 M: the binary-search kernel alone, no sortedness check and no
    conditional in the program, and jnp's answers (Pallas' interpreter)."""
    ok, reason = gpu.status("pallas", interpret=True)
    if not ok:
        pytest.skip(reason)
    rng = np.random.default_rng(3)
    a = jnp.sort(jnp.asarray(rng.integers(0, 500, 2000), jnp.float32))
    v = jnp.sort(jnp.asarray(rng.integers(-5, 505, 20), jnp.float32))

    def f(a, v):
        return jaxsearch.searchsorted(a, v, sorted_v=sorted_v, implementation="pallas")

    s = assert_gpu_kernels(f, a, v, kinds={"binary_search"}, backend="pallas")
    assert "stablehlo.case" not in s.text and "stablehlo.if" not in s.text
    np.testing.assert_array_equal(f(a, v), jnp.searchsorted(a, v))


def test_merges_past_int32_positions_lower_for_cuda_without_x64():
    """N = M = 2**30 + 5 int8 (traced, never allocated): the default call
    lowers for cuda to the binary-search kernel (the merge path would need
    int64 positions), and 2**31 needles to jnp's search."""
    if not gpu.status("pallas")[0]:
        pytest.skip(gpu.status("pallas")[1])
    half = jax.ShapeDtypeStruct((2**30 + 5,), jnp.int8)
    s = served(jaxsearch.searchsorted, half, half, platform="cuda")
    assert s.gpu_kernels == {("pallas", "binary_search")}, s
    few, many = (jax.ShapeDtypeStruct((size,), jnp.int8) for size in (10, 2**31))
    assert not served(jaxsearch.searchsorted, few, many, platform="cuda").by_jaxsearch
