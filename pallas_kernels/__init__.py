"""GPU searchsorted kernels in Pallas (Triton backend).

`merge_path_searchsorted` needs sorted needles and streams both inputs once;
`binary_search_searchsorted` takes any needles; `is_sorted` tells which one
applies. Both kernels also run in the Pallas interpreter (`interpret=True`)
on any backend. This package imports nothing from `jaxsearch`.
"""

from ._order import SUPPORTED_DTYPES, sort_key
from .binary_search import binary_search_searchsorted
from .configs import (
    BinarySearchConfig,
    MergePathConfig,
    default_binary_search_config,
    default_merge_path_config,
    tuning_space,
)
from .merge_path import merge_path_searchsorted
from .reference import searchsorted_reference
from .sortedness import is_sorted

__all__ = [
    "BinarySearchConfig",
    "MergePathConfig",
    "SUPPORTED_DTYPES",
    "binary_search_searchsorted",
    "default_binary_search_config",
    "default_merge_path_config",
    "is_sorted",
    "merge_path_searchsorted",
    "searchsorted_reference",
    "sort_key",
    "tuning_space",
]
