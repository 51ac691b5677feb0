"""The bucket search (cpu_ext/bucket_search.pxd): one row of many needles in
any order in a sorted `a` of `CpuConfig.bucket_min_bytes` or more (its
default, which `cpu.search` passes), partitioned by
bucket of its bin table, searched bucket by bucket, and put back in place.

The rows here just reach the route (one needle per BUCKET_KEYS_PER_NEEDLE
keys and a little more), for the orders that take it at once (any) and after
checking the needles (check). Each case differs from the easy one in a way
the route has to keep exact: skewed keys (crowded buckets), a NaN tail,
descents (marked bins, jnp's probes), NaN and out-of-range needles, both
sides, 8-byte keys, answers wider than the keys (int64 under x64), and a
needle count that leaves a tail past the search's chunks.
"""

from __future__ import annotations

import concurrent.futures
import functools

import jax.numpy as jnp
import numpy as np
import pytest
from helpers.cpu_calls import CPU_SEARCH, SIDES, cpu_search, like_jnp, seeded
from helpers.tiers import full

from jaxsearch.core import cpu
from jaxsearch.tuning import CpuConfig

pytestmark = pytest.mark.skipif(not cpu.AVAILABLE, reason="the CPU extension is unavailable")

MIN_BYTES = CpuConfig.bucket_min_bytes
KEYS_PER_NEEDLE = cpu._ext.BUCKET_KEYS_PER_NEEDLE if cpu.AVAILABLE else 16


