"""Registers, spills and shared memory of every GPU kernel config on an H200.

Compiles each config of the tuning space (and each heuristic default at the
sizes given) for an NVIDIA H200 that need not be here, with XLA's whole GPU
pipeline (see tests/helpers/h200.py), and prints what ptxas -v and XLA's launch plan
say of each kernel: registers per thread, spill stores and loads, stack,
threads per program and shared memory per program. A config that spills
shows "SPILLS" (the compile was refused: spills are fatal there).

Needs the `h200-compile` extra (no GPU):

    python bench/gpu_resources.py [--dtypes int32,float32] [--sides left]
        [--batch 4] [--n 4096 --m 4096] [--json FILE]
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
    return parser


def _row(result: dict) -> list[str]:
    fields = ",".join(f"{k}={v}" for k, v in result["config"].items() if v is not None)
    kernel_name = f"{result['kind']}_searchsorted"
    kernel = result["kernels"].get(kernel_name, {})
    compiled = "yes" if result["ok"] else "SPILLS" if "spill" in result["error"] else \
        result["error"].splitlines()[0][:40]
    values = [kernel.get(k, "-") for k in ("registers", "spill_stores", "spill_loads", "stack",
                                            "threads", "shared_memory")]
    return [result["implementation"], result["kind"], fields, result["dtype"], result["side"],
            compiled, *map(str, values)]


def table(rows: list[list[str]]) -> str:
    """Rows under COLUMNS, aligned."""
    widths = [max(len(r[i]) for r in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
             for row in [COLUMNS, *rows]]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    missing = h200.missing_wheels()
    if missing:
        print(f"cannot compile for the H200 here: {missing}", file=sys.stderr)
        return 2
    import jaxsearch.pallas_kernels as pk

    dtypes = h200.DTYPES if args.dtypes == "all" else tuple(args.dtypes.split(","))
    cases = h200.config_cases(pk.tuning_space(), dtypes=dtypes, sides=tuple(args.sides.split(",")),
                              shape=(args.n, args.m), batch=args.batch or None)
    results = h200.run_worker(cases, verbose=True)
    print(f"Compiled for an NVIDIA H200 (sm_90a), N={args.n}, M={args.m}, "
          f"{f'vmap of {args.batch} rows' if args.batch else 'no vmap'}; registers per thread, "
          "bytes of spills and stack per thread, shared memory bytes per program:\n")
    print(table([_row(r) for r in results]))
    spilled = [h200.case_id(r) for r in results if not r["ok"]]
    print(f"\n{len(results) - len(spilled)} of {len(results)} compiled without spilling"
          + (": refused " + ", ".join(spilled) if spilled else ""))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if spilled else 0


if __name__ == "__main__":
    sys.exit(main())
