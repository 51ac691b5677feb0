"""Benchmark harness: timing, problems, peers, tables and plots.

Everything that times something goes through :func:`measure_all` (warm-up,
then medians of repeated, blocked calls, interleaved across the callables
compared). A benchmark is a list of
:class:`Problem` s crossed with a list of :class:`Impl` s; :func:`run_suite`
measures each pair, checks each result against ``numpy.searchsorted`` and
returns :class:`Result` s that the table and plot functions turn into text,
JSON and a PNG.

Ratios, never absolute times, are what carry between runs: the machines are
shared and noisy, so every comparison is measured side by side in one run.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import gc
import importlib
import json
import math
import os
import platform
import statistics
import sys
import textwrap
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxsearch

from . import _cpu, _tuning

# ---------------------------------------------------------------- machine


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
    """Where a measurement was taken: host, devices and versions."""
    device = jax.devices()[0]
    return {
        "load_avg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu_model": cpu_model(),
        "cores": _cpu.available_cores(),
        "backend": jax.default_backend(),
        "device_kind": device.device_kind,
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": importlib.import_module("jaxlib").__version__,
        "numpy": np.__version__,
        "jaxsearch": jaxsearch.__version__,
    }


# ---------------------------------------------------------------- progress


class Progress:
    """A dependency-free progress bar on stderr.

    On a terminal it redraws one line; elsewhere (logs, CI, tests) it prints a
    line at each tenth of the way, so logs stay short.
    """

    def __init__(self, total: int, desc: str, stream: Any = None) -> None:
        self.total, self.desc, self.done = max(total, 1), desc, 0
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.perf_counter()
        self._last_tenth = 0
        self.label = ""

    def show(self, label: str) -> None:
        """Say what is running now (on a terminal; logs get only the steps)."""
        self.label = label
        if self.tty:
            self._draw()

    def step(self) -> None:
        """Count one unit of work done."""
        self.done = min(self.done + 1, self.total)
        self._draw()

    def _draw(self) -> None:
        frac = self.done / self.total
        elapsed = time.perf_counter() - self.start
        bar = "#" * int(24 * frac) + "-" * (24 - int(24 * frac))
        line = f"{self.desc} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s {self.label}"
        if self.tty:
            self.stream.write("\r" + line[:120].ljust(120))
            if self.done == self.total:
                self.stream.write("\n")
        elif int(10 * frac) > self._last_tenth:
            self._last_tenth = int(10 * frac)
            self.stream.write(line + "\n")
        self.stream.flush()


# ---------------------------------------------------------------- timing


@dataclasses.dataclass(frozen=True)
class Timing:
    """Seconds per call: the median of the samples, and how they were taken."""

    median: float
    samples: tuple[float, ...]
    number: int  # calls averaged in each sample
    first: float  # the first call, compilation included


@dataclasses.dataclass
class Measurement:
    """One callable's timing, or the error it raised; and whether its output passed."""

    timing: Timing | None = None
    error: Exception | None = None
    correct: bool | None = None  # None: no check given


@dataclasses.dataclass
class _Run:
    fn: Callable[[], Any]
    number: int
    first: float
    samples: list[float]
    spent: float = 0.0


def _sample(fn: Callable[[], Any], number: int) -> float:
    """Seconds per call over `number` back-to-back calls, each blocked on.

    Python's cyclic garbage collector is off while timing, as in ``timeit``:
    a full collection (44 ms measured just after importing jax) would land
    on whichever peer's sample crosses the allocation threshold.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(number):
            jax.block_until_ready(fn())
        return (time.perf_counter() - t0) / number
    finally:
        if enabled:
            gc.enable()


def measure_all(fns: Sequence[Callable[[], Any]], *, repeats: int = 5, budget_s: float = 1.0,
                min_sample_s: float = 2e-3,
                checks: Sequence[Callable[[Any], bool] | None] | None = None
                ) -> list[Measurement]:
    """Time several zero-argument callables side by side.

    Each callable's first call compiles and warms up and is not counted; its
    output goes to the callable's entry in `checks`, if any. Calls shorter
    than `min_sample_s` are repeated within a sample so that clock and
    dispatch jitter stay small against it.
    Then the callables take one sample each in turn (interleaved, so any drift
    in the load of a shared machine hits all of them alike) until each has
    `repeats` samples, or has spent `budget_s` with at least two (slow peers).
    Every call is blocked on (``jax.block_until_ready``), so asynchronous
    dispatch is timed to completion. A callable that raises is reported with
    its error and the others go on.
    """
    results = [Measurement() for _ in fns]
    runs: list[_Run | None] = []
    for fn, result, check in zip(fns, results, checks or [None] * len(fns)):
        try:
            t0 = time.perf_counter()
            out = jax.block_until_ready(fn())
            first = time.perf_counter() - t0
            if check is not None:
                result.correct = bool(check(out))
            del out
            once = _sample(fn, 1)
        except Exception as exc:  # report it, keep measuring the others
            result.error = exc
            runs.append(None)
            continue
        number = 1 if once >= min_sample_s else \
            min(10_000, math.ceil(min_sample_s / max(once, 1e-7)))
        # A call long enough to be a sample on its own counts as the first.
        runs.append(_Run(fn, number, first, [once], once) if number == 1 else
                    _Run(fn, number, first, []))

    def wants_more(run: _Run | None) -> bool:
        return run is not None and len(run.samples) < repeats and (
            len(run.samples) < 2 or run.spent < budget_s)

    while any(wants_more(run) for run in runs):
        for run in runs:
            if wants_more(run):
                t = _sample(run.fn, run.number)
                run.samples.append(t)
                run.spent += t * run.number
    for run, result in zip(runs, results):
        if run is not None:
            result.timing = Timing(statistics.median(run.samples), tuple(run.samples),
                                   run.number, run.first)
    return results


def to_numpy(x: Any) -> np.ndarray:
    """A peer's output as a numpy array (jax, numpy, torch or cupy)."""
    if hasattr(x, "get") and type(x).__module__.startswith("cupy"):
        return x.get()
    if type(x).__module__.startswith("torch"):
        return x.cpu().numpy()
    return np.asarray(x)


