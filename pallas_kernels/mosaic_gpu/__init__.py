"""The kernels in Pallas with its Mosaic GPU backend (compute capability 9.0
and above).

Importing this package raises ImportError where jax's Mosaic GPU cannot load
(jax 0.10's needs absl-py, which jax itself does not require).
"""

from .binary_search import mosaic_binary_search_searchsorted
from .checked import mosaic_checked_searchsorted
from .merge_path import mosaic_merge_path_searchsorted

__all__ = ["mosaic_binary_search_searchsorted", "mosaic_checked_searchsorted",
           "mosaic_merge_path_searchsorted"]
