"""Every private jax name the kernels use, in one place, so that a jax
upgrade has one file to break. Each was checked on jax 0.10.2 and 0.12.0.1.
The one private Triton name they read is here too (`triton_interpreted`).

(jaxsearch's library has the same kind of module for its own:
`jaxsearch/core/jax_private.py`; the kernels import nothing from it, since
they sit below the library.)
"""

import jax

# The concrete mesh in force (a compile-only topology's devices too).
from jax._src import mesh as _mesh_lib


def concrete_mesh_devices() -> list:
    """The devices of the concrete mesh in force (`jax.set_mesh`, or an AOT
    topology's); [] when there is none."""
    mesh = _mesh_lib.get_concrete_mesh()
    return [] if mesh.empty else list(mesh.devices.flat)


def gpu_triton():
    """jaxlib's Triton bindings, or None where jaxlib has no GPU support."""
    try:
        from jax._src.lib import gpu_triton as module
    except ImportError:
        return None
    return module


def mosaic_interpret_params():
    """What `plgpu.kernel(interpret=...)` takes to run in the GPU interpreter:
    public from jax 0.12 on, private in jax 0.10."""
    from jax.experimental.pallas import mosaic_gpu as plgpu

    params = getattr(plgpu, "InterpretGPUParams", None)
    if params is None:
        from jax._src.pallas.mosaic_gpu.interpret.params import InterpretGPUParams as params
    return params()


def compute_capability() -> tuple[int, int] | None:
    """(major, minor) of the CUDA device being compiled for: the concrete
    mesh's in force (an AOT topology's included), else the first GPU's; None
    when no device says (lowering on a host with no GPU)."""
    devices = concrete_mesh_devices()
    if not devices:
        try:
            devices = jax.devices("gpu")
        except RuntimeError:  # No GPU backend in this process.
            devices = []
    for device in devices:
        capability = getattr(device, "compute_capability", None)
        if capability:
            major, _, minor = str(capability).partition(".")
            return int(major), int(minor.split(".")[0] or 0)
    return None


def triton_interpreted(kernel) -> bool:
    """Whether a Triton kernel was decorated for Triton's interpreter
    (TRITON_INTERPRET=1): by its class's name, which asks nothing of a
    stand-in kernel and imports no triton. Checked on triton 3.9."""
    return type(kernel).__name__ == "InterpretedFunction"
