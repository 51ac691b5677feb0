"""The kernels in Pallas with its Triton backend (deprecated in jax 0.11).

Importing this package raises ImportError where jax's Pallas has no Triton
backend.
"""

from .binary_search import binary_search_searchsorted
from .checked import checked_searchsorted
from .merge_path import merge_path_searchsorted

__all__ = ["binary_search_searchsorted", "checked_searchsorted", "merge_path_searchsorted"]
