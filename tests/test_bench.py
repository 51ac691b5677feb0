"""The benchmark harness: timing, problems, suites, tables, JSON and plot (no timing asserts)."""

import io
import json
import time

import numpy as np
import pytest

from jaxsearch import _bench, _tuning
from jaxsearch.__main__ import main


def test_measure_all_samples_checks_and_reports_errors():
    calls = {"fast": 0}

    def fast():
        calls["fast"] += 1
        return np.arange(3)

    def broken():
        raise RuntimeError("boom")

    good, bad, wrong = _bench.measure_all(
        [fast, broken, lambda: np.zeros(3)], repeats=3, budget_s=0.0,
        checks=[lambda out: out[2] == 2, None, lambda out: out[2] == 2])
    assert good.error is None and good.correct is True
    assert len(good.timing.samples) >= 2 and good.timing.median > 0
    assert good.timing.number > 1  # a microsecond call is repeated within a sample
    assert calls["fast"] >= 2 + 2 * good.timing.number
    assert isinstance(bad.error, RuntimeError) and bad.timing is None
    assert wrong.correct is False


def test_measure_all_stops_slow_callables_at_the_budget():
    def slow():
        time.sleep(0.003)

    (m,) = _bench.measure_all([slow], repeats=50, budget_s=0.0)
    assert m.timing.number == 1 and len(m.timing.samples) == 2
    assert m.timing.first >= 0.003 and min(m.timing.samples) >= 0.003


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "int16", "uint8",
                                   "float16"])
@pytest.mark.parametrize("sorted_v", [True, False])
def test_make_arrays(dtype, sorted_v):
    a, v = _bench.make_arrays(_bench.Problem(1000, 300, dtype, sorted_v))
    assert a.dtype == v.dtype == np.dtype(dtype) and a.shape == (1000,) and v.shape == (300,)
    assert np.all(a[:-1] <= a[1:])
    assert np.all(v[:-1] <= v[1:]) == sorted_v
    idx = np.searchsorted(a, v)
    assert idx.min() < 100 and idx.max() > 900  # needles spread over all of a


def test_make_arrays_is_reproducible():
    p = _bench.Problem(50, 50)
    assert all(np.array_equal(x, y) for x, y in zip(_bench.make_arrays(p),
                                                      _bench.make_arrays(p)))


@pytest.mark.parametrize("n, text", [(7, "7"), (1000, "1e3"), (25000, "2.5e4"),
                                     (10**7, "1e7"), (123456, "123456")])
def test_fmt_count(n, text):
    assert _bench.fmt_count(n) == text


def test_fmt_ms():
    assert [_bench.fmt_ms(s) for s in (1.2345, 0.01234, 0.0012345, 1.2e-5, None)] == \
        ["1234", "12.3", "1.23", "0.0120", "-"]


def test_progress_without_a_terminal_prints_tenths():
    out = io.StringIO()
    bar = _bench.Progress(20, "job", stream=out)
    for _ in range(20):
        bar.show("working")
        bar.step()
    lines = out.getvalue().splitlines()
    assert len(lines) == 10 and lines[-1].startswith("job [####") and "20/20" in lines[-1]


def tiny_suite():
    wrong = _bench.Impl("wrong", "numpy", lambda x: lambda: np.zeros(x.v.shape, np.int64))
    broken = _bench.Impl("broken", "jnp", lambda x: 1 / 0)
    costly = _bench.Impl("costly", "jnp", lambda x: lambda: None,
                         cost=lambda n, m: (1e9, 0.0))
    impls = [_bench.jaxsearch_impl(None), _bench.jaxsearch_impl(True), _bench.numpy_impl(),
             _bench.jnp_impl("scan"), wrong, broken, costly, _bench.copy_impl(),
             _bench.jax_floor_impl()]
    problems = [_bench.Problem(300, 300), _bench.Problem(300, 20, sorted_v=False)]
    return _bench.run_suite(problems, impls, repeats=2, budget_s=0.0)


