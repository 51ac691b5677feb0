"""jaxsearch: a drop-in, faster jax.numpy.searchsorted.

``jaxsearch.searchsorted(a, v, side="left", sorter=None, *, sorted_v=None,
method=None, implementation=None)`` returns exactly what
``jnp.searchsorted`` returns. When the needles `v` are sorted too it merges
two sorted streams instead of binary-searching each needle: Cython kernels
through the XLA FFI on CPU, Pallas (Triton) kernels on GPU, jnp elsewhere.

The package in layers, each importing only those below it: `tools` (the
benchmark harness, the autotuner and the command line), `core` (the
library), `tuning` (the tuning caches and the CPU config), the kernels
(`pallas_kernels`, the checkout's `pallas_kernels/`, and `_cpu_ext`, built
from `cpu_ext/`) and, under all of them, the shared facts of `keys`.
"""

import importlib.util as _importlib_util
import sys as _sys
from pathlib import Path as _Path

# Run from a clone's root, Python finds the source tree's jaxsearch/ before
# the installed one; it has no compiled extension (the build puts it inside
# the installed package). Refuse it at once rather than quietly run jnp
# instead: one line for `python -m jaxsearch` (argv[0] is "-m" while runpy
# imports the package), an ImportError for an import.
if (_Path(__file__).parent.parent / "meson.build").exists() and \
        _importlib_util.find_spec(f"{__name__}._cpu_ext") is None:
    _message = (
        f"jaxsearch: {_Path(__file__).parent} is the unbuilt source tree, not the installed "
        "package: after `pip install .`, run the `jaxsearch` command, or Python from another "
        "directory (for development, the editable install in docs/development.md)")
    if _sys.argv[:1] == ["-m"]:
        _sys.exit(_message)
    raise ImportError(_message)

from ._version import __version__
from .core.api import JNP_METHODS, searchsorted
from .core.cumsum import searchsorted_cumsum
from .core.digitize import digitize
from .core.histogram import histogram, histogram2d, histogramdd
from .core.implementations import IMPLEMENTATIONS
from .core.interp import interp
from .core.patching import is_patched, patch, patched, unpatch
from .core.primitive import export_disabled_checks
from .core.sharded import sharded_searchsorted

__all__ = ["searchsorted", "searchsorted_cumsum", "digitize", "interp", "histogram",
           "histogram2d", "histogramdd", "sharded_searchsorted",
           "patch", "unpatch", "patched", "is_patched", "export_disabled_checks",
           "IMPLEMENTATIONS", "JNP_METHODS", "__version__"]
