"""Compiling jaxsearch for an NVIDIA H200 that is not here.

XLA compiles for a GPU it cannot see when jax's CUDA plugin is installed (no
driver needed) and a compile-only topology describes the target: then
`jax.jit(f).lower(...).compile()` runs XLA's whole GPU pipeline, Triton and
ptxas included, and the GPU kernels become sm_90a cubins. The slim set of
wheels that allows it is the `h200-compile` extra (jax's CUDA plugin matching
jaxlib, and ptxas from nvidia-cuda-nvcc-cu12).

Importable (the test tier, bench/gpu_resources.py and
tests/helpers/cuda_topology_check.py use it): the H200's target description,
`missing_wheels()`, the cases (`config_cases()`, `checked_cases()`,
`dispatch_cases()`, `mosaic_dispatch_cases()`, `canary_cases()`,
`DEVICE_CASE`), what a dispatch case compiles to (`search_kernels()`) and
`run_worker()`. Run as a script, this file is that worker: it reads
cases (JSON) on stdin, compiles each in this process for the H200 and prints
one JSON line per case. It runs in a process of its own because XLA reads
XLA_FLAGS and its log settings once, when it starts, and the plugin needs
JAX_PLATFORMS=cpu on a machine without a GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# XLA's GPU target description of an H100 SXM (its
# xla/tools/hlo_opt/gpu_specs/h100_sxm.txtpb) with the H200's memory size,
# bandwidth and name: the same Hopper SM (compute capability 9.0, 132 SMs,
# 227 KiB of shared memory per block with the opt-in, 64K registers).
H200_TARGET = """
gpu_device_info {
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: 233472
  threads_per_core_limit: 2048
  core_count: 132
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: 4800000000000
  l2_cache_size: 52428800
  clock_rate_ghz: 1.98
  device_memory_size: 150754820096
  shared_memory_per_block_optin: 232448
  cuda_compute_capability { major: 9 }
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}
platform_name: "CUDA"
device_description_str: "NVIDIA H200"
"""

# A kernel that spills registers fails to compile, instead of running slowly.
FAIL_ON_SPILL = "--xla_gpu_fail_ptx_compilation_on_register_spilling=true"
# ptxas -v through XLA's log: registers, spills and shared memory per kernel.
PTXAS_VERBOSE = "--xla_gpu_ptx_compiler_extra_flags=-v"

# How the custom call each GPU implementation's kernels lower to begins
# (Mosaic GPU's is "mosaic_gpu_v2" in jax 0.10).
KERNEL_CALL_TARGETS = {"pallas": "__gpu$xla.gpu.triton", "mosaic": "mosaic_gpu"}

# What the tier needs, each as the modules that provide it (CUDA 12's, as
# the h200-compile extra installs them, or CUDA 13's, as on a GPU machine).
_WHEELS = {"jax-cuda12-plugin": ("jax_cuda12_plugin", "jax_cuda13_plugin"),
           "jax-cuda12-pjrt": ("jax_plugins.xla_cuda12", "jax_plugins.xla_cuda13"),
           "nvidia-cuda-nvcc-cu12 (ptxas)": ("nvidia.cuda_nvcc", "nvidia.cu13")}
INSTALL_HINT = 'pip install ".[h200-compile]" (jax\'s CUDA plugin matching jaxlib, and ptxas)'


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def missing_wheels() -> str | None:
    """Why nothing can be compiled for the H200 here, or None when it can."""
    missing = [wheel for wheel, modules in _WHEELS.items()
               if not any(map(_importable, modules))
               and not (wheel.startswith("nvidia") and shutil.which("ptxas"))]
    if missing:
        return f"the H200 compile wheels are not installed ({', '.join(missing)}): {INSTALL_HINT}"
    return None


def compile_env(*, verbose: bool = False) -> dict[str, str]:
    """The environment of a worker: spills fatal; with `verbose`, ptxas -v in
    XLA's log, and Mosaic GPU's ptxas reports and IR in its dump folder
    (Mosaic GPU runs ptxas itself: XLA's spill flag does not reach it)."""
    # ptxas, not libnvjitlink: what makes spills fatal and prints the report.
    flags = [FAIL_ON_SPILL, "--xla_gpu_enable_libnvjitlink=false"]
    if verbose:
        flags.append(PTXAS_VERBOSE)
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": " ".join([os.environ.get("XLA_FLAGS", ""), *flags]).strip()}
    if verbose:
        env |= {"TF_CPP_MIN_LOG_LEVEL": "0",
                "TF_CPP_VMODULE": "subprocess_compilation=2,nvjitlink=3",
                "MOSAIC_GPU_DUMP_PTXAS": "1", "MOSAIC_GPU_DUMP_RESOURCES": "1"}
    return env


def run_worker(cases: list[dict], *, verbose: bool = False, pallas_triton: bool = True,
               timeout: float = 1800) -> list[dict]:
    """Compiles every case for the H200 in a worker process; its results, in order.

    Each result is the case with `ok`, `error` (the first lines of XLA's error
    when it failed), `kernel_calls` (the GPU kernel custom calls in the
    compiled module), `conditionals` (its HLO conditionals, each a branch
    chosen on the host) and, with `verbose`, `kernels`: per kernel the registers,
    spill bytes and shared memory that ptxas reported, and for a Mosaic GPU
    kernel its unsigned compares. Without `pallas_triton` the dispatch runs
    as on a jax that has lost Pallas' Triton backend (Mosaic GPU first).
    """
    args = [sys.executable, str(Path(__file__).resolve())]
    args += (["--verbose"] if verbose else []) + ([] if pallas_triton else [_NO_PALLAS_TRITON])
    with tempfile.TemporaryDirectory() as scratch:  # never the source tree's jaxsearch/
        done = subprocess.run(args, input=json.dumps(cases), capture_output=True, text=True,
                              env=compile_env(verbose=verbose), cwd=scratch, timeout=timeout)
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or len(results) != len(cases):
        raise RuntimeError(f"the H200 compile worker failed (exit {done.returncode}, "
                           f"{len(results)} of {len(cases)} results):\n{done.stderr[-4000:]}")
    return results


# ------------------------------------------------------------------ the cases

# Every GPU implementation the cuda dispatch may take, compiled explicitly.
IMPLEMENTATIONS = ("pallas",)
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64")
X64_DTYPES = ("int64", "uint64", "float64")
# (N, M): balanced, many keys and few needles, few keys and many needles.
SHAPES = {"balanced": (4096, 4096), "skew a": (1 << 16, 64), "skew v": (64, 1 << 16)}
# Where the merge path once spilled: vmap of 4 rows, N = M = 2^20. The
# register use of a config does not depend on N and M (the same spills show
# at 4096), so the tuning space compiles at the smaller size.
LARGE = (1 << 20, 1 << 20)
SMALL_BATCHED = (4096, 4096)
BATCH = 4


def config_cases(space, dtypes=DTYPES, sides=("left", "right"), shape=SMALL_BATCHED,
                 batch=BATCH, implementations=IMPLEMENTATIONS,
                 one_side_each=False, dtypes_each=None) -> list[dict]:
    """Each config of `space` in each implementation under vmap (where the
    merge path spilled) at `shape`, for each of `dtypes` and `sides`.

    With `one_side_each`, each config and dtype on one of `sides`, taken in
    turn so that every config and every dtype still meets each side: the side
    changes one comparison, not the registers, and halves the compiles.

    With `dtypes_each` (a count), each config for the last of `dtypes` (the
    one whose keys hold the most registers) and for `dtypes_each - 1` of the
    others, taken in turn, so that every dtype still meets several configs
    of each kind: a dtype changes the keys' width and comparison, and the
    dispatch cases compile every dtype at its default configs."""
    def turns(ci):  # (dtype, turn) for config ci: its side is the turn's
        if dtypes_each is None:
            return [(dtype, ci + di) for di, dtype in enumerate(dtypes)]
        others, each = dtypes[:-1], dtypes_each - 1
        # The others' slots run through them round after round; each round
        # flips their sides.
        slots = range(ci * each, (ci + 1) * each)
        return [*((others[s % len(others)], s // len(others)) for s in slots), (dtypes[-1], ci)]
    return [{"what": "config", "implementation": implementation, "kind": c.kind,
             "config": dataclasses.asdict(c), "dtype": dtype, "side": side, "n": shape[0],
             "m": shape[1], "batch": batch}
            for implementation in implementations for ci, c in enumerate(space)
            for dtype, turn in turns(ci)
            for side in ([sides[turn % len(sides)]] if one_side_each else sides)]


def checked_cases(pairs, implementation, dtypes, shape=SMALL_BATCHED,
                  batch=BATCH) -> list[dict]:
    """A backend's checked kernel for each (merge config, binary-search
    config) of `pairs` and each of `dtypes`, with its flag set each way,
    under vmap at `shape`; the sides taken in turn."""
    return [{"what": "checked", "implementation": implementation, "merging": merging,
             "merge_config": dataclasses.asdict(merge),
             "bisect_config": dataclasses.asdict(bisect), "dtype": dtype,
             "side": ("left", "right")[(pi + di + merging) % 2], "n": shape[0], "m": shape[1],
             "batch": batch}
            for pi, (merge, bisect) in enumerate(pairs) for di, dtype in enumerate(dtypes)
            for merging in (0, 1)]


def canary_cases() -> list[dict]:
    """A kernel that fits in registers and its twin that cannot (all 256
    sums of a 256 x 256 outer product in one warp): the second must fail."""
    return [{"what": "canary", "size": size, "dtype": "float32"} for size in (128, 256)]


def dispatch_cases() -> list[dict]:
    """Every dispatch variant of the default call: each key dtype and
    sorted_v, on the three SHAPES and vmapped at LARGE, each dtype and shape
    on one side, taken in turn (every dtype meets both sides, and so does
    every shape). And each GPU implementation by name (the same kernels and
    configs, but its own path through the API) for each key dtype and
    sorted_v, balanced and vmapped."""
    cases = _dispatch(None, ("left", "right"), [*SHAPES, "vmapped"], one_side_each=True)
    for implementation in IMPLEMENTATIONS:
        cases += _dispatch(implementation, ("left",), ["balanced", "vmapped"])
    return cases


def mosaic_dispatch_cases() -> list[dict]:
    """The default call's dispatch variants where Mosaic GPU is the first
    choice (a worker run without Pallas Triton): each key dtype, side and
    sorted_v vmapped at LARGE, and both skews for float32 and int64, each
    dtype and skew on one side, taken in turn."""
    sides = ("left", "right")
    return (_dispatch(None, sides, ["vmapped"])
            + _dispatch(None, sides, ["skew a", "skew v"], ("float32", "int64"),
                        one_side_each=True))


def _dispatch(implementation, sides, shapes, dtypes=DTYPES, one_side_each=False) -> list[dict]:
    shapes = {name: (*SHAPES[name], None) if name in SHAPES else (*LARGE, BATCH)
              for name in shapes}
    return [{"what": "dispatch", "implementation": implementation, "dtype": dtype,
             "side": side, "sorted_v": sorted_v, "shape": name, "n": n, "m": m, "batch": batch}
            for di, dtype in enumerate(dtypes)
            for si, (name, (n, m, batch)) in enumerate(shapes.items())
            for side in ([sides[(di + si) % len(sides)]] if one_side_each else sides)
            for sorted_v in (True, False, None)]


# The device the worker compiles for, as the dispatch sees it.
DEVICE_CASE = {"what": "device"}


def cumsum_cases() -> list[dict]:
    """searchsorted_cumsum on the GPU (a compensated running sum, then the
    merge path or binary search): float32 and float64 weights, both sides,
    each sorted_v, balanced and vmapped."""
    shapes = {"balanced": (1 << 16, 1 << 16, None), "vmapped": (1 << 16, 1 << 16, BATCH)}
    return [{"what": "cumsum", "implementation": None, "dtype": dtype, "side": side,
             "sorted_v": sorted_v, "shape": name, "n": n, "m": m, "batch": batch}
            for dtype in ("float32", "float64") for side in ("left", "right")
            for sorted_v in (True, False, None) for name, (n, m, batch) in shapes.items()]


def search_kernels(case: dict, default: str) -> tuple[int, int]:
    """The GPU kernels one search of a dispatch case compiles to, and its
    conditionals: one kernel as the route gives it (the checked kernel where
    the call is checked), the merge path's partition pass before it where it
    may merge and its default config partitions once, and no conditional.
    `default`: the implementation the dispatch takes where the case names
    none."""
    import jax.numpy as jnp

    from jaxsearch import pallas_kernels as pk
    from jaxsearch.core import gpu

    implementation = case["implementation"] or default
    n, m, dtype = case["n"], case["m"], jnp.dtype(case["dtype"])
    order = gpu.route({True: "sorted", False: "any", None: "check"}[case["sorted_v"]], n, m,
                      dtype, implementation)
    partitions = int(order != "any"
                     and pk.default_merge_path_config(n, m, dtype).partition == "once")
    return 1 + partitions, 0


def case_id(case: dict) -> str:
    """A short readable name of a case."""
    if case["what"] in ("canary", "device"):
        return f"{case['what']}-{case.get('size', 'h200')}"
    if case["what"] in ("config", "checked"):
        configs = [case["config"]] if case["what"] == "config" else \
            [case["merge_config"], case["bisect_config"]]
        fields = "|".join(",".join(f"{k}={v}" for k, v in config.items() if v is not None)
                          for config in configs)
        kind = case["kind"] if case["what"] == "config" else f"checked={case['merging']}"
        return f"{case['implementation']}-{kind}[{fields}]-{case['dtype']}-{case['side']}"
    name = "cumsum" if case["what"] == "cumsum" else case["implementation"] or "default"
    return f"{name}-{case['dtype']}-{case['side']}-sorted_v={case['sorted_v']}-{case['shape']}"


# ------------------------------------------------------------------ the worker

# One ptxas -v report: the function, then its spills, then its resources.
_PTXAS_FUNCTION = re.compile(r"Compiling entry function '(\w+)'")
_PTXAS_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                           r"(\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:, used \d+ barriers)?(?:, (\d+) bytes smem)?")


def parse_ptxas(log: str) -> dict[str, dict]:
    """Registers, spill bytes and static shared memory per kernel in a ptxas -v log."""
    kernels, current = {}, None
    for line in log.splitlines():
        if match := _PTXAS_FUNCTION.search(line):
            current = kernels[match.group(1)] = {}
        elif current is not None and (match := _PTXAS_SPILLS.search(line)):
            current.update(stack=int(match.group(1)), spill_stores=int(match.group(2)),
                           spill_loads=int(match.group(3)))
        elif current is not None and (match := _PTXAS_USED.search(line)):
            current.update(registers=int(match.group(1)), static_smem=int(match.group(2) or 0))
    return kernels


# One kernel launch in XLA's thunk sequence: its launch shape and the shared
# memory it is launched with (Triton's is dynamic, so ptxas does not see it).
_LAUNCH = re.compile(r"(\w+) grid: \[([\d, ]+)\] threads: \[([\d, ]+)\]\s+"
                     r"shared_memory: (\d+) bytes")


def mosaic_resources(dump_dir: str) -> dict[str, dict]:
    """Registers, spill bytes, shared memory and unsigned compares per Mosaic
    GPU kernel, from its dumps (MOSAIC_GPU_DUMP_TO): the ptxas report, the
    scratch allocation (jax 0.12, MOSAIC_GPU_DUMP_RESOURCES) and the IR."""
    kernels = {}
    for report in Path(dump_dir).glob("*.ptxas"):
        resources = {}  # The report may or may not name the function itself.
        for found in parse_ptxas(f"Compiling entry function '{report.stem}'\n"
                                 + report.read_text()).values():
            resources |= found
        scratch = report.with_suffix(".resources.txt")
        scratch = re.search(r"smem_scratch_bytes=(\d+)",
                            scratch.read_text() if scratch.exists() else "")
        kernels[report.stem] = {
            **resources, "shared_memory": int(scratch.group(1)) if scratch else 0,
            "unsigned_compares": _unsigned_compares(report.with_suffix(".mlir-passes.log"))}
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


def parse_launches(dump_dir: str) -> dict[str, dict]:
    """Grid, threads and shared memory per kernel, from XLA's dumped thunk sequence."""
    kernels = {}
    for path in Path(dump_dir).glob("*thunk_sequence.txt"):
        for match in _LAUNCH.finditer(path.read_text()):
            kernels[match.group(1)] = {"threads": int(match.group(3).split(",")[0]),
                                       "shared_memory": int(match.group(4))}
    return kernels


def h200_mesh():
    """A one-device mesh of a compile-only H200 topology."""
    from jax.experimental import topologies

    topology = topologies.get_topology_desc(platform="cuda", target_config=H200_TARGET,
                                            topology="1x1x1")
    return topologies.make_mesh(topology, (1,), ("x",))


def case_function(case: dict):
    """The function a case compiles, and its argument shapes (also what
    bench/gpu_resources.py compiles for gfx942)."""
    import functools

    import jax
    import numpy as np

    import jaxsearch
    from jaxsearch import pallas_kernels as pk

    if case["what"] == "canary":
        return _canary, [(case["size"],)]
    if case["what"] == "checked":  # the checked kernel, its flag fixed
        fn = functools.partial(
            pk.BACKENDS[case["implementation"]].checked, merging=int(case["merging"]),
            side=case["side"],
            out_dtype=np.dtype(np.int32), merge_config=pk.MergePathConfig(**case["merge_config"]),
            bisect_config=pk.BinarySearchConfig(**case["bisect_config"]))
    elif case["what"] in ("dispatch", "cumsum"):
        search = jaxsearch.searchsorted if case["what"] == "dispatch" else \
            jaxsearch.searchsorted_cumsum
        fn = functools.partial(search, side=case["side"], sorted_v=case["sorted_v"],
                               implementation=case["implementation"])
    else:
        kind = pk.kernel_kind(case["kind"])
        kernel = pk.BACKENDS[case["implementation"]].kernel(kind)
        fn = functools.partial(kernel, side=case["side"], out_dtype=np.dtype(np.int32),
                               config=kind.config_cls(**case["config"]))
    n, m, batch = case["n"], case["m"], case["batch"]
    shapes = [(n,), (m,)] if batch is None else [(batch, n), (batch, m)]
    return (fn if batch is None else jax.vmap(fn)), shapes


def _canary(x):
    import jax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as pltriton

    def outer_sums(x_ref, o_ref):
        x = x_ref[...]
        o_ref[...] = (x[:, None] * x[None, :]).sum(axis=1)

    return pl.pallas_call(outer_sums, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          name="canary",
                          compiler_params=pltriton.CompilerParams(num_warps=1, num_stages=1))(x)


@contextlib.contextmanager
def _captured_stderr():
    """What the process writes to file descriptor 2 meanwhile (XLA's C++ log)."""
    with tempfile.TemporaryFile(mode="w+b") as sink:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        captured = {}
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured["text"] = sink.read().decode(errors="replace")


def _compile_case(case: dict, mesh, verbose: bool) -> dict:
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    if case["what"] == "device":
        from jaxsearch.pallas_kernels import compute_capability

        return {**case, "ok": True, "error": "", "device": mesh.devices.flat[0].device_kind,
                "compute_capability": compute_capability()}
    fn, shapes = case_function(case)
    with jax.enable_x64(case["dtype"] in X64_DTYPES):
        args = [jax.ShapeDtypeStruct(s, jax.numpy.dtype(case["dtype"]),
                                     sharding=NamedSharding(mesh, PartitionSpec()))
                for s in shapes]
        result = dict(case)
        dump = tempfile.TemporaryDirectory()
        # Per compile, unlike XLA_FLAGS: this case's thunk sequence alone.
        options = {"xla_dump_to": dump.name} if verbose else {}
        os.environ["MOSAIC_GPU_DUMP_TO"] = dump.name  # Read at each compile.
        with dump, _captured_stderr() as log:
            try:
                text = jax.jit(fn).lower(*args).compile(compiler_options=options).as_text()
            except Exception as exc:  # noqa: BLE001  (XLA's errors, reported per case)
                result.update(ok=False, error=str(exc)[:2000], kernel_calls=0,
                              conditionals=0)
            else:
                targets = tuple(KERNEL_CALL_TARGETS.values())
                calls = re.findall(r'custom_call_target="([^"]+)"', text)
                result.update(ok=True, error="",
                              kernel_calls=sum(1 for c in calls if c.startswith(targets)),
                              conditionals=len(re.findall(r" conditional\(", text)))
            launches = parse_launches(dump.name)
            mosaic = mosaic_resources(dump.name)
            if verbose and case.get("sass"):
                result["sass"] = disassemble(dump.name)
    if verbose:
        result["kernels"] = {name: {**resources, **launches.get(name, {})}
                             for name, resources in parse_ptxas(log["text"]).items()} | mosaic
    return result


def nvidia_tool(name: str) -> str | None:
    """The path of a CUDA tool (ptxas, nvdisasm): on PATH, else in the
    nvidia wheels' bin folders (nvidia-cuda-nvcc-cu12, nvidia-cuda-nvdisasm)."""
    if found := shutil.which(name):
        return found
    spec = importlib.util.find_spec("nvidia") if _importable("nvidia") else None
    for root in (spec.submodule_search_locations if spec else []):
        for path in sorted(Path(root).glob(f"*/bin/{name}")):
            return str(path)
    return None


_SASS_FUNCTION = re.compile(r"^\s*\.section\s+\.text\.(\w+),", re.MULTILINE)


def disassemble(dump_dir: str) -> dict[str, str]:
    """Each kernel's SASS, by name: the PTX that XLA dumped, assembled for
    sm_90a by ptxas and disassembled by nvdisasm; {} where either is missing."""
    ptxas, nvdisasm = nvidia_tool("ptxas"), nvidia_tool("nvdisasm")
    if ptxas is None or nvdisasm is None:
        return {}
    kernels = {}
    for ptx in sorted(Path(dump_dir).glob("*.ptx")):
        if not ptx.stat().st_size:
            continue
        cubin = ptx.with_suffix(".cubin")
        subprocess.run([ptxas, "-arch=sm_90a", "-O3", str(ptx), "-o", str(cubin)], check=True,
                       capture_output=True)
        text = subprocess.run([nvdisasm, "-c", str(cubin)], check=True, capture_output=True,
                              text=True).stdout
        starts = list(_SASS_FUNCTION.finditer(text))
        for this, after in zip(starts, starts[1:] + [None]):
            kernels[this.group(1)] = text[this.start():after.start() if after else len(text)]
    return kernels


_NO_PALLAS_TRITON = "--without-pallas-triton"


def main() -> int:
    verbose = "--verbose" in sys.argv[1:]
    cases = json.load(sys.stdin)
    import jax

    if _NO_PALLAS_TRITON in sys.argv[1:]:
        from jaxsearch.pallas_kernels import BACKENDS

        # As a jax without Pallas' Triton backend would leave it: every
        # reader of the registry (the dispatch's status included) sees it.
        BACKENDS["pallas"] = dataclasses.replace(
            BACKENDS["pallas"], kernels={}, import_error=f"disabled ({_NO_PALLAS_TRITON})")

    mesh = h200_mesh()
    with jax.set_mesh(mesh):
        for case in cases:
            print(json.dumps(_compile_case(case, mesh, verbose)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
