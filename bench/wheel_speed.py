"""The wheel's extension against this environment's own build, side by side
in one process.

    bash .ci/wheels                       # builds dist/*.whl (clang, through zig)
    python bench/wheel_speed.py dist/jaxsearch-*_x86_64.whl
    python bench/wheel_speed.py dist/*_x86_64.whl --check       # exit 1 past 5% slower
    python bench/wheel_speed.py dist/*_x86_64.whl --recheck 4   # cells past 5%: median of 5

The installed jaxsearch's extension (built by `pip install .`, gcc here;
`_cpu_ext_x86_64_v3` where the CPU runs it, else `_cpu_ext`) serves every
call as usual; the wheel's build of the same module is loaded beside it and
its XLA FFI targets registered under other names. Each cell is compiled
twice, once per build (the compiled program is checked for the target it
calls), and the two are timed interleaved (``measure_all``), so that the
machine's load hits both alike; both answers are checked against numpy.

Cells: the default call and the promised one (``sorted_v=True`` on sorted
needles, ``False`` on unsorted) at N, M in --sizes for float32, int32,
float64 and int64 (bench/default_call.py's and bench/cpu_targets.py's
grids), ``searchsorted_cumsum`` on sorted and unsorted needles, and
``histogram`` of unsorted data. One thread per call by default (--threads):
the compilers' code, not the thread pool's scheduling, is compared.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxsearch
from jaxsearch import tuning
from jaxsearch.core import cpu
from jaxsearch.tools.bench.format import fmt_count, format_table
from jaxsearch.tools.bench.peers import Problem, make_arrays
from jaxsearch.tools.bench.timing import Progress, machine_info, matches, measure_all

SIZES = (10**3, 10**5, 10**7)
DTYPES = ("float32", "int32", "float64", "int64")
MAX_RATIO = 1.05
# Samples per median, each of at least SAMPLE_S of back-to-back calls: with
# 9 samples of 2 ms, this build against itself differed by up to 1.2x on a
# cell (shared 2-core machine).
REPEATS = 21
SAMPLE_S = 0.02
# cpu.py's module globals that name its FFI targets, read when a call is traced.
TARGETS = ("TARGET_NAME", "CUMSUM_TARGET_NAME", "HISTOGRAM_TARGET_NAME")
SUFFIX = "_wheel"


def load_wheel_extension(wheel: Path, into: Path) -> ModuleType:
    """The wheel's build of the extension module that serves this process
    (`_cpu_ext`, or `_cpu_ext_x86_64_v3` where the CPU runs it: cpu.ISA),
    or an extension module given as a .so, unpacked into `into` and imported
    under another package name, its FFI targets registered with SUFFIX."""
    if wheel.suffix == ".so":
        path = wheel
    else:
        serving = cpu.EXTENSION_MODULE.rpartition(".")[2]
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if n.startswith(f"jaxsearch/{serving}.")
                     and n.endswith(".so")]
            if len(names) != 1:
                raise SystemExit(f"{wheel}: expected one jaxsearch/{serving}.*.so, found {names}")
            path = Path(archive.extract(names[0], into))
    # The module's init function is named after the module (PyInit__cpu_ext),
    # whatever package holds it.
    spec = importlib.util.spec_from_file_location(f"jaxsearch_wheel.{path.name.split('.')[0]}",
                                                  path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for glob, capsule in zip(TARGETS, (module.handler_capsule, module.cumsum_handler_capsule,
                                       module.histogram_handler_capsule)):
        jax.ffi.register_ffi_target(getattr(cpu, glob) + SUFFIX, capsule(), platform="cpu")
    return module


@contextlib.contextmanager
def wheel_targets() -> Iterator[None]:
    """Calls traced inside call the wheel's targets."""
    saved = {glob: getattr(cpu, glob) for glob in TARGETS}
    try:
        for glob, name in saved.items():
            setattr(cpu, glob, name + SUFFIX)
        yield
    finally:
        for glob, name in saved.items():
            setattr(cpu, glob, name)


