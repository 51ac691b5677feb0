"""The implementations a search can run in: the one list that the API, the
dispatch, the autotuner, `jaxsearch info` and the tests read.

"cython" is the CPU extension (`cpu_ext/`, called through the XLA FFI), the
GPU implementations are the kernel backends of `pallas_kernels.BACKENDS`
(each name there is the implementation's), and "xla" is
`jnp.searchsorted`.
"""

from __future__ import annotations

from ..pallas_kernels import BACKENDS

CYTHON = "cython"
XLA = "xla"
# In the order the dispatch prefers them, after a tuned choice.
GPU_IMPLEMENTATIONS = tuple(BACKENDS)
IMPLEMENTATIONS = (CYTHON, *GPU_IMPLEMENTATIONS, XLA)
# searchsorted_cumsum's: its CPU kernel, its GPU route (a running sum, then
# the Pallas kernels) and jnp throughout.
CUMSUM_IMPLEMENTATIONS = (CYTHON, "pallas", XLA)


def check_implementation(implementation: str | None, allowed: tuple[str, ...]) -> None:
    """ValueError unless `implementation` is None or one of `allowed`."""
    if implementation is not None and implementation not in allowed:
        raise ValueError(
            f"implementation must be None or one of {allowed}, got {implementation!r}")
