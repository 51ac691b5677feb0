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

The same two kernels in Pallas with its Mosaic GPU backend, for compute
capability 9.0 and above: `mosaic_merge_path_searchsorted` and
`mosaic_binary_search_searchsorted` (same configs and semantics);
`mosaic_available()` says whether this jax has what they need.
"""

import importlib

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
    "mosaic_available",
    "pallas_available",
    "searchsorted_reference",
    "sort_key",
    "triton_available",
    "triton_binary_search_searchsorted",
    "triton_merge_path_searchsorted",
    "tuning_space",
]


def _import_optional(backend, *modules):
    """Imports kernel modules that need a Pallas backend jax may lack, and
    exports their `<module>_searchsorted` wrappers; returns "" or why they
    did not import."""
    try:
        loaded = [importlib.import_module(f"{__name__}.{module}") for module in modules]
    except ImportError as exc:
        return f"this jax has no usable Pallas {backend} backend ({exc})"
    for module, name in zip(loaded, modules):
        globals()[f"{name}_searchsorted"] = getattr(module, f"{name}_searchsorted")
        __all__.append(f"{name}_searchsorted")
    return ""


# Pallas' Triton backend is deprecated (jax 0.11) and will leave jax: the
# package must still import, with the native Triton kernels, once it has.
_PALLAS_ERROR = _import_optional("Triton", "binary_search", "merge_path")
# Mosaic GPU imports absl-py on jax 0.10, which jax itself does not require.
_MOSAIC_ERROR = _import_optional("Mosaic GPU", "mosaic_binary_search", "mosaic_merge_path")


def pallas_available():
    """(True, "") where the Pallas kernels can run, else (False, why not)."""
    return not _PALLAS_ERROR, _PALLAS_ERROR


def mosaic_available():
    """(True, "") where the Mosaic GPU kernels can run (on a GPU of compute
    capability 9.0 or above, or in the interpreter), else (False, why not)."""
    return not _MOSAIC_ERROR, _MOSAIC_ERROR
