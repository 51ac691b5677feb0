"""Whether the native Triton kernels can run here (`triton_available`), and
what jax-triton is told of the GPU compiled for.

Nothing here imports triton, torch or jax-triton at import time: the probe
imports them when it runs.
"""

from __future__ import annotations

import functools
import inspect

import jax
import jax.numpy as jnp

from .._jax_private import compute_capability, gpu_triton

# What pyproject's `cuda` extra brings: a CUDA 12 jaxlib, triton, and
# jax-triton where it works (0.3.1, with jax 0.10).
_INSTALL_HINT = "pip install 'jaxsearch[cuda]' (in a clone: pip install '.[cuda]')"


def _probe(interpret):
    try:
        import triton
    except ImportError as exc:
        return False, f"triton is not installed ({exc}): {_INSTALL_HINT}"
    interpreting = bool(triton.knobs.runtime.interpret)
    if interpret:
        if not interpreting:
            return False, (
                "Triton's interpreter needs TRITON_INTERPRET=1 in the "
                "environment before the kernels first load"
            )
        try:
            import torch  # noqa: F401  (the interpreter runs on torch tensors)
        except ImportError as exc:
            return False, (
                f"torch is not installed ({exc}); Triton's interpreter "
                "runs kernels on torch CPU tensors"
            )
        return True, f"triton {triton.__version__} interpreter"
    if interpreting:
        return False, (
            "TRITON_INTERPRET=1 is set: the kernels run only in "
            "Triton's interpreter (interpret=True)"
        )
    # jax-triton raises at import without GPU support in jaxlib, after it has
    # already set TRITON_CACHE_DIR and registered lowerings: look first.
    if not hasattr(gpu_triton(), "get_compute_capability"):
        return False, f"jaxlib has no GPU support: {_INSTALL_HINT}"
    try:
        import jax_triton
    except Exception as exc:  # noqa: BLE001  (ImportError, or a version clash)
        return False, f"jax-triton did not import ({exc}): {_INSTALL_HINT}"
    versions = f"triton {triton.__version__}, jax-triton {jax_triton.__version__}"
    broken = _lowering_error(jax_triton)
    if broken:
        return False, (f"{versions} cannot lower a triton_call with jax {jax.__version__} "
                       f"({broken}); jax-triton 0.3.1 works with jax 0.10: pip install "
                       "'jax[cuda12]>=0.10,<0.11' 'jax-triton==0.3.1'")
    return True, versions


def _lowering_error(jax_triton) -> str:
    """Why jax-triton cannot lower the smallest triton_call for cuda with this
    jax ("" when it can): its lowering follows jax's internals, and a jax
    newer than it breaks every call (jax 0.12 calls DCE rules with an
    argument that jax-triton 0.4.1 does not take)."""
    from ._common import copy_one

    x = jax.ShapeDtypeStruct((1,), jnp.int32)

    def call(x):
        return jax_triton.triton_call(x, kernel=copy_one, grid=(1,),
                                      compute_capability=target_compute_capability(),
                                      **out_argument(jax_triton, x))

    try:
        jax.jit(call).trace(x).lower(lowering_platforms=("cuda",))
    except Exception as exc:  # noqa: BLE001  (whatever jax-triton raises is the answer)
        return f"{type(exc).__name__}: {exc}"
    return ""


def out_argument(jax_triton, out) -> dict:
    """The output's shape as `triton_call` takes it: `out_type` since
    jax-triton 0.4 (which deprecates `out_shape`), `out_shape` before."""
    parameters = inspect.signature(jax_triton.triton_call).parameters
    return {"out_type" if "out_type" in parameters else "out_shape": out}


# What jax assumes of a GPU it cannot see (Hopper: H100, H200).
_DEFAULT_COMPUTE_CAPABILITY = (9, 0)


def target_compute_capability() -> int:
    """Compute capability (major * 10 + minor) of the GPU being compiled for
    (`compute_capability`), else 90. jax-triton otherwise asks the driver,
    which fails where there is no GPU."""
    major, minor = compute_capability() or _DEFAULT_COMPUTE_CAPABILITY
    return major * 10 + minor


@functools.cache
def triton_available(interpret: bool = False) -> tuple[bool, str]:
    """Whether the native Triton kernels can run here, and why not.

    Args:
      interpret: ask about Triton's interpreter (triton, torch and
        TRITON_INTERPRET=1) instead of compiled kernels through jax-triton
        (triton, jax-triton and a jaxlib with GPU support).

    Returns:
      (True, the versions in use) or (False, the reason and what to install).
      Cached: call `triton_available.cache_clear()` after changing the
      environment.
    """
    return _probe(interpret)
