"""The accuracy check of the resampling benchmark and of searchsorted_cumsum's
tests: indices against the float64 reference, and which differences its
contract allows (a needle within one float32 ulp of a running sum, or a
relative bound for float64, may go either way)."""

from __future__ import annotations

from typing import Any

import numpy as np


def reference(w: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The float64 reference ancestors, row by row."""
    return np.stack([np.minimum(np.searchsorted(np.cumsum(wr, dtype=np.float64), ur), len(wr) - 1)
                     for wr, ur in zip(w, u.astype(np.float64))])


def beyond_contract(prefix: np.ndarray, v: np.ndarray, out: np.ndarray, ref: np.ndarray,
                    tolerance: np.ndarray) -> int:
    """How many indices `out` differ from `ref` where the contract does not
    allow it: a difference is allowed only when every running sum between
    the two indices lies within `tolerance` of the needle.

    Args:
      prefix: the reference running sums (float64), shape (n,).
      v: the needles, shape (m,).
      out, ref: the indices to check and the reference's, shape (m,).
      tolerance: per running sum, how far a needle may be from it and still
        go either way (one float32 ulp, or a relative bound), shape (n,).
    """
    wrong = np.flatnonzero(out != ref)
    if wrong.size == 0:
        return 0
    lo = np.minimum(out[wrong], ref[wrong]).astype(np.int64)
    hi = np.maximum(out[wrong], ref[wrong]).astype(np.int64) - 1
    if lo.min() < 0 or hi.max() >= len(prefix):
        return int(wrong.size)  # an index out of range is always a violation
    x = v[wrong].astype(np.float64)
    # The running sums are sorted: the two ends of the range bound the rest.
    near = (np.abs(prefix[lo] - x) <= tolerance[lo]) & (np.abs(prefix[hi] - x) <= tolerance[hi])
    return int(np.count_nonzero(~near))


def float32_ulps(prefix: np.ndarray) -> np.ndarray:
    """One float32 ulp at each running sum, in float64."""
    return np.spacing(np.abs(prefix).astype(np.float32)).astype(np.float64)


def accuracy(w: np.ndarray, u: np.ndarray, out: Any, ref: np.ndarray) -> tuple[int, int]:
    """(largest index error, indices beyond the contract) over all filters."""
    out = np.asarray(out).astype(np.int64)
    beyond = 0
    for wr, ur, o, r in zip(w, u, out, ref):
        prefix = np.cumsum(wr, dtype=np.float64)
        beyond += beyond_contract(prefix, ur, o, r, float32_ulps(prefix))
    return int(np.max(np.abs(out - ref))), beyond
