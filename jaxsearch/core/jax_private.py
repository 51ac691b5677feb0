"""Every private jax name the library uses, in one place, so that a jax
upgrade has one file to break. Each was checked on jax 0.10.2 and 0.12.0.1.

(The kernels keep theirs in `pallas_kernels/_jax_private.py`: they sit
below the library and import nothing from it.)
"""

import jax

# How an aval varies over shard_map's manual mesh axes (`aval.mat.varying`).
from jax._src.core import ManualAxisType

# The eager path of every jax primitive (a jit of the primitive alone,
# cached per shapes and parameters), and the set of primitives that jit
# lowers with the devices known.
from jax._src.dispatch import apply_primitive, prim_requires_devices_during_lowering

# The concrete mesh in force (an AOT topology's devices too).
from jax._src.mesh import get_concrete_mesh

# A sharding without a mesh: what a custom_partitioning rule is handed.
from jax._src.sharding_impls import GSPMDSharding
from jax.sharding import NamedSharding, PartitionSpec


def lowers_for_export(ctx) -> bool:
    """Whether a lowering rule's context lowers for `jax.export` (its
    module's lowering parameters, `for_export`)."""
    return bool(getattr(getattr(ctx.module_context, "lowering_parameters", None),
                        "for_export", False))


def lowering_platforms(ctx) -> tuple[str, ...]:
    """The platforms a lowering rule's module lowers for: several where
    `jax.export` lowers for several at once."""
    return tuple(ctx.module_context.platforms)


def manual_axes(ctx) -> frozenset[str]:
    """The mesh axes a lowering rule's context is manual over (those of an
    enclosing `shard_map`); empty outside one."""
    return frozenset(getattr(ctx.module_context.axis_context, "manual_axes", None) or ())


def replicated(sharding):
    """A sharding that replicates over the devices of `sharding` (a
    custom_partitioning rule's operand sharding, which may have no mesh)."""
    return GSPMDSharding.get_replicated(sharding._device_assignment)


def varying_as(aval, *operands):
    """`aval` (a primitive's output), varying over every manual mesh axis
    any of `operands` varies over: inside `shard_map`, where jax checks
    that values vary alike (its check_vma), an output that varies over none
    cannot meet the branch of a `lax.cond` that does."""
    varying = frozenset().union(*(x.mat.varying for x in operands))
    if not varying:
        return aval
    # A type that varies names its mesh: that of an operand that varies,
    # where `aval` has none of its own.
    sharding = aval.sharding
    if sharding.mesh.empty:
        mesh = next(x.sharding.mesh for x in operands if x.mat.varying)
        sharding = NamedSharding(mesh, PartitionSpec())
    return aval.update(sharding=sharding, manual_axis_type=ManualAxisType(varying=varying))


def vary_alike(*xs):
    """`xs` (None stays None), each cast to vary over every manual mesh axis
    any of them varies over. Operands of a `lax.cond` that vary alike keep
    it batchable inside `shard_map`: under `vmap` with a batched predicate
    it becomes a select, which makes every operand vary as the predicate
    does, and a `pcast` that jax put in a branch for an operand that did
    not vary then fails (the cast of a value that already varies)."""
    axes = frozenset().union(*(jax.typeof(x).mat.varying for x in xs if x is not None))

    def cast(x):
        missing = axes - jax.typeof(x).mat.varying
        return jax.lax.pcast(x, tuple(sorted(missing)), to="varying") if missing else x

    return tuple(None if x is None else cast(x) for x in xs)


__all__ = ["apply_primitive", "get_concrete_mesh", "lowering_platforms", "lowers_for_export",
           "manual_axes", "prim_requires_devices_during_lowering", "replicated", "vary_alike",
           "varying_as"]
