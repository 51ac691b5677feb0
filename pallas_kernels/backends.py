"""The GPU implementations of the kernels, one per backend subpackage: the
one table that dispatch, tuning, the autotuner, `jaxsearch info`, the
compile tier and the tests read.

Each backend writes every kind of kernel (`configs.KERNEL_KINDS`) with the
same configs and answers; `BACKENDS` lists them in the order the dispatch
prefers them (after a tuned choice).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from ._jax_private import compute_capability
from .configs import BINARY_SEARCH, MERGE_PATH, KernelKind
from .triton import (
    triton_available,
    triton_binary_search_searchsorted,
    triton_checked_searchsorted,
    triton_merge_path_searchsorted,
)


@dataclasses.dataclass(frozen=True)
class Backend:
    """One GPU implementation of the kernels.

    Attributes:
      name: the implementation's name, as `jaxsearch.searchsorted(...,
        implementation=name)` and the tuning caches call it.
      package: its subpackage of `pallas_kernels`.
      label: its name in messages ("Pallas Mosaic GPU").
      kernels: each kind's public wrapper, by kind name; empty where the
        subpackage did not import (`import_error` says why).
      checked: the checked call's kernel, `checked(a, v, merging, *, side,
        out_dtype, merge_config, bisect_config, interpret)`: both kinds'
        programs in one kernel that reads the sortedness test on the device;
        None where the subpackage did not import.
      import_error: "" or why the subpackage did not import.
      min_capability: the lowest CUDA compute capability it compiles for
        (None: any).
      interpreted_at_trace_time: its interpreter has ordered effects, which
        cannot enter a lowering rule (Mosaic GPU's): on a host that compiles
        for no GPU it is interpreted where the search is traced.
      probe: `probe(interpret)`, whether it can run here and why not, for a
        backend whose needs show only at run time (native Triton).
    """

    name: str
    package: str
    label: str
    kernels: Mapping[str, Callable]
    checked: Callable | None = None
    import_error: str = ""
    min_capability: tuple[int, int] | None = None
    interpreted_at_trace_time: bool = False
    probe: Callable[[bool], tuple[bool, str]] | None = None

    def kernel(self, kind: KernelKind) -> Callable:
        """The public wrapper of `kind`; ValueError where it did not import."""
        if kind.name not in self.kernels:
            raise ValueError(f"jaxsearch's {self.name} kernels did not import: "
                             f"{self.import_error}")
        return self.kernels[kind.name]

    def status(self, *, interpret: bool = False) -> tuple[bool, str]:
        """(True, "") or (True, the versions in use) where it can run here,
        else (False, why not).

        With `interpret`, whether it can run on the host in its interpreter
        (for tests). An unknown device (lowering on a host with no GPU)
        meets `min_capability`, as Mosaic GPU's own lowering assumes.
        """
        if self.import_error:
            return False, self.import_error
        if self.probe is not None:
            return self.probe(interpret)
        capability = None if interpret or self.min_capability is None else compute_capability()
        if capability is not None and capability < self.min_capability:
            need = ".".join(map(str, self.min_capability))
            return False, (f"{self.label} needs compute capability {need} or above; the "
                           f"device compiled for has {capability[0]}.{capability[1]}")
        return True, ""


def _pallas_triton() -> dict[str, object]:
    from .pallas_triton import (
        binary_search_searchsorted,
        checked_searchsorted,
        merge_path_searchsorted,
    )

    return {"kernels": {MERGE_PATH.name: merge_path_searchsorted,
                        BINARY_SEARCH.name: binary_search_searchsorted},
            "checked": checked_searchsorted}


def _mosaic_gpu() -> dict[str, object]:
    from .mosaic_gpu import (
        mosaic_binary_search_searchsorted,
        mosaic_checked_searchsorted,
        mosaic_merge_path_searchsorted,
    )

    return {"kernels": {MERGE_PATH.name: mosaic_merge_path_searchsorted,
                        BINARY_SEARCH.name: mosaic_binary_search_searchsorted},
            "checked": mosaic_checked_searchsorted}


def _optional(name: str, package: str, label: str, load: Callable[[], dict], **fields) -> Backend:
    """A backend whose subpackage needs a Pallas backend jax may lack: the
    fields its subpackage gives (`load()`: its kernels), or why it did not
    import."""
    try:
        loaded, error = load(), ""
    except ImportError as exc:
        loaded, error = {"kernels": {}}, f"this jax has no usable {label} backend ({exc})"
    return Backend(name, package, label, import_error=error, **loaded, **fields)


BACKENDS: dict[str, Backend] = {
    # Pallas' Triton backend is deprecated (jax 0.11) and will leave jax: the
    # package must still import, with the other backends, once it has.
    "pallas": _optional("pallas", "pallas_triton", "Pallas Triton", _pallas_triton),
    # Mosaic GPU imports absl-py on jax 0.10, which jax itself does not require.
    "mosaic": _optional("mosaic", "mosaic_gpu", "Pallas Mosaic GPU", _mosaic_gpu,
                        min_capability=(9, 0), interpreted_at_trace_time=True),
    # Imports neither triton nor jax-triton until a kernel runs.
    "triton": Backend("triton", "triton", "native Triton",
                      {MERGE_PATH.name: triton_merge_path_searchsorted,
                       BINARY_SEARCH.name: triton_binary_search_searchsorted},
                      checked=triton_checked_searchsorted,
                      probe=lambda interpret: triton_available(interpret=interpret)),
}
