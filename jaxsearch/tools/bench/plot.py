"""The full searchsorted benchmark's PNG: effective bandwidth against size,
speed-up against skew and by dtype, with one legend and a caption."""

from __future__ import annotations

import functools
import math
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .format import fmt_count, group_by_problem
from .peers import COPY_NAME, JAX_FLOOR_NAME, Problem
from .report import BANDWIDTH_TEXT, COPY_TEXT, JAX_FLOOR_TEXT
from .suite import Result, bandwidth, problem_summary, ratio
from .timing import machine_info


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

