"""The tuning cache: keys, lookup order, buckets, files; the CPU config, and
the config reaching the kernel."""

import concurrent.futures
import contextlib
import dataclasses
import json
import math
import os
import re
import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.caches import cpu_entry, write

import jaxsearch
from jaxsearch import _cpu_ext, tuning
from jaxsearch.core import cpu
from jaxsearch.tools.cli.info import info_report
from jaxsearch.tuning import CacheEntry, CpuConfig, cache


@pytest.mark.parametrize("dtype, cls", [
    (np.float32, "float32"), (np.float16, "float32"), (jnp.bfloat16, "float32"),
    (np.float64, "float64"), (np.int32, "int32"), (np.uint8, "int32"), (np.bool_, "int32"),
    (np.int64, "int64"), (np.uint64, "int64")])
def test_dtype_class(dtype, cls):
    assert tuning.dtype_class(dtype) == cls


def test_normalize_device_kind():
    assert tuning.normalize_device_kind("NVIDIA H200") == "nvidia_h200"
    assert tuning.normalize_device_kind("cpu") == "cpu"
    assert tuning.normalize_device_kind("TPU v5 lite") == "tpu_v5_lite"
    assert tuning.normalize_device_kind("  ") == "unknown"


def test_defaults_without_any_cache(caches):
    config, source = tuning.resolve_cpu_config(10**6, 10**6, np.float32)
    assert (config, source) == (tuning.DEFAULT_CPU_CONFIG, "defaults")


@pytest.mark.parametrize("dtype, count_keys", [
    (np.float32, CpuConfig.count_keys), (np.int16, CpuConfig.count_keys),
    (np.float64, 16), (np.int64, 16), (np.uint64, 16), (np.int8, 32), (np.bool_, 32)])
def test_count_keys_built_in_by_key_size(caches, dtype, count_keys):
    """Untuned, and where the cache's entry lacks it, count_keys is the
    built-in value for the keys' size (BUILT_IN_COUNT_KEYS); a cached value
    wins over it."""
    user, _ = caches
    want = dataclasses.replace(tuning.DEFAULT_CPU_CONFIG, count_keys=count_keys)
    assert tuning.resolve_cpu_config(10**6, 10**6, dtype) == (want, "defaults")
    write(user, CacheEntry(tuning.CPU_KERNEL, tuning.dtype_class(dtype), {"size": 10**6},
                           {"bisect_ratio": 7.0}, {"note": "test"}))
    assert tuning.cpu_config(10**6, 10**6, dtype) == dataclasses.replace(want, bisect_ratio=7.0)
    write(user, cpu_entry(tuning.dtype_class(dtype), count_keys=5))
    assert tuning.cpu_config(10**6, 10**6, dtype).count_keys == 5


def test_user_cache_comes_before_shipped(caches):
    user, shipped = caches
    write(shipped, cpu_entry(bisect_ratio=11.0))
    assert tuning.cpu_config(10**6, 10**6).bisect_ratio == 11.0
    path = write(user, cpu_entry(bisect_ratio=22.0))
    config, source = tuning.resolve_cpu_config(10**6, 10**6)
    assert config.bisect_ratio == 22.0 and source == str(path)


def test_shipped_answers_a_dtype_class_the_user_cache_lacks(caches):
    user, shipped = caches
    write(user, cpu_entry("float32", bisect_ratio=22.0))
    write(shipped, cpu_entry("int64", bisect_ratio=33.0))
    assert tuning.cpu_config(10**6, 10**6, np.int64).bisect_ratio == 33.0
    assert tuning.cpu_config(10**6, 10**6, np.float16).bisect_ratio == 22.0
    assert tuning.cpu_config(10**6, 10**6, np.int32) == tuning.DEFAULT_CPU_CONFIG


