"""What each GPU kernel costs on an NVIDIA H200, estimated from its machine
code, without a GPU.

Each kernel the dispatch runs for the cases below is compiled for an H200 as
the compile tier does (tests/helpers/h200.py: XLA's whole GPU pipeline for a
device that need not be here); the PTX XLA dumps is assembled by ptxas for
sm_90a and disassembled by nvdisasm (the `h200-compile` extra installs
both). From the SASS, per kernel:

* registers, threads per program, and programs resident per SM by compute
  capability 9.0's limits (65,536 registers per SM, allocated per warp in
  units of 256; 64 warps and 32 programs per SM);
* its loops (backward branches), the instructions in each body, and the
  global loads (LDG) and stores (STG) in each, with their widths;
* the rounds of dependent global loads before the program's first store.

Each kernel's loops, in the order they appear, are those of its algorithm
(`plan`): the diagonal search (bit_length(min(N, M)) steps) of the
partition pass, one lane per tile boundary, or of each merge program, two
lanes active; the merge program's loop over its needle blocks (one when
the promise holds) and its search inside a tile (bit_length(tile) steps),
or, merging serially, each lane's search for its run's start
(bit_length(tile) steps), its walk (`items` steps) and the needle blocks of
its fallback (none when the promise holds: the fallback's search may be
unrolled into them); binary search's probes (bit_length(N) steps). A kernel
whose loops are not laid out so is reported, not estimated. From the trip
counts, for each case:

* issue: warp-instructions over 132 SMs x 4 schedulers x 1.98 GHz, one
  instruction per scheduler per cycle (masked-off lanes still issue);
* L1: the 128-byte lines each warp's global loads and stores in the loops
  touch, one line per cycle per SM. Lanes of a warp that read keys a few
  bytes apart share lines; lanes a line or more apart (the serial merge's
  runs, the partition pass's boundaries, binary search's probes of
  unsorted needles) each touch their own;
* memory: bytes from HBM at 4.3 TB/s (the H200's copy bandwidth): what the
  kernel streams (the merge path: all of `a` and `v`, whose slices its
  in-tile search reads, and the answers; binary search: `v` and the
  answers), plus its random probes, one 32-byte sector per key read: at the
  top 20 levels, which stay in the 50 MB L2 (2**20 sectors), each distinct
  sector once (at most 2**level per level), below them every read;
* latency: waves of resident programs times the load rounds before the
  first store, 400 cycles a round (between L2's and HBM's latency);

and the estimate is the largest of the four. The floor: N + M keys read and
M int32 answers written at 4.3 TB/s (where N is far above M a search need
not read all of `a`, and the estimate can fall below it). "before" is what
this project's dispatch ran before it routed by shape and partitioned once
(the merge path, each program searching its own boundaries, for every
sorted call); "bisect" is the default before the serial merge (partition
once, then a binary search per needle in its tile); a checked call
(sorted_v=None) adds its sortedness test, one read of `a` and `v`, in
every row, and before it also a conditional that XLA decides on the host
(not costed).

    python bench/gpu_cost.py [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_sass, when a test loads this file

from gpu_sass import Sass, read_sass  # noqa: E402
from helpers import h200  # noqa: E402  (tests/helpers/h200.py: the H200 and its worker)

SMS, SCHEDULERS, CLOCK_HZ = 132, 4, 1.98e9
BANDWIDTH = 4.3e12  # bytes/s
L2_LEVELS = 20  # binary-search levels whose keys stay in L2
SECTOR = 32  # bytes
LINE, WARP = 128, 32  # bytes of an L1 line; lanes of a warp
L1_LINES_PER_CYCLE = 1  # per SM: a warp's access costs a cycle per line it touches
ROUND_CYCLES = 400
REGISTERS_PER_SM, REGISTER_UNIT, WARPS_PER_SM, PROGRAMS_PER_SM = 65536, 256, 64, 32

# The cases: (N, M, needles sorted).
CASES = {"sorted, N = M = 1e8": (10**8, 10**8, True),
         "unsorted, N = M = 1e8": (10**8, 10**8, False),
         "sorted, N = 1e8, M = 1e3": (10**8, 10**3, True),
         "sorted, N = 1e3, M = 1e8": (10**3, 10**8, True)}


# ------------------------------------------------------------------ the model


def resident_programs(registers: int, threads: int) -> int:
    """Programs per SM by compute capability 9.0's limits (no shared memory)."""
    warps = -(-threads // 32)
    per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    by_registers = REGISTERS_PER_SM // (per_warp * warps) if per_warp else PROGRAMS_PER_SM
    return max(0, min(PROGRAMS_PER_SM, WARPS_PER_SM // warps, by_registers))


@dataclasses.dataclass(frozen=True)
class PlannedLoop:
    """One loop of a kernel's algorithm: its name, depth, trip count per
    trip of its parent (0 where the program does not run it), and, where it
    probes memory at random, how many lanes of all programs probe and how
    many keys each reads per step (the floor covers every other load), and
    how many 128-byte lines a warp's global load or store in it touches, on
    average (`_lines`)."""

    name: str
    depth: int
    trips: int
    probing_lanes: int = 0
    loads_per_step: int = 0
    lines: float = 1.0


def _lines(stride: float, active: float = 1.0) -> float:
    """128-byte lines one warp's access touches when its lanes' addresses lie
    `stride` bytes apart and a fraction `active` of them is not masked off."""
    if stride >= LINE:
        return WARP * active
    per_line = LINE / max(stride, 1.0)
    return WARP / per_line * (1 - (1 - active) ** per_line)


def _merge_loops(config, n, m, taken=True):
    if config["method"] == "compare":
        return None  # the compare method's loops are not planned
    programs = -(-(n + m) // config["tile"])
    # Two lanes search the program's two diagonals, reading a key of `a` and
    # one of `v` at each step (where the partition pass has not).
    partition = [] if config["partition"] == "once" else [
        PlannedLoop("diagonal search", 0, min(n, m).bit_length() if taken else 0,
                    2 * programs if taken else 0, 2, _lines(LINE, 2 / WARP))]
    steps = config["tile"].bit_length() if taken else 0
    if config["method"] == "serial":  # each lane's run start, its walk, no fallback
        # A lane's run holds items * n / (n + m) keys of `a` and the rest of
        # `v`: neighbouring lanes read and write that far apart.
        share_a, share_v = n / (n + m), m / (n + m)
        apart_a, apart_v = 4 * config["items"] * share_a, 4 * config["items"] * share_v
        search = (_lines(apart_a) + _lines(apart_v)) / 2
        walk = (_lines(apart_a, share_a) + 2 * _lines(apart_v, share_v)) / 3
        return partition + [PlannedLoop("run start in the tile", 0, steps, lines=search),
                            PlannedLoop("serial merge", 0, config["items"] if taken else 0,
                                        lines=walk),
                            PlannedLoop("needle blocks", 0, 0),
                            PlannedLoop("search in the tile", 1, 0)]
    # Neighbouring lanes hold neighbouring needles, n / m keys of `a` apart.
    return partition + [
        PlannedLoop("needle blocks", 0, 1 if taken else 0),
        PlannedLoop("search in the tile", 1, steps, lines=_lines(4 * n / m))]


def _partition_loops(config, n, m, taken=True):
    # A lane per tile boundary, a key of `a` and one of `v` at each step;
    # nothing where the checked kernel's flag picks binary search.
    boundaries = -(-(n + m) // config["tile"]) + 1
    return [PlannedLoop("diagonal search", 0, min(n, m).bit_length() if taken else 0,
                        boundaries if taken else 0, 2, _lines(4 * config["tile"]))]


def _binary_loops(config, n, m, taken=True, sorted_v=False):
    del config
    # Unsorted needles probe anywhere; sorted ones n / m keys apart.
    lines = _lines(4 * n / m) if sorted_v else WARP
    return [PlannedLoop("probes", 0, n.bit_length() if taken else 0, m if taken else 0, 1,
                        lines)]


def plan(kernel: str, configs: dict, n: int, m: int, merging: bool) -> list[PlannedLoop] | None:
    """The loops of `kernel` in address order, for one search (None: not planned)."""
    if kernel == "merge_path_partition":
        return _partition_loops(configs["merge_path"], n, m, merging)
    if kernel == "merge_path_searchsorted":
        return _merge_loops(configs["merge_path"], n, m)
    if kernel == "binary_search_searchsorted":
        return _binary_loops(configs["binary_search"], n, m, sorted_v=merging)
    if kernel == "checked_searchsorted":  # both bodies, the merge path's first
        merge = _merge_loops(configs["merge_path"], n, m, merging)
        return None if merge is None else merge + _binary_loops(None, n, m, not merging)
    return None


def programs_of(kernel: str, configs: dict, n: int, m: int, merging: bool) -> tuple[int, int]:
    """(programs launched, programs that run the loops): the checked kernel
    launches the larger grid of its two kinds, and only the programs of the
    kind its flag picks search."""
    merge = -(-(n + m) // configs["merge_path"]["tile"])
    binary = -(-m // configs["binary_search"]["block"])
    if kernel == "merge_path_partition":  # 128 boundaries per program
        partition = -(-(merge + 1) // 128)
        return partition, partition if merging else 0
    if kernel == "checked_searchsorted":
        return max(merge, binary), merge if merging else binary
    return (merge,) * 2 if kernel == "merge_path_searchsorted" else (binary,) * 2


def _probe_sectors(lanes: int, steps: int) -> int:
    """Sectors read from HBM by `lanes` searches of `steps` steps each: at a
    level that stays in L2, each distinct sector once; below, every read."""
    return sum(min(2**level, lanes) if level < L2_LEVELS else lanes for level in range(steps))


def estimate(sass: Sass, loops: list[PlannedLoop], *, registers: int, threads: int,
             programs: tuple[int, int], streamed_bytes: float) -> dict:
    """The three bounds and the estimate, in seconds, and their inputs.
    Every launched program is charged the code outside the loops (both
    bodies of the checked kernel: an overestimate of a few percent); the
    searching programs, the loops."""
    trips = []
    for i, loop in enumerate(sass.loops):  # a loop runs its trips per trip of its parents
        outer = [trips[j] for j in range(i) if sass.loops[j].start <= loop.start
                 and loop.end <= sass.loops[j].end]
        trips.append(loops[i].trips * math.prod(outer))
    launched, searching = programs
    in_loops = sum(lp.instructions * t for lp, t in zip(sass.loops, trips))
    warps = -(-threads // WARP)
    warp_instructions = warps * (launched * sass.instructions + searching * in_loops)
    issue_s = warp_instructions / (SMS * SCHEDULERS * CLOCK_HZ)
    # Global accesses in the loops, by the lines each touches (those outside
    # them stream whole lines, as the memory bound counts).
    lines = warps * searching * sum((len(lp.loads) + len(lp.stores)) * t * planned.lines
                                    for lp, t, planned in zip(sass.loops, trips, loops))
    l1_s = lines / (SMS * L1_LINES_PER_CYCLE * CLOCK_HZ)
    probe_bytes = sum(_probe_sectors(lp.probing_lanes, lp.trips) * lp.loads_per_step * SECTOR
                      for lp in loops)
    memory_s = (streamed_bytes + probe_bytes) / BANDWIDTH
    rounds = sum(trips[i] if i is not None else 1 for i in dict.fromkeys(sass.rounds_before_store))
    resident = resident_programs(registers, threads)
    waves = -(-searching // (SMS * resident)) if resident else math.inf
    latency_s = waves * rounds * ROUND_CYCLES / CLOCK_HZ
    return {"warp_instructions": warp_instructions, "probe_bytes": probe_bytes,
            "load_rounds": rounds, "resident": resident, "issue_s": issue_s,
            "l1_s": l1_s, "memory_s": memory_s, "latency_s": latency_s,
            "estimate_s": max(issue_s, l1_s, memory_s, latency_s)}


def streamed_bytes(kernel: str, n: int, m: int, merging: bool) -> int:
    """The bytes a kernel reads and writes in order (float32 keys, int32
    answers): the merge path all of `a` and `v`, binary search `v`, and
    both their answers; the partition pass, only its splits."""
    if kernel == "merge_path_partition":
        return 0
    merges = kernel == "merge_path_searchsorted" or (kernel == "checked_searchsorted"
                                                     and merging)
    return (n if merges else 0) * 4 + m * 8


# ------------------------------------------------------------------ the run


def _kernels(n: int, m: int, sorted_v: bool) -> dict[str, tuple[str, bool]]:
    """The kernel the default call (sorted_v=None) runs, before routing by
    shape, with the per-needle bisection after it, and now, and whether it
    pays the sortedness test first."""
    from jaxsearch.core import gpu

    before = "merge_path_searchsorted" if sorted_v else "binary_search_searchsorted"
    route = gpu.route("check", n, m, "float32", "pallas")
    now = "checked_searchsorted" if route == "check" else "binary_search_searchsorted"
    return {"before": (before, True), "bisect": (now, route == "check"),
            "now": (now, route == "check")}


def _compile_case(kernel: str, configs: dict, merging: bool) -> dict:
    """The worker's case for one kernel and its configs (at 4096 x 4096:
    registers and loops do not depend on N and M)."""
    base = {"implementation": "pallas", "dtype": "float32", "side": "left", "n": 4096,
            "m": 4096, "batch": None, "sass": True}
    if kernel == "checked_searchsorted":
        return {**base, "what": "checked", "merging": merging,
                "merge_config": configs["merge_path"], "bisect_config": configs["binary_search"]}
    kind = "merge_path" if kernel == "merge_path_searchsorted" else "binary_search"
    return {**base, "what": "config", "kind": kind, "config": configs[kind]}


COLUMNS = ["case", "when", "kernel", "registers", "threads", "resident", "warp instr",
           "probe MB", "issue ms", "L1 ms", "memory ms", "latency ms", "check ms", "estimate ms",
           "floor ms", "x floor"]


def cost_rows() -> list[dict]:
    """One row per case and kernel (before, bisect, now)."""
    import jax.numpy as jnp

    import jaxsearch.pallas_kernels as pk

    rows = []
    for name, (n, m, sorted_v) in CASES.items():
        configs = {"merge_path": pk.default_merge_path_config(n, m, jnp.float32),
                   "binary_search": pk.default_binary_search_config(n, m, jnp.float32)}
        now = {kind: dataclasses.asdict(config) for kind, config in configs.items()}
        # The row "bisect": the partition pass, then the merge path's method
        # "bisect", a binary search per needle in its tile (the default
        # before the serial merge); before: each merge program searched its
        # own boundaries too.
        bisect_method = {**now, "merge_path": dataclasses.asdict(
            pk.default_bisect_config(n, m, jnp.float32))}
        before = {**now, "merge_path": {**bisect_method["merge_path"],
                                        "partition": "per_program"}}
        kernels = _kernels(n, m, sorted_v)
        configs_of = {"before": before, "bisect": bisect_method, "now": now}
        cases = [_compile_case(kernel, configs_of[when], sorted_v)
                 for when, (kernel, _) in kernels.items()]
        floor_bytes = (n + m) * 4 + m * 4
        for (when, (kernel, checks)), result in zip(kernels.items(), h200.run_worker(
                cases, verbose=True)):
            configs = configs_of[when]
            # N, M, sorted_v and the configs: what bench/gpu_bench.py needs to
            # time the row's kernel beside its estimate.
            row = {"case": name, "n": n, "m": m, "sorted_v": sorted_v, "when": when,
                   "kernel": kernel, "configs": configs,
                   "floor ms": floor_bytes / BANDWIDTH * 1e3}
            # The search's kernels in order: the partition pass first, where it runs.
            names = [k for k in ("merge_path_partition", kernel) if k in result.get("sass", {})]
            parts = [_kernel_cost(name, result, configs, n, m, sorted_v) for name in names]
            if not result["ok"] or kernel not in names or any("note" in p for p in parts):
                row["note"] = "not compiled" if not result["ok"] else "loops not as planned"
                rows.append(row)
                continue
            check_s = (n + m) * 4 / BANDWIDTH if checks else 0.0
            total = sum(p["estimate_s"] for p in parts) + check_s
            main = parts[-1]
            row.update({"kernel": " + ".join(names), "registers": main["registers"],
                        "threads": main["threads"], "resident": main["resident"],
                        "warp instr": sum(p["warp_instructions"] for p in parts),
                        "probe MB": sum(p["probe_bytes"] for p in parts) / 1e6,
                        "issue ms": sum(p["issue_s"] for p in parts) * 1e3,
                        "L1 ms": sum(p["l1_s"] for p in parts) * 1e3,
                        "memory ms": sum(p["memory_s"] for p in parts) * 1e3,
                        "latency ms": sum(p["latency_s"] for p in parts) * 1e3,
                        "check ms": check_s * 1e3, "estimate ms": total * 1e3,
                        "x floor": total * 1e3 / row["floor ms"], "parts": parts})
            rows.append(row)
    return rows


def _kernel_cost(name: str, result: dict, configs: dict, n: int, m: int,
                 merging: bool) -> dict:
    """One compiled kernel's estimate (with its resources and loops), or a
    note where its loops are not those of its plan."""
    resources = result.get("kernels", {}).get(name, {})
    sass = read_sass(result["sass"][name])
    loops = plan(name, configs, n, m, merging)
    if loops is not None and len(sass.loops) < len(loops):
        # An inner loop the program never runs here may have been unrolled
        # into its parent (the serial merge's fallback search).
        loops = [lp for lp in loops if lp.trips or not lp.depth]
    if loops is None or resources.get("threads") is None or \
            [lp.depth for lp in sass.loops] != [lp.depth for lp in loops]:
        return {"kernel": name, "note": "loops not as planned"}
    found = estimate(sass, loops, registers=resources["registers"],
                     threads=resources["threads"],
                     programs=programs_of(name, configs, n, m, merging),
                     streamed_bytes=streamed_bytes(name, n, m, merging))
    return {"kernel": name, "registers": resources["registers"],
            "threads": resources["threads"], **found,
            "loops": [dataclasses.asdict(lp) | {"plan": planned.name}
                      for lp, planned in zip(sass.loops, loops)]}


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/gpu_cost.py",
        description="The cost of each GPU kernel on an H200, estimated from its SASS, "
                    "compiled without a GPU.")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    missing = h200.missing_wheels() or (None if h200.nvidia_tool("nvdisasm") else
                                        "nvdisasm is missing: pip install nvidia-cuda-nvdisasm")
    if missing:
        print(f"gpu_cost: {missing}", file=sys.stderr)
        return 2
    from jaxsearch.tools.bench.format import format_table

    rows = cost_rows()
    table = [[_cell(row.get(c)) for c in COLUMNS] + [row.get("note", "")] for row in rows]
    print(format_table(COLUMNS + ["note"], table, align="lll" + "r" * (len(COLUMNS) - 3) + "l"))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
