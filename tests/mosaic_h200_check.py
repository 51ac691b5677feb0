"""Compile the Mosaic GPU kernels for an H200 that is not there, with XLA's
whole GPU pipeline, and report each kernel's registers, spills and shared
memory.

The H200 topology is tests/h200.py's. Needs jax's CUDA plugin next to jaxlib
and no GPU (the slim compile set: `pip install ".[h200-compile]"`). Run with
JAX_PLATFORMS=cpu:

    JAX_PLATFORMS=cpu python tests/mosaic_h200_check.py [--table] [--only TEXT]

Compiles every config of the tuning space with each Mosaic GPU kernel
(float32 and int64 keys), and the public searchsorted as the cuda dispatch
runs it where jax has no Pallas Triton backend (so that Mosaic GPU is
chosen): every key dtype, both sides, sorted_v True/False/None, vmapped
(batch 4, N = M = 2^20), and both skews. Mosaic GPU runs ptxas itself, so
`--xla_gpu_fail_ptx_compilation_on_register_spilling` covers XLA's own
kernels only; each Mosaic kernel's ptxas report (MOSAIC_GPU_DUMP_PTXAS) is
read instead. Prints one JSON object: per variant whether it compiled, the
error if not, how many Mosaic GPU calls the program holds, and per kernel
its registers, spill bytes, shared memory and unsigned compares (with
MOSAIC_GPU_DUMP_TO's IR dump).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_gpu_fail_ptx_compilation_on_register_spilling=true"
)

from h200 import h200_mesh  # noqa: E402

X64_DTYPES = ("int64", "uint64", "float64")
KEY_DTYPES = ("bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16",
              "bfloat16", "float32") + X64_DTYPES
BIG = 1 << 20


def compile_for_h200(fn, *shapes):
    """`jax.jit(fn)` compiled for the H200; `shapes` are (shape, dtype) pairs."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = h200_mesh()
    with jax.set_mesh(mesh):
        args = [jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, P()))
                for shape, dtype in shapes]
        return jax.jit(fn).lower(*args).compile()


def ptxas_resources(dump_dir: Path) -> list[dict]:
    """Registers, spill bytes and shared memory of each Mosaic GPU kernel
    dumped into `dump_dir` (MOSAIC_GPU_DUMP_TO with MOSAIC_GPU_DUMP_PTXAS=1;
    jax 0.12 also writes the kernel's scratch allocation with
    MOSAIC_GPU_DUMP_RESOURCES=1)."""
    kernels = []
    for report in sorted(dump_dir.glob("*.ptxas")):
        text = report.read_text()
        spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
        registers = re.search(r"Used (\d+) registers", text)
        smem = re.search(r"(\d+) bytes smem", text)
        scratch = report.with_suffix(".resources.txt")
        scratch = re.search(r"smem_scratch_bytes=(\d+)",
                            scratch.read_text() if scratch.exists() else "")
        kernels.append({
            "kernel": report.stem,
            "unsigned_compares": _unsigned_compares(report.with_suffix(".mlir-passes.log")),
            "registers": int(registers.group(1)) if registers else None,
            "spill_stores": int(spills.group(1)) if spills else None,
            "spill_loads": int(spills.group(2)) if spills else None,
            "smem_bytes": max(int(smem.group(1)) if smem else 0,
                              int(scratch.group(1)) if scratch else 0),
        })
    return kernels


def _unsigned_compares(passes_log: Path) -> int | None:
    """How many unsigned integer compares the kernel's first IR dump holds:
    the keys of signed and float dtypes must compare signed (jax 0.10's
    Mosaic GPU can lose the signedness of an array, see `_order.float_key`),
    and no interpreter or CPU test can see the difference."""
    if not passes_log.exists():
        return None
    first = passes_log.read_text().split("IR Dump Before")[1]
    return len(re.findall(r"arith\.cmpi u(?:lt|le|gt|ge)", first))


