"""The command lines, run as a user runs them (subprocesses; no timing asserts)."""

import argparse
import dataclasses
import re
from pathlib import Path

import pytest
from helpers.caches import write
from helpers.processes import run_python

from jaxsearch import tuning
from jaxsearch.core import cpu
from jaxsearch.core.implementations import GPU_IMPLEMENTATIONS
from jaxsearch.pallas_kernels import KERNEL_KINDS, BinarySearchConfig, MergePathConfig
from jaxsearch.tools.cli import info
from jaxsearch.tools.cli.args import parse_count, parse_counts, parse_dtypes, parse_ratios
from jaxsearch.tools.cli.info import info_report
from jaxsearch.tuning import CacheEntry

ROOT = Path(__file__).resolve().parents[2]


def run(*args, tmp_path, timeout=180):
    return run_python(*args, env={tuning.TUNING_DIR_ENV: str(tmp_path / "cache")},
                      cwd=tmp_path, timeout=timeout)


def test_main_job(tmp_path):
    done = run("-m", "jaxsearch", "--scale", "1e-4", "--repeats", "1", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "N=1e3 M=1e3 float32 sorted" in done.stdout  # 1e7 scaled by 1e-4
    for header in ("median ms", "speed-up vs numpy", "vs best jnp", "time / jax floor",
                   "correct", "jaxsearch sorted_v=True", "jnp compare_all", "copy floor"):
        assert header in done.stdout, header
    assert done.stdout.count("(best jnp:") == 5 and "NO" not in done.stdout
    # Explained: a legend under the blocks, and why the skewed ones have no jax floor.
    assert "Legend, for every block above:" in done.stdout
    assert done.stdout.count("[1] jax floor: not applicable: needs N == M") == 2
    assert "jaxsearch [" in done.stderr  # the progress bar


def test_info(tmp_path, monkeypatch):
    done = run("-m", "jaxsearch", "info", "--n", "1e7", "--m", "1e3", "--dtype", "int64",
               tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for text in ("platform:", "cython", "pallas", "xla", "bisect_ratio", "CPU threads:",
                 "N=1e7, M=1e3, int64", str(tmp_path / "cache" / "cpu" / "searchsorted.json"),
                 str(tuning.cache_file(tuning.SHIPPED_DIR, "cpu"))):
        assert text in out, text
    # No user cache here: the shipped cache answers if it covers int64, else the defaults.
    monkeypatch.setenv(tuning.TUNING_DIR_ENV, str(tmp_path / "cache"))
    assert f"from {tuning.resolve_cpu_config(10**7, 10**3, 'int64')[1]}\n" in out
    assert not re.search(r"\d\.\d{6}", out)  # no float reprs


def test_info_report_says_what_each_config_field_means():
    config = tuning.CpuConfig(bisect_ratio=5.656854249492381, runs_ratio=724.0773439350247,
                               threads=0, min_parallel=31623)
    with tuning.use_cpu_config(config):
        out = info_report(10**7, 10**3, "float32")
    assert not re.search(r"\d\.\d{6}", out) and "CpuConfig(" not in out
    assert "  CPU config:    from use_cpu_config\n" in out
    lines = [line.split(None, 2) for line in out.splitlines()]
    fields = {line[0]: line[1:] for line in lines if len(line) == 3}
    assert fields["bisect_ratio"] == ["5.66", "lock-step binary search (bisect) of sorted "
                                      "needles when N/M > 5.66"]
    assert fields["runs_ratio"][0] == "724" and "M/N > 724" in fields["runs_ratio"][1]
    assert fields["threads"] == ["0", f"all available cores ({cpu.available_cores()} here)"]
    assert fields["min_parallel"][0] == "31623"
    with tuning.use_cpu_config(tuning.CpuConfig(threads=3)):
        assert "at most 3 threads per call" in info_report(10**7, 10**3, "float32")


# A GPU that is not here, as the tuning caches name its kind.
FAKE_GPU = "nvidia_h200"


def gpu_tiles(implementation):
    """Each kernel kind's tuned config for one implementation: tiles and
    blocks of its own, so that a report shows whose they are."""
    i = GPU_IMPLEMENTATIONS.index(implementation)
    return {"merge_path": MergePathConfig(tile=256 << i, num_warps=8),
            "binary_search": BinarySearchConfig(block=128 << i, num_warps=8)}


@pytest.mark.parametrize("implementation", GPU_IMPLEMENTATIONS)
def test_info_reports_the_tiles_of_the_gpu_implementation_that_runs(caches, monkeypatch,
                                                                     implementation):
    """On a GPU whose cache tunes every implementation (and prefers another
    one, which cannot run there), `info` names the implementation that runs
    and the tuned choice, and shows the tiles of the one that runs, not
    Pallas Triton's whatever ran."""
    user, _ = caches
    tuned = GPU_IMPLEMENTATIONS[(GPU_IMPLEMENTATIONS.index(implementation) + 1)
                                % len(GPU_IMPLEMENTATIONS)]
    bucket = {"n": 10**6, "m": 10**6}
    entries = [CacheEntry(tuning.gpu_kernel_key(name, kind.name), "float32", bucket,
                          dataclasses.asdict(gpu_tiles(name)[kind.name]))
               for name in GPU_IMPLEMENTATIONS for kind in KERNEL_KINDS]
    entries.append(CacheEntry(tuning.IMPLEMENTATION_KERNEL, "float32", bucket, {"name": tuned}))
    path = write(user, *entries, kind=FAKE_GPU)
    monkeypatch.setattr(tuning, "device_kind", lambda platform=None: FAKE_GPU)
    monkeypatch.setattr(info.api, "default_implementation", lambda n, m, dtype: implementation)
    out = info_report(10**6, 10**6, "float32")
    assert f"  GPU implementation: {implementation} (tuned: {tuned}, from {path})\n" in out
    merge, binary = (gpu_tiles(implementation)[kind.name] for kind in KERNEL_KINDS)
    assert (f"  GPU merge_path: chunk=None, items=None, method=bisect, num_stages=1, "
            f"num_warps=8, partition=once, "
            f"tile={merge.tile}\n                 from {path}\n") in out
    assert (f"  GPU binary_search: block={binary.block}, num_stages=1, num_warps=8\n"
            f"                 from {path}") in out
    for other in GPU_IMPLEMENTATIONS:
        if other != implementation:
            assert f"tile={gpu_tiles(other)['merge_path'].tile}\n" not in out, other
            assert f"block={gpu_tiles(other)['binary_search'].block}," not in out, other


def test_bench_cli_writes_files(tmp_path):
    pytest.importorskip("matplotlib")
    done = run("-m", "jaxsearch", "bench", "--quick", "--sizes", "1e2", "--dtypes", "float32",
               "--skew-size", "100", "--skew-ratios", "10", "--repeats", "1", "--output", "out",
               tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    kind = tuning.device_kind()
    for suffix in ("json", "png"):
        assert (tmp_path / "out" / f"bench_{kind}.{suffix}").exists()
    assert "wrote png" in done.stdout and "bench [" in done.stderr


def test_cpu_targets_script_prints_its_table(tmp_path):
    done = run(str(ROOT / "bench" / "cpu_targets.py"), "--scale", "1e-4", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr  # no --check: misses at toy sizes are expected
    for text in ("Target 2 grid", "numpy on jax buffers", "jitted call / jitted no-op", "status",
                 " of 12 met"):
        assert text in done.stdout, text


@pytest.mark.parametrize("command, usage", [(("-m", "jaxsearch", "bench"),
                                             "python -m jaxsearch bench"),
                                            (("-m", "jaxsearch.autotune"),
                                             "python -m jaxsearch.autotune")])
def test_the_package_commands_name_themselves(tmp_path, command, usage):
    """(bench/bench.py and bench/autotune.py, their aliases, are gone.)"""
    done = run(*command, "--help", tmp_path=tmp_path)
    assert done.returncode == 0 and usage in done.stdout


def test_bad_arguments_exit_2(tmp_path):
    done = run("-m", "jaxsearch", "bench", "--sizes", "ten", tmp_path=tmp_path)
    assert done.returncode == 2 and "not a number" in done.stderr


def test_parsers():
    assert parse_count("1e6") == 10**6 and parse_counts("1e3, 2000") == (1000, 2000)
    assert parse_dtypes("float32,int64") == ("float32", "int64")
    for bad in ("0", "1.5", "-3"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_count(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        parse_dtypes("float33")
    assert parse_ratios("1e-2,100") == (0.01, 100.0)
    for bad in ("0", "x", "1,-2"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_ratios(bad)
