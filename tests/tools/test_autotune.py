"""The autotuner's choices (crossovers, threads) and its runs: the CPU and GPU
sweeps, and the command end to end, writing a cache a fresh process reads."""

import dataclasses
import json

import numpy as np
import pytest
from helpers.caches import write
from helpers.processes import run_python

from jaxsearch import tuning
from jaxsearch.core import cpu, gpu
from jaxsearch.core.implementations import GPU_IMPLEMENTATIONS
from jaxsearch.tools.autotune import cpu as autotune_cpu
from jaxsearch.tools.autotune import gpu as autotune_gpu
from jaxsearch.tools.autotune import grid as autotune_grid
from jaxsearch.tools.bench.timing import Progress
from jaxsearch.tuning import CpuConfig


def test_crossover():
    ratios = [1, 4, 16, 64]
    # The alternative wins from 16 on: halfway (log space) between 4 and 16.
    assert autotune_cpu.crossover(ratios, [1, 1, 1, 1], [2, 2, 0.5, 0.5]) == pytest.approx(8.0)
    # A win at 4 followed by a loss does not count.
    assert autotune_cpu.crossover(ratios, [1, 1, 1, 1], [2, 0.5, 2, 0.5]) == pytest.approx(32.0)
    # Never wins: one step past the largest ratio; always wins: one step below.
    assert autotune_cpu.crossover(ratios, [1] * 4, [2] * 4) == 256.0
    assert autotune_cpu.crossover(ratios, [1] * 4, [0.5] * 4) == pytest.approx(0.5)


def test_thread_choices():
    assert autotune_cpu._best_threads({"0": 1.0, "1": 2.0}) == 0
    assert autotune_cpu._best_threads({"0": 1.0, "1": 0.98}) == 0  # within the margin
    assert autotune_cpu._best_threads({"0": 1.0, "1": 0.5, "2": 0.7}) == 1
    sizes = [10**4, 10**5, 10**6]
    slow, fast = {"0": 2.0, "1": 1.0}, {"0": 1.0, "1": 2.0}
    assert autotune_cpu._min_parallel(sizes, [slow, fast, fast]) == round((10**9) ** 0.5)
    assert autotune_cpu._min_parallel(sizes, [fast, fast, fast]) == 10**4
    assert autotune_cpu._min_parallel(sizes, [fast, slow, slow]) == \
        tuning.DEFAULT_CPU_CONFIG.min_parallel
    assert autotune_cpu._min_parallel(sizes, [{"0": 1.0}] * 3) == \
        tuning.DEFAULT_CPU_CONFIG.min_parallel


def test_bucket_threshold_choices():
    nbytes = [10**6, 10**7, 10**8]
    assert autotune_cpu._bucket_min_bytes(nbytes, [False, True, True]) == round(10**6.5)
    assert autotune_cpu._bucket_min_bytes(nbytes, [True, True, True]) == 10**6
    # A win followed by a loss is no threshold: only the trailing wins count.
    assert autotune_cpu._bucket_min_bytes(nbytes, [True, False, True]) == round(10**7.5)
    assert autotune_cpu._bucket_min_bytes(nbytes, [True, True, False]) == 10**9


def test_bucket_sweep_times_both_routes(caches):
    """One size of 1 MiB of float32 keys, buckets on and off; the threshold
    goes into every size's entry of the dtype."""
    user, _ = caches
    size = autotune_cpu.BUCKET_SWEEP_MIN_BYTES // 4
    grid = dataclasses.replace(autotune_grid.GRIDS.quick, dtypes=("float32",),
                               sizes=(64, size), ratios=(1, 4), repeats=1, budget_s=0.0,
                               threads=False)
    progress = Progress(autotune_cpu.cpu_steps(grid), "test")
    entries = autotune_cpu.tune_cpu(grid, progress)
    assert progress.done == progress.total
    swept = entries[-1].times["buckets"]
    assert swept["sizes"] == [size] and len(swept["buckets_s"]) == len(swept["table_s"]) == 1
    assert {e.config["bucket_min_bytes"] for e in entries} == {swept["threshold"]}
    assert swept["threshold"] in (4 * size, 40 * size)
    # The density ladder, at that size, and its threshold in every entry.
    density = swept["density"]
    assert density["size"] == size
    assert len(density["needles_per_key"]) == len(density["buckets_s"]) == \
        len(density["table_s"]) == len(autotune_cpu.BUCKET_NEEDLES_PER_KEY)
    assert {e.config["bucket_keys_per_needle"] for e in entries} == {density["threshold"]}
    write(user, *entries)
    config = tuning.cpu_config(size, size, np.float32)
    assert config.bucket_min_bytes == swept["threshold"]
    assert config.bucket_keys_per_needle == density["threshold"]
    assert "bucket_keys_per_needle" in autotune_cpu.cpu_table(entries)


