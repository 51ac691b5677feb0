"""Shared fixtures, for the tests of every layer, and the two tiers.

The tests come in two tiers. The quick tier, what a plain `pytest tests`
runs, is the contract users rely on: the differential tests against jnp and
numpy, the fast path, the patch, the histogram/interp/digitize/cumsum
drop-ins, the API's edges, and a smoke test of each GPU backend. Tests marked
`full` (the compile tiers, the interpreters' whole matrices, jax's own tests
under the patch, several processes) run only with `--full`, or when a `-m`
expression picks them (`pytest -m full tests` runs the full tier alone).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import jax
import pytest

from jaxsearch import tuning
from jaxsearch.tuning import cache


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False,
                     help="run the full tier too (tests marked `full`), not only the quick tier")


def pytest_collection_modifyitems(config, items):
    """Leave the full tier out unless `--full` or a `-m` expression asks."""
    if config.getoption("--full") or config.getoption("markexpr"):
        return
    quick, full = [], []
    for item in items:
        (full if item.get_closest_marker("full") else quick).append(item)
    if full:
        config.hook.pytest_deselected(items=full)
        items[:] = quick


def pytest_configure(config):
    """Isolate the user's tuning cache, and refuse to test a jaxsearch whose
    CPU extension is missing: every CPU test would quietly exercise the jnp
    fallback instead.

    Which kernel runs, and on how many threads, follows the tuning cache: the
    session reads an empty user cache (JAXSEARCH_TUNING_DIR, read on every
    lookup, so before any search and in every subprocess a test starts), and
    the shipped cache (jaxsearch/data/) answers as it does for any user.
    """
    user_cache = tempfile.mkdtemp(prefix="jaxsearch-tests-tuning-")
    os.environ[tuning.TUNING_DIR_ENV] = user_cache
    config.add_cleanup(lambda: shutil.rmtree(user_cache, ignore_errors=True))
    from jaxsearch.core import cpu

    if not cpu.AVAILABLE:
        raise pytest.UsageError(f"jaxsearch's CPU extension is unavailable: "
                                f"{cpu.UNAVAILABLE_REASON}")


@pytest.fixture
def x64():
    """Run the test with jax_enable_x64 on."""
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="module")
def fresh_triton_cache(tmp_path_factory):
    """A Triton cache of the module's own, so that every case in it really
    compiles (the compile tests: `pytest.mark.usefixtures`)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton_cache")))
        yield


@pytest.fixture
def caches(tmp_path, monkeypatch):
    """An empty user cache (via JAXSEARCH_TUNING_DIR) and an empty shipped cache.

    A search reads the cache files when it is traced, and jit keeps the
    trace: traces made under other files are dropped on the way in and out.
    """
    user, shipped = tmp_path / "user", tmp_path / "shipped"
    monkeypatch.setenv(tuning.TUNING_DIR_ENV, str(user))
    monkeypatch.setattr(cache, "SHIPPED_DIR", shipped)  # where cache_files reads it
    clear = jax.clear_caches  # the real one, should a test forbid it
    clear()
    yield user, shipped
    clear()