# ---------------------------------------------------------------- problems


@dataclasses.dataclass(frozen=True)
class Problem:
    """A searchsorted problem: m needles in n sorted keys."""

    n: int
    m: int
    dtype: str = "float32"
    sorted_v: bool = True

    @property
    def label(self) -> str:
        order = "sorted" if self.sorted_v else "unsorted"
        return f"N={fmt_count(self.n)} M={fmt_count(self.m)} {self.dtype} {order}"

    @property
    def nbytes(self) -> int:
        """Bytes of a and v and of m int32 indices: what a search reads and
        writes when it must read all of a (see :attr:`reads_all`)."""
        return (self.n + self.m) * np.dtype(self.dtype).itemsize + 4 * self.m

    @property
    def reads_all(self) -> bool:
        """Whether any search must read all of a and v: when N <= M.

        The needles spread over a's range (:func:`make_arrays`), so with at
        least one needle per key every cache line of a holds some needle's
        insertion point. With N > M a search may skip most of a (a binary
        search reads about M * log2(N) keys), and nbytes / time would be no
        bandwidth: 1e7 keys and 1e3 needles read "10x faster than a copy".
        """
        return self.n <= self.m


def _sorted_uniform(rng: np.random.Generator, k: int) -> np.ndarray:
    """k sorted uniform samples in [0, 1), in O(k) (order statistics, no sort)."""
    gaps = rng.standard_exponential(k + 1)
    return (np.cumsum(gaps)[:-1] / gaps.sum()).clip(0.0, np.nextafter(1.0, 0.0))


