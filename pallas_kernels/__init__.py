"""GPU searchsorted kernels in Pallas (Triton backend).

`merge_path_searchsorted` needs sorted needles and streams both inputs once;
`binary_search_searchsorted` takes any needles; `is_sorted` tells which one
applies. Both kernels also run in the Pallas interpreter (`interpret=True`)
on any backend. This package imports nothing from `jaxsearch`.

The same two kernels written in the Triton language, called through
jax-triton: `triton_merge_path_searchsorted` and
`triton_binary_search_searchsorted` (same configs and semantics);
`triton_available()` says whether they can run here. triton, torch and
jax-triton load only when these are called.
"""

from ._order import SUPPORTED_DTYPES, sort_key
from .configs import (
    BinarySearchConfig,
    MergePathConfig,
    default_binary_search_config,
    default_merge_path_config,
    tuning_space,
)
from .reference import searchsorted_reference
from .sortedness import is_sorted
from .triton_searchsorted import (
    triton_available,
    triton_binary_search_searchsorted,
    triton_merge_path_searchsorted,
)

__all__ = [
    "BinarySearchConfig",
    "MergePathConfig",
    "SUPPORTED_DTYPES",
    "default_binary_search_config",
    "default_merge_path_config",
    "is_sorted",
    "pallas_available",
    "searchsorted_reference",
    "sort_key",
    "triton_available",
    "triton_binary_search_searchsorted",
    "triton_merge_path_searchsorted",
    "tuning_space",
]

# Pallas' Triton backend is deprecated (jax 0.11) and will leave jax: the
# package must still import, with the native Triton kernels, once it has.
try:
    from .binary_search import binary_search_searchsorted
    from .merge_path import merge_path_searchsorted
except ImportError as exc:
    _PALLAS_ERROR = f"this jax has no Pallas Triton backend ({exc})"
else:
    _PALLAS_ERROR = ""
    __all__ += ["binary_search_searchsorted", "merge_path_searchsorted"]


def pallas_available():
    """(True, "") where the Pallas kernels can run, else (False, why not)."""
    return not _PALLAS_ERROR, _PALLAS_ERROR
