"""jax's own tests of the functions `jaxsearch.patch()` serves, run under the patch.

The patch promises that every call it serves answers as jax does: values,
dtypes, shapes and errors. jax's own tests of those functions, at the
installed jax's tag, are the proof: they run here in a subprocess,
`pytest -p jaxsearch.autopatch FILES -k SELECT`, from the folder that the
environment variable JAXSEARCH_JAX_TESTS names, and must pass. Make that
folder (outside this repository: we carry none of jax's code) with

    bench/fetch_jax_tests.sh https://github.com/jax-ml/jax ~/jax-tests
    JAXSEARCH_JAX_TESTS=~/jax-tests pytest tests/tools/test_jax_suite.py

Without the variable, without the files or for another jax than the one the
files came from, the tests skip, saying why. Each run takes minutes (about 3
to 5 on two CPU cores).

Two runs: the patch as shipped (small searches pass to jax, as they do for
every user), and one with every search that a jaxsearch kernel can serve
served (`SMALLEST_SERVED = 0`): jax's tests use small arrays, so that is the
run in which jaxsearch's kernels answer jax's tests nearly everywhere. Both
log, per call site, whether jaxsearch served it or passed it to jax; the
tests check that the searches were served.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.tiers import full

JAX_TESTS_ENV = "JAXSEARCH_JAX_TESTS"
pytestmark = full  # minutes a run (tests/conftest.py)

# jax's test files that reach a function the patch serves, and the tests in
# them that do (pytest's -k, matched against the test ids).
FILES = (
    "tests/lax_numpy_test.py",  # searchsorted (and Array.searchsorted), digitize,
    #                             interp, histogram*, the wrapped signatures and docstrings
    "tests/lax_numpy_setops_test.py",  # isin, method="binary_search" among others
    "tests/random_lax_test.py",  # random.choice, with p
    "tests/scipy_interpolate_test.py",  # RegularGridInterpolator
    "tests/array_extensibility_test.py",  # arguments that define __jax_array__
    "tests/shard_map_test.py",  # histogram and random.choice(p=...) in shard_map
)
SELECT = " or ".join((
    "testSearchsorted", "testDigitize", "testInterp", "testHistogram", "testIsin",
    "testChoice", "testRegularGridInterpolator",
    "jax_array_digitize", "jax_array_histogram", "jax_array_interp",
    "(jax_array_isin and not isinf)", "jax_array_searchsorted",
    "testWrappedSignaturesMatch", "test_lax_numpy_docstrings",
    "test_jnp_histogram", "test_random_choice_pvary",
))
SERVED_FUNCTIONS = ("searchsorted", "digitize", "interp")
TIMEOUT_S = 1800

# pytest.main, with the "jaxsearch" logger writing each call site's verdict
# to a file (argv[1]) and, for the second run, no search too small to serve.
DRIVER = """\
import logging, sys
import pytest
from jaxsearch.core import patching
handler = logging.FileHandler(sys.argv[1])
handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
log = logging.getLogger("jaxsearch")
log.addHandler(handler)
log.setLevel(logging.INFO)
if sys.argv[2] == "every":
    patching.SMALLEST_SERVED = 0
sys.exit(pytest.main(sys.argv[3:]))
"""


def _installed_jax() -> str:
    return importlib.metadata.version("jax")


def _suite() -> Path:
    """The folder of jax's tests, or a skip saying why there is none to run."""
    where = os.environ.get(JAX_TESTS_ENV)
    if not where:
        pytest.skip(f"{JAX_TESTS_ENV} is unset: make jax's tests with "
                    f"bench/fetch_jax_tests.sh and set it to their folder")
    root = Path(where).expanduser()
    missing = [name for name in FILES if not (root / name).is_file()]
    if missing:
        pytest.skip(f"{JAX_TESTS_ENV}={root} lacks {', '.join(missing)}")
    stamp = root / "JAX_VERSION"
    if not stamp.is_file():
        pytest.skip(f"{root} has no JAX_VERSION: make it with bench/fetch_jax_tests.sh, "
                    f"which says which jax the tests come from")
    version = stamp.read_text().split()[0]
    if version != _installed_jax():
        pytest.skip(f"{root} holds jax {version}'s tests; jax {_installed_jax()} is installed")
    return root


