"""jnp's contract at the edges: what jnp.searchsorted rejects, and the types a
type checker sees."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from helpers.processes import run_python

import jaxsearch

NOT_ARRAYS = {
    "None": None, "str": "abc", "bytes": b"abc", "dict": {"a": 1}, "object": object(),
    "list": [1.0, 2.0], "tuple": (1.0, 2.0), "list of str": ["a", "b"],
    "str array": np.array(["a", "b"]), "object array": np.array([1.0, None], dtype=object),
}


@pytest.mark.parametrize("name, value", [
    pytest.param(name, value, id=f"{name}={label}")
    for name in ("a", "v", "sorter") for label, value in NOT_ARRAYS.items()
    if not (name == "sorter" and value is None)])  # the default
def test_what_jnp_rejects_raises_type_error(name, value):
    """jnp raises TypeError for each of these, lists included; so do we, naming the input."""
    args = {"a": jnp.arange(3.0), "v": jnp.float32(1.0), "sorter": None, name: value}
    with pytest.raises(TypeError):
        jnp.searchsorted(**args)
    with pytest.raises(TypeError, match=f"{name} must be a numeric array or scalar"):
        jaxsearch.searchsorted(**args)


def test_package_carries_the_py_typed_marker():
    """PEP 561: without the marker, type checkers ignore the package's hints."""
    assert (Path(jaxsearch.__file__).parent / "py.typed").is_file()


def test_type_checker_sees_a_jax_array(request, tmp_path):
    """mypy, finding jaxsearch as an installed package (which needs the
    marker), types a search's result as jax.Array."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed")
    snippet = ("import jax\nimport jaxsearch\n"
               "def f(x: jax.Array) -> None:\n    reveal_type(x)\n"
               "reveal_type(jaxsearch.searchsorted(jax.numpy.arange(3.0), 1.0))\n")
    cache = request.config.cache.mkdir("mypy") if hasattr(request.config, "cache") else tmp_path
    # On the path as site-packages are: a package there without the marker
    # is an error ("missing library stubs or py.typed marker").
    root = Path(jaxsearch.__file__).parent.parent
    done = run_python("-m", "mypy", "--cache-dir", str(cache), "-c", snippet,
                      env={"PYTHONPATH": str(root)}, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    array, result = re.findall(r'Revealed type is "([^"]+)"', done.stdout)
    assert result == array != "Any"
