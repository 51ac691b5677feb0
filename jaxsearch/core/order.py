"""The needles' order, decided in one place: what a call's promise
(`sorted_v`) asks of the kernels.

The orders: "any" (binary search), "sorted" (the caller promised sorted
needles, and a sorted `a`: merge) and "check" (test them, then merge when
sorted). The CPU kernels take "check" themselves (each row of `a` is checked
once, each part of the needles while it is merged, in the extension); the
GPU binding tests the needles first (`gpu.by_order`).
"""

from __future__ import annotations

import numpy as np

ORDERS = ("any", "sorted", "check")
_ORDER_OF_PROMISE = {None: "check", True: "sorted", False: "any"}


def check_order_flag(name: str, flag: object) -> None:
    """TypeError unless `flag` (a sortedness promise) is True, False or None."""
    if flag is not None and not isinstance(flag, (bool, np.bool_)):
        raise TypeError(f"{name} must be True, False or None, got {flag!r}")


def order_of(name: str, sorted_v: bool | None) -> str:
    """The order a promise `sorted_v` (argument `name`) asks for: "check"
    for None, "sorted" for True, "any" for False; TypeError for anything
    else."""
    check_order_flag(name, sorted_v)
    return _ORDER_OF_PROMISE[None if sorted_v is None else bool(sorted_v)]

