"""numpy in another Python as a peer (--numpy-python): the worker's numpy
and Python named in the impl, its answers checked against this numpy's
before timing, its calls timed beside the others in one suite, and clear
errors for a Python that cannot serve."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from jaxsearch.tools.bench.other_numpy import numpy_process_impl
from jaxsearch.tools.bench.peers import Problem, make_inputs, numpy_impl
from jaxsearch.tools.bench.suite import run_suite


def test_worker_names_its_numpy_and_answers_as_numpy():
    impl = numpy_process_impl(sys.executable)
    assert impl.name == f"numpy {np.__version__} (Python {sys.version.split()[0]})"
    assert impl.group == "numpy" and not impl.checked
    call = impl.build(make_inputs(Problem(1000, 3000, "int32", sorted_v=False)))
    assert call() is None  # one round trip, the search done in the worker


def test_timed_in_a_suite_beside_this_numpy():
    problems = [Problem(100, 100), Problem(1000, 10, "int64", sorted_v=False)]
    results = run_suite(problems, [numpy_impl(), numpy_process_impl(sys.executable)],
                        repeats=2, budget_s=0.01, max_call_s=1.0)
    assert {r.impl for r in results if r.timing is not None} == \
        {"numpy", f"numpy {np.__version__} (Python {sys.version.split()[0]})"}
    assert all(r.skipped is None for r in results)


def test_a_python_that_cannot_serve(tmp_path):
    with pytest.raises(ValueError, match="cannot run it"):
        numpy_process_impl(str(tmp_path / "no-python"))
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 1\n")  # prints no banner
    fake.chmod(0o755)
    with pytest.raises(ValueError, match="does not import numpy"):
        numpy_process_impl(str(fake))
