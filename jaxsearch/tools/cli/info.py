"""The ``info`` command (``jaxsearch info``): platform, implementations, the
tuning caches in use, and the config that would be chosen for a search of a
given size."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from ... import tuning
from ...core import api, cpu, gpu, patching
from ...core.implementations import CYTHON, GPU_IMPLEMENTATIONS, XLA
from ...pallas_kernels import KERNEL_KINDS
from ..bench.format import fmt_count, format_table
from ..bench.timing import machine_info
from .args import HelpFormatter, parse_count, parse_dtypes

# The package whose install extras the hint names, and what the extra for a
# CUDA GPU is known by: the one that brings jax-triton, which only the native
# Triton kernels need, and with it a CUDA jaxlib and the rest.
DISTRIBUTION = "jaxsearch"
GPU_EXTRA_BRINGS = "jax-triton"
# The GPU probes end their reasons with what to install; `info` gives one
# hint, from the package's extras, in its place.
_PROBE_ADVICE = re.compile(r": pip install .*$")


def add_info_parser(sub: Any) -> None:
    """The ``info`` command, added to the top-level parser's subparsers `sub`."""
    i = sub.add_parser(
        "info", help="platform, implementations, tuning cache, chosen config",
        description="What jaxsearch finds on this machine: the platform, which "
                    "implementations can run (and what to install for the others), the "
                    "tuning caches in the order they are read, and the config and kernels "
                    "a search of --n keys and --m needles would get.",
        formatter_class=HelpFormatter)
    i.add_argument("--n", type=parse_count, default=10**7, help="len(a) (default: 1e7)")
    i.add_argument("--m", type=parse_count, default=10**7, help="len(v) (default: 1e7)")
    i.add_argument("--dtype", type=parse_dtypes, default=("float32",),
                   help="key dtype (default: float32)")


def extras() -> list[str]:
    """The install extras of the installed package (its metadata, written
    from pyproject.toml); none for a copy pip never installed."""
    try:
        return importlib.metadata.metadata(DISTRIBUTION).get_all("Provides-Extra") or []
    except importlib.metadata.PackageNotFoundError:
        return []


def gpu_extra() -> str | None:
    """The extra that brings the GPU implementations' packages (`GPU_EXTRA_BRINGS`
    among them), as the installed package's requirements name it."""
    try:
        requires = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    provided = extras()
    for requirement in requires:
        name = re.match(r"[A-Za-z0-9._-]+", requirement)
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", requirement)
        if name and extra and name.group() == GPU_EXTRA_BRINGS and extra.group(1) in provided:
            return extra.group(1)
    return None


def install_hint() -> str:
    """One line saying what to install for the GPU implementations."""
    extra = gpu_extra()
    if extra is None:
        return "see the extras in jaxsearch's pyproject.toml for the GPU implementations"
    return (f'the GPU implementations on a CUDA GPU: pip install "{DISTRIBUTION}[{extra}]" '
            f'(in a clone: pip install ".[{extra}]")')


def _gpu_state(name: str, on_cpu: bool) -> str:
    """Whether GPU implementation `name` runs here and why not; on a CPU
    backend, in its interpreter, and what `gpu.status` checked of it for a
    GPU (its kernels import, and native Triton's packages; nothing is
    compiled or run without one)."""
    ok, reason = gpu.status(name, interpret=on_cpu)
    reason = _PROBE_ADVICE.sub("", reason)
    if not on_cpu:
        return "available" if ok else f"unavailable: {reason}"
    state = ("available in interpret mode (this CPU backend: for tests)" if ok
             else f"unavailable: {reason}")
    gpu_ok, gpu_reason = gpu.status(name)
    gpu_reason = _PROBE_ADVICE.sub("", gpu_reason)
    if not gpu_ok and gpu_reason == reason:
        return state.replace("unavailable:", "unavailable here and for a GPU:", 1)
    if not gpu_ok:
        return f"{state}; for a GPU: unavailable: {gpu_reason}"
    checked = f"{gpu_reason} import" if gpu_reason else "its kernels import"
    return f"{state}; for a GPU: {checked} (not compiled or run: no GPU here)"


