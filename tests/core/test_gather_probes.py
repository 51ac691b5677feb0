"""jnp's probes in AVX2 gathers (cpu_ext/gather_probes.pxd): 4-byte keys, 64
needles at a time, in the x86-64-v3 build (where the CPU runs it; elsewhere
the same cases test the scalar lanes). They answer the binary search on any
`a` and the lower-bound search on a sorted one, so their answers must be
jnp's default method's, needle for needle: on the edges of each type (the
sign bit of uint32, int32's extremes, float32's NaN, infinities, signed zeros
and subnormals), on an `a` out of order, and for needle counts around the 64
of a group.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.cpu_calls import SIDES, cpu_search, like_jnp, seeded


def edge_values(rng: np.random.Generator, size: int, dtype: str) -> np.ndarray:
    """`size` values of `dtype`, a third of them the type's edges."""
    if dtype == "float32":
        tiny = np.finfo(np.float32).smallest_subnormal
        edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, tiny, -tiny, 3 * tiny,
                 np.finfo(np.float32).max, -np.finfo(np.float32).max, 1.0, -1.0]
        values = rng.uniform(-4, 4, size).astype(np.float32)
    else:
        info = np.iinfo(dtype)
        edges = [info.min, info.min + 1, info.max, info.max - 1, 0, 1, 2**31 - 1]
        if dtype == "uint32":
            edges += [2**31, 2**31 + 1, 2**32 - 2]
        else:
            edges += [-1, -(2**31) + 5]
        values = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
    picks = rng.random(size) < 1 / 3
    values[picks] = np.array(edges, dtype=dtype)[rng.integers(0, len(edges), picks.sum())]
    return values


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32"])
@pytest.mark.parametrize("n", [1, 3, 1000, 65_537])
def test_answers_as_jnp_on_any_a(dtype, n):
    rng = seeded("gathers", dtype, n)
    for a_sorted in (True, False):
        a = edge_values(rng, n, dtype)
        if a_sorted:  # NaN last, as jnp sorts
            a = np.concatenate([np.sort(a[~np.isnan(a)]), a[np.isnan(a)]]) \
                if dtype == "float32" else np.sort(a)
        for m in (65, 3000):
            v = edge_values(rng, m, dtype)
            for side in SIDES:
                want = like_jnp(a, v, side)
                # "any" and bisect: the binary search, or on a sorted `a`
                # the lower-bound search; "sorted": the lower-bound search.
                for order in ("any", "sorted") if a_sorted else ("any",):
                    # Two threads, several parts of needles each.
                    got = cpu_search(a, v, side, order, "bisect", 2, 64)
                    np.testing.assert_array_equal(
                        got, want, err_msg=f"{order=} {a_sorted=} {m=} {side=}")

