"""GPU searchsorted kernels, each written three times.

Two kernels: the merge path (`merge_path.py`) needs sorted needles and
streams both inputs once; the binary search (`binary_search.py`) takes any
needles; `is_sorted` tells which one applies. Each is written for three
backends, one subpackage each, with the same configs and semantics:

- `pallas_triton/`: Pallas with its Triton backend,
  `merge_path_searchsorted` and `binary_search_searchsorted`;
  `pallas_available()` says whether this jax still has that backend.
- `mosaic_gpu/`: Pallas with its Mosaic GPU backend, for compute capability
  9.0 and above, `mosaic_merge_path_searchsorted` and
  `mosaic_binary_search_searchsorted`; `mosaic_available()` says whether this
  jax has what they need.
- `triton/`: the Triton language, called through jax-triton,
  `triton_merge_path_searchsorted` and `triton_binary_search_searchsorted`;
  `triton_available()` says whether they can run here. triton, torch and
  jax-triton load only when these are called.

Every wrapper also runs its kernel in an interpreter (`interpret=True`). The
pieces all share are here at the top: the sort keys (`_order`), the Pallas
searches (`_bisect`), the wrappers' setup and docstring (`_wrapper`), the
configs and the tuning space (`configs`). This package imports nothing from
`jaxsearch`.
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
from .sortedness import is_sorted
from .triton import (
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
    "sort_key",
    "triton_available",
    "triton_binary_search_searchsorted",
    "triton_merge_path_searchsorted",
    "tuning_space",
]


def _import_optional(backend, subpackage):
    """Imports a subpackage that needs a Pallas backend jax may lack, and
    exports its wrappers; returns "" or why it did not import."""
    try:
        module = importlib.import_module(f"{__name__}.{subpackage}")
    except ImportError as exc:
        return f"this jax has no usable Pallas {backend} backend ({exc})"
    for name in module.__all__:
        globals()[name] = getattr(module, name)
        __all__.append(name)
    return ""


# Pallas' Triton backend is deprecated (jax 0.11) and will leave jax: the
# package must still import, with the native Triton kernels, once it has.
_PALLAS_ERROR = _import_optional("Triton", "pallas_triton")
# Mosaic GPU imports absl-py on jax 0.10, which jax itself does not require.
_MOSAIC_ERROR = _import_optional("Mosaic GPU", "mosaic_gpu")


def pallas_available():
    """(True, "") where the Pallas kernels can run, else (False, why not)."""
    return not _PALLAS_ERROR, _PALLAS_ERROR


def mosaic_available():
    """(True, "") where the Mosaic GPU kernels can run (on a GPU of compute
    capability 9.0 or above, or in the interpreter), else (False, why not)."""
    return not _MOSAIC_ERROR, _MOSAIC_ERROR
