"""Argument types shared by the command lines (``python -m jaxsearch`` and
``python -m jaxsearch.autotune``): counts, ratios and dtypes as people type
them."""

from __future__ import annotations

import argparse

import numpy as np


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


