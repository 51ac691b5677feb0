"""Running a searchsorted benchmark: every peer on every problem, side by side,
each checked against ``numpy.searchsorted``; then the ratios and effective
bandwidths that the tables, JSON and plots report.

A benchmark is a list of :class:`Problem` s crossed with a list of
:class:`Impl` s; :func:`run_suite` measures each pair and returns
:class:`Result` s.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax
import numpy as np

from .peers import COPY_NAME, JAX_FLOOR_NAME, Impl, Inputs, Problem, make_inputs
from .timing import Progress, Timing, matches, measure_all, too_slow

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


def memory_bytes() -> float:
    """This machine's memory in bytes (8 GB where the OS does not say)."""
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
        x = make_inputs(problem)
        expected = np.searchsorted(x.a, x.v)
        todo = [Result(problem, i.name, i.group, skipped=_skip_reason(i, problem, max_call_s))
                for i in impls]
        timed = [(i, r) for i, r in zip(impls, todo) if r.skipped is None]
        check = functools.partial(matches, expected)
        measured = measure_all([_build(i, x) for i, _ in timed], repeats=repeats,
                               budget_s=budget_s,
                               checks=[check if i.checked else None for i, _ in timed])
        for (_, result), m in zip(timed, measured):
            result.timing, result.correct, result.skipped = m.timing, m.correct, m.failure
        results += todo
        if progress:
            progress.step()
    return results


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
    if slow := too_slow(est_s, max_call_s):
        return slow
    if est_bytes > memory_bytes() / 4:
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