@dataclasses.dataclass(frozen=True)
class Case:
    """One call to compare: what it computes on which inputs."""

    family: str  # "searchsorted", "cumsum" or "histogram"
    problem: Problem
    sorted_v: bool | None  # the call's promise (searchsorted and cumsum)

    @property
    def label(self) -> str:
        promise = {None: "default", True: "sorted_v=True", False: "sorted_v=False"}
        if self.family == "histogram":
            return f"histogram N={fmt_count(self.problem.n)} {self.problem.dtype}"
        return f"{self.family} {self.problem.label} {promise[self.sorted_v]}"


def cases(sizes: Sequence[int]) -> list[Case]:
    out = []
    for dtype in DTYPES:
        for order in (True, False):
            for n in sizes:
                for m in sizes:
                    problem = Problem(n, m, dtype, order)
                    out += [Case("searchsorted", problem, None),
                            Case("searchsorted", problem, order)]
    for dtype in ("float32", "float64"):
        for order in (True, False):
            for n in sizes:
                out.append(Case("cumsum", Problem(n, max(sizes), dtype, order), None))
        for n in sizes:
            out.append(Case("histogram", Problem(n, 100, dtype, False), None))
    return out


def build(case: Case) -> tuple[Callable[[Any, Any], Any], tuple, np.ndarray | None]:
    """The function to compile, its arguments and numpy's answer (None for
    the cumsum, whose sums are more accurate than numpy's float32 ones: the
    source build's answer is the reference)."""
    a, v = make_arrays(case.problem)
    if case.family == "searchsorted":
        return (lambda x, y: jaxsearch.searchsorted(x, y, sorted_v=case.sorted_v),
                (a, v), np.searchsorted(a, v))
    if case.family == "cumsum":
        w = np.diff(a, prepend=a.dtype.type(0)).clip(0)
        u = v * np.cumsum(w, dtype=np.float64)[-1].astype(a.dtype)
        return (lambda x, y: jaxsearch.searchsorted_cumsum(x, y, sorted_v=case.sorted_v),
                (w, u), None)
    data = make_arrays(Problem(case.problem.n, 1, case.problem.dtype, False), seed=1)[0]
    np.random.default_rng(2).shuffle(data)
    edges = np.linspace(data.min(), data.max(), case.problem.m + 1).astype(data.dtype)
    expected = np.asarray(jnp.histogram(jnp.asarray(data), jnp.asarray(edges))[0])
    return (lambda x, y: jaxsearch.histogram(x, y)[0], (data, edges), expected)


def compiled_pair(case: Case, threads: int) -> tuple[list[Callable[[], Any]], np.ndarray]:
    """The case compiled against each build, as zero-argument calls."""
    fn, args, expected = build(case)
    jargs = [jnp.asarray(x) for x in args]
    config = dataclasses.replace(tuning.DEFAULT_CPU_CONFIG, threads=threads)
    calls = []
    for wheel in (False, True):
        with tuning.use_cpu_config(config), \
                wheel_targets() if wheel else contextlib.nullcontext():
            # A new function for each build: jit's trace cache is keyed on the
            # function, and would hand the second build the first one's trace.
            compiled = jax.jit(lambda *xs, fn=fn: fn(*xs)).lower(*jargs).compile()
        text = compiled.as_text()
        names = [getattr(cpu, glob) + (SUFFIX if wheel else "") for glob in TARGETS]
        if not any(f'"{name}"' in text for name in names):
            raise RuntimeError(f"{case.label}: the {'wheel' if wheel else 'source'} build's "
                               "targets are not called")
        calls.append(lambda compiled=compiled: compiled(*jargs))
    return calls, np.asarray(calls[0]()) if expected is None else expected


@dataclasses.dataclass(frozen=True)
class Row:
    case: Case
    source_s: float
    wheel_s: float
    correct: bool
    runs: int = 1  # the measurements this row is the median of (--recheck)

    @property
    def ratio(self) -> float:
        return self.wheel_s / self.source_s


