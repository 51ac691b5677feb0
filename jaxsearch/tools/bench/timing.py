"""The timing harness that every benchmark and the autotuner share.

Everything that times something goes through :func:`measure_all` (warm-up,
then medians of repeated, blocked calls, interleaved across the callables
compared); :class:`Progress` reports how far a long run is, and
:func:`machine_info` records where it ran (:func:`save_run`, with the run).

Ratios, never absolute times, are what carry between runs: the machines are
shared and noisy, so every comparison is measured side by side in one run.
"""

from __future__ import annotations

import dataclasses
import datetime
import gc
import importlib
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ... import tuning
from ..._version import __version__
from ...core import cpu
from .format import write_json

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
        "cores": cpu.available_cores(),
        "backend": jax.default_backend(),
        "device_kind": device.device_kind,
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": importlib.import_module("jaxlib").__version__,
        "numpy": np.__version__,
        "jaxsearch": __version__,
    }


def save_run(rows: Callable[[dict[str, Any]], dict[str, Any]], family: str, grid: Any,
             output: Path, stem: str | None = None) -> Path:
    """Write a family's run into `output` as <stem>_<device kind>.json (stem:
    the family's name) and return its path: `rows(meta)`, the meta naming
    where it ran (:func:`machine_info`), the family and its grid."""
    meta = machine_info() | {"family": family, "grid": dataclasses.asdict(grid)}
    return write_json(rows(meta), output / f"{stem or family}_{tuning.device_kind()}.json")


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


def run_each(problems: Sequence[Any], run_one: Callable[[Any], Any],
             progress: Progress | None = None) -> list[Any]:
    """`run_one(problem)` for each problem in turn, each shown on `progress`
    (by its ``label``) while it runs and counted when done."""
    results = []
    for problem in problems:
        if progress:
            progress.show(problem.label)
        results.append(run_one(problem))
        if progress:
            progress.step()
    return results


# ---------------------------------------------------------------- timing


@dataclasses.dataclass(frozen=True)
class Timing:
    """Seconds per call: the median of the samples, and how they were taken."""

    median: float
    samples: tuple[float, ...]
    # None in a resampling run saved before these two were recorded.
    number: int | None  # calls averaged in each sample
    first: float | None  # the first call, compilation included


@dataclasses.dataclass
class Measurement:
    """One callable's timing, or the error it raised; and whether its output passed."""

    timing: Timing | None = None
    error: Exception | None = None
    correct: bool | None = None  # None: no check given

    @property
    def failure(self) -> str | None:
        """The error as a table's reason for an empty cell, or None."""
        return None if self.error is None else \
            f"error: {type(self.error).__name__}: {self.error}"[:200]


def too_slow(estimate_s: float, max_call_s: float) -> str | None:
    """Why a call estimated to take `estimate_s` is skipped, or None.

    Peers' estimates are for a 2-core CPU: on an accelerator none is skipped
    for time.
    """
    if estimate_s > max_call_s and jax.default_backend() == "cpu":
        return f"est. {estimate_s:.2g} s/call > {max_call_s:g} s"
    return None


@dataclasses.dataclass
class _Run:
    fn: Callable[[], Any]
    number: int
    first: float
    samples: list[float]
    spent: float = 0.0


def _sample(fn: Callable[[], Any], number: int,
            clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds per call over `number` back-to-back calls, each blocked on.

    Python's cyclic garbage collector is off while timing, as in ``timeit``:
    a full collection (44 ms measured just after importing jax) would land
    on whichever peer's sample crosses the allocation threshold.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        t0 = clock()
        for _ in range(number):
            jax.block_until_ready(fn())
        return (clock() - t0) / number
    finally:
        if enabled:
            gc.enable()


def measure_all(fns: Sequence[Callable[[], Any]], *, repeats: int = 5, budget_s: float = 1.0,
                min_sample_s: float = 2e-3,
                checks: Sequence[Callable[[Any], bool] | None] | None = None,
                clock: Callable[[], float] = time.perf_counter) -> list[Measurement]:
    """Time several zero-argument callables side by side.

    Each callable's first call compiles and warms up and is not counted; its
    output goes to the callable's entry in `checks`, if any. Calls shorter
    than `min_sample_s` are repeated within a sample so that clock and
    dispatch jitter stay small against it.
    Then the callables take one sample each in turn (interleaved, so any drift
    in the load of a shared machine hits all of them alike; each round starts
    one callable further on, so that none always follows the same) until each has
    `repeats` samples, or has spent `budget_s` with at least two (slow peers).
    Every call is blocked on (``jax.block_until_ready``), so asynchronous
    dispatch is timed to completion. A callable that raises is reported with
    its error and the others go on. `clock` reads the time: wall time by
    default; ``time.process_time`` counts this process's CPU time alone, on
    which other load of a shared machine weighs less (for single-threaded
    calls, whose CPU time is their time).
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
            once = _sample(fn, 1, clock)
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

    turn = 0
    while any(wants_more(run) for run in runs):
        # Each round starts one callable further on, so that none always
        # follows the same one: a sample's first call pays for the switch
        # from the program before it (jaxsearch's default call, N = 100,
        # M = 1e5 int32, right after numpy's v.max(): 1.35-1.44x its time
        # right after the promised call).
        for run in runs[turn:] + runs[:turn]:
            if wants_more(run):
                t = _sample(run.fn, run.number, clock)
                run.samples.append(t)
                run.spent += t * run.number
        turn = (turn + 1) % len(runs)
    for run, result in zip(runs, results):
        if run is not None:
            result.timing = Timing(statistics.median(run.samples), tuple(run.samples),
                                   run.number, run.first)
    return results


def timing_json(timing: Timing | None) -> dict[str, Any]:
    """A timing's fields for a row of a JSON report (each None without a timing)."""
    if timing is None:
        return dict.fromkeys(("median_s", "samples_s", "calls_per_sample", "first_call_s"))
    return {"median_s": timing.median, "samples_s": list(timing.samples),
            "calls_per_sample": timing.number, "first_call_s": timing.first}


def timing_from_json(row: dict[str, Any]) -> Timing | None:
    """The timing that :func:`timing_json` wrote into `row`, or None."""
    if row["median_s"] is None:
        return None
    return Timing(row["median_s"], tuple(row["samples_s"]), row.get("calls_per_sample"),
                  row.get("first_call_s"))


def to_numpy(x: Any) -> np.ndarray:
    """A peer's output as a numpy array (jax, numpy, torch or cupy)."""
    if hasattr(x, "get") and type(x).__module__.startswith("cupy"):
        return x.get()
    if type(x).__module__.startswith("torch"):
        return x.cpu().numpy()
    return np.asarray(x)


def matches(expected: np.ndarray, out: Any) -> bool:
    """Whether a peer's output equals numpy's."""
    return bool(np.array_equal(to_numpy(out), expected))