def _implementations() -> list[tuple[str, str]]:
    """Each implementation with whether it can run here, and why not."""
    on_cpu = jax.default_backend() == "cpu"
    rows = [(CYTHON, f"available ({cpu.ISA} build, {cpu.EXTENSION_MODULE}; "
                     f"${cpu.ISA_ENV} chooses)" if cpu.AVAILABLE
             else f"unavailable: {cpu.UNAVAILABLE_REASON}")]
    rows += [(name, _gpu_state(name, on_cpu)) for name in GPU_IMPLEMENTATIONS]
    return rows + [(XLA, "available (jnp.searchsorted)")]


def _describe_cache(path: Path) -> str:
    if not path.exists():
        return "not present"
    entries = tuning.load_entries(path)
    meta = tuning.read_meta(path)
    host = ", ".join(str(meta[k]) for k in ("cpu_model", "device_kind", "date") if k in meta)
    return f"{len(entries)} entries" + (f"; measured on {host}" if host else "")


def readable(value: Any) -> str:
    """A config value as a person reads it: floats to 3 significant digits."""
    return f"{value:.3g}" if isinstance(value, float) else str(value)


# What each CpuConfig field does, from its value and the config (for `info`).
_CPU_FIELD_MEANINGS: dict[str, Callable[[Any, tuning.CpuConfig], str]] = {
    "bisect_ratio": lambda x, c: f"lock-step binary search (bisect) of sorted needles when "
                                 f"N/M > {readable(x)}",
    "runs_ratio": lambda x, c: f"fill runs of needles per key (runs) when M/N > {readable(x)}; "
                               "merge in between",
    # What 0 comes to here: the most threads a call may run on.
    "threads": lambda x, c: (f"at most {x} threads per call" if x else "all available cores "
                             f"({c.max_threads(cpu.available_cores())} here)"),
    "min_parallel": lambda x, c: f"one thread for a row of fewer than {x} needles",
    "bucket_min_bytes": lambda x, c: f"needles in any order by buckets of keys from {x} bytes "
                                     "of keys",
    "bucket_keys_per_needle": lambda x, c: ("by buckets where there are at most "
                                            f"{readable(x)} keys per needle"),
    "table_check_ratio": lambda x, c: ("the kernels' own rule for the bin table of needles in "
                                       "any order" if x is None else "needles in any order by "
                                       f"the bin table up to {readable(x)} keys per needle "
                                       "(where SIMD gathers serve)"),
    "count_keys": lambda x, c: (f"needles in any order counted in one sorted row of at most "
                                f"{x} keys" if x else "needles in any order never counted"),
    "short_row_needles": lambda x, c: (f"two rows or more of fewer than {x} needles each searched "
                                       "across rows" if x else "never searched across rows"),
}


def describe_cpu_config(config: tuning.CpuConfig) -> str:
    """Each field of `config` on its own line: name, rounded value, meaning."""
    rows = [[f.name, readable(getattr(config, f.name)),
             _CPU_FIELD_MEANINGS.get(f.name, lambda x, c: "")(getattr(config, f.name), config)]
            for f in dataclasses.fields(config)]
    return format_table(["field", "value", "meaning"], rows, align="lll")