def _summary(stdout: str) -> dict[str, int]:
    """pytest's closing counts ("3 passed, 1 skipped ... in 2.0s") by outcome."""
    lines = [line for line in stdout.splitlines() if re.search(r" in [\d.]+s\b", line)]
    if not lines:
        return {}
    counts = re.findall(r"(\d+) (passed|failed|skipped|deselected|errors?|xfailed|xpassed)",
                        lines[-1])
    return {("error" if kind.startswith("error") else kind): int(n) for n, kind in counts}


def _run(root: Path, log_file: Path, mode: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    # shard_map's tests need several devices: eight CPU devices, as jax's CI gives them.
    env["XLA_FLAGS"] = " ".join(filter(None, (
        env.get("XLA_FLAGS"), "--xla_force_host_platform_device_count=8")))
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(log_file), mode,
         "-p", "jaxsearch.autopatch", "-p", "no:randomly", "-p", "no:cacheprovider",
         "-rfEs", *FILES, "-k", SELECT],
        cwd=root, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    return done, _summary(done.stdout)


def _verdicts(log_file: Path) -> dict[str, list[str]]:
    """The log's lines: served by jaxsearch, passed to jax, and jaxsearch's
    warnings (it raised where jax answers; jax then answered)."""
    lines = log_file.read_text().splitlines() if log_file.exists() else []
    return {
        "served": [line for line in lines if "served by jaxsearch" in line],
        "passed": [line for line in lines if "passed to jax" in line and "raised" not in line],
        "raised": [line for line in lines if line.startswith("WARNING")],
    }


def _check(done: subprocess.CompletedProcess, counts: dict, verdicts: dict) -> None:
    tail = "\n".join(done.stdout.splitlines()[-60:]) + "\n" + done.stderr[-3000:]
    assert "jaxsearch: patch in force" in done.stdout, tail
    assert counts.get("passed", 0) > 0, f"no test of jax's ran: {counts}\n{tail}"
    assert counts.get("failed", 0) == 0 and counts.get("error", 0) == 0, f"{counts}\n{tail}"
    assert done.returncode == 0, f"pytest exited {done.returncode}: {counts}\n{tail}"
    print(f"jax's tests under the patch: {counts}; call sites served by jaxsearch: "
          f"{len(verdicts['served'])}, passed to jax: {len(verdicts['passed'])}, "
          f"jaxsearch raised and jax answered: {len(verdicts['raised'])}")


def test_jax_tests_pass_under_the_patch(tmp_path):
    """The patch as shipped: what every user of `pytest -p jaxsearch.autopatch` gets."""
    root = _suite()
    log_file = tmp_path / "jaxsearch.log"
    done, counts = _run(root, log_file, "shipped")
    verdicts = _verdicts(log_file)
    _check(done, counts, verdicts)
    assert verdicts["served"], "no call site of jax's tests was served by jaxsearch"


def test_jax_tests_pass_with_every_search_served(tmp_path):
    """No search too small to serve: jaxsearch's kernels answer jax's tests,
    wherever a kernel serves the keys (not complex ones, nor an explicit
    digitize method)."""
    root = _suite()
    log_file = tmp_path / "jaxsearch.log"
    done, counts = _run(root, log_file, "every")
    verdicts = _verdicts(log_file)
    _check(done, counts, verdicts)
    for name in SERVED_FUNCTIONS:
        assert any(f"jnp.{name} at " in line for line in verdicts["served"]), \
            f"jnp.{name}: no call site served\n" + "\n".join(verdicts["served"])
    assert not any("too small to gain" in line for line in verdicts["passed"])
