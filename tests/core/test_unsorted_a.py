"""searchsorted on an `a` that is not sorted: for sorted_v=None and False the
answers are jnp's default method's (jax's probe recurrence, method="scan"),
whatever the kernel, the threads and the rows.

The running sum of float32 weights that every particle filter searches is
one such `a`: XLA's float32 cumsum is not monotone at a million weights.
The CPU binary search follows jnp's probes; the merge and runs kernels
answer only rows of `a` found in order (NaN last), the others are searched
as jnp searches them. The negative controls (sorted_v=True, which checks
nothing) show that each case's `a` does change the merge's answers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.cpu_calls import SIDES, cpu_search, like_jnp, seeded
from helpers.keys import random_keys, sort_keys
from helpers.served import assert_cpu_kernel

import jaxsearch
from jaxsearch import tuning
from jaxsearch.core import cpu

# (n, m) for each kernel the tests force: where the tuning would pick it.
KERNEL_SIZES = {"merge": (3000, 3000), "runs": (40, 20_000), "bisect": (3000, 500)}
# One row of `a` of at most this many keys is counted where sorted, by default.
COUNT_KEYS = cpu._ext.COUNT_ROW_KEYS if cpu.AVAILABLE else 32
# One thread, and two threads on small parts (several parts per row).
THREADS = [(1, 1 << 16), (2, 64)]


def unsorted_keys(rng: np.random.Generator, n: int, dtype: str) -> dict[str, np.ndarray]:
    """Rows of `a` out of order in the ways that matter, named."""
    base = sort_keys(random_keys(rng, n, dtype))
    few = max(1, n // 500)

    def swapped(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        a = base.copy()
        a[i], a[j] = base[j], base[i]
        return a

    def spiked(at: np.ndarray) -> np.ndarray:
        a = base.copy()
        a[at] = base[-1] if not np.issubdtype(base.dtype, np.floating) else np.nanmax(base)
        return a

    at = rng.integers(0, n - 1, few)
    cases = {
        "permuted": rng.permutation(base),
        "a few swaps": swapped(rng.integers(0, n, few), rng.integers(0, n, few)),
        # Descents of a step or two, as in a float32 running sum.
        "adjacent swaps": swapped(at, at + 1),
        "spikes": spiked(at),
        "reversed": base[::-1].copy(),
        "ties out of order": rng.permutation(random_keys(rng, n, dtype, distinct=4)),
    }
    if np.issubdtype(base.dtype, np.floating):
        nan_inside = base.copy()
        nan_inside[[n // 3, n // 2]] = np.nan
        zeros = base.copy()
        zeros[rng.integers(0, n, 4 * few)] = rng.choice(np.array([0.0, -0.0], base.dtype),
                                                        4 * few)
        cases |= {"NaN inside": nan_inside, "signed zeros out of place": zeros}
    cases["sorted"] = base  # the control: in order, NaN last
    return cases


def needles(rng: np.random.Generator, a: np.ndarray, m: int, sort: bool) -> np.ndarray:
    """m needles of a's dtype: random (with NaN, +-inf, +-0.0 for floats),
    a quarter of them equal to keys of `a`."""
    v = random_keys(rng, m, a.dtype.name)
    v[: m // 4] = rng.choice(a.reshape(-1), m // 4)
    return sort_keys(v) if sort else rng.permutation(v)


@pytest.mark.parametrize("threads, min_parallel", THREADS)
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8"])
@pytest.mark.parametrize("kernel", cpu.KERNELS)
def test_each_kernel_answers_as_jnp(kernel, dtype, threads, min_parallel):
    """Each kernel, forced, for the checked order and for any order, both
    sides, sorted and unsorted needles, on every kind of unsorted `a`."""
    rng = seeded(kernel, dtype, threads)
    n, m = KERNEL_SIZES[kernel]
    for name, a in unsorted_keys(rng, n, dtype).items():
        for sort in (True, False):
            v = needles(rng, a, m, sort)
            for side in SIDES:
                want = like_jnp(a, v, side)
                for order in ("check", "any"):
                    got = cpu_search(a, v, side, order, kernel, threads, min_parallel)
                    np.testing.assert_array_equal(
                        got, want, err_msg=f"{name}, sorted needles {sort}, {side}, {order}")


@pytest.mark.parametrize("kernel", ["merge", "runs"])
def test_the_merge_on_unsorted_a_would_differ(kernel):
    """The negative control: trusted (order "sorted"), the merge and runs
    kernels answer otherwise than jnp on these rows of `a`, so the checked
    call's answers being jnp's shows the check at work."""
    rng = seeded("control", kernel)
    n, m = KERNEL_SIZES[kernel]
    a = unsorted_keys(rng, n, "float32")["spikes"]
    v = needles(rng, a, m, True)
    trusted = cpu_search(a, v, "left", "sorted", kernel, 1, 1 << 16)
    assert (trusted != like_jnp(a, v, "left")).any()


def test_the_order_check_split_over_threads():
    """A row of `a` long enough that its check is cut into several parts:
    a single descent on either side of each boundary between them, and at
    both ends of the row, is found."""
    n, m = 300_000, 2000  # four check parts of 75,000 keys on two threads
    rng = seeded("split", n)
    base = np.sort(rng.standard_normal(n)).astype(np.float32)
    v = np.sort(np.concatenate([rng.choice(base, m // 2), rng.standard_normal(m // 2)])
                ).astype(np.float32)
    # The keys past t lowered: one descent, between t - 1 and t.
    for t in (1, n - 1, *(b + d for b in (75_000, 150_000, 225_000) for d in (-1, 0, 1))):
        a = base.copy()
        a[t:] -= 1
        want = like_jnp(a, v, "left")
        if 1 < t < n - 1:  # at the row's ends the trusted merge happens to agree
            assert (cpu_search(a, v, "left", "sorted", "merge", 2, 64) != want).any(), t
        for threads, min_parallel in THREADS:
            np.testing.assert_array_equal(
                cpu_search(a, v, "left", "check", "merge", threads, min_parallel), want,
                err_msg=f"descent at {t}, {threads} threads")


@pytest.mark.parametrize("kernel, order", [("merge", "check"), ("runs", "check"),
                                           ("bisect", "check"), ("bisect", "any")])
def test_rows_of_a_some_sorted_some_not(kernel, order):
    """Batched rows: each row of `a` is checked on its own, also where `a`
    broadcasts over the rows of the needles or the needles over `a`'s. (The
    binary search checks `a` too where it is short against the needles, as
    here, and searches a row found in order by the cheaper lower bound.)"""
    rng = seeded("rows", kernel, order)
    n, m = KERNEL_SIZES[kernel]
    cases = unsorted_keys(rng, n, "float32")
    a = np.stack(list(cases.values()))  # the last row is sorted
    v = np.stack([needles(rng, a, m, kernel != "bisect") for _ in cases])
    for a_rows, v_rows in [(a, v), (a, v[:1]), (a[:1], v), (a[-1:], v), (a[1:2, None], v[None])]:
        for side in SIDES:
            want = like_jnp(a_rows, v_rows, side)
            for threads, min_parallel in THREADS:
                got = cpu_search(a_rows, v_rows, side, order, kernel, threads, min_parallel)
                np.testing.assert_array_equal(got, want, err_msg=f"{a_rows.shape}, {side}")


@pytest.mark.parametrize("sorted_v", [None, False])
@pytest.mark.parametrize("regime, n, m", [("runs", 10, 20_000), ("merge", 20_000, 20_000),
                                          ("bisect", 20_000, 50)])
def test_public_call_in_each_regime(regime, n, m, sorted_v):
    """jaxsearch.searchsorted as a user calls it, where the tuning picks each
    kernel, and on two threads with small parts; vmapped rows too."""
    rng = seeded("public", regime, sorted_v)
    a_cases = unsorted_keys(rng, n, "float32")
    for name, a in a_cases.items():
        for sort in (True, False):
            v = needles(rng, a, m, sort)
            for side in SIDES:
                want = like_jnp(a, v, side)
                got = jaxsearch.searchsorted(a, v, side, sorted_v=sorted_v)
                np.testing.assert_array_equal(np.asarray(got), want,
                                              err_msg=f"{name}, sorted needles {sort}, {side}")
    a = np.stack([a_cases["permuted"], a_cases["sorted"], a_cases["spikes"]])
    v = np.stack([needles(rng, a, m, True) for _ in range(3)])
    search = jax.vmap(lambda a, v: jaxsearch.searchsorted(a, v, sorted_v=sorted_v))
    with tuning.use_cpu_config(tuning.CpuConfig(threads=2, min_parallel=16)):
        assert_cpu_kernel(search, a, v, kernel=regime,
                          order="check" if sorted_v is None else "any")
        np.testing.assert_array_equal(np.asarray(search(a, v)), like_jnp(a, v, "left"))


@pytest.mark.parametrize("n", [2, COUNT_KEYS, COUNT_KEYS + 1])
def test_one_short_row_and_needles_in_any_order(n):
    """One row of `a` of up to COUNT_KEYS keys (the count kernel's, the
    default config's `count_keys`) is checked even where the needles are in
    any order (sorted_v=False): counted where it is sorted, probed where
    not; past it, probed. jnp's answers throughout."""
    rng = seeded("short row, any needles", n)
    for name, a in unsorted_keys(rng, n, "float32").items():
        v = needles(rng, a, 5000, False)
        for side in SIDES:
            got = jaxsearch.searchsorted(a, v, side, sorted_v=False)
            np.testing.assert_array_equal(np.asarray(got), like_jnp(a, v, side),
                                          err_msg=f"{name}, {side}")


@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "uint16", "uint32", "float16",
                                   "bfloat16", "float32"])