def test_explicit_config_comes_first(caches):
    user, _ = caches
    write(user, cpu_entry(bisect_ratio=2.0, runs_ratio=2.0))
    assert tuning.choose_cpu_kernel(1000, 100) == "bisect"  # cached: 1000 > 2 * 100
    explicit = CpuConfig(bisect_ratio=1e6, runs_ratio=1e6)
    assert tuning.choose_cpu_kernel(1000, 100, explicit) == "merge"
    with tuning.use_cpu_config(explicit):
        assert tuning.resolve_cpu_config(1000, 100) == (explicit, "use_cpu_config")
        assert tuning.choose_cpu_kernel(1000, 100) == "merge"
    assert tuning.choose_cpu_kernel(1000, 100) == "bisect"


def test_use_cpu_config_rejects_other_types():
    with pytest.raises(TypeError, match="CpuConfig"), tuning.use_cpu_config({"threads": 1}):
        pass


def test_nearest_bucket(caches):
    user, _ = caches
    write(user, *(cpu_entry(size=s, bisect_ratio=float(s)) for s in (10**4, 10**6, 10**7)))
    assert tuning.cpu_config(10**6, 10).bisect_ratio == 1e6  # exact: max(n, m)
    assert tuning.cpu_config(20, 3 * 10**4).bisect_ratio == 1e4  # nearest in log space
    assert tuning.cpu_config(10**9, 10**9).bisect_ratio == 1e7  # beyond the largest
    assert tuning.cpu_config(1, 1).bisect_ratio == 1e4  # below the smallest
    assert tuning.cpu_config().bisect_ratio == 1e7  # no sizes: the largest bucket