def make_arrays(problem: Problem, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sorted keys `a` and needles `v` (sorted when the problem says so).

    Both are drawn from the same range (needles a little wider, so some fall
    off each end); integer keys have duplicates and gaps. `problem.dtype` is
    any float or integer dtype.
    """
    rng = np.random.default_rng(seed)
    dt = np.dtype(problem.dtype)
    a = _sorted_uniform(rng, problem.n)
    v = _sorted_uniform(rng, problem.m) if problem.sorted_v else rng.random(problem.m)
    if np.issubdtype(dt, np.floating):
        return a.astype(dt), (v * 1.02 - 0.01).astype(dt)
    span = min(2 * max(problem.n, problem.m), int(np.iinfo(dt).max) // 2)
    # Keys in [1, span], needles in [0, span + 1]: no negatives for unsigned types.
    return (np.floor(a * span) + 1).astype(dt), np.floor(v * (span + 2)).astype(dt)


# ---------------------------------------------------------------- peers


@dataclasses.dataclass(frozen=True)
class Inputs:
    """A problem's arrays on the host (numpy) and on the default device (jax)."""

    a: np.ndarray
    v: np.ndarray
    ja: jax.Array
    jv: jax.Array


@dataclasses.dataclass(frozen=True)
class Impl:
    """One thing to time on each problem.

    Attributes:
      name: shown in tables and plots.
      group: "jaxsearch", "jnp", "numpy", "torch", "cupy" or "floor"; ratios
        are taken against the best of each peer group.
      build: makes the zero-argument call to time from a problem's inputs.
      applies: whether the impl makes sense for a problem (e.g. sorted only).
      needs: what `applies` asks of a problem, in words: the reason recorded
        for the problems it does not apply to.
      cost: estimated (seconds per call on a 2-core CPU, bytes of temporaries),
        to skip peers that would not fit in the time or memory allowed.
      checked: whether its output is compared with numpy's.
    """

    name: str
    group: str
    build: Callable[[Inputs], Callable[[], Any]]
    applies: Callable[[Problem], bool] = lambda p: True
    needs: str = ""
    cost: Callable[[int, int], tuple[float, float]] | None = None
    checked: bool = True


def _log2(x: int) -> float:
    return math.log2(max(x, 2))


def jaxsearch_impl(sorted_v: bool | None) -> Impl:
    """jaxsearch.searchsorted under jit with the given `sorted_v`."""
    name = "jaxsearch" if sorted_v is None else f"jaxsearch sorted_v={sorted_v}"

    def build(x: Inputs) -> Callable[[], Any]:
        f = jax.jit(functools.partial(jaxsearch.searchsorted, sorted_v=sorted_v))
        return lambda: f(x.ja, x.jv)

    if sorted_v:
        return Impl(name, "jaxsearch", build, applies=lambda p: p.sorted_v,
                    needs="sorted needles")
    return Impl(name, "jaxsearch", build)


# Rough per-element costs of jnp's methods on this kind of 2-core CPU,
# measured once; they only decide what to skip on a CPU backend, never what
# is reported. (Accelerators are far faster: only memory limits them.)
_JNP_COSTS: dict[str, Callable[[int, int], tuple[float, float]]] = {
    "scan": lambda n, m: (6e-9 * m * _log2(n + 1), 0.0),
    "scan_unrolled": lambda n, m: (1.3e-8 * m * _log2(n + 1), 0.0),
    "sort": lambda n, m: (1.8e-8 * (n + m) * _log2(n + m), 16.0 * (n + m)),
    "compare_all": lambda n, m: (1.5e-9 * n * m, float(n * m)),
}


def jnp_impl(method: str) -> Impl:
    """jnp.searchsorted under jit with one of its methods."""

    def build(x: Inputs) -> Callable[[], Any]:
        f = jax.jit(functools.partial(jnp.searchsorted, method=method))
        return lambda: f(x.ja, x.jv)

    return Impl(f"jnp {method}", "jnp", build, cost=_JNP_COSTS[method])


def call_under_config(config: _tuning.CpuConfig, ja: jax.Array, jv: jax.Array,
                      **kwargs: Any) -> Callable[[], Any]:
    """``jaxsearch.searchsorted(ja, jv, **kwargs)`` under jit with `config` in force.

    Compiled ahead of time inside :func:`_tuning.use_cpu_config`, so that calls
    made later, interleaved with calls compiled under other configs, still run
    with it.
    """
    with _tuning.use_cpu_config(config):
        compiled = jax.jit(functools.partial(jaxsearch.searchsorted, **kwargs)).lower(
            ja, jv).compile()
    return lambda: compiled(ja, jv)


def numpy_impl() -> Impl:
    """numpy.searchsorted on host arrays."""
    return Impl("numpy", "numpy", lambda x: functools.partial(np.searchsorted, x.a, x.v))


def numpy_on_jax_buffers_impl() -> Impl:
    """numpy.searchsorted reading the jax arrays' own buffers (zero-copy on CPU).

    numpy allocates its large arrays on 2 MiB pages where the OS allows, XLA
    on 4 KiB pages; a binary search over a large haystack is bound by TLB
    misses, so the same search is faster over numpy's copy than over XLA's.
    This peer reads the very bytes jaxsearch reads. Its group is its own:
    ratios against "numpy" stay against numpy's own arrays.
    """
    return Impl("numpy on jax buffers", "numpy on jax buffers",
                lambda x: functools.partial(np.searchsorted, np.asarray(x.ja), np.asarray(x.jv)),
                applies=lambda p: jax.default_backend() == "cpu", needs="the CPU backend")


def torch_impl() -> Impl | None:
    """torch.searchsorted (on CUDA when jax runs on a GPU), if torch imports."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return None
    cuda = jax.default_backend() == "gpu" and torch.cuda.is_available()

    def build(x: Inputs) -> Callable[[], Any]:
        ta, tv = torch.from_numpy(x.a), torch.from_numpy(x.v)
        if not cuda:
            return lambda: torch.searchsorted(ta, tv, out_int32=True)
        ta, tv = ta.cuda(), tv.cuda()

        def call() -> Any:
            out = torch.searchsorted(ta, tv, out_int32=True)
            torch.cuda.synchronize()
            return out

        return call

    return Impl("torch (cuda)" if cuda else "torch", "torch", build)


def cupy_impl() -> Impl | None:
    """cupy.searchsorted, if cupy imports and a CUDA device is there."""
    if jax.default_backend() != "gpu":
        return None
    try:
        cp = importlib.import_module("cupy")
    except ImportError:
        return None

    def build(x: Inputs) -> Callable[[], Any]:
        ca, cv = cp.asarray(x.a), cp.asarray(x.v)

        def call() -> Any:
            out = cp.searchsorted(ca, cv)
            cp.cuda.Device().synchronize()
            return out

        return call

    return Impl("cupy", "cupy", build)


COPY_NAME = "copy floor"
JAX_FLOOR_NAME = "jax floor"


def copy_impl() -> Impl:
    """A plain copy of the bytes of `a` and `v`: the memory floor.

    On CPU a numpy copy into a fresh buffer (as a search's fresh output); on an
    accelerator one jitted elementwise pass (read and write) on the device.
    """

    def build(x: Inputs) -> Callable[[], Any]:
        src = np.concatenate([x.a.view(np.uint8), x.v.view(np.uint8)])
        if jax.default_backend() == "cpu":
            return src.copy
        f, dsrc = jax.jit(jnp.bitwise_not), jax.device_put(src)
        return lambda: f(dsrc)

    return Impl(COPY_NAME, "floor", build, checked=False)


def jax_floor_impl() -> Impl:
    """The floor through JAX: one fused jitted pass reading a and v, writing int32.

    ``(v > a).astype(int32)`` needs N == M. (``(v > a.sum())`` is no floor:
    XLA runs it several times slower.)
    """
    f = jax.jit(lambda a, v: (v > a).astype(jnp.int32))
    return Impl(JAX_FLOOR_NAME, "floor", lambda x: functools.partial(f, x.ja, x.jv),
                applies=lambda p: p.n == p.m, needs="N == M", checked=False)


def peer_impls() -> list[Impl]:
    """The full line-up: jaxsearch variants, every jnp method, numpy, torch and
    cupy where they import, and the floors."""
    impls = [jaxsearch_impl(None), jaxsearch_impl(True), jaxsearch_impl(False)]
    impls += [jnp_impl(m) for m in jaxsearch.JNP_METHODS]
    impls.append(numpy_impl())
    impls += [i for i in (torch_impl(), cupy_impl()) if i is not None]
    return impls + [copy_impl(), jax_floor_impl()]


# ---------------------------------------------------------------- running


NOT_APPLICABLE = "not applicable"  # how the skip reason of an impl that does not apply starts


@dataclasses.dataclass
class Result:
    """One impl on one problem: its timing, or why it was skipped (or not
    applicable: see :attr:`applies`)."""

    problem: Problem
    impl: str
    group: str
    timing: Timing | None = None
    skipped: str | None = None
    correct: bool | None = None  # None: not checked

    @property
    def seconds(self) -> float | None:
        return None if self.timing is None else self.timing.median

    @property
    def applies(self) -> bool:
        """False for an impl that does not apply to the problem (never run)."""
        return not (self.skipped or "").startswith(NOT_APPLICABLE)


def _memory_bytes() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8e9


def needs_x64(dtypes: Iterable[str]) -> bool:
    """Whether any dtype needs jax_enable_x64 to exist in JAX."""
    return any(np.dtype(d).itemsize == 8 for d in dtypes)


def run_suite(problems: Sequence[Problem], impls: Sequence[Impl], *, repeats: int = 5,
              budget_s: float = 1.0, max_call_s: float = 2.0,
              progress: Progress | None = None) -> list[Result]:
    """Measure every impl on every problem that it applies to, side by side.

    Every impl gets a result on every problem, so that tables can say why a
    cell is empty: one that does not apply is recorded as skipped, "not
    applicable: needs ...". Peers whose estimated cost exceeds `max_call_s`
    per call, or a quarter of the memory, are skipped with the reason
    recorded. A peer that raises is recorded as skipped with the error, so one
    failure never loses a run.
    """
    if needs_x64(p.dtype for p in problems):
        jax.config.update("jax_enable_x64", True)
    results = []
    for problem in problems:
        if progress:
            progress.show(problem.label)
        a, v = make_arrays(problem)
        x = Inputs(a, v, jnp.asarray(a), jnp.asarray(v))
        expected = np.searchsorted(a, v)
        todo = [Result(problem, i.name, i.group, skipped=_skip_reason(i, problem, max_call_s))
                for i in impls]
        timed = [(i, r) for i, r in zip(impls, todo) if r.skipped is None]
        check = functools.partial(matches, expected)
        measured = measure_all([_build(i, x) for i, _ in timed], repeats=repeats,
                               budget_s=budget_s,
                               checks=[check if i.checked else None for i, _ in timed])
        for (_, result), m in zip(timed, measured):
            result.timing, result.correct = m.timing, m.correct
            if m.error is not None:
                result.skipped = f"error: {type(m.error).__name__}: {m.error}"[:200]
        results += todo
        if progress:
            progress.step()
    return results


def matches(expected: np.ndarray, out: Any) -> bool:
    """Whether a peer's output equals numpy's."""
    return bool(np.array_equal(to_numpy(out), expected))


def _build(impl: Impl, x: Inputs) -> Callable[[], Any]:
    """impl's call on x; if building it fails, a call that raises that error."""
    try:
        return impl.build(x)
    except Exception as exc:  # reported through measure_all like a failing call
        error = exc

        def fail() -> Any:
            raise error

        return fail


def _skip_reason(impl: Impl, problem: Problem, max_call_s: float) -> str | None:
    """Why `impl` should not run on `problem` here, or None."""
    if not impl.applies(problem):
        return f"{NOT_APPLICABLE}: needs {impl.needs}"
    est_s, est_bytes = impl.cost(problem.n, problem.m) if impl.cost else (0.0, 0.0)
    if est_s > max_call_s and jax.default_backend() == "cpu":
        return f"est. {est_s:.2g} s/call > {max_call_s:g} s"
    if est_bytes > _memory_bytes() / 4:
        return f"needs ~{est_bytes / 2**30:.1f} GiB"
    return None


# ---------------------------------------------------------------- ratios


PEER_GROUPS = ("numpy", "jnp", "torch", "cupy")
REFERENCES = (*PEER_GROUPS, "copy", "floor")  # the keys of problem_summary
_FLOOR_REFERENCES = {"copy": COPY_NAME, "floor": JAX_FLOOR_NAME}


def reference_members(results: Iterable[Result], ref: str) -> list[Result]:
    """The results that can stand as reference `ref` (one of REFERENCES)."""
    if ref in _FLOOR_REFERENCES:
        return [r for r in results if r.impl == _FLOOR_REFERENCES[ref]]
    return [r for r in results if r.group == ref]


def problem_summary(results: Sequence[Result]) -> dict[str, Result | None]:
    """The references for one problem's results: the fastest of each peer
    group, and the floors; None where none of them has a time."""
    refs = {}
    for ref in REFERENCES:
        timed = [r for r in reference_members(results, ref) if r.seconds is not None]
        refs[ref] = min(timed, key=lambda r: r.seconds) if timed else None
    return refs


def why_untimed(results: Sequence[Result], what: str) -> str:
    """Why none of `results` (standing for `what`) has a time, each one's reason."""
    return "; ".join(f"{r.impl}: {r.skipped}" for r in results if r.skipped) or \
        f"{what}: not run"


def group_by_problem(results: Sequence[Result]) -> dict[Problem, list[Result]]:
    """Results grouped per problem, in order of first appearance."""
    groups: dict[Problem, list[Result]] = {}
    for r in results:
        groups.setdefault(r.problem, []).append(r)
    return groups


def ratio(num: Result | None, den: Result | None) -> float | None:
    """num's time over den's time, or None if either is missing."""
    if num is None or den is None or num.seconds is None or den.seconds is None:
        return None
    return num.seconds / den.seconds


def bandwidth(result: Result) -> float | None:
    """Effective bandwidth in bytes/s: the bytes a search must move, over its time.

    None without a time, and where a search need not read all of a (see
    :attr:`Problem.reads_all`). For the copy floor, the bytes it copies, read
    and written: it always moves all of them.
    """
    if result.seconds is None:
        return None
    p = result.problem
    if result.impl == COPY_NAME:
        return 2 * (p.n + p.m) * np.dtype(p.dtype).itemsize / result.seconds
    return p.nbytes / result.seconds if p.reads_all else None


def why_no_bandwidth(result: Result) -> str:
    """Why :func:`bandwidth` gives None for `result`."""
    if result.seconds is None:
        return why_untimed([result], result.impl)
    return "N > M: a search need not read all of a, so bytes / time is no bandwidth"


# ---------------------------------------------------------------- formatting


def fmt_count(n: int) -> str:
    """1000 -> "1e3", 25000 -> "2.5e4", 123 -> "123"."""
    if n < 1000:
        return str(n)
    exp = int(math.floor(math.log10(n)))
    mant = n / 10**exp
    return f"{mant:g}e{exp}" if abs(mant - round(mant, 1)) < 1e-9 else str(n)


def fmt_ms(seconds: float | None) -> str:
    """Seconds as milliseconds with about three significant digits."""
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    for limit, digits in ((100, 0), (10, 1), (1, 2), (0.1, 3)):
        if ms >= limit:
            return f"{ms:.{digits}f}"
    return f"{ms:.4f}"


def fmt_x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x" if x < 10 else f"{x:.1f}x"


def fmt_ok(result: Result) -> str:
    return {None: "-", True: "yes", False: "NO"}[result.correct]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
                 align: str | None = None) -> str:
    """A plain-text table. `align` has one "l" or "r" per column; by default
    the first column is left-aligned and the others right-aligned."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    align = align or "l" + "r" * (len(widths) - 1)

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) if a == "l" else str(c).rjust(w)
                         for c, w, a in zip(cells, widths, align)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


# ---------------------------------------------------------------- legends

HEADLINE = "jaxsearch"  # the drop-in call (sorted_v=None) that tables lead with

# What the tables, the JSON and the plot mean by their words, said once for all.
PROBLEM_TEXT = ("N = len(a) sorted keys, M = len(v) needles, the dtype of both, and whether v "
                'is sorted too; every search asks for side="left" (the default)')
MEDIAN_TEXT = ("median milliseconds per call, each call blocked on until its result is ready; "
               "jax calls under jax.jit, compiled beforehand")
CORRECT_TEXT = ('the output equals numpy.searchsorted(a, v, side="left") element for element '
                "(floors are not checked)")
COPY_TEXT = ("a plain numpy copy of the bytes of a and v into a fresh buffer (on an accelerator, "
             "one jitted elementwise pass over them): the memory floor, what merely moving the "
             "input costs")
JAX_FLOOR_TEXT = ("one jitted fused pass (v > a).astype(int32), reading a and v and writing M "
                  "int32: the least any search through JAX can cost (it needs N == M)")
BANDWIDTH_TEXT = ("effective bandwidth: the bytes of a and v and of M int32 indices over the "
                  "median time. Given only where N <= M: there every cache line of a holds some "
                  "needle's insertion point, so any search must read all of a and v; with N > M "
                  "a search may skip most of a (a binary search reads about M*log2(N) keys), and "
                  "bytes / time would be no bandwidth")
COPY_SHARE_TEXT = ("that bandwidth over the copy floor's (which counts the bytes it reads and "
                   "writes): 100% moves a search's bytes as fast as a plain copy moves its own")
MARKER_TEXT = ('"-[k]" marks an empty cell; "[k] reason" under its table says why.')
_GROUP_TEXT = {"numpy": "numpy.searchsorted's",
               "jnp": "the fastest jnp.searchsorted method's",
               "torch": "torch.searchsorted's", "cupy": "cupy.searchsorted's"}
_DESCRIPTIONS = {
    HEADLINE: "jaxsearch.searchsorted(a, v), the drop-in call (sorted_v=None: it merges, "
              "checking the needles' order as it goes, and binary-searches a part of them "
              "found out of order)",
    "jaxsearch sorted_v=True": "jaxsearch.searchsorted told that v is sorted (sorted_v=True)",
    "jaxsearch sorted_v=False": "jaxsearch.searchsorted told that v may be unsorted "
                                "(sorted_v=False): a binary search per needle",
    "numpy": "numpy.searchsorted on host copies of a and v",
    "numpy on jax buffers": "numpy.searchsorted reading the jax arrays' own buffers",
    "torch": "torch.searchsorted", "torch (cuda)": "torch.searchsorted on the GPU",
    "cupy": "cupy.searchsorted",
    COPY_NAME: COPY_TEXT, JAX_FLOOR_NAME: JAX_FLOOR_TEXT,
}


def describe(impl: str) -> str:
    """What an impl named in the tables is, for their legends."""
    if impl.startswith("jnp "):
        return f"jnp.searchsorted(a, v, method={impl.removeprefix('jnp ')!r})"
    return _DESCRIPTIONS.get(impl, "an implementation of this run")


def format_legend(entries: Sequence[tuple[str, str]], width: int = 100) -> str:
    """Terms and their meanings, the meanings wrapped and aligned after the terms."""
    w = max(len(term) for term, _ in entries)
    return "\n".join(textwrap.fill(text, width, initial_indent=f"  {term:<{w}}  ",
                                   subsequent_indent=" " * (w + 4)) for term, text in entries)


class Footnotes:
    """Why cells of a table are empty: each reason gets a marker, "-[1]" in
    its cells and "[1] reason" under the table."""

    def __init__(self) -> None:
        self.markers: dict[str, str] = {}

    def cell(self, value: Any, fmt: Callable[[Any], str], why: str) -> str:
        """`fmt(value)`, or where `value` is None the marker of `why`."""
        if value is not None:
            return fmt(value)
        return "-" + self.markers.setdefault(why, f"[{len(self.markers) + 1}]")

    def __str__(self) -> str:
        return "\n".join(f"{marker} {why}" for why, marker in self.markers.items())


def _explained(title: str, table: str, notes: Footnotes, legend: str) -> str:
    """A table with its title above, and its footnotes and legend below."""
    return "\n".join(part for part in (title, table, str(notes), legend) if part)


def main_job_table(results: Sequence[Result]) -> str:
    """One block per problem: each impl's time and its speed-ups, the reasons
    for its empty cells under it; then one legend for all blocks.

    Impls that do not apply to a problem have no row in its block.
    """
    blocks = []
    for problem, rs in group_by_problem(results).items():
        refs = problem_summary(rs)
        notes = Footnotes()
        rows = []
        for r in (r for r in rs if r.applies):
            if r.seconds is None:
                rows.append([r.impl] + [""] * 5 + [f"skipped: {r.skipped}"])
            elif r.group == "floor":
                rows.append([r.impl, fmt_ms(r.seconds)] + [""] * 4
                            + ["a reference, not a search"])
            else:
                rows.append([r.impl, fmt_ms(r.seconds)] + [
                    notes.cell(ratio(refs[g], r), fmt_x,
                               why_untimed(reference_members(rs, g), g)) for g in ("numpy", "jnp")
                ] + [notes.cell(ratio(r, refs["floor"]), fmt_x,
                                why_untimed(reference_members(rs, "floor"), JAX_FLOOR_NAME)),
                     fmt_ok(r), ""])
        best_jnp = refs["jnp"].impl if refs["jnp"] else "none"
        table = format_table(["implementation", "median ms", "speed-up vs numpy", "vs best jnp",
                              "time / jax floor", "correct", "note"], rows, align="lrrrrrl")
        blocks.append(_explained(f"{problem.label}   (best jnp: {best_jnp})", table, notes, ""))
    names = dict.fromkeys(r.impl for r in results if r.applies)
    absent = dict.fromkeys(f"{r.impl} ({(r.skipped or '').removeprefix(NOT_APPLICABLE + ': ')})"
                           for r in results if not r.applies)
    legend = "\n".join([
        "Legend, for every block above:",
        format_legend([
            ("problem", PROBLEM_TEXT), ("implementation", "what the row times (see Rows)"),
            ("median ms", MEDIAN_TEXT),
            ("speed-up vs numpy", f"{_GROUP_TEXT['numpy']} median time / the row's: above 1x, "
                                  "the row is faster"),
            ("vs best jnp", f"{_GROUP_TEXT['jnp']} median time / the row's (the method is named "
                            "above the block)"),
            ("time / jax floor", "the row's median time / the jax floor's: 1x is as fast as any "
                                 "search through JAX can be (below 1x only where fixed per-call "
                                 "costs dominate: small problems)"),
            ("correct", CORRECT_TEXT), ("note", "why a row has no numbers")]),
        "Rows:",
        format_legend([(n, describe(n)) for n in names]),
        *([textwrap.fill("A block has no row for what does not apply to its problem: "
                         + ", ".join(absent) + ".", 100)] if absent else []),
        MARKER_TEXT])
    return "\n\n".join(blocks + [legend])


def short_name(impl: str) -> str:
    """A column-sized name: "jaxsearch sorted_v=True" -> "sorted_v=True", "jnp sort" -> "sort"."""
    return impl if impl == HEADLINE else impl.removeprefix("jaxsearch ").removeprefix("jnp ")


def _vs(group: str) -> str:
    """The header of the speed-up column over a peer group."""
    return f"vs {'best jnp' if group == 'jnp' else group}"


def bench_table(results: Sequence[Result]) -> str:
    """Two tables, one row per problem: every impl's median ms; then the
    headline's speed-ups over each peer group and its effective bandwidth.
    Under each, the reasons for its empty cells and a legend of its columns.
    Every impl that applies to some problem has a column, even one that never
    ran: its cells say why."""
    names = list(dict.fromkeys(r.impl for r in results if r.applies))
    groups = [g for g in PEER_GROUPS if any(r.group == g and r.applies for r in results)]
    time_notes, ratio_notes = Footnotes(), Footnotes()
    times, ratios = [], []
    for problem, rs in group_by_problem(results).items():
        by_name = {r.impl: r for r in rs}
        refs = problem_summary(rs)
        # An impl missing from a problem (a partial saved run) stands as untimed.
        times.append([problem.label] + [
            time_notes.cell(r.seconds, fmt_ms, r.skipped or "not run")
            for r in (by_name.get(n) or Result(problem, n, "") for n in names)])
        head = by_name.get(HEADLINE) or Result(problem, HEADLINE, "jaxsearch")
        bw = bandwidth(head)
        copy_bw = bandwidth(refs["copy"]) if refs["copy"] else None
        share = bw / copy_bw if bw is not None and copy_bw is not None else None
        ratios.append([problem.label] + [
            ratio_notes.cell(ratio(refs[g], head), fmt_x, why_untimed([head], HEADLINE)
                             if head.seconds is None
                             else why_untimed(reference_members(rs, g), g))
            for g in groups] + [
            ratio_notes.cell(bw, lambda x: f"{x / 1e9:.2f}", why_no_bandwidth(head)),
            ratio_notes.cell(share, lambda x: f"{100 * x:.0f}%", why_no_bandwidth(head)
                             if bw is None else why_untimed(reference_members(rs, "copy"),
                                                            COPY_NAME)),
            "yes" if all(r.correct is not False for r in rs) else "NO"])
    time_legend = format_legend(
        [("problem", PROBLEM_TEXT), ("cells", MEDIAN_TEXT)]
        + [(short_name(n), describe(n)) for n in names])
    ratio_legend = format_legend(
        [("problem", PROBLEM_TEXT)]
        + [(_vs(g), f"{_GROUP_TEXT[g]} median time / {HEADLINE}'s: above 1x, {HEADLINE} is "
                    "faster") for g in groups]
        + [("GB/s", f"{HEADLINE}'s {BANDWIDTH_TEXT}"), ("% of copy", COPY_SHARE_TEXT),
           ("copy floor", COPY_TEXT),
           ("all correct", f"every implementation timed on the problem passed: {CORRECT_TEXT}")])
    return "\n\n".join([
        _explained("Median ms per call, by implementation", format_table(
            ["problem"] + [short_name(n) for n in names], times), time_notes,
            f"Legend:\n{time_legend}\n{MARKER_TEXT}"),
        _explained(f"{HEADLINE} (the drop-in call) against the fastest of each peer, and its "
                   "effective bandwidth", format_table(
                       ["problem"] + [_vs(g) for g in groups]
                       + ["GB/s", "% of copy", "all correct"], ratios), ratio_notes,
                   f"Legend:\n{ratio_legend}\n{MARKER_TEXT}")])


# ---------------------------------------------------------------- JSON and plot


JSON_LEGEND = {
    "problem": PROBLEM_TEXT,
    "median_s": "median seconds per call, each call blocked on until its result is ready",
    "skipped": "why the row has no time: not applicable, estimated too slow or too big, "
               "or the error it raised",
    "correct": CORRECT_TEXT + "; null: not checked",
    "speedup_vs": "per peer group, the fastest member's median time / this row's",
    "time_over_jax_floor": "this row's median time / the jax floor's: " + JAX_FLOOR_TEXT,
    "bandwidth_GBps": BANDWIDTH_TEXT + "; null where not given, or without a time",
    "fraction_of_copy_bandwidth": COPY_SHARE_TEXT + "; the copy floor is " + COPY_TEXT,
}


def results_json(results: Sequence[Result], meta: dict[str, Any]) -> dict[str, Any]:
    """Results with their ratios against each peer group, and a legend of the
    fields, ready for json.dump."""
    rows = []
    for rs in group_by_problem(results).values():
        refs = problem_summary(rs)
        for r in rs:
            bw, copy_bw = bandwidth(r), refs["copy"] and bandwidth(refs["copy"])
            rows.append({
                "problem": dataclasses.asdict(r.problem), "impl": r.impl, "group": r.group,
                "median_s": r.seconds, "skipped": r.skipped, "correct": r.correct,
                "samples_s": list(r.timing.samples) if r.timing else None,
                "calls_per_sample": r.timing.number if r.timing else None,
                "first_call_s": r.timing.first if r.timing else None,
                "speedup_vs": {g: ratio(refs[g], r) for g in PEER_GROUPS},
                "time_over_jax_floor": ratio(r, refs["floor"]),
                "bandwidth_GBps": bw and bw / 1e9,
                "fraction_of_copy_bandwidth": bw / copy_bw if bw and copy_bw else None,
            })
    return {"meta": meta, "legend": JSON_LEGEND, "results": rows}


def _plot_lines(ax: Any, points: dict[str, dict[float, float | None]],
                styles: dict[str, dict]) -> None:
    """One line per impl over every x that any impl has, NaN (a break in the
    line) where that impl has no value: skipped, failed or not applicable."""
    xs = sorted({x for pts in points.values() for x in pts})
    for name, style in styles.items():
        pts = points.get(name, {})
        ys = [math.nan if (y := pts.get(x)) is None else y for x in xs]
        if not all(math.isnan(y) for y in ys):
            ax.plot(xs, ys, label=name, **style)


def _plot_bandwidth(ax: Any, rs: Sequence[Result], styles: dict[str, dict], title: str) -> None:
    points: dict[str, dict[float, float | None]] = {}
    for r in rs:
        bw = bandwidth(r)
        points.setdefault(r.impl, {})[r.problem.n] = None if bw is None else bw / 1e9
    _plot_lines(ax, points, styles)
    ax.set(xscale="log", yscale="log", xlabel="N = M (elements)",
           ylabel="effective bandwidth, GB/s (higher is better)", title=title)


def _speedups(results: Sequence[Result]) -> dict[Problem, dict[str, float]]:
    """Each problem's speed-ups over numpy, by impl (floors excluded)."""
    out = {}
    for problem, rs in group_by_problem(results).items():
        ref = problem_summary(rs)["numpy"]
        out[problem] = {r.impl: ratio(ref, r) for r in rs
                        if r.group != "floor" and ratio(ref, r) is not None}
    return out


def _plot_skew(ax: Any, rs: Sequence[Result], styles: dict[str, dict], size: int) -> None:
    speedups = _speedups(rs)
    _plot_lines(ax, {name: {p.n / p.m: s.get(name) for p, s in speedups.items()}
                     for name in styles}, styles)
    ax.axhline(1.0, color="grey", linewidth=1)
    ax.set(xscale="log", yscale="log", xlabel="N / M (keys per needle)",
           ylabel="speed-up over numpy.searchsorted",
           title=f"float32, sorted needles, max(N, M) = {fmt_count(size)}")


def _plot_dtypes(ax: Any, rs: Sequence[Result], styles: dict[str, dict], size: int) -> None:
    speedups = {p.dtype: s for p, s in _speedups(rs).items()}
    dtypes = sorted(speedups)
    bars = [n for n in styles if n != "numpy" and any(n in s for s in speedups.values())]
    width = 0.8 / max(len(bars), 1)
    for i, name in enumerate(bars):
        ax.bar(np.arange(len(dtypes)) + i * width, [speedups[d].get(name, 0.0) for d in dtypes],
               width, label=name, color=styles[name]["color"])
    ax.axhline(1.0, color="grey", linewidth=1)
    ax.set_xticks(np.arange(len(dtypes)) + 0.4 - width / 2, dtypes)
    ax.set(yscale="log", ylabel="speed-up over numpy.searchsorted",
           title=f"sorted needles, N = M = {fmt_count(size)}, by dtype")


def results_from_json(data: dict[str, Any]) -> list[Result]:
    """Rebuild results from :func:`results_json`'s output (to re-plot a saved run)."""
    out = []
    for row in data["results"]:
        timing = None if row["median_s"] is None else Timing(
            row["median_s"], tuple(row["samples_s"]), row["calls_per_sample"],
            row["first_call_s"])
        out.append(Result(Problem(**row["problem"]), row["impl"], row["group"], timing,
                          row["skipped"], row["correct"]))
    return out


PLOT_CAPTION = (  # one paragraph each
    f"GB/s: {BANDWIDTH_TEXT}.",
    f"Copy floor: {COPY_TEXT}. Jax floor: {JAX_FLOOR_TEXT}.",
    "Speed-up: numpy.searchsorted's median time / the implementation's. Every search asks for "
    'side="left". A line breaks where its implementation was skipped, failed or does not '
    "apply; the JSON says why.")


def plot_results(results: Sequence[Result], path: Path) -> Path:
    """Write a PNG: throughput against size per impl, skews, and dtypes.

    Panels (those with data): effective bandwidth against N = M for sorted and
    for unsorted float32 needles, with the copy and JAX floors; speed-up over
    numpy against the skew N/M; speed-up over numpy per dtype at the largest
    balanced size. One legend for all, and a caption saying what the words
    mean. A line breaks where its impl has no point.

    Raises:
      ImportError: matplotlib is missing (the `bench` extra).
    """
    import matplotlib  # noqa: PLC0415  (optional dependency, imported lazily)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    timed = [r for r in results if r.seconds is not None]
    names = list(dict.fromkeys(r.impl for r in timed))
    styles = {n: dict(color=plt.cm.tab10(i % 10), marker="os^vD<>ph*"[i % 10])
              for i, n in enumerate(n for n in names if n not in (COPY_NAME, JAX_FLOOR_NAME))}
    styles |= {COPY_NAME: dict(color="black", linestyle="--"),
               JAX_FLOOR_NAME: dict(color="black", linestyle=":")}
    styles = {n: styles[n] for n in names}

    # Lines run over all results, so that they break where a point is missing.
    balanced = [r for r in results
                if r.problem.n == r.problem.m and r.problem.dtype == "float32"]
    panels: list[Callable[[Any], None]] = [
        functools.partial(_plot_bandwidth, rs=rs, styles=styles,
                          title=f"float32, {order} needles, N = M")
        for order, rs in (("sorted", [r for r in balanced if r.problem.sorted_v]),
                          ("unsorted", [r for r in balanced if not r.problem.sorted_v])) if rs]
    skewed = [r for r in results if r.problem.sorted_v and r.problem.dtype == "float32"]
    skew_sizes = {max(r.problem.n, r.problem.m) for r in skewed if r.problem.n != r.problem.m}
    if skew_sizes:
        size = max(skew_sizes)
        panels.append(functools.partial(
            _plot_skew, rs=[r for r in skewed if max(r.problem.n, r.problem.m) == size],
            styles=styles, size=size))
    sorted_bal = [r for r in timed if r.problem.sorted_v and r.problem.n == r.problem.m]
    if len({r.problem.dtype for r in sorted_bal}) > 1:
        size = max(r.problem.n for r in sorted_bal)
        panels.append(functools.partial(
            _plot_dtypes, rs=[r for r in sorted_bal if r.problem.n == size], styles=styles,
            size=size))

    cols = min(len(panels), 2)
    rows = -(-len(panels) // cols)
    caption = "\n".join(textwrap.fill(part, 100 * cols) for part in PLOT_CAPTION)
    # Inches under the panels: the legend's rows of up to 6 entries, then the caption.
    legend_h = 0.25 * -(-len(styles) // 6) + 0.1
    caption_h = 0.16 * (caption.count("\n") + 1) + 0.1
    height = 4.8 * rows + 0.5 + legend_h + caption_h
    fig, axes = plt.subplots(rows, cols, figsize=(7 * cols, height), squeeze=False)
    for draw, ax in zip(panels, axes.flat):
        draw(ax)
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    handles = {}
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=min(len(handles), 6),
               fontsize=9, frameon=False, bbox_to_anchor=(0.5, caption_h / height))
    fig.text(0.01, 0.01, caption, fontsize=8, va="bottom", ha="left")
    meta = machine_info()
    fig.suptitle(f"jaxsearch vs peers: {meta['backend']} ({meta['cpu_model']}, {meta['cores']} "
                 f"cores), jax {meta['jax']}; medians", fontsize=12)
    fig.tight_layout(rect=(0, (legend_h + caption_h) / height, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_json(data: dict[str, Any], path: Path) -> Path:
    """Write `data` as indented JSON (creating the folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


# ---------------------------------------------------------------- the two jobs


def main_job_problems(scale: float = 1.0) -> list[Problem]:
    """The main job's problems: balanced, both skews, unsorted, tiny."""
    def s(x: float) -> int:
        return max(1, round(x * scale))

    return [Problem(s(1e7), s(1e7)), Problem(s(1e7), s(1e3)), Problem(s(1e3), s(1e7)),
            Problem(s(1e6), s(1e6), sorted_v=False), Problem(s(1e4), s(1e4))]


def main_job(*, scale: float = 1.0, repeats: int = 5, budget_s: float = 1.0,
             max_call_s: float = 2.0) -> tuple[str, list[Result]]:
    """Time jaxsearch against jnp, numpy and the floors on a few problems.

    Returns:
      (table, results).
    """
    problems = main_job_problems(scale)
    impls = [jaxsearch_impl(True), jaxsearch_impl(None), jaxsearch_impl(False),
             jnp_impl("scan"), jnp_impl("sort"), jnp_impl("compare_all"), numpy_impl(),
             copy_impl(), jax_floor_impl()]
    # sorted_v=False is for unsorted needles: on sorted ones it says nothing new.
    impls[2] = dataclasses.replace(impls[2], applies=lambda p: not p.sorted_v,
                                   needs="unsorted needles")
    progress = Progress(len(problems), "jaxsearch")
    results = run_suite(problems, impls, repeats=repeats, budget_s=budget_s,
                        max_call_s=max_call_s, progress=progress)
    return main_job_table(results), results


@dataclasses.dataclass(frozen=True)
class BenchGrid:
    """What the full benchmark sweeps."""

    sizes: tuple[int, ...]  # N = M for the balanced problems
    dtypes: tuple[str, ...]
    skew_size: int  # max(N, M) of the skewed problems
    skew_ratios: tuple[float, ...]  # N / M
    repeats: int = 5
    budget_s: float = 1.0
    max_call_s: float = 30.0

    def problems(self) -> list[Problem]:
        """Balanced sizes x dtypes x sorted/unsorted, then skews (float32, sorted)."""
        out = [Problem(n, n, dt, s) for dt in self.dtypes for s in (True, False)
               for n in self.sizes]
        for r in self.skew_ratios:
            n, m = (self.skew_size, round(self.skew_size / r)) if r >= 1 else \
                (round(self.skew_size * r), self.skew_size)
            p = Problem(max(n, 1), max(m, 1))
            if p not in out:
                out.append(p)
        return out


SKEW_RATIOS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3, 1e4)
FULL_GRID = BenchGrid(sizes=tuple(10**k for k in range(3, 9)),
                      dtypes=("float32", "int32", "float64", "int64"),
                      skew_size=10**7, skew_ratios=SKEW_RATIOS)
QUICK_GRID = BenchGrid(sizes=tuple(10**k for k in range(3, 7)), dtypes=("float32", "int32"),
                       skew_size=10**6, skew_ratios=SKEW_RATIOS, repeats=5,
                       budget_s=0.25, max_call_s=1.0)


def fit_to_memory(grid: BenchGrid) -> BenchGrid:
    """Drop sizes whose arrays (keys, needles, copies, outputs) would not fit."""
    memory = _memory_bytes()
    width = max(np.dtype(d).itemsize for d in grid.dtypes)
    sizes = tuple(n for n in grid.sizes if 8 * n * width < memory / 2)
    return dataclasses.replace(grid, sizes=sizes)


def bench(grid: BenchGrid, output: Path) -> tuple[str, dict[str, Path]]:
    """Run the full benchmark over `grid`; write JSON and PNG into `output`.

    Returns:
      (table, {"json": path, "png": path}); "png" is missing when matplotlib
      is not installed (a message says so on stderr).
    """
    grid = fit_to_memory(grid)
    problems, impls = grid.problems(), peer_impls()
    progress = Progress(len(problems), "bench")
    results = run_suite(problems, impls, repeats=grid.repeats, budget_s=grid.budget_s,
                        max_call_s=grid.max_call_s, progress=progress)
    kind = _tuning.device_kind()
    meta = machine_info() | {"grid": dataclasses.asdict(grid)}
    paths = {"json": write_json(results_json(results, meta), output / f"bench_{kind}.json")}
    try:
        paths["png"] = plot_results(results, output / f"bench_{kind}.png")
    except ImportError:
        print("matplotlib is not installed, so no plot was written; install it with "
              "`pip install 'jaxsearch[bench]'` (or `pip install matplotlib`).",
              file=sys.stderr)
    return bench_table(results), paths
