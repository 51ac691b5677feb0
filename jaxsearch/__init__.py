"""jaxsearch: a drop-in, faster jax.numpy.searchsorted.

``jaxsearch.searchsorted(a, v, side="left", sorter=None, *, sorted_v=None,
method=None, implementation=None)`` returns exactly what
``jnp.searchsorted`` returns. When the needles `v` are sorted too it merges
two sorted streams instead of binary-searching each needle: Cython kernels
through the XLA FFI on CPU, Pallas (Triton) kernels on GPU, jnp elsewhere.
"""

import importlib.util as _importlib_util
import sys as _sys
from pathlib import Path as _Path

# Run from a clone's root, Python finds the source tree's jaxsearch/ before
# the installed one; it has neither the compiled extension nor the GPU
# kernels (the build puts both inside the installed package). Refuse it at
# once rather than fail half-imported or quietly run jnp instead: one line
# for `python -m jaxsearch` (argv[0] is "-m" while runpy imports the
# package), an ImportError for an import.
if (_Path(__file__).parent.parent / "meson.build").exists() and \
        _importlib_util.find_spec(f"{__name__}._cpu_ext") is None:
    _message = (
        f"jaxsearch: {_Path(__file__).parent} is the unbuilt source tree, not the installed "
        "package: after `pip install .`, run the `jaxsearch` command, or Python from another "
        "directory (for development, the editable install in the README)")
    if _sys.argv[:1] == ["-m"]:
        _sys.exit(_message)
    raise ImportError(_message)

from ._api import IMPLEMENTATIONS, JNP_METHODS, searchsorted
from ._cumsum import searchsorted_cumsum
from ._digitize import digitize
from ._interp import interp
from ._primitive import export_disabled_checks
from ._sharded import sharded_searchsorted

__version__ = "0.1.0"
__all__ = ["searchsorted", "searchsorted_cumsum", "digitize", "interp", "sharded_searchsorted",
           "export_disabled_checks",
           "IMPLEMENTATIONS", "JNP_METHODS", "__version__"]
