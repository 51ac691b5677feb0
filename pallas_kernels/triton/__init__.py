"""The kernels in the Triton language, called through jax-triton.

Importing this package imports neither triton nor jax-triton: the kernels
load on their first call (see `searchsorted.py`).
"""

from .probe import triton_available
from .searchsorted import (
    triton_binary_search_searchsorted,
    triton_checked_searchsorted,
    triton_merge_path_searchsorted,
)

__all__ = [
    "triton_available",
    "triton_binary_search_searchsorted",
    "triton_checked_searchsorted",
    "triton_merge_path_searchsorted",
]
