"""What every report is made of (the benchmarks, the autotuner, ``info``):
number formats, plain-text tables with their footnotes and legends, and
JSON files."""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

MEDIAN_TEXT = ("median milliseconds per call, each call blocked on until its result is ready; "
               "jax calls under jax.jit, compiled beforehand")
MARKER_TEXT = ('"-[k]" marks an empty cell; "[k] reason" under its table says why.')


def fmt_count(n: int) -> str:
    """1000 -> "1e3", 25000 -> "2.5e4", 123 -> "123"."""
    if n < 1000:
        return str(n)
    exp = int(math.floor(math.log10(n)))
    mant = n / 10**exp
    return f"{mant:g}e{exp}" if abs(mant - round(mant, 1)) < 1e-9 else str(n)


def batch_label(name: str, n: int, batch: int) -> str:
    """A problem's label: `name` and its size n, or, for `batch` > 1 problems
    under jax.vmap, "<name> <batch>x<n> vmap"."""
    size = fmt_count(n)
    return f"{name} {size}" if batch == 1 else f"{name} {batch}x{size} vmap"


def fmt_3(x: float) -> str:
    """A positive number with three significant digits and no exponent
    (1234 -> "1234", 1.2345 -> "1.23", 0.0012345 -> "0.00123"), so that a
    small value never prints as zero."""
    if x <= 0 or not math.isfinite(x):
        return f"{x:g}"
    return f"{x:.{max(0, 2 - math.floor(math.log10(x)))}f}"


def fmt_ms(seconds: float | None) -> str:
    """Seconds as milliseconds with three significant digits."""
    return "-" if seconds is None else fmt_3(seconds * 1e3)


def fmt_gbps(bytes_per_s: float) -> str:
    """Bytes per second as GB/s with three significant digits."""
    return fmt_3(bytes_per_s / 1e9)


def fmt_x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x" if x < 10 else f"{x:.1f}x"


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


def group_by_problem(results: Sequence[Any]) -> dict[Any, list[Any]]:
    """Results (anything with a ``problem``) grouped per problem, in order of
    first appearance."""
    groups: dict[Any, list[Any]] = {}
    for r in results:
        groups.setdefault(r.problem, []).append(r)
    return groups


def write_json(data: dict[str, Any], path: Path) -> Path:
    """Write `data` as indented JSON (creating the folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path

