"""The benchmark harness: timing, problems, suites, tables, JSON and plot (no timing asserts)."""

import io
import json
import re
import time

import numpy as np
import pytest

from jaxsearch import tuning
from jaxsearch.__main__ import main
from jaxsearch.tools.bench import plot as bench_plot
from jaxsearch.tools.bench import searchsorted as bench_searchsorted
from jaxsearch.tools.bench import timing
from jaxsearch.tools.bench.format import fmt_count, fmt_gbps, fmt_ms
from jaxsearch.tools.bench.peers import (
    COPY_NAME,
    JAX_FLOOR_NAME,
    Impl,
    Problem,
    copy_impl,
    jax_floor_impl,
    jaxsearch_impl,
    jnp_impl,
    make_arrays,
    numpy_impl,
)
from jaxsearch.tools.bench.report import (
    bench_table,
    main_job_table,
    results_from_json,
    results_json,
)
from jaxsearch.tools.bench.suite import Result, problem_summary, run_suite
from jaxsearch.tools.bench.timing import Progress, Timing, measure_all


class _Clock:
    """A stand-in for the harness's clock in which only calls take time, so
    that a busy machine cannot change how many calls make a sample."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


def test_measure_all_samples_checks_and_reports_errors(monkeypatch):
    calls = {"fast": 0}
    clock = _Clock()
    monkeypatch.setattr(timing, "time", clock)

    def fast():  # a microsecond call
        calls["fast"] += 1
        clock.now += 1e-6
        return np.arange(3)

    def broken():
        raise RuntimeError("boom")

    good, bad, wrong = measure_all(
        [fast, broken, lambda: np.zeros(3)], repeats=3, budget_s=0.0,
        checks=[lambda out: out[2] == 2, None, lambda out: out[2] == 2])
    assert good.error is None and good.correct is True
    assert len(good.timing.samples) >= 2 and good.timing.median > 0
    assert good.timing.number > 1  # a microsecond call is repeated within a sample
    assert calls["fast"] >= 2 + 2 * good.timing.number
    assert isinstance(bad.error, RuntimeError) and bad.timing is None
    assert wrong.correct is False


def test_measure_all_rotates_who_goes_first(monkeypatch):
    """Each round of samples starts one callable further on, so that no
    callable always runs right after the same other one."""
    clock = _Clock()
    monkeypatch.setattr(timing, "time", clock)
    order = []

    def call(name):
        def fn():
            order.append(name)
            clock.now += 1.0  # a sample of one call
        return fn

    measure_all([call("a"), call("b"), call("c")], repeats=4, budget_s=10.0,
                clock=clock.perf_counter)
    # Two calls each to warm up (the second, a sample of one call, counts as
    # the first sample), then three rounds of one sample each.
    assert order[:6] == ["a", "a", "b", "b", "c", "c"]
    assert order[6:] == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]


def test_measure_all_stops_slow_callables_at_the_budget():
    def slow():
        time.sleep(0.003)

    (m,) = measure_all([slow], repeats=50, budget_s=0.0)
    assert m.timing.number == 1 and len(m.timing.samples) == 2
    assert m.timing.first >= 0.003 and min(m.timing.samples) >= 0.003


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "int16", "uint8",
                                   "float16"])
@pytest.mark.parametrize("sorted_v", [True, False])
def test_make_arrays(dtype, sorted_v):
    a, v = make_arrays(Problem(1000, 300, dtype, sorted_v))
    assert a.dtype == v.dtype == np.dtype(dtype) and a.shape == (1000,) and v.shape == (300,)
    assert np.all(a[:-1] <= a[1:])
    assert np.all(v[:-1] <= v[1:]) == sorted_v
    idx = np.searchsorted(a, v)
    assert idx.min() < 100 and idx.max() > 900  # needles spread over all of a


def test_make_arrays_is_reproducible():
    p = Problem(50, 50)
    assert all(np.array_equal(x, y) for x, y in zip(make_arrays(p),
                                                      make_arrays(p)))


@pytest.mark.parametrize("n, text", [(7, "7"), (1000, "1e3"), (25000, "2.5e4"),
                                     (10**7, "1e7"), (123456, "123456")])
def test_fmt_count(n, text):
    assert fmt_count(n) == text


def test_fmt_ms():
    assert [fmt_ms(s) for s in (1.2345, 0.01234, 0.0012345, 1.2e-5, None)] == \
        ["1234", "12.3", "1.23", "0.0120", "-"]


def test_fmt_gbps_keeps_a_slow_bandwidth_above_zero():
    # 3.6 kB in 1 ms, as a 300-key problem reads on a loaded machine: printed
    # to two decimals it read 0.00, and a table check of "GB/s > 0" failed.
    assert [fmt_gbps(b) for b in (3.6e6, 2.5e9, 1.234e11)] == ["0.00360", "2.50", "123"]


def test_progress_without_a_terminal_prints_tenths():
    out = io.StringIO()
    bar = Progress(20, "job", stream=out)
    for _ in range(20):
        bar.show("working")
        bar.step()
    lines = out.getvalue().splitlines()
    assert len(lines) == 10 and lines[-1].startswith("job [####") and "20/20" in lines[-1]


@pytest.fixture(scope="module")
def suite():
    """A real run of every kind of result: right, wrong, raising, skipped as too
    slow, not applicable; on a balanced and on a skewed (N > M) problem."""
    wrong = Impl("wrong", "numpy", lambda x: lambda: np.zeros(x.v.shape, np.int64))
    broken = Impl("broken", "jnp", lambda x: 1 / 0)
    costly = Impl("costly", "jnp", lambda x: lambda: None,
                  cost=lambda n, m: (1e9, 0.0))
    impls = [jaxsearch_impl(None), jaxsearch_impl(True), numpy_impl(),
             jnp_impl("scan"), wrong, broken, costly, copy_impl(),
             jax_floor_impl()]
    problems = [Problem(300, 300), Problem(300, 20, sorted_v=False)]
    return run_suite(problems, impls, repeats=2, budget_s=0.0)


BALANCED, SKEWED = "N=300 M=300 float32 sorted", "N=300 M=20 float32 unsorted"


def test_run_suite_checks_skips_and_reports(suite):
    by = {(r.problem.sorted_v, r.impl): r for r in suite}
    assert by[True, "jaxsearch"].correct and by[True, "numpy"].correct
    assert by[True, "jnp scan"].correct and by[False, "jaxsearch"].correct
    not_sorted = by[False, "jaxsearch sorted_v=True"]
    assert not_sorted.skipped == "not applicable: needs sorted needles"
    assert not not_sorted.applies and not_sorted.seconds is None
    assert by[False, JAX_FLOOR_NAME].skipped == "not applicable: needs N == M"
    assert by[True, "wrong"].correct is False
    assert by[True, "broken"].skipped.startswith("error: ZeroDivisionError")
    assert by[True, "costly"].skipped.startswith("est.") and by[True, "costly"].applies
    assert by[True, COPY_NAME].correct is None and by[True, COPY_NAME].seconds

    refs = problem_summary([r for r in suite if r.problem.sorted_v])
    assert refs["jnp"].impl == "jnp scan" and refs["floor"].impl == JAX_FLOOR_NAME
    assert problem_summary([r for r in suite if not r.problem.sorted_v])["floor"] is None


def table_row(text, title, label):
    """Row `label` of the table under the line starting with `title`: {header: cell}."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    headers = re.split(r"\s{2,}", lines[start + 1].strip())
    line = next(line for line in lines[start + 3:] if line.startswith(label + "  "))
    cells = re.split(r"\s{2,}", line.strip())
    assert len(cells) <= len(headers), line  # fewer: blank cells at the end
    return dict(zip(headers, cells))


