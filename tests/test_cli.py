"""The command lines, run as a user runs them (subprocesses; no timing asserts)."""

import argparse
from pathlib import Path

import pytest
from processes import run_python

from jaxsearch import _tuning
from jaxsearch.__main__ import parse_count, parse_counts, parse_dtypes, parse_ratios

ROOT = Path(__file__).resolve().parents[1]


def run(*args, tmp_path, timeout=180):
    return run_python(*args, env={_tuning.TUNING_DIR_ENV: str(tmp_path / "cache")},
                      cwd=tmp_path, timeout=timeout)


def test_main_job(tmp_path):
    done = run("-m", "jaxsearch", "--scale", "1e-4", "--repeats", "1", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "N=1e3 M=1e3 float32 sorted" in done.stdout  # 1e7 scaled by 1e-4
    for header in ("median ms", "speed-up vs numpy", "vs best jnp", "time / jax floor",
                   "correct", "jaxsearch sorted_v=True", "jnp compare_all", "copy floor"):
        assert header in done.stdout, header
    assert done.stdout.count("(best jnp:") == 5 and "NO" not in done.stdout
    assert "jaxsearch [" in done.stderr  # the progress bar


def test_info(tmp_path, monkeypatch):
    done = run("-m", "jaxsearch", "info", "--n", "1e7", "--m", "1e3", "--dtype", "int64",
               tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for text in ("platform:", "cython", "pallas", "xla", "CpuConfig(", "CPU threads:",
                 "N=1e7, M=1e3, int64", str(tmp_path / "cache" / "cpu" / "searchsorted.json"),
                 str(_tuning.cache_file(_tuning.SHIPPED_DIR, "cpu"))):
        assert text in out, text
    # No user cache here: the shipped cache answers if it covers int64, else the defaults.
    monkeypatch.setenv(_tuning.TUNING_DIR_ENV, str(tmp_path / "cache"))
    assert f"from {_tuning.resolve_cpu_config(10**7, 10**3, 'int64')[1]}\n" in out


def test_bench_cli_writes_files(tmp_path):
    pytest.importorskip("matplotlib")
    done = run("-m", "jaxsearch", "bench", "--quick", "--sizes", "1e2", "--dtypes", "float32",
               "--skew-size", "100", "--skew-ratios", "10", "--repeats", "1", "--output", "out",
               tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    kind = _tuning.device_kind()
    for suffix in ("json", "png"):
        assert (tmp_path / "out" / f"bench_{kind}.{suffix}").exists()
    assert "wrote png" in done.stdout and "bench [" in done.stderr


def test_cpu_targets_script_prints_its_table(tmp_path):
    done = run(str(ROOT / "bench" / "cpu_targets.py"), "--scale", "1e-4", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr  # no --check: misses at toy sizes are expected
    for text in ("Target 2 grid", "numpy on jax buffers", "jitted call / jitted no-op", "status",
                 " of 12 met"):
        assert text in done.stdout, text


@pytest.mark.parametrize("script, usage", [("bench.py", "python -m jaxsearch bench"),
                                           ("autotune.py", "python -m jaxsearch.autotune")])
def test_bench_scripts_are_the_package_commands(tmp_path, script, usage):
    done = run(str(ROOT / "bench" / script), "--help", tmp_path=tmp_path)
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
