"""What the command lines (``jaxsearch`` and its ``jaxsearch-autotune`` alias)
share: the name they were run by, a help format that shows each option's
default, and argument types for counts, ratios and dtypes as people type them."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..bench.format import fmt_count
from ..grids import G, Grids


def program_name() -> str:
    """The program as it was run: ``python -m jaxsearch`` (or another module
    of the package) under ``python -m``, else the script's name (``jaxsearch``,
    ``jaxsearch-autotune``), as usage lines should name it."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    if spec is not None and spec.name.partition(".")[0] == "jaxsearch":
        return "python -m " + spec.name.removesuffix(".__main__")
    return Path(sys.argv[0]).name or "jaxsearch"


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: ...)" to an option's help where it has a default
    value and its help does not already say what the default does; a flag's
    help says what it does instead."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_text = action.help or ""
        if "(default" in help_text or action.default is None or action.nargs == 0:
            return help_text
        return super()._get_help_string(action)


def parse(parser: argparse.ArgumentParser,
          argv: Sequence[str] | None = None) -> argparse.Namespace:
    """`argv` (default: ``sys.argv[1:]``) parsed by `parser`, with the command
    line as run in ``invocation``, for the records a command writes."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.invocation = " ".join([parser.prog, *map(shlex.quote, argv)])
    return args


def grid_default(grids: Grids[G], show: Callable[[G], str]) -> str:
    """The default of an option that replaces a field of the grids, `show(grid)`
    of each: "(default: the full grid's; with --quick: the quick grid's)", one
    value where they agree. Read from the grids, so that help and runs agree."""
    full, quick = show(grids.full), show(grids.quick)
    return f"(default: {full})" if full == quick else f"(default: {full}; with --quick: {quick})"


def show_number(x: float) -> str:
    """A count or ratio as people type it: 1e-4, 0.5, 100, 2.5e4."""
    if isinstance(x, int):
        return fmt_count(x)
    if 1e-2 < abs(x) < 1e3 or x == 0:
        return f"{x:g}"
    mantissa, exponent = f"{x:e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def show_list(values: Sequence[Any]) -> str:
    """Counts, ratios or dtypes as the options take them: "1e3,1e4", "float32,int32"."""
    return ",".join(str(v) if isinstance(v, str) else show_number(v) for v in values)


def parse_count(text: str) -> int:
    """An element count written as 1000, 1e6 or 2.5e5."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"not a positive whole count: {text!r}")
    return int(value)


def parse_counts(text: str) -> tuple[int, ...]:
    """A comma-separated list of counts: "1e3,1e4"."""
    return tuple(parse_count(t) for t in text.split(",") if t.strip())


def parse_ratios(text: str) -> tuple[float, ...]:
    """A comma-separated list of positive ratios: "1e-2,100"."""
    try:
        ratios = tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if any(r <= 0 for r in ratios):
        raise argparse.ArgumentTypeError(f"ratios must be positive: {text!r}")
    return ratios


def parse_dtypes(text: str) -> tuple[str, ...]:
    """A comma-separated list of numpy dtype names: "float32,int64"."""
    try:
        return tuple(np.dtype(t.strip()).name for t in text.split(",") if t.strip())
    except TypeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