def footnote(text, title, cell):
    """The reason given under the table titled `title` for an empty `cell` ("-[2]")."""
    marker = re.fullmatch(r"-(\[\d+\])", cell).group(1)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    return next(line for line in lines[start:] if line.startswith(marker + " "))[
        len(marker) + 1:]


def legend_terms(legend):
    """The terms a legend explains (each at the start of an indented line)."""
    return set(re.findall(r"^  (\S.*?)(?:  |$)", legend, re.M))


def test_main_job_table_explains_every_column_and_empty_cell(suite):
    table = main_job_table(suite)
    blocks, legend = table.split("Legend")
    # No jax floor on a skewed problem, and the cell says why.
    cell = table_row(table, SKEWED, "jaxsearch")["time / jax floor"]
    assert footnote(table, SKEWED, cell) == "jax floor: not applicable: needs N == M"
    assert table_row(table, BALANCED, "jaxsearch")["time / jax floor"].endswith("x")
    assert "skipped: est. 1e+09 s/call > 2 s" in table  # a row that never ran says why
    skewed_block = blocks.split(SKEWED)[1]
    assert "jnp scan" in skewed_block and "jaxsearch sorted_v=True" not in skewed_block

    headers = re.split(r"\s{2,}", blocks.splitlines()[1].strip())
    rows = {r.impl for r in suite if r.applies}
    assert legend_terms(legend) >= set(headers) | rows | {"problem"}, legend_terms(legend)
    for text in ("(v > a).astype(int32)", "writing M int32", "least any search through JAX",
                 "numpy copy of the bytes of a and v into a fresh buffer",
                 'numpy.searchsorted(a, v, side="left")', 'side="left"', "the dtype"):
        assert text in " ".join(legend.split()), text