def test_every_dtype(dtype):
    rng = seeded("dtype", dtype)
    for n, m in [(1, 5), (2, 7), (257, 1031), (1000, 1000), (37, 5000)]:
        a = rng.permutation(random_keys(rng, n, dtype))
        for sorted_v, sort in [(None, True), (None, False), (False, False)]:
            v = needles(rng, a, m, sort)
            for side in SIDES:
                got = jaxsearch.searchsorted(a, v, side, sorted_v=sorted_v)
                want = jnp.searchsorted(a, v, side, method="scan")
                np.testing.assert_array_equal(np.asarray(got), np.asarray(want),
                                              err_msg=f"n={n}, m={m}, {side}")


@pytest.mark.parametrize("dtype", ["int64", "uint64", "float64"])
def test_64_bit_dtypes(x64, dtype):
    rng = seeded("x64", dtype)
    for kernel, (n, m) in KERNEL_SIZES.items():
        for name, a in unsorted_keys(rng, n, dtype).items():
            v = needles(rng, a, m, True)
            for side in SIDES:
                got = cpu_search(a, v, side, "check", kernel, 2, 64)
                np.testing.assert_array_equal(got, like_jnp(a, v, side),
                                              err_msg=f"{kernel}, {name}, {side}")


def test_running_sum_of_softmax_weights():
    """The particle filter's line: searchsorted(cumsum(softmax(x)), u) with
    sorted uniforms u, on a float32 running sum that is not monotone."""
    n = 2_000_000
    key_x, key_u = jax.random.split(jax.random.key(0))
    a = jnp.cumsum(jax.nn.softmax(jax.random.normal(key_x, (n,), jnp.float32)))
    descents = int(jnp.sum(a[1:] < a[:-1]))
    assert descents > 0, "this running sum came out monotone: the case needs a larger n"
    u = jnp.sort(jax.random.uniform(key_u, (n,), jnp.float32))
    want = np.asarray(jnp.searchsorted(a, u))
    for sorted_v in (None, False):
        np.testing.assert_array_equal(np.asarray(jaxsearch.searchsorted(a, u, sorted_v=sorted_v)),
                                      want, err_msg=f"sorted_v={sorted_v}, {descents} descents")