def test_two_dimensional_buckets(caches):
    user, _ = caches
    entries = [CacheEntry("merge_path", "float32", {"n": n, "m": m}, {"tile": n // m})
               for n, m in ((10**6, 10**6), (10**6, 10**3))]
    write(user, *entries, kind="nvidia_h200")
    assert tuning.lookup("merge_path", np.float32, {"n": 10**6, "m": 2000},
                          "nvidia_h200").config == {"tile": 1000}
    assert tuning.lookup("merge_path", np.float32, {"n": 10**6, "m": 10**5},
                          "nvidia_h200").config == {"tile": 1}
    assert tuning.lookup("binary_search", np.float32, {"n": 1, "m": 1}, "nvidia_h200") is None


def test_write_cache_merges_by_key(caches):
    user, _ = caches
    write(user, cpu_entry("float32", 10**5, bisect_ratio=1.0),
          cpu_entry("float32", 10**6, bisect_ratio=2.0))
    path = write(user, cpu_entry("float32", 10**6, bisect_ratio=3.0))
    data = json.loads(path.read_text())
    assert data["version"] == tuning.CACHE_VERSION and data["device_kind"] == "cpu"
    ratios = {e["bucket"]["size"]: e["config"]["bisect_ratio"] for e in data["entries"]}
    assert ratios == {10**5: 1.0, 10**6: 3.0}
    assert data["entries"][0]["times"] == {"note": "test"}


def test_cache_is_reread_when_the_file_changes(caches):
    user, _ = caches
    path = write(user, cpu_entry(bisect_ratio=5.0))
    assert tuning.cpu_config().bisect_ratio == 5.0
    write(user, cpu_entry(bisect_ratio=6.0))
    os.utime(path, ns=(1, 1))  # a new mtime even on a coarse clock
    assert tuning.cpu_config().bisect_ratio == 6.0


@pytest.mark.parametrize("text", [
    "{not json", "[]", '{"version": 99, "entries": []}', '{"version": 1}',
    '{"version": 1, "entries": {"kernel": "cpu"}}'])
def test_a_broken_cache_warns_and_is_ignored(caches, text):
    user, _ = caches
    path = tuning.cache_file(user, "cpu")
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.warns(RuntimeWarning, match="ignoring tuning cache"):
        assert tuning.cpu_config() == tuning.DEFAULT_CPU_CONFIG


def test_unknown_config_fields_are_ignored_and_missing_ones_default(caches):
    user, _ = caches
    write(user, CacheEntry("cpu", "float32", {"size": 10}, {"threads": 3, "from_the_future": 1}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tuning.cpu_config() == dataclasses.replace(tuning.DEFAULT_CPU_CONFIG, threads=3)


MISSING = object()


def bad_entry(field, value=MISSING):
    """A test case: a valid entry with `field` (top-level, or a config field)
    set to `value`, or removed."""
    entry = cpu_entry(size=10**6, bisect_ratio=5.0).to_json()
    fields = entry["config"] if field in {f.name for f in dataclasses.fields(CpuConfig)} else entry
    if value is MISSING:
        del fields[field]
    else:
        fields[field] = value
    name = f"no {field}" if value is MISSING else f"{field}={value!r}"
    return pytest.param(entry, field, id=name)


@pytest.mark.parametrize("entry, field", [
    bad_entry("threads", 2000), bad_entry("threads", -1), bad_entry("threads", None),
    bad_entry("threads", "4"), bad_entry("threads", 2.5), bad_entry("threads", True),
    bad_entry("min_parallel", 0), bad_entry("bisect_ratio", None),
    bad_entry("bisect_ratio", "fast"), bad_entry("bisect_ratio", 0),
    bad_entry("runs_ratio", -8.0), bad_entry("runs_ratio", math.nan),
    bad_entry("runs_ratio", math.inf), bad_entry("config"), bad_entry("config", [1, 2]),
    bad_entry("bucket"), bad_entry("bucket", {"size": "big"}), bad_entry("bucket", {"size": None}),
    bad_entry("dtype"), bad_entry("kernel"), bad_entry("kernel", 5), bad_entry("times", []),
    pytest.param("cpu", "cpu", id="not an object"),
])
def test_a_bad_entry_warns_once_and_the_others_still_count(caches, entry, field):
    """Each of these broke every search once. Now the entry is skipped with
    one warning that names the file, the entry and the field, searches give
    jnp's answers, and the file's good entry still answers."""
    user, _ = caches
    path = tuning.cache_file(user, "cpu")
    path.parent.mkdir(parents=True)
    good = cpu_entry(size=10**3, bisect_ratio=3.0).to_json()
    path.write_text(json.dumps({"version": 1, "entries": [entry, good]}))
    a, v = jnp.arange(2000, dtype=jnp.float32), jnp.linspace(-1.0, 2001.0, 50)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for sorted_v in (True, None):
            np.testing.assert_array_equal(jaxsearch.searchsorted(a, v, sorted_v=sorted_v),
                                          jnp.searchsorted(a, v))
        assert tuning.cpu_config(10**6, 10**6).bisect_ratio == 3.0
    [message] = [str(w.message) for w in caught if "jaxsearch" in str(w.message)]
    assert str(path) in message and field in message
    for key in ("kernel", "dtype", "bucket"):  # the entry's key, as far as it has one
        if isinstance(entry, dict) and key in entry:
            assert f"{key}={entry[key]!r}" in message


@pytest.mark.parametrize("name, value, error", [
    ("threads", tuning.MAX_THREADS + 1, ValueError), ("threads", -1, ValueError),
    ("threads", 1.0, TypeError), ("threads", None, TypeError),
    ("min_parallel", 0, ValueError), ("min_parallel", np.bool_(True), TypeError),
    ("bisect_ratio", 0.0, ValueError), ("bisect_ratio", math.nan, ValueError),
    ("runs_ratio", math.inf, ValueError), ("runs_ratio", "8", TypeError),
    ("bucket_min_bytes", -1, ValueError), ("bucket_min_bytes", 2.0**24, TypeError),
    ("table_check_ratio", -0.5, ValueError), ("table_check_ratio", math.nan, ValueError),
    ("bucket_keys_per_needle", -1.0, ValueError), ("bucket_keys_per_needle", math.nan, ValueError),
    ("bucket_keys_per_needle", None, TypeError), ("bucket_keys_per_needle", True, TypeError),
    ("table_check_ratio", "8", TypeError), ("table_check_ratio", True, TypeError),
    ("count_keys", -1, ValueError), ("count_keys", 2**31, ValueError),
    ("count_keys", 32.0, TypeError), ("count_keys", True, TypeError),
    ("short_row_needles", -1, ValueError), ("short_row_needles", 2**31, ValueError),
    ("short_row_needles", 64.0, TypeError), ("short_row_needles", None, TypeError),
])
def test_cpu_config_checks_its_fields(name, value, error):
    with pytest.raises(error, match=name):
        CpuConfig(**{name: value})


def test_cpu_config_takes_numpy_numbers_and_the_limits():
    config = CpuConfig(bisect_ratio=np.float32(2.5), runs_ratio=1, threads=np.int64(3),
                       min_parallel=1)
    assert config == CpuConfig(bisect_ratio=2.5, runs_ratio=1.0, threads=3, min_parallel=1)
    assert hash(config) == hash(CpuConfig(bisect_ratio=2.5, runs_ratio=1.0, threads=3,
                                          min_parallel=1))
    assert CpuConfig(threads=tuning.MAX_THREADS).threads == tuning.MAX_THREADS


def test_user_cache_dir_default(monkeypatch, tmp_path):
    monkeypatch.delenv(tuning.TUNING_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert tuning.user_cache_dir() == tmp_path / "jaxsearch"


def test_gpu_config_is_none_on_cpu(caches):
    assert tuning.gpu_config("merge_path", 10**6, 10**6, np.float32) is None


def test_tuned_gpu_config_builds_validates_and_drops_stale_fields(monkeypatch):
    pk = pytest.importorskip("jaxsearch.pallas_kernels")
    cached = {}
    monkeypatch.setattr(cache, "gpu_config", lambda kernel, n, m, dtype: cached.get(kernel))
    assert tuning.tuned_gpu_config(pk.MergePathConfig, 10, 10, np.float32) is None
    cached["merge_path"] = {"tile": 512, "num_warps": 8, "gone_field": 1}
    assert tuning.tuned_gpu_config(pk.MergePathConfig, 10, 10, np.float32) == \
        pk.MergePathConfig(tile=512, num_warps=8)
    cached["binary_search"] = {"block": 3}  # not a power of two: the class rejects it
    with pytest.warns(RuntimeWarning, match="ignoring cached binary_search"):
        assert tuning.tuned_gpu_config(pk.BinarySearchConfig, 10, 10, np.float32) is None


@pytest.mark.parametrize("m, threads, min_parallel", [
    (999, 8, 1000), (1000, 8, 1000), (5000, 8, 1000), (7999, 8, 1000), (10**6, 8, 1000),
    (10**6, 3, 1000), (64, 2, 1), (10, 2, 1 << 16)])
def test_the_thread_plan_info_reports_is_the_kernels(m, threads, min_parallel):
    """The threads `info` reports for a row of m needles are those the kernel
    plans from the attributes its call is lowered with: as many as parts of
    at least min_parallel needles (one where there are fewer), at most
    `threads`, also where min_parallel <= m < threads * min_parallel."""
    config = CpuConfig(threads=threads, min_parallel=min_parallel)
    a = jnp.arange(2 * m, dtype=jnp.float32)
    v = jnp.linspace(-1.0, 2.0 * m, m, dtype=jnp.float32)
    with tuning.use_cpu_config(config):
        attrs = cpu_call_attrs(lambda a, v: jaxsearch.searchsorted(a, v), a, v)
        report = info_report(2 * m, m, "float32")
    kernel_plan = _cpu_ext.planned_threads(1, 1, m, attrs["threads"], attrs["min_parallel"])
    assert kernel_plan == min(threads, max(1, m // min_parallel))
    assert cpu.threads_for(config, m) == kernel_plan
    assert f"  CPU threads:   {kernel_plan} for one call of" in report


# ---------------------------------------------------------------- the config reaching the kernel


def cpu_call_attrs(f, *args):
    """The attributes (kernel, threads, min_parallel, ...) of the CPU custom call
    that `jax.jit(f)` lowers to."""
    text = jax.jit(f).lower(*args).as_text()
    [attrs] = re.findall(rf"@{cpu.TARGET_NAME}\(.*?mhlo\.backend_config = \{{([^}}]*)\}}", text)
    return {k: int(v) for k, v in re.findall(r"(\w+) = (-?\d+) : i32", attrs)}


def test_each_thread_compiles_and_runs_its_own_config(caches, monkeypatch):
    """Python threads, each under use_cpu_config with its own config (one
    with none), trace and call at once: each one's config, and no other's,
    reaches its kernel, with no cache clearing."""
    monkeypatch.setattr(jax, "clear_caches", lambda: pytest.fail("jax.clear_caches called"))
    a, v = jnp.arange(2000, dtype=jnp.float32), jnp.linspace(-1.0, 2001.0, 50)
    want = jnp.searchsorted(a, v)
    configs = {  # the kernel each chooses for n/m = 40
        "bisect": CpuConfig(bisect_ratio=2.0, runs_ratio=1e6, threads=1, min_parallel=7),
        "merge": CpuConfig(bisect_ratio=1e6, runs_ratio=1e6, threads=2, min_parallel=11),
        "runs": CpuConfig(bisect_ratio=1e6, runs_ratio=0.01, threads=3, min_parallel=13),
        None: None,  # the cache's config: here the defaults
    }
    start = threading.Barrier(len(configs))

    def search(a, v):
        return jaxsearch.searchsorted(a, v, sorted_v=True)

    def worker(kernel, config):
        expected = config or tuning.DEFAULT_CPU_CONFIG
        with tuning.use_cpu_config(config) if config else contextlib.nullcontext():
            start.wait()
            for _ in range(10):
                np.testing.assert_array_equal(search(a, v), want)
                # A new function each time: jax.jit caches traces per function.
                attrs = cpu_call_attrs(lambda a, v: search(a, v), a, v)
                assert attrs["threads"] == expected.max_threads(cpu.available_cores())
                assert attrs["min_parallel"] == expected.min_parallel
                assert attrs["kernel"] == _cpu_ext.KERNEL_NAMES[
                    kernel or tuning.choose_cpu_kernel(2000, 50, expected)]

    with concurrent.futures.ThreadPoolExecutor(len(configs)) as pool:
        for done in [pool.submit(worker, k, c) for k, c in configs.items()]:
            done.result()
    assert tuning.resolve_cpu_config(2000, 50)[1] == "defaults"  # nothing leaked out


def test_more_cores_than_the_handler_takes(monkeypatch):
    """A host with more cores than MAX_THREADS still searches, on MAX_THREADS."""
    monkeypatch.setattr(cpu, "available_cores", lambda: 4096)
    # A config of its own, so that the search traces afresh with 4096 cores.
    config = CpuConfig(threads=0, min_parallel=4099)
    assert config.max_threads(cpu.available_cores()) == tuning.MAX_THREADS
    a, v = jnp.arange(10_000, dtype=jnp.int32), jnp.arange(-5, 9_000, 3, dtype=jnp.int32)
    with tuning.use_cpu_config(config):
        for sorted_v in (True, False):
            np.testing.assert_array_equal(jaxsearch.searchsorted(a, v, sorted_v=sorted_v),
                                          jnp.searchsorted(a, v))
        assert cpu_call_attrs(jaxsearch.searchsorted, a, v)["threads"] == tuning.MAX_THREADS
