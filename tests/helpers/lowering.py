"""Helpers to lower for CUDA on a machine without a GPU and to verify the
Triton IR that Pallas puts in the module."""

import jax
from jax._src.interpreters import mlir as jax_mlir
from jax._src.lib.mlir import ir

try:
    from jax._src.lib.triton import dialect as triton_dialect
except ImportError:  # A jaxlib without the Triton dialect bindings.
    triton_dialect = None

TRITON_TARGET = "__gpu$xla.gpu.triton"


def _abstract_gpu_mesh():
    """A one-device mesh of an abstract H200; None where jax lacks them."""
    try:
        device = jax.sharding.AbstractDevice(
            device_kind="NVIDIA H200", num_cores=132, platform="gpu"
        )
        return jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)
    except (AttributeError, TypeError):
        return None


def on_abstract_gpu_if_needed(thunk):
    """Runs `thunk()`, lowering for CUDA on this (GPU-less) machine.

    jax 0.10 assumes compute capability 9.0 when it finds no GPU; newer jax
    wants an abstract GPU device, which we supply when the plain call fails.
    """
    try:
        return thunk()
    except Exception:
        mesh = _abstract_gpu_mesh()
        if mesh is None:
            raise
        with jax.sharding.use_abstract_mesh(mesh):
            return thunk()


def lower_for_cuda(fn, *args):
    """Lowers `fn(*args)` for CUDA on this machine."""
    return lower_for("cuda", fn, *args)


def lower_for(platform, fn, *args):
    """Lowers `fn(*args)` for a GPU platform ("cuda" or "rocm") on this machine."""
    return on_abstract_gpu_if_needed(
        lambda: jax.jit(fn).trace(*args).lower(lowering_platforms=(platform,))
    )


def triton_calls(lowered):
    """The Triton custom calls of a lowered module, as MLIR operations."""
    return triton_calls_in(lowered.compiler_ir("stablehlo").operation)


def mosaic_calls(lowered):
    """The Mosaic GPU custom calls of a lowered module, as MLIR operations."""
    return custom_calls_in(lowered.compiler_ir("stablehlo").operation,
                           lambda target: target.startswith("mosaic_gpu"))


def triton_calls_in(module_op):
    """The Triton custom calls under an MLIR operation."""
    return custom_calls_in(module_op, lambda target: target == TRITON_TARGET)


def custom_calls_in(module_op, wanted):
    """The custom calls under an MLIR operation whose target `wanted` takes."""
    found = []

    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    child = child.operation
                    if child.name == "stablehlo.custom_call" and wanted(
                        ir.StringAttr(child.attributes["call_target_name"]).value
                    ):
                        found.append(child)
                    walk(child)

    walk(module_op)
    return found


def backend_config(call):
    """The call's backend config as a dict of MLIR attributes."""
    for name in ("mhlo.backend_config", "backend_config"):
        if name in call.attributes:
            try:
                config = ir.DictAttr(call.attributes[name])
            except ValueError:  # The other spelling holds an empty string.
                continue
            return {config[i].name: config[i].attr for i in range(len(config))}
    raise AssertionError(f"no dict backend config on {call}")


def verified_triton_module(ir_bytes):
    """Parses Triton IR (bytecode or text) and runs the MLIR verifier on it."""
    context = jax_mlir.JaxIrContext()
    context.append_dialect_registry(jax_mlir.upstream_dialects)
    triton_dialect.register_dialect(context)
    context.load_all_available_dialects()
    with context:
        module = ir.Module.parse(ir_bytes)
        assert module.operation.verify()
        return str(module)