def test_bench_table_explains_every_column_and_empty_cell(suite):
    text = bench_table(suite)
    times_title, ratios_title = "Median ms per call", "jaxsearch (the drop-in call)"
    times, ratios = text.split(ratios_title)

    # A cell left out says why: too slow, raised, not applicable.
    balanced = table_row(text, times_title, BALANCED)
    assert footnote(text, times_title, balanced["costly"]) == "est. 1e+09 s/call > 2 s"
    assert footnote(text, times_title, balanced["broken"]).startswith(
        "error: ZeroDivisionError")
    skewed = table_row(text, times_title, SKEWED)
    assert footnote(text, times_title, skewed["sorted_v=True"]) == \
        "not applicable: needs sorted needles"
    assert footnote(text, times_title, skewed["jax floor"]) == "not applicable: needs N == M"

    # Bandwidth only where the search must read all of a: not with N > M.
    balanced = table_row(text, ratios_title, BALANCED)
    assert float(balanced["GB/s"]) > 0 and re.fullmatch(r"\d+%", balanced["% of copy"])
    skewed = table_row(text, ratios_title, SKEWED)
    assert skewed["vs numpy"].endswith("x")
    assert skewed["% of copy"] == skewed["GB/s"]
    assert footnote(text, ratios_title, skewed["GB/s"]).startswith(
        "N > M: a search need not read all of a")

    # Each table's legend names its every column and says what the words mean.
    musts = {times: ("(v > a).astype(int32)", "numpy copy of the bytes of a and v", 'side="left"'),
             ratios: ("N <= M", "M*log2(N)", "over the copy floor's",
                      "numpy copy of the bytes of a and v",
                      'numpy.searchsorted(a, v, side="left")')}
    for part, words in musts.items():
        table, legend = part.split("Legend:")
        headers = re.split(r"\s{2,}", table.strip().splitlines()[1])  # under the title
        assert legend_terms(legend) >= set(headers), (headers, legend_terms(legend))
        assert all(w in " ".join(legend.split()) for w in words)


def test_json_round_trip(suite):
    data = json.loads(json.dumps(results_json(suite, {"test": True})))
    row = next(r for r in data["results"] if r["impl"] == "jaxsearch" and r["problem"]["n"] == 300
               and r["problem"]["m"] == 300)
    assert row["correct"] is True and row["speedup_vs"]["numpy"] > 0
    assert row["bandwidth_GBps"] > 0 and row["fraction_of_copy_bandwidth"] > 0
    skewed = next(r for r in data["results"] if r["impl"] == "jaxsearch"
                  and r["problem"]["m"] == 20)
    assert skewed["speedup_vs"]["numpy"] > 0
    assert skewed["bandwidth_GBps"] is None and skewed["fraction_of_copy_bandwidth"] is None
    assert "N <= M" in data["legend"]["bandwidth_GBps"]
    again = results_from_json(data)
    assert [(r.impl, r.seconds, r.correct, r.skipped) for r in again] == \
        [(r.impl, r.seconds, r.correct, r.skipped) for r in suite]


def result(n, m, impl, seconds, group="jnp"):
    """A result as a run records it: timed, or skipped (seconds None)."""
    if seconds is None:
        return Result(Problem(n, m), impl, group, skipped="est. 9 s/call > 1 s")
    return Result(Problem(n, m), impl, group,
                  Timing(seconds, (seconds,), 1, seconds))