@pytest.mark.parametrize("threads, min_parallel", THREADS)
@pytest.mark.parametrize("m", [6000, 60_000], ids=["compacted", "runs"])
@pytest.mark.parametrize("shape", ["steps down", "spikes", "NaN tail", "too many"])
def test_merge_around_a_few_descents(shape, m, threads, min_parallel):
    """A row of `a` sorted but for a few descents (as in a float32 running
    sum) is merged, but for the needles the descents could mislead: needles
    on and next to both keys of each descent, and between them, answer as
    jnp's probes do. The rest are merged as one compacted copy where the
    descents hold many needle ranges against the needles, else run by run.
    Past one descent per 64 keys the row is probed whole."""
    rng = seeded("descents", shape, m, threads)
    n = 6000
    a = np.sort(rng.standard_normal(n)).astype(np.float32)
    at = np.sort(rng.choice(np.arange(1, n - 1), 400 if shape == "too many" else 12,
                            replace=False))
    if shape == "spikes":  # wide descents: most needles lie under some spike
        a[at - 1] = a[at - 1] + np.float32(0.5)
    else:  # a step down of an ulp or a few, a running sum's rounding
        a[at] = np.nextafter(a[at - 1], np.float32(-np.inf)) - np.float32(1e-7) * rng.integers(
            0, 3, at.size)
    if shape == "NaN tail":
        a[-20:] = np.nan
    keys = np.concatenate([a[at], a[at - 1], np.nextafter(a[at], np.inf),
                           np.nextafter(a[at - 1], -np.inf), (a[at] + a[at - 1]) / 2])
    v = np.concatenate([keys, rng.standard_normal(m - keys.size - 3).astype(np.float32),
                        [np.nan, np.inf, -np.inf]]).astype(np.float32)
    v = sort_keys(v)
    assert (a[1:] < a[:-1]).any()
    for side in SIDES:
        want = like_jnp(a, v, side)
        got = cpu_search(a, v, side, "check", "merge", threads, min_parallel)
        np.testing.assert_array_equal(got, want, err_msg=f"{shape}, {side}")
    if shape != "too many":  # the control: trusted, the merge answers otherwise
        assert (cpu_search(a, v, "left", "sorted", "merge", 1, 1 << 16)
                != like_jnp(a, v, "left")).any()