def _compile_variant(fn, shapes, *, x64):
    """Compiles one variant into a fresh dump folder; its report entry."""
    import jax

    with tempfile.TemporaryDirectory() as dump, \
            jax.enable_x64(True) if x64 else contextlib.nullcontext():
        os.environ["MOSAIC_GPU_DUMP_TO"] = dump  # Read at each compile.
        try:
            text = compile_for_h200(fn, *shapes).as_text()
        except Exception as exc:  # noqa: BLE001  (reported, and the test fails on it)
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        calls = re.findall(r'custom_call_target="mosaic_gpu', text)
        return {"ok": True, "mosaic_calls": len(calls), "kernels": ptxas_resources(Path(dump))}


def config_variants():
    """(name, fn, shapes, x64) for every tuning-space config with its Mosaic kernel."""
    import jax.numpy as jnp

    import jaxsearch.pallas_kernels as pk

    for index, config in enumerate(pk.tuning_space()):
        fn = (pk.mosaic_merge_path_searchsorted if config.kind == "merge_path"
              else pk.mosaic_binary_search_searchsorted)
        side = ("left", "right")[index % 2]
        for dtype in ("float32", "int64"):
            x64 = dtype in X64_DTYPES
            out = jnp.int64 if x64 else jnp.int32
            yield (f"config {config} {dtype} {side}",
                   functools.partial(fn, side=side, out_dtype=out, config=config),
                   (((BIG,), dtype), ((BIG,), dtype)), x64)


def dispatch_variants():
    """(name, fn, shapes, x64) for the public searchsorted, vmapped."""
    import jax

    import jaxsearch

    def vmapped(side, sorted_v):
        return jax.vmap(functools.partial(jaxsearch.searchsorted, side=side, sorted_v=sorted_v))

    sizes = {"balanced": (BIG, BIG), "few needles": (BIG, 1 << 10), "few keys": (1 << 10, BIG)}
    for dtype in KEY_DTYPES:
        for shape_name, (n, m) in sizes.items():
            if shape_name != "balanced" and dtype not in ("float32", "int64"):
                continue
            for side in ("left", "right"):
                for sorted_v in (True, False, None):
                    yield (f"dispatch {dtype} {shape_name} side={side} sorted_v={sorted_v}",
                           vmapped(side, sorted_v), (((4, n), dtype), ((4, m), dtype)),
                           dtype in X64_DTYPES)


def main() -> int:
    import jax

    from jaxsearch import _gpu

    # The dispatch as on a jax without Pallas' Triton backend: Mosaic GPU
    # is then the first choice on an H200.
    _gpu.PALLAS_AVAILABLE, _gpu.PALLAS_REASON = False, "disabled by mosaic_h200_check"
    os.environ["MOSAIC_GPU_DUMP_PTXAS"] = "1"
    os.environ["MOSAIC_GPU_DUMP_RESOURCES"] = "1"
    with jax.set_mesh(h200_mesh()):
        capability = _gpu.compute_capability()
    report = {"jax": jax.__version__, "device": h200_mesh().devices.flat[0].device_kind,
              "compute_capability": capability, "variants": {}}
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
    for name, fn, shapes, x64 in (*config_variants(), *dispatch_variants()):
        if only in name:
            report["variants"][name] = _compile_variant(fn, shapes, x64=x64)
    if "--table" in sys.argv:
        print_table(report)
    else:
        print(json.dumps(report))
    return 0


def print_table(report):
    """One line per kernel: registers, spill bytes, shared memory."""
    print(f"jax {report['jax']}, {report['device']}")
    print(f"{'variant':<90} {'kernel':<40} {'regs':>5} {'spill st/ld':>11} {'smem':>6} "
          f"{'ucmp':>5}")
    for name, entry in report["variants"].items():
        if not entry["ok"]:
            print(f"{name:<90} FAILED: {entry['error'][:200]}")
            continue
        for k in entry["kernels"]:
            print(f"{name:<90} {k['kernel']:<40} {k['registers']:>5} "
                  f"{k['spill_stores']:>5}/{k['spill_loads']:<5} {k['smem_bytes']:>6} "
                  f"{k['unsigned_compares']!s:>5}")


if __name__ == "__main__":
    sys.exit(main())
