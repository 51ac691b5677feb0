"""Compiling the Pallas Triton kernels for an AMD MI300X (gfx942) that is
not here.

jax lowers a Pallas Triton call for ROCm on any machine: the lowering puts
the kernel into the module as Triton IR, and XLA's ROCm backend would
compile that IR with the Triton inside jaxlib when the program compiles,
which needs jax's ROCm plugin and a device. Here the AMD backend of the
triton wheel compiles the same IR instead, and the code object's metadata
gives the registers, scratch and LDS of each kernel. The figures are those
of the wheel's Triton; jaxlib's may lay a kernel out otherwise.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from pathlib import Path

from jax._src.lib.mlir import ir

from helpers.lowering import backend_config, lower_for, triton_calls, verified_triton_module

LDS_BYTES = 64 * 1024  # per workgroup on MI300X


@dataclasses.dataclass(frozen=True)
class Resources:
    """One compiled kernel's resources, per lane where not said otherwise."""

    kernel: str
    num_warps: int  # wavefronts of 64 lanes per program
    vgprs: int
    agprs: int  # accumulation registers, where the compiler may also park values
    sgprs: int
    vgpr_spills: int
    sgpr_spills: int
    scratch: int  # bytes of private (spill and stack) memory
    lds: int  # bytes per program
    occupancy: int  # wavefronts per SIMD, as the compiler reports it

    @property
    def spills(self) -> bool:
        """Whether it spills to memory. SGPR spills go to lanes of vector
        registers, not to memory: they do not count."""
        return bool(self.scratch or self.vgpr_spills)


def _metadata(asm: str, name: str) -> int:
    """A number of the code object's metadata (`.name: value`)."""
    found = re.search(rf"^[\s-]*\.{name}:\s+(\d+)\s*$", asm, re.M)
    assert found, f"no .{name} in the amdgcn assembly"
    return int(found.group(1))


def resources(compiled) -> Resources:
    """The resources of a kernel that `triton.compile` built for gfx942,
    from its code object's metadata."""
    asm = compiled.asm["amdgcn"]
    return Resources(
        kernel=compiled.metadata.name, num_warps=compiled.metadata.num_warps,
        vgprs=_metadata(asm, "vgpr_count"), agprs=_metadata(asm, "agpr_count"),
        sgprs=_metadata(asm, "sgpr_count"), vgpr_spills=_metadata(asm, "vgpr_spill_count"),
        sgpr_spills=_metadata(asm, "sgpr_spill_count"),
        scratch=_metadata(asm, "private_segment_fixed_size"),
        lds=max(compiled.metadata.shared, _metadata(asm, "group_segment_fixed_size")),
        occupancy=int(re.search(r"^; Occupancy: (\d+)", asm, re.M).group(1)))


def _compile(name: str, ttir: str, num_warps: int, num_stages: int) -> Resources:
    import triton
    from triton.backends.compiler import GPUTarget

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{name}.ttir"  # triton.compile takes IR by its path
        path.write_text(ttir)
        return resources(triton.compile(
            str(path), target=GPUTarget("hip", "gfx942", 64),
            options={"num_warps": num_warps, "num_stages": num_stages,
                     "enable_fp_fusion": True}))


def compile_for_gfx942(fn, *args) -> list[Resources]:
    """Each Pallas Triton kernel of `fn(*args)`, in call order, lowered for
    ROCm and compiled for gfx942."""
    found = []
    for call in triton_calls(lower_for("rocm", fn, *args)):
        config = backend_config(call)
        found.append(_compile(
            ir.StringAttr(config["name"]).value,
            verified_triton_module(ir.StringAttr(config["ir"]).value_bytes),
            ir.IntegerAttr(config["num_warps"]).value,
            ir.IntegerAttr(config["num_stages"]).value))
    return found
