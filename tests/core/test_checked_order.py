"""The default call (sorted_v=None) on needles that are almost sorted.

On CPU the merge checks each part's order in blocks before it merges, and
the runs kernel checks each needle as it fills its run; a part found out of
order goes to binary search. These cases put one needle out of place
everywhere a check could miss it: first, last, at a merge chain's start and
end, past the first check block, as a NaN inside, and as a non-NaN after the
NaN tail.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from helpers.cpu_calls import CPU_SEARCH
from helpers.keys import sort_keys

import jaxsearch
from jaxsearch.core import cpu

M = 3000  # several of the order check's 1024-needle blocks, six merge chunks


def broken_needles(rng: np.random.Generator, dtype: str) -> dict[str, np.ndarray]:
    """Sorted needles, each case with one defect."""
    base = sort_keys((rng.standard_normal(M) * 50).astype(dtype))
    chunk = M // 6  # the merge's chunks: one per interleaved chain

    def swapped(i: int, j: int) -> np.ndarray:
        v = base.copy()
        v[i], v[j] = base[j] + 1, base[i] - 1  # strictly out of order, not a tie
        return v

    cases = {
        "first pair": swapped(0, 1),
        "last pair": swapped(M - 2, M - 1),
        "across chunks": swapped(chunk - 1, chunk),
        "inside the last chunk, late": swapped(M - 40, M - 39),
        "past the first check block": swapped(1500, 1501),
        "one far needle": np.concatenate([base[:M // 2], base[-1:] + 5, base[M // 2 + 1:]]),
        "reversed": base[::-1].copy(),
    }
    if np.issubdtype(base.dtype, np.floating):
        nan_inside = base.copy()
        nan_inside[M // 3] = np.nan
        nan_first = base.copy()
        nan_first[0] = np.nan
        value_in_tail = base.copy()
        value_in_tail[-10:] = np.nan
        value_in_tail[-3] = 0.0
        cases |= {"NaN inside": nan_inside, "NaN first": nan_first,
                  "a value in the NaN tail": value_in_tail}
    return cases


@pytest.mark.parametrize("kernel", cpu.KERNELS)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("n", [1, 40, 1000, 100_000])
@pytest.mark.parametrize("threads, min_parallel", [(1, 1 << 16), (2, 500)])
def test_checking_kernels_answer_exactly(kernel, dtype, n, threads, min_parallel):
    rng = np.random.default_rng(n)
    a = sort_keys((rng.standard_normal(n) * 50).astype(dtype))
    for name, v in broken_needles(rng, dtype).items():
        for side in ("left", "right"):
            got = CPU_SEARCH(jnp.asarray(a), jnp.asarray(v), side=side, order="check",
                             kernel=kernel, out_dtype=np.dtype(np.int32), threads=threads,
                             min_parallel=min_parallel)
            np.testing.assert_array_equal(np.asarray(got), np.searchsorted(a, v, side),
                                          err_msg=f"{name}, side={side}")


def test_chunks_sorted_only_within_themselves():
    """Each chain starts with a binary search, so chunks out of order with each
    other still merge exactly; the answer must not depend on which path ran."""
    rng = np.random.default_rng(3)
    a = np.sort(rng.standard_normal(5000)).astype(np.float32)
    chunks = np.sort(rng.standard_normal((6, 500)), axis=1).astype(np.float32)
    v = chunks[::-1].reshape(-1)
    for side in ("left", "right"):
        got = jaxsearch.searchsorted(a, v, side)
        np.testing.assert_array_equal(np.asarray(got), np.searchsorted(a, v, side))


@pytest.mark.parametrize("n, m", [(10, 20_000), (20_000, 20_000), (20_000, 50)])
def test_default_call_on_each_kernels_regime(n, m):
    """Through the public call, where the tuned thresholds pick the kernel:
    sorted, then unsorted from the middle on."""
    rng = np.random.default_rng(4)
    a = np.sort(rng.standard_normal(n)).astype(np.float32)
    v = np.sort(rng.standard_normal(m)).astype(np.float32)
    tail_shuffled = np.concatenate([v[:m // 2], rng.permutation(v[m // 2:])])
    for needles in (v, tail_shuffled):
        got = jaxsearch.searchsorted(a, needles)
        np.testing.assert_array_equal(np.asarray(got), np.searchsorted(a, needles))


@pytest.mark.parametrize("kernel", cpu.KERNELS)
@pytest.mark.parametrize("n", [1, 3, 1000])
def test_all_nan_keys_and_unsorted_needles_with_nan(kernel, n):
    """An all-NaN `a` (a piece of a sharded `a` past its NaN tail, say) and
    unsorted needles holding NaN: the checking kernels must not answer 0 for
    a NaN needle on side='right' (the answer is n)."""
    a = np.full(n, np.nan, np.float32)
    for v in (np.array([np.nan, 1.0, 0.0], np.float32),
              np.array([2.0, np.nan, 1.0, -np.inf, 0.0, np.nan], np.float32),
              np.where(np.arange(4096) % 200 == 0, np.nan,
                       np.random.default_rng(n).standard_normal(4096)).astype(np.float32)):
        for side in ("left", "right"):
            got = CPU_SEARCH(jnp.asarray(a), jnp.asarray(v), side=side, order="check",
                             kernel=kernel, out_dtype=np.dtype(np.int32), threads=1,
                             min_parallel=1 << 16)
            np.testing.assert_array_equal(np.asarray(got), np.searchsorted(a, v, side),
                                          err_msg=f"side={side}, m={len(v)}")
            np.testing.assert_array_equal(np.asarray(jaxsearch.searchsorted(a, v, side)),
                                          np.searchsorted(a, v, side))