def test_ladder_limit_choices():
    """The short rows' limits (count_keys, short_row_needles): the rung up
    to which a route wins, halfway (log space) between the last rung it won
    and the first it lost, past the ladder's ends where it won everywhere
    or nowhere; a loss within the margin is no loss."""
    def limit(route_s, other_s):
        return autotune_cpu._ladder_limit((8, 16, 32, 64, 128), route_s, other_s)

    assert limit([1, 1, 1, 2, 2], [1.5] * 5) == 45  # sqrt(32 * 64)
    assert limit([1] * 5, [2] * 5) == 256
    assert limit([2] * 5, [1] * 5) == 5  # sqrt(4 * 8)
    assert limit([1, 1, 1, 1, 1.04], [1] * 5) == 256
    assert limit([1, 1, 2, 1, 2], [1.5] * 5) == 90  # sqrt(64 * 128): only the last run


def test_short_row_sweeps_time_both_routes(caches):
    """The short rows' ladders for one dtype (keys counted or searched;
    needles per row across rows or row by row), with as many needles as
    the grid's largest size: both routes timed at every rung, each
    threshold in every entry of the dtype and in the config resolved."""
    user, _ = caches
    grid = dataclasses.replace(autotune_grid.GRIDS.quick, dtypes=("int32",), sizes=(64, 2000),
                               ratios=(1, 4), repeats=1, budget_s=0.0, threads=False)
    progress = Progress(autotune_cpu.cpu_steps(grid), "test")
    entries = autotune_cpu.tune_cpu(grid, progress)
    assert progress.done == progress.total
    counts = entries[0].times["counts"]
    assert counts["needles"] == 2000 and counts["keys"] == list(autotune_cpu.COUNT_ROW_KEYS)
    assert len(counts["counted_s"]) == len(counts["searched_s"]) == len(counts["keys"])
    assert counts["threshold"] == autotune_cpu._ladder_limit(
        autotune_cpu.COUNT_ROW_KEYS, counts["counted_s"], counts["searched_s"])
    assert {e.config["count_keys"] for e in entries} == {counts["threshold"]}
    # The batches of rows: as many needles in all, 8 to 256 a row.
    short = entries[0].times["short_rows"]
    assert short["needles"] == 2000 and short["needles_per_row"] == [8, 16, 32, 64, 128, 256]
    assert len(short["across_s"]) == len(short["by_row_s"]) == 6
    assert short["threshold"] == autotune_cpu._ladder_limit(
        autotune_cpu.SHORT_ROW_NEEDLES, short["across_s"], short["by_row_s"])
    assert {e.config["short_row_needles"] for e in entries} == {short["threshold"]}
    write(user, *entries)
    config = tuning.cpu_config(2000, 2000, np.int32)
    assert (config.count_keys, config.short_row_needles) == (counts["threshold"],
                                                             short["threshold"])
    table = autotune_cpu.cpu_table(entries)
    assert "count_keys" in table and "short_row_needles" in table


def test_keys_per_needle_limit_choices():
    """The table check's and the buckets' density thresholds."""
    limit = autotune_cpu._keys_per_needle_limit
    rungs = [0.25, 0.5, 1.0, 2.0]
    # The route wins from 1 needle per key on: up to 1 / sqrt(0.5) keys per needle.
    assert limit(rungs, [3, 3, 1, 1], [2, 2, 2, 2]) == pytest.approx(2**0.5)
    # Everywhere: a step past the most keys per needle tried; nowhere: a
    # step short of the fewest.
    assert limit(rungs, [1] * 4, [2] * 4) == pytest.approx(32**0.5)
    assert limit(rungs, [3] * 4, [2] * 4) == pytest.approx(0.25)
    # A win within the margin is no win; nor one followed by a loss.
    assert limit(rungs, [3, 3, 3, 1.99], [2] * 4) == 0.25
    assert limit(rungs, [1, 3, 1, 1], [2] * 4) == pytest.approx(2**0.5)


