"""Registers, spills and shared memory of every GPU kernel config on an H200.

Compiles each config of the tuning space (and each heuristic default at the
sizes given) for an NVIDIA H200 that need not be here, with XLA's whole GPU
pipeline (see tests/helpers/h200.py), and prints what ptxas -v and XLA's launch plan
say of each kernel: registers per thread, spill stores and loads, stack,
threads per program and shared memory per program. A config that spills
shows "SPILLS" (the compile was refused: spills are fatal there).

Needs the `h200-compile` extra (no GPU):

    python bench/gpu_resources.py [--dtypes int32,float32] [--sides left]
        [--batch 4] [--n 4096 --m 4096] [--json FILE] [--gfx942]

With --gfx942 (needs the triton wheel), the same configs' Pallas Triton
kernels are also compiled for AMD's MI300X (tests/helpers/gfx942.py: jax's
ROCm lowering, then the triton wheel's AMD backend), and a second table
gives their vector and scalar registers, spills, scratch and LDS.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers import h200  # noqa: E402  (tests/helpers/h200.py: the H200 and its worker)

COLUMNS = ["implementation", "kernel", "config", "dtype", "side", "compiled", "registers",
           "spill stores", "spill loads", "stack", "threads", "shared memory"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python bench/gpu_resources.py",
        description="Registers, spills and shared memory per GPU kernel config, compiled "
                    "for an NVIDIA H200 without a GPU.")
    parser.add_argument("--dtypes", default="int32,int16,float32,float64",
                        help="key dtypes, comma-separated (default: int32,int16,float32,"
                             "float64; 'all' for every one)")
    parser.add_argument("--sides", default="left", help="left, right or left,right")
    parser.add_argument("--n", type=int, default=h200.SMALL_BATCHED[0], help="len(a)")
    parser.add_argument("--m", type=int, default=h200.SMALL_BATCHED[1], help="len(v)")
    parser.add_argument("--batch", type=int, default=h200.BATCH,
                        help="vmap rows (0: no vmap); the merge path spilled under vmap")
    parser.add_argument("--json", type=Path, help="also write every result to this file")
    parser.add_argument("--gfx942", action="store_true",
                        help="also compile the Pallas Triton kernels for an MI300X (gfx942) "
                             "and print their registers, spills, scratch and LDS")
    return parser


def _row(result: dict) -> list[str]:
    fields = _fields(result["config"])
    kernel_name = f"{result['kind']}_searchsorted"
    kernel = result["kernels"].get(kernel_name, {})
    compiled = "yes" if result["ok"] else "SPILLS" if "spill" in result["error"] else \
        result["error"].splitlines()[0][:40]
    values = [kernel.get(k, "-") for k in ("registers", "spill_stores", "spill_loads", "stack",
                                            "threads", "shared_memory")]
    return [result["implementation"], result["kind"], fields, result["dtype"], result["side"],
            compiled, *map(str, values)]


def _fields(config: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items() if v is not None)


GFX942_COLUMNS = ["kernel", "config", "dtype", "side", "wavefronts", "VGPRs", "AGPRs", "SGPRs",
                  "VGPR spills", "SGPR spills", "scratch", "LDS", "occupancy"]


def gfx942_kernels(cases: list[dict]) -> list[tuple[dict, object]]:
    """The Pallas Triton kernels of each case (a config case of
    `h200.config_cases`), compiled for gfx942: (case, `gfx942.Resources`)
    per kernel."""
    import jax
    from helpers import gfx942

    found = []
    for case in cases:
        search, shapes = h200.case_function(case)
        with jax.enable_x64(case["dtype"] in h200.X64_DTYPES):
            args = [jax.ShapeDtypeStruct(shape, jax.numpy.dtype(case["dtype"]))
                    for shape in shapes]
            kernels = gfx942.compile_for_gfx942(search, *args)
        found += [(case, kernel) for kernel in kernels]
    return found


def _gfx942_row(case: dict, k) -> list[str]:
    return [k.kernel, _fields(case["config"]), case["dtype"], case["side"],
            *map(str, (k.num_warps, k.vgprs, k.agprs, k.sgprs, k.vgpr_spills, k.sgpr_spills,
                       k.scratch, k.lds, k.occupancy))]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    missing = h200.missing_wheels()
    if missing:
        print(f"cannot compile for the H200 here: {missing}", file=sys.stderr)
        return 2
    import jaxsearch.pallas_kernels as pk
    from jaxsearch.tools.bench.format import format_table

    dtypes = h200.DTYPES if args.dtypes == "all" else tuple(args.dtypes.split(","))
    cases = h200.config_cases(pk.tuning_space(), dtypes=dtypes, sides=tuple(args.sides.split(",")),
                              shape=(args.n, args.m), batch=args.batch or None)
    results = h200.run_worker(cases, verbose=True)
    print(f"Compiled for an NVIDIA H200 (sm_90a), N={args.n}, M={args.m}, "
          f"{f'vmap of {args.batch} rows' if args.batch else 'no vmap'}; registers per thread, "
          "bytes of spills and stack per thread, shared memory bytes per program:\n")
    print(format_table(COLUMNS, [_row(r) for r in results], align="l" * len(COLUMNS)))
    spilled = [h200.case_id(r) for r in results if not r["ok"]]
    print(f"\n{len(results) - len(spilled)} of {len(results)} compiled without spilling"
          + (": refused " + ", ".join(spilled) if spilled else ""))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.gfx942:
        kernels = gfx942_kernels([c for c in cases if c["implementation"] == "pallas"])
        print("\nThe Pallas Triton kernels compiled for an AMD MI300X (gfx942) by the triton "
              "wheel: wavefronts per program, registers and scratch bytes per lane, LDS "
              "bytes per program, occupancy in wavefronts per SIMD:\n")
        print(format_table(GFX942_COLUMNS, [_gfx942_row(*found) for found in kernels],
                           align="llll" + "r" * 9))
        scratch = [k for _, k in kernels if k.spills]
        print(f"\n{len(kernels) - len(scratch)} of {len(kernels)} kernels with no scratch "
              "and no VGPR spill")
        spilled = spilled or scratch
    return 1 if spilled else 0


if __name__ == "__main__":
    sys.exit(main())
