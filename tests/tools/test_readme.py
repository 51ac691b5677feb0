"""The README: its Python examples run and give jnp's answers, and its speed
table is the one `bench/speed_table.py` writes, a row for each problem it
measures, between the markers it writes into."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from jaxsearch.tools.bench.peers import Problem
from jaxsearch.tools.bench.searchsorted import main_job_problems
from jaxsearch.tools.bench.suite import Result
from jaxsearch.tools.bench.timing import Timing

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()

_spec = importlib.util.spec_from_file_location("speed_table", ROOT / "bench" / "speed_table.py")
speed_table = sys.modules["speed_table"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(speed_table)

EXAMPLES = re.findall(r"```python\n(.*?)```", README, re.S)


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_example_runs(source):
    import jaxsearch

    # The patch example leaves its block as "..." and its switch on: run a
    # body, and switch off after.
    try:
        exec(compile(source.replace("    ...", "    pass"), "README.md", "exec"),
             {"jaxsearch": jaxsearch})
    finally:
        jaxsearch.unpatch()


def test_first_example_is_the_merge_case():
    """The first example searches sorted needles about as many as the keys."""
    assert "sorted_v=True" in EXAMPLES[0] and EXAMPLES[0].count("1_000_000") == 2


def test_speed_table_holds_each_measured_problem():
    table = README.split(speed_table.START)[1].split(speed_table.END)[0]
    rows = [line for line in table.splitlines() if re.match(r"\| \d", line)]
    expected = [(p.n, p.m, "sorted" if p.sorted_v else "unsorted") for p in main_job_problems()]
    found = [(int(float(n)), int(float(m)), order)
             for n, m, order, *_ in (r.strip("| ").split(" | ") for r in rows)]
    assert found == expected
    assert speed_table.COMMAND in table


def _timing(seconds):
    return Timing(median=seconds, samples=(seconds,), number=1, first=None)


def test_markdown_table_ratios():
    p = Problem(10**7, 10**3)
    results = [Result(p, "jaxsearch", "jaxsearch", _timing(0.002), correct=True),
               Result(p, "jnp scan", "jnp", _timing(0.05), correct=True),
               Result(p, "numpy", "numpy", _timing(0.007), correct=True)]
    meta = {"repeats": 7, "cpu_model": "CPU", "cores": 2, "jax": "0.x", "numpy": "2.x",
            "jaxsearch": "0.1", "date": "2026-01-01T00:00:00"}
    row = speed_table.markdown_table(results, meta).splitlines()[2]
    assert row == "| 1e7 | 1e3 | sorted | 2 ms | 50 ms | 7 ms | 25x | 3.5x |"


def test_replace_between_markers():
    text = f"head\n{speed_table.START}\nold\n{speed_table.END}\ntail\n"
    new = speed_table.replace_between_markers(text, "new")
    assert new == f"head\n{speed_table.START}\nnew\n{speed_table.END}\ntail\n"
    assert speed_table.replace_between_markers(new, "new") == new
    with pytest.raises(ValueError, match="needs the lines"):
        speed_table.replace_between_markers("no markers", "new")
