"""Every private jax name the library uses, in one place, so that a jax
upgrade has one file to break. Each was checked on jax 0.10.2 and 0.12.0.1.

(The kernels keep theirs in `pallas_kernels/_jax_private.py`: they sit
below the library and import nothing from it.)
"""

# The eager path of every jax primitive (a jit of the primitive alone,
# cached per shapes and parameters), and the set of primitives that jit
# lowers with the devices known.
from jax._src.dispatch import apply_primitive, prim_requires_devices_during_lowering

# The concrete mesh in force (an AOT topology's devices too).
from jax._src.mesh import get_concrete_mesh

# A sharding without a mesh: what a custom_partitioning rule is handed.
from jax._src.sharding_impls import GSPMDSharding


def replicated(sharding):
    """A sharding that replicates over the devices of `sharding` (a
    custom_partitioning rule's operand sharding, which may have no mesh)."""
    return GSPMDSharding.get_replicated(sharding._device_assignment)


__all__ = ["apply_primitive", "get_concrete_mesh", "prim_requires_devices_during_lowering",
           "replicated"]