@functools.cache
def row(kind: str, dtype: str) -> np.ndarray:
    """A sorted row of `a` just past the route's size, of one kind."""
    rng = seeded(kind, dtype)
    n = MIN_BYTES // np.dtype(dtype).itemsize + 4099
    if kind == "crowded":
        a = np.sort(rng.lognormal(0, 3, n))
    else:
        a = np.sort(rng.standard_normal(n) * 1e3)
    a = a.astype(dtype)
    if kind == "NaN tail":
        a[-n // 7:] = np.nan
    elif kind == "descents":
        at = rng.choice(np.arange(1, n), 40, replace=False)
        a[at] = np.nextafter(a[at - 1], -np.inf)
    return a


def needles(a: np.ndarray, seed: str) -> np.ndarray:
    """Unsorted needles, enough for the route: keys of `a` and their
    neighbours, values in and beyond its range, a few NaN."""
    rng = seeded(seed)
    m = a.size // KEYS_PER_NEEDLE + 333
    finite = a[np.isfinite(a)]
    v = np.concatenate([rng.choice(finite, m // 2),
                        rng.uniform(finite[0] * 1.5 - 1, finite[-1] * 1.5 + 1, m - m // 2)])
    v = v.astype(a.dtype)
    v[: m // 4] = np.nextafter(v[: m // 4], np.inf)
    if np.issubdtype(a.dtype, np.floating):
        v[rng.integers(0, m, 5)] = np.nan
    return rng.permutation(v)


@pytest.mark.parametrize("kind", ["normal", "crowded", "NaN tail", "descents"])
@pytest.mark.parametrize("order", ["any", "check"])
def test_row_answers_as_jnp(kind, order):
    a = row(kind, "float32")
    v = needles(a, kind)
    for side in SIDES:
        want = like_jnp(a, v, side)
        # Three threads: slices whose partitions start past a line's start.
        for threads, min_parallel in ((1, 1 << 16), (2, 1024), (3, 1024)):
            got = cpu_search(a, v, side, order, "merge", threads, min_parallel)
            np.testing.assert_array_equal(got, want, err_msg=f"{side}, {threads} threads")


def test_a_sorted_slice_among_unsorted():
    """The checked call on needles sorted in their first half only: phase 0
    finds them out of order, and every slice is partitioned, the sorted one
    too (the buckets' runs search all slices' needles, or none)."""
    a = row("normal", "float32")
    v = needles(a, "half sorted")
    v[: v.size // 2] = np.sort(v[: v.size // 2])
    for side in SIDES:
        np.testing.assert_array_equal(cpu_search(a, v, side, "check", "merge", 2, 1024),
                                      like_jnp(a, v, side), err_msg=side)


@pytest.mark.parametrize("dtype", [pytest.param("float64", marks=full), "int32",
                                   pytest.param("uint32", marks=full),
                                   pytest.param("int16", marks=full)])
def test_other_keys(dtype, x64):
    """Under x64, so that float64 stays 8 bytes a key; int16 keys take lines
    of 32 bytes where the partition streams them."""
    info = None if dtype.startswith("float") else np.iinfo(dtype)
    a = row("normal", dtype) if info is None else np.sort(seeded(dtype).integers(
        max(info.min, 0), min(info.max, 1 << 30), MIN_BYTES // info.bits * 8 + 77).astype(dtype))
    v = needles(a, dtype)
    for side in SIDES:
        np.testing.assert_array_equal(cpu_search(a, v, side, "any", "merge", 2, 1024),
                                      like_jnp(a, v, side), err_msg=side)


def test_answers_wider_than_keys(x64):
    """int64 answers for float32 keys: held apart from the keys."""
    a = row("normal", "float32")
    v = needles(a, "wide")
    got = CPU_SEARCH(jnp.asarray(a), jnp.asarray(v), side="left", order="any", kernel="merge",
                     out_dtype=np.dtype(np.int64), threads=2, min_parallel=1024)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(got), like_jnp(a, v, "left"))


def test_answers_narrower_than_keys(x64):
    """int32 answers for float64 keys, on three threads: each answer lies
    over its own key's bytes, which no other thread's run of buckets
    reads."""
    rng = seeded("narrow")
    a = np.sort(rng.standard_normal(1 << 17) * 1e3)
    v = needles(a, "narrow")
    for side in SIDES:
        got = CPU_SEARCH(jnp.asarray(a), jnp.asarray(v), side=side, order="any", kernel="merge",
                         out_dtype=np.dtype(np.int32), threads=3, min_parallel=1024,
                         bucket_min_bytes=0)
        np.testing.assert_array_equal(np.asarray(got), like_jnp(a, v, side), err_msg=side)


@pytest.mark.parametrize("kind", ["normal", "descents", "NaN tail"])
def test_sorted_needles_keep_their_answers(kind):
    """The checked call on sorted needles (NaN last) of the same size: found
    sorted in phase 0, merged unchecked (around the descents, if any)."""
    a = row(kind, "float32")
    v = np.sort(needles(a, kind))
    for side in SIDES:
        np.testing.assert_array_equal(cpu_search(a, v, side, "check", "merge", 2, 1024),
                                      like_jnp(a, v, side), err_msg=side)


@pytest.mark.parametrize("order", ["any", "check"])
def test_the_threshold_is_the_call_s(order):
    """`bucket_min_bytes` of 0 takes a row of 2^17 keys (512 KiB) by buckets:
    the route's answers at a size its default threshold leaves to the table.
    `table_check_ratio` of inf has `a` checked, as buckets need, whatever
    the kernel: the built-in rule leaves a binary-searched row under 2 MiB
    with a needle per 16 keys unchecked, where the gathers serve."""
    rng = seeded("threshold", order)
    a = np.sort(rng.standard_normal(1 << 17) * 1e3).astype(np.float32)
    v = needles(a, order)
    for side in SIDES:
        np.testing.assert_array_equal(
            cpu_search(a, v, side, order, "merge", 2, 1024, bucket_min_bytes=0,
                       table_check_ratio=np.inf),
            like_jnp(a, v, side), err_msg=side)


@pytest.mark.parametrize("nan_keys", [0, 12_000])
def test_buckets_of_a_table_of_stride_1(nan_keys):
    """`bucket_min_bytes` of 0 on rows whose tables take a bin per key: one
    of 24,576 float32 keys, and one of 40,960 (160 KiB, past the stride's
    threshold) whose NaN tail leaves 28,960 (113 KiB, short of it), so that
    the buckets' room, planned from the row's length, must hold the bins of
    the table built on its keys without a NaN. `table_check_ratio` of inf
    has `a` checked (so it takes a table) with a needle per 16 keys,
    whatever the kernel."""
    fine = cpu._ext.TABLE_FINE_ROW_BYTES // 4
    n = fine * 5 // 4 if nan_keys else fine * 3 // 4
    assert (n - nan_keys) * 4 < cpu._ext.TABLE_FINE_ROW_BYTES
    rng = seeded("stride 1", nan_keys)
    a = np.sort(rng.standard_normal(n) * 1e3).astype(np.float32)
    a[n - nan_keys:] = np.nan
    v = needles(a, "stride 1")
    for side in SIDES:
        np.testing.assert_array_equal(
            cpu_search(a, v, side, "any", "merge", 2, 1024, bucket_min_bytes=0,
                       table_check_ratio=np.inf),
            like_jnp(a, v, side), err_msg=side)


@pytest.mark.parametrize("order", ["any", "check"])
def test_sparse_needles_by_buckets(order):
    """`bucket_keys_per_needle` of inf takes a row with one needle per 1,000
    keys by buckets (most of them empty, some runs of them without a needle):
    a density the default leaves to the table."""
    a = row("normal", "float32")
    v = needles(a, "sparse")[: a.size // 1000]
    for side in SIDES:
        got = CPU_SEARCH(jnp.asarray(a), jnp.asarray(v), side=side, order=order, kernel="merge",
                         out_dtype=np.dtype(np.int32), threads=3, min_parallel=64,
                         bucket_keys_per_needle=np.inf)
        np.testing.assert_array_equal(np.asarray(got), like_jnp(a, v, side), err_msg=side)


def test_scratch_kept_between_calls():
    """The partition's scratch of 4 MiB or more per part is kept from one
    call to the next (huge_pages.scratch_malloc): calls of other sizes, on
    threads of their own at once, each take a block large enough or a fresh
    one, and answer as jnp does."""
    rng = seeded("scratch")
    a = np.sort(rng.standard_normal(1 << 17) * 1e3).astype(np.float32)
    # Needles per part (2 threads): 6 MB, 4.6 MB (a kept block, not over 4x
    # too large), 12 MB (too small: a fresh one), 4.2 MB (12 MB is too large).
    sizes = [3_000_000, 2_300_001, 6_000_000, 2_100_000]
    cases = [(rng.uniform(-5e3, 5e3, m).astype(np.float32), side)
             for m, side in zip(sizes, ["left", "right", "left", "right"])]

    def search(case):
        v, side = case
        return np.asarray(CPU_SEARCH(jnp.asarray(a), jnp.asarray(v), side=side, order="any",
                                     kernel="merge", out_dtype=np.dtype(np.int32), threads=2,
                                     min_parallel=1024, bucket_min_bytes=0))

    wants = [like_jnp(a, v, side) for v, side in cases]
    for case, want in zip(cases, wants):
        np.testing.assert_array_equal(search(case), want)
    with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:
        for got, want in zip(pool.map(search, cases * 2), wants * 2):
            np.testing.assert_array_equal(got, want)
