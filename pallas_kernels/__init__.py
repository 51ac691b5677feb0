"""GPU searchsorted kernels, each written for three backends.

Two kinds of kernel (`configs.KERNEL_KINDS`): the merge path
(`merge_path.py`) needs sorted needles and streams both inputs once; the
binary search (`binary_search.py`) takes any needles; `is_sorted` tells
which one applies. Each is written for three backends, one subpackage each,
with the same configs and semantics, listed in `backends.BACKENDS`:

- "pallas", `pallas_triton/`: Pallas with its Triton backend;
- "mosaic", `mosaic_gpu/`: Pallas with its Mosaic GPU backend, for compute
  capability 9.0 and above;
- "triton", `triton/`: the Triton language, called through jax-triton;
  triton, torch and jax-triton load only when these are called.

`BACKENDS[name].kernel(kind)` is a backend's public wrapper of a kind, and
`BACKENDS[name].status()` says whether it can run here. Every wrapper also
runs its kernel in an interpreter (`interpret=True`). The pieces all share
are here at the top: the sort keys (`_order`), the Pallas searches
(`_bisect`), the wrappers' setup and docstring (`_wrapper`), the kinds,
configs and tuning space (`configs`), and the private jax names they use
(`_jax_private`).

The installed package holds this folder as `jaxsearch/pallas_kernels/`
(the checkout links it there too). It imports nothing from `jaxsearch`
but the shared facts of `jaxsearch.keys`.
"""

from ._jax_private import compute_capability
from ._order import SUPPORTED_DTYPES, sort_key
from .backends import BACKENDS, Backend
from .configs import (
    BINARY_SEARCH,
    KERNEL_KINDS,
    MERGE_PATH,
    BinarySearchConfig,
    KernelKind,
    MergePathConfig,
    default_binary_search_config,
    default_bisect_config,
    default_merge_path_config,
    for_warp_lanes,
    kernel_kind,
    tuning_space,
)
from .sortedness import is_sorted

__all__ = [
    "BACKENDS",
    "BINARY_SEARCH",
    "Backend",
    "BinarySearchConfig",
    "KERNEL_KINDS",
    "KernelKind",
    "MERGE_PATH",
    "MergePathConfig",
    "SUPPORTED_DTYPES",
    "compute_capability",
    "default_binary_search_config",
    "default_bisect_config",
    "default_merge_path_config",
    "for_warp_lanes",
    "is_sorted",
    "kernel_kind",
    "sort_key",
    "tuning_space",
]