@pytest.mark.skipif(not cpu.gathers_search(np.float32, 100_000),
                    reason="the gathers serve the x86-64-v3 build only")
def test_table_sweep_times_both_routes(caches):
    """One size of float32 keys, the table always and never checked for at
    each rung of needles per key; its threshold goes into that size's entry
    and the config resolved there."""
    user, _ = caches
    size = 100_000
    grid = dataclasses.replace(autotune_grid.GRIDS.quick, dtypes=("float32",), sizes=(size,),
                               ratios=(1, 4), repeats=1, budget_s=0.0, threads=False)
    progress = Progress(autotune_cpu.cpu_steps(grid), "test")
    entries = autotune_cpu.tune_cpu(grid, progress)
    assert progress.done == progress.total
    swept = entries[-1].times["table"]
    assert len(swept["needles_per_key"]) == len(swept["table_s"]) == len(swept["gathers_s"]) >= 2
    assert swept["threshold"] == entries[-1].config["table_check_ratio"] > 0
    write(user, *entries)
    assert tuning.cpu_config(size, size, np.float32).table_check_ratio == swept["threshold"]
    assert "table_check_ratio" in autotune_cpu.cpu_table(entries)


def test_thread_candidates():
    assert autotune_cpu._thread_candidates(1) == [0]
    assert autotune_cpu._thread_candidates(2) == [0, 1]
    assert autotune_cpu._thread_candidates(16) == [0, 1, 2, 4, 8]


# ---------------------------------------------------------------- end to end


def run(*args, env=None, timeout=120):
    return run_python(*args, env=env, timeout=timeout)


def test_tiny_autotune_writes_a_cache_a_fresh_process_reads(tmp_path):
    out = tmp_path / "tuned"
    done = run("-m", "jaxsearch.autotune", "--sizes", "64,512", "--dtypes", "float32",
               "--repeats", "1", "--platforms", "cpu", "--output", str(out),
               env={tuning.TUNING_DIR_ENV: str(tmp_path / "unused")})
    assert done.returncode == 0, done.stderr
    path = tuning.cache_file(out, "cpu")
    assert f"wrote {path}" in done.stdout and "bisect_ratio" in done.stdout
    data = json.loads(path.read_text())
    assert {e["bucket"]["size"] for e in data["entries"]} == {64, 512}
    entry = data["entries"][0]
    assert entry["kernel"] == "cpu" and entry["dtype"] == "float32"
    # Keys of 2 KiB at most: too few for buckets or tables, whose thresholds
    # stay the defaults.
    assert set(entry["config"]) == {f.name for f in dataclasses.fields(CpuConfig)} - {
        "bucket_min_bytes", "bucket_keys_per_needle", "table_check_ratio"}
    assert {"bisect", "runs", "threads_s"} <= set(entry["times"])
    assert not {"buckets", "table"} & set(entry["times"])
    assert data["meta"]["cores"] >= 1 and "autotune" in data["meta"]["command"]

    env = {tuning.TUNING_DIR_ENV: str(out)}
    read = run("-c", "from jaxsearch import tuning; c, s = tuning.resolve_cpu_config(512, 512);"
               " print(c.bisect_ratio, s)", env=env)
    assert read.returncode == 0, read.stderr
    ratio, source = read.stdout.split()
    by_size = {e["bucket"]["size"]: e["config"] for e in data["entries"]}
    assert float(ratio) == by_size[512]["bisect_ratio"] and source == str(path)

    info = run("-m", "jaxsearch", "info", "--n", "512", "--m", "512", env=env)
    assert info.returncode == 0, info.stderr
    assert f"from {path}" in info.stdout and "2 entries" in info.stdout


