"""jaxsearch: a drop-in, faster jax.numpy.searchsorted.

``jaxsearch.searchsorted(a, v, side="left", sorter=None, *, sorted_v=None,
method=None, implementation=None)`` returns exactly what
``jnp.searchsorted`` returns. When the needles `v` are sorted too it merges
two sorted streams instead of binary-searching each needle: Cython kernels
through the XLA FFI on CPU, Pallas (Triton) kernels on GPU, jnp elsewhere.
"""

from ._api import IMPLEMENTATIONS, JNP_METHODS, searchsorted
from ._primitive import export_disabled_checks
from ._sharded import sharded_searchsorted

__version__ = "0.1.0"
__all__ = ["searchsorted", "sharded_searchsorted", "export_disabled_checks",
           "IMPLEMENTATIONS", "JNP_METHODS", "__version__"]