def measure(case: Case, threads: int) -> Row:
    calls, expected = compiled_pair(case, threads)
    source, wheel = measure_all(calls, repeats=REPEATS, budget_s=5.0, min_sample_s=SAMPLE_S,
                                clock=time.process_time,
                                checks=[lambda out: matches(expected, out)] * 2)
    for m in (source, wheel):
        if m.error is not None:
            raise m.error
    return Row(case, source.timing.median, wheel.timing.median,
               bool(source.correct and wheel.correct))


def recheck(row: Row, times: int, threads: int) -> Row:
    """`row`'s cell measured `times` more times: the run of median ratio
    (the lower middle one for an even count), correct only if all were."""
    runs = sorted([row] + [measure(row.case, threads) for _ in range(times)],
                  key=lambda r: r.ratio)
    middle = runs[(len(runs) - 1) // 2]
    return dataclasses.replace(middle, correct=all(r.correct for r in runs), runs=len(runs))


def report(rows: Sequence[Row]) -> str:
    table = format_table(
        ["call", "source (us)", "wheel (us)", "wheel / source"],
        [[r.case.label, f"{r.source_s * 1e6:.1f}", f"{r.wheel_s * 1e6:.1f}",
          f"{r.ratio:.3f}" + ("" if r.ratio <= MAX_RATIO else " SLOW")
          + ("" if r.correct else " WRONG")
          + (f" (median of {r.runs} runs)" if r.runs > 1 else "")] for r in rows])
    by_family: dict[str, list[float]] = {}
    for r in rows:
        by_family.setdefault(r.case.family, []).append(r.ratio)
    summary = format_table(
        ["family", "cells", "median", "max", f"> {MAX_RATIO:.2f}"],
        [[f, str(len(x)), f"{statistics.median(x):.3f}", f"{max(x):.3f}",
          str(sum(y > MAX_RATIO for y in x))] for f, x in by_family.items()])
    return table + "\n\n" + summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path,
                        help="the wheel whose extension to compare (or the extension's .so)")
    parser.add_argument("--sizes", type=lambda t: tuple(int(float(x)) for x in t.split(",")),
                        default=SIZES, help="N and M values, comma-separated (1e3,1e5,1e7)")
    parser.add_argument("--threads", type=int, default=1, help="threads per call (1)")
    parser.add_argument("--family", action="append",
                        choices=("searchsorted", "cumsum", "histogram"),
                        help="only these calls (repeatable; all by default)")
    parser.add_argument("--recheck", type=int, default=0, metavar="K",
                        help=f"measure each cell over {MAX_RATIO:.2f}x K more times and keep "
                             "the run of median ratio: a shared machine's noise moves single "
                             "cells by up to about 10%% (0: no rechecks)")
    parser.add_argument("--check", action="store_true",
                        help=f"exit 1 when a cell is over {MAX_RATIO:.2f}x or wrong")
    args = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)  # the 64-bit cells keep their dtype
    if not cpu.AVAILABLE:
        raise SystemExit(f"wheel_speed: {cpu.UNAVAILABLE_REASON}")
    with tempfile.TemporaryDirectory() as tmp:
        load_wheel_extension(args.wheel, Path(tmp))
        todo = [c for c in cases(args.sizes) if not args.family or c.family in args.family]
        print(machine_info())
        progress = Progress(len(todo), "wheel_speed")
        rows = []
        for case in todo:
            progress.show(case.label)
            rows.append(measure(case, args.threads))
            progress.step()
        slow = [i for i, r in enumerate(rows) if r.ratio > MAX_RATIO] if args.recheck else []
        progress = Progress(len(slow), "wheel_speed recheck")
        for i in slow:
            progress.show(rows[i].case.label)
            rows[i] = recheck(rows[i], args.recheck, args.threads)
            progress.step()
    print(report(rows))
    bad = [r for r in rows if r.ratio > MAX_RATIO or not r.correct]
    return 1 if args.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