def test_autotune_refuses_a_platform_it_cannot_tune(tmp_path):
    done = run("-m", "jaxsearch.autotune", "--platforms", "tpu", "--output", str(tmp_path))
    assert done.returncode == 2 and "cannot tune tpu" in done.stderr


def test_gpu_sweep_in_interpret_mode(caches):
    pk = pytest.importorskip("jaxsearch.pallas_kernels")
    user, _ = caches
    grid = dataclasses.replace(autotune_grid.GRIDS.quick, dtypes=("float32",), gpu_sizes=(256,),
                               ratios=(1, 16, 256), repeats=1, budget_s=0.0)
    space = [pk.MergePathConfig(tile=256), pk.BinarySearchConfig(block=128)]
    progress = Progress(autotune_gpu.gpu_steps(grid, space), "test")
    entries = autotune_gpu.tune_gpu(grid, progress, space=space, interpret=True)
    assert progress.done == progress.total
    # The implementations race too, each that runs here in its interpreter
    # (Pallas Triton and Mosaic GPU; native Triton needs TRITON_INTERPRET=1).
    [race] = [e for e in entries if e.kernel == tuning.IMPLEMENTATION_KERNEL]
    times = race.times["implementations_s"]
    assert set(times) == {name for name in GPU_IMPLEMENTATIONS
                          if gpu.status(name, interpret=True)[0]}
    assert "pallas" in times and race.config == {"name": min(times, key=times.get)}
    # Then the winner's merge path against its binary search, per skew.
    [route] = [e for e in entries if e.kernel == tuning.GPU_ROUTE_KERNEL]
    assert route.times["implementation"] == race.config["name"]
    assert route.times["ratios"] == [1, 16, 256]
    assert all(isinstance(t, float) for t in route.times["merge_s"] + route.times["bisect_s"])
    assert route.config["bisect_ratio"] == autotune_grid.crossover(
        [1, 16, 256], route.times["merge_s"], route.times["bisect_s"])
    assert "bisect_ratio=" in autotune_gpu.gpu_table([route])
    entries = [e for e in entries if e is not race and e is not route]
    # Each implementation's configs: Pallas Triton's under the kernel's name,
    # the others' under "<implementation>/<kernel>".
    kernels = ("merge_path", "binary_search")
    assert {e.kernel for e in entries} == {
        k if name == "pallas" else f"{name}/{k}" for name in times for k in kernels}
    for e in entries:
        assert e.bucket == {"n": 256, "m": 256} and e.dtype == "float32"
        assert e.times["default"] in e.times["configs_s"]
        rebuilt = {"merge_path": pk.MergePathConfig,
                   "binary_search": pk.BinarySearchConfig}[e.kernel.split("/")[-1]](**e.config)
        assert dataclasses.asdict(rebuilt) == e.config
    write(user, *entries, kind="nvidia_h200")
    found = tuning.lookup("merge_path", np.float32, {"n": 10**6, "m": 10**6}, "nvidia_h200")
    assert found is not None and found.config == entries[0].config
    assert "best config" in autotune_gpu.gpu_table(entries + [race])


def test_tune_cpu_without_threads_keeps_the_default_thread_settings(caches):
    user, _ = caches
    grid = dataclasses.replace(autotune_grid.GRIDS.quick, dtypes=("int32",), sizes=(64,),
                               ratios=(1, 4, 16), repeats=1, budget_s=0.0, threads=False)
    progress = Progress(autotune_cpu.cpu_steps(grid), "test")
    (entry,) = autotune_cpu.tune_cpu(grid, progress)
    assert set(entry.config) == {"bisect_ratio", "runs_ratio", "count_keys", "short_row_needles"}
    assert "threads_s" not in entry.times
    assert entry.times["bisect"]["ratios"] == [1, 4, 16]
    write(user, entry)
    config = tuning.cpu_config(64, 64, np.int32)
    assert config.bisect_ratio == entry.config["bisect_ratio"]
    assert (config.threads, config.min_parallel) == (tuning.DEFAULT_CPU_CONFIG.threads,
                                                     tuning.DEFAULT_CPU_CONFIG.min_parallel)
    assert "default" in autotune_cpu.cpu_table([entry])