def info_report(n: int, m: int, dtype: str) -> str:
    """What ``jaxsearch info`` prints."""
    meta = machine_info()
    kind = tuning.device_kind()
    implementations = _implementations()
    lines = [
        f"jaxsearch {meta['jaxsearch']}: jax {meta['jax']}, jaxlib {meta['jaxlib']}, "
        f"numpy {meta['numpy']}, Python {meta['python']}",
        f"platform:        {meta['backend']} (device kind {meta['device_kind']!r}, "
        f"cache key {kind!r})",
        f"host:            {meta['cpu_model']}, {meta['cores']} cores available",
        "implementations:",
        *(f"  {name:<8} {state}" for name, state in implementations),
        *([f"  {'install':<8} {install_hint()}"]
          if any("unavailable" in state for _, state in implementations) else []),
        f"default here:    {api.default_implementation(n, m, dtype)} (for the search below)",
        f"patch:           {_patch_state()}",
        "",
    ]
    kinds = ["cpu"] + ([kind] if kind != "cpu" else [])
    for k in kinds:
        lines.append(f"tuning caches for {k!r}, in lookup order "
                     f"(user dir from ${tuning.TUNING_DIR_ENV} or the user cache dir):")
        for label, path in zip(("user", "shipped"), tuning.cache_files(k)):
            lines.append(f"  {label:<8} {path}  [{_describe_cache(path)}]")
    config, source = tuning.resolve_cpu_config(n, m, dtype)
    label = f"N={fmt_count(n)}, M={fmt_count(m)}, {dtype}"
    lines += [
        "",
        f"for {label}:",
        f"  CPU config:    from {source}",
        textwrap.indent(describe_cpu_config(config), " " * 4),
        f"  CPU kernel:    {_cpu_kernel_line(tuning.choose_cpu_kernel(n, m, config))}",
        f"  CPU threads:   {cpu.threads_for(config, m)} for one call of "
        f"M={fmt_count(m)} needles (see threads and min_parallel)",
    ]
    if kind != "cpu":
        lines += _gpu_lines(n, m, dtype, kind)
    return "\n".join(lines)


def _cpu_kernel_line(kernel: str) -> str:
    """The CPU kernel for sorted needles, and what the default call
    (sorted_v=None) does with it, as searchsorted's docstring and the README
    say: it checks the order only where the kernel is the merge or runs."""
    if kernel == "bisect":
        return ("bisect for sorted needles (sorted_v=True); sorted_v=None and False: binary "
                "search, nothing checked, as binary search is the kernel anyway")
    return (f"{kernel} for sorted needles (sorted_v=True; sorted_v=None runs it checking the "
            "order as it goes, and binary-searches a part of the needles found out of "
            "order); binary search for sorted_v=False")


def _gpu_lines(n: int, m: int, dtype: str, kind: str) -> list[str]:
    """The GPU's part of `info`: the implementation that runs and where that
    choice came from, and the tiles of its kernels (tuned for it, or the
    kernels' heuristics)."""
    bucket = {"n": n, "m": m}
    runs = api.default_implementation(n, m, dtype)
    tuned = tuning.lookup(tuning.IMPLEMENTATION_KERNEL, dtype, bucket, kind)
    lines = [f"  GPU implementation: {runs} (" + (
        f"tuned: {tuned.config.get('name')}, from {tuned.source}" if tuned
        else "no tuned choice: the first of " + ", ".join(GPU_IMPLEMENTATIONS) + " that runs")
        + ")"]
    if runs not in GPU_IMPLEMENTATIONS:
        return lines
    for kernel in KERNEL_KINDS:
        entry = tuning.lookup(tuning.gpu_kernel_key(runs, kernel.name), dtype, bucket, kind)
        lines.append(f"  GPU {kernel.name}: " + (
            ", ".join(f"{k}={readable(v)}" for k, v in entry.config.items())
            + f"\n                 from {entry.source}" if entry
            else "the kernel's heuristic default (no tuned entry)"))
    return lines


def _patch_state() -> str:
    served = ", ".join(f"jnp.{s.name}" for s in patching.SERVED)
    if patching.is_patched():
        return f"in force in this process: {served} (and jax's searches through them)"
    return (f"not in force (jaxsearch.patch(), or python -m jaxsearch.autopatch script.py, "
            f"serves {served} and jax's searches through them)")


def run_info(args: argparse.Namespace) -> int:
    print(info_report(args.n, args.m, args.dtype[0]))
    return 0