def test_run_suite_checks_skips_and_reports():
    results = tiny_suite()
    by = {(r.problem.sorted_v, r.impl): r for r in results}
    assert by[True, "jaxsearch"].correct and by[True, "numpy"].correct
    assert by[True, "jnp scan"].correct and by[False, "jaxsearch"].correct
    assert (False, "jaxsearch sorted_v=True") not in by  # sorted needles only
    assert (False, _bench.JAX_FLOOR_NAME) not in by  # N == M only
    assert by[True, "wrong"].correct is False
    assert by[True, "broken"].skipped.startswith("error: ZeroDivisionError")
    assert by[True, "costly"].skipped.startswith("est.")
    assert by[True, _bench.COPY_NAME].correct is None and by[True, _bench.COPY_NAME].seconds

    table = _bench.main_job_table(results)
    assert "N=300 M=300 float32 sorted" in table and "NO" in table and "skipped: est." in table
    refs = _bench.problem_summary([r for r in results if r.problem.sorted_v])
    assert refs["jnp"].impl == "jnp scan" and refs["floor"].impl == _bench.JAX_FLOOR_NAME


def test_json_round_trip():
    results = tiny_suite()
    data = json.loads(json.dumps(_bench.results_json(results, {"test": True})))
    row = next(r for r in data["results"] if r["impl"] == "jaxsearch" and r["problem"]["n"] == 300
               and r["problem"]["m"] == 300)
    assert row["correct"] is True and row["speedup_vs"]["numpy"] > 0
    assert row["bandwidth_GBps"] > 0 and row["fraction_of_copy_bandwidth"] > 0
    again = _bench.results_from_json(data)
    assert [(r.impl, r.seconds, r.correct, r.skipped) for r in again] == \
        [(r.impl, r.seconds, r.correct, r.skipped) for r in results]


def test_bench_grid_problems():
    grid = _bench.BenchGrid(sizes=(100, 1000), dtypes=("float32", "int64"), skew_size=1000,
                            skew_ratios=(1e-2, 1.0, 10.0))
    problems = grid.problems()
    assert _bench.Problem(100, 100, "int64", False) in problems
    assert _bench.Problem(10, 1000) in problems and _bench.Problem(1000, 100) in problems
    assert len(problems) == len(set(problems)) == 8 + 2  # the balanced 1e3 is not repeated


def test_bench_quick_writes_json_png_and_table(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv(_tuning.TUNING_DIR_ENV, str(tmp_path / "no-cache"))
    assert main(["bench", "--quick", "--sizes", "100", "--dtypes", "float32,int32",
                 "--skew-size", "100", "--skew-ratios", "0.1,10", "--repeats", "1",
                 "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "median ms per call" in out and "vs best jnp" in out and "% of copy" in out
    kind = _tuning.device_kind()
    data = json.loads((tmp_path / f"bench_{kind}.json").read_text())
    assert data["meta"]["grid"]["sizes"] == [100] and data["meta"]["cores"] >= 1
    assert {(r["problem"]["n"], r["problem"]["m"]) for r in data["results"]} == \
        {(100, 100), (10, 100), (100, 10)}
    assert all(r["correct"] is not False for r in data["results"])
    impls = {r["impl"] for r in data["results"]}
    assert {"jaxsearch", "numpy", "jnp scan", _bench.COPY_NAME} <= impls
    png = tmp_path / f"bench_{kind}.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    replot = tmp_path / "replot"
    assert main(["bench", "--replot", str(tmp_path / f"bench_{kind}.json"),
                 "--output", str(replot)]) == 0
    assert (replot / png.name).exists()


def test_bench_without_matplotlib_still_writes_json(tmp_path, monkeypatch, capsys):
    def no_matplotlib(*args, **kwargs):
        raise ImportError("No module named 'matplotlib'")

    monkeypatch.setattr(_bench, "plot_results", no_matplotlib)
    grid = _bench.BenchGrid(sizes=(64,), dtypes=("float32",), skew_size=64, skew_ratios=(),
                            repeats=1, budget_s=0.0)
    table, paths = _bench.bench(grid, tmp_path)
    assert set(paths) == {"json"} and paths["json"].exists()
    assert "pip install 'jaxsearch[bench]'" in capsys.readouterr().err