@pytest.fixture
def axes():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def test_plot_bandwidth_breaks_lines_at_missing_sizes(axes):
    sizes = (10, 100, 1000)
    rs = [result(n, n, "numpy", 1e-6 * n, "numpy") for n in sizes]
    rs += [result(n, n, "jnp scan", None if n == 100 else 1e-7 * n) for n in sizes]  # skipped
    rs += [result(n, n, "jnp sort", 1e-7 * n) for n in sizes[:2]]  # no result at 1000
    bench_plot._plot_bandwidth(axes, rs, {"numpy": {}, "jnp scan": {}, "jnp sort": {}}, "t")
    lines = {line.get_label(): line for line in axes.get_lines()}
    assert all(list(line.get_xdata()) == list(sizes) for line in lines.values())
    assert np.isfinite(lines["numpy"].get_ydata()).all()
    assert np.isnan(lines["jnp scan"].get_ydata()).tolist() == [False, True, False]
    assert np.isnan(lines["jnp sort"].get_ydata()).tolist() == [False, False, True]


def test_plot_skew_breaks_lines_at_missing_ratios(axes):
    shapes = ((10, 1000), (1000, 1000), (1000, 10))
    rs = [result(n, m, "numpy", 1e-3, "numpy") for n, m in shapes]
    rs += [result(n, m, "jaxsearch", 1e-4, "jaxsearch") for n, m in shapes]
    rs += [result(n, m, "jnp scan", None if n == m else 1e-2) for n, m in shapes]
    bench_plot._plot_skew(axes, rs, {"numpy": {}, "jaxsearch": {}, "jnp scan": {}}, 1000)
    lines = {line.get_label(): line for line in axes.get_lines() if line.get_label() in
             ("jaxsearch", "jnp scan")}
    assert list(lines["jnp scan"].get_xdata()) == [0.01, 1.0, 100.0]
    assert np.isnan(lines["jnp scan"].get_ydata()).tolist() == [False, True, False]
    assert np.allclose(lines["jaxsearch"].get_ydata(), 10.0)


def test_bench_grid_problems():
    grid = bench_searchsorted.BenchGrid(sizes=(100, 1000), dtypes=("float32", "int64"),
                                         skew_size=1000, skew_ratios=(1e-2, 1.0, 10.0))
    problems = grid.problems()
    assert Problem(100, 100, "int64", False) in problems
    assert Problem(10, 1000) in problems and Problem(1000, 100) in problems
    assert len(problems) == len(set(problems)) == 8 + 2  # the balanced 1e3 is not repeated


def test_bench_quick_writes_json_png_and_table(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv(tuning.TUNING_DIR_ENV, str(tmp_path / "no-cache"))
    assert main(["bench", "--quick", "--sizes", "100", "--dtypes", "float32,int32",
                 "--skew-size", "100", "--skew-ratios", "0.1,10", "--repeats", "1",
                 "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Median ms per call" in out and "vs best jnp" in out and "% of copy" in out
    assert out.count("Legend:") == 2 and "N > M: a search need not read all of a" in out
    kind = tuning.device_kind()
    data = json.loads((tmp_path / f"bench_{kind}.json").read_text())
    assert data["meta"]["grid"]["sizes"] == [100] and data["meta"]["cores"] >= 1
    assert {(r["problem"]["n"], r["problem"]["m"]) for r in data["results"]} == \
        {(100, 100), (10, 100), (100, 10)}
    assert all(r["correct"] is not False for r in data["results"])
    assert all((r["bandwidth_GBps"] is None) == (r["problem"]["n"] > r["problem"]["m"])
               for r in data["results"] if r["impl"] == "jaxsearch")
    impls = {r["impl"] for r in data["results"]}
    assert {"jaxsearch", "numpy", "jnp scan", COPY_NAME} <= impls
    png = tmp_path / f"bench_{kind}.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    replot = tmp_path / "replot"
    assert main(["bench", "--replot", str(tmp_path / f"bench_{kind}.json"),
                 "--output", str(replot)]) == 0
    assert (replot / png.name).exists()


def test_bench_without_matplotlib_still_writes_json(tmp_path, monkeypatch, capsys):
    def no_matplotlib(*args, **kwargs):
        raise ImportError("No module named 'matplotlib'")

    monkeypatch.setattr(bench_searchsorted, "plot_results", no_matplotlib)
    grid = bench_searchsorted.BenchGrid(sizes=(64,), dtypes=("float32",), skew_size=64,
                                         skew_ratios=(), repeats=1, budget_s=0.0)
    table, paths = bench_searchsorted.bench(grid, tmp_path)
    assert set(paths) == {"json"} and paths["json"].exists()
    assert "pip install 'jaxsearch[bench]'" in capsys.readouterr().err
