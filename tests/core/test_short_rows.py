"""Short rows. A batch of them, two rows or more with fewer than
`SHORT_ROW_NEEDLES` needles a row (one needle per row under vmap, say), is
searched across rows, by jnp's probes, whatever order it was asked for. Its
answers are jnp's on any `a`, for every batch layout (an operand broadcast,
several batch dimensions), at the route's edges and on several threads; and
under vmap the public call stays one custom call. A row of at most
`COUNT_KEYS` keys found sorted counts its unsorted needles; a row of one key
lowers to jnp's own search."""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.cpu_calls import SIDES, cpu_search, like_jnp, lowered_unsorted_call, seeded
from helpers.keys import random_keys, sort_keys
from helpers.served import assert_cpu_kernel, assert_jnp
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxsearch
from jaxsearch import tuning
from jaxsearch.core import cpu
from jaxsearch.tuning import CpuConfig, use_cpu_config

pytestmark = pytest.mark.skipif(not cpu.AVAILABLE, reason="the CPU extension is unavailable")

SHORT = cpu._ext.SHORT_ROW_NEEDLES if cpu.AVAILABLE else 64
ORDERS = ("check", "any", "sorted")
# One thread, and two threads on parts of a few rows each.
THREADS = [(1, 1 << 16), (2, 16)]


def rows_of_keys(rng: np.random.Generator, rows: int, n: int, dtype: str) -> np.ndarray:
    """`rows` rows of n keys: sorted rows (NaN last) and, every third row,
    one out of order (permuted), with NaN, infinities and signed zeros."""
    a = np.stack([sort_keys(random_keys(rng, n, dtype)) for _ in range(rows)])
    a[::3] = rng.permuted(a[::3], axis=1)
    return a


def row_needles(rng: np.random.Generator, a: np.ndarray, m: int) -> np.ndarray:
    """m needles per row of `a`, a third of them keys of their row."""
    v = random_keys(rng, a.shape[0] * m, a.dtype.name).reshape(a.shape[0], m)
    take = rng.integers(0, a.shape[1], v.shape) if a.shape[1] else None
    hit = rng.random(v.shape) < 1 / 3
    if take is not None:
        v[hit] = np.take_along_axis(a, take, axis=1)[hit]
    return v


@pytest.mark.parametrize("threads, min_parallel", THREADS)
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32", "uint8"])
@pytest.mark.parametrize("rows, n, m", [(37, 9, 1), (20, 200, SHORT - 1), (5, 1, 3),
                                        (50, 33, 8), (300, 9, 1)])
def test_rows_answer_as_jnp(rows, n, m, dtype, threads, min_parallel):
    """Every order asked for, both sides, rows in order and out of order."""
    rng = seeded(rows, n, m, dtype, threads)
    a = rows_of_keys(rng, rows, n, dtype)
    v = row_needles(rng, a, m)
    for side in SIDES:
        want = like_jnp(a, v, side)
        for order in ORDERS:
            got = cpu_search(a, v, side, order, "merge", threads, min_parallel)
            np.testing.assert_array_equal(got, want, err_msg=f"{side}, {order}")


@pytest.mark.parametrize("layout", ["a broadcast", "v broadcast", "two batch dimensions",
                                    "a broadcast in one of two"])
def test_batch_layouts(layout):
    """The rows walked in order through broadcast operands and several batch
    dimensions (the odometer over the batch strides)."""
    rng = seeded(layout)
    a = rows_of_keys(rng, 24, 12, "float32")
    v = row_needles(rng, a, 3)
    a, v = {
        "a broadcast": (a[:1], v),
        "v broadcast": (a, v[:1]),
        "two batch dimensions": (a.reshape(4, 6, 12), v.reshape(4, 6, 3)),
        "a broadcast in one of two": (a[:4].reshape(4, 1, 12), v.reshape(4, 6, 3)),
    }[layout]
    for side in SIDES:
        for threads, min_parallel in THREADS:
            np.testing.assert_array_equal(
                cpu_search(a, v, side, "check", "merge", threads, min_parallel),
                like_jnp(a, v, side), err_msg=f"{side}, {threads} threads")


@pytest.mark.parametrize("rows, m", [(1, 1), (1, SHORT - 1), (2, SHORT - 1), (2, SHORT),
                                     (3, SHORT + 1)])
def test_the_routes_edges(rows, m):
    """One row, and rows of SHORT needles or more, take the per-row route;
    answers are jnp's on either side of the edge."""
    rng = seeded("edges", rows, m)
    a = rows_of_keys(rng, rows, 40, "float32")
    v = row_needles(rng, a, m)
    for side in SIDES:
        for order in ("check", "any"):
            np.testing.assert_array_equal(cpu_search(a, v, side, order, "merge", 1, 1 << 16),
                                          like_jnp(a, v, side), err_msg=f"{side}, {order}")


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(2, 150), n=st.integers(1, 70), m=st.integers(1, SHORT - 1),
       dtype=st.sampled_from(["float32", "int32", "int8", "uint16"]), side=st.sampled_from(SIDES),
       order=st.sampled_from(ORDERS), seed=st.integers(0, 2**32 - 1))
def test_property_any_rows(rows, n, m, dtype, side, order, seed):
    rng = np.random.default_rng(seed)
    a = rows_of_keys(rng, rows, n, dtype)
    v = row_needles(rng, a, m)
    np.testing.assert_array_equal(cpu_search(a, v, side, order, "merge", 2, 16),
                                  like_jnp(a, v, side))


def test_64_bit_keys(x64):
    rng = seeded("x64")
    for dtype in ("int64", "uint64", "float64"):
        a = rows_of_keys(rng, 30, 17, dtype)
        v = row_needles(rng, a, 2)
        for side in SIDES:
            np.testing.assert_array_equal(cpu_search(a, v, side, "check", "merge", 1, 1 << 16),
                                          like_jnp(a, v, side), err_msg=f"{dtype}, {side}")


@pytest.mark.parametrize("in_axes", [(0, 0), (None, 0), (0, None)])
@pytest.mark.parametrize("sorted_v", [None, True, False])
def test_vmap_of_one_needle_per_row_is_one_custom_call(in_axes, sorted_v):
    """The shape the route is for, through the public function: one custom
    call and jnp's answers (jnp.searchsorted under vmap as the reference)."""
    rng = seeded("vmap", in_axes, sorted_v)
    a = jnp.asarray(np.sort(rng.standard_normal((300, 9)).astype(np.float32), axis=1))
    v = jnp.asarray(rng.standard_normal((300,)).astype(np.float32))
    a1 = a if in_axes[0] == 0 else a[0]
    v1 = v if in_axes[1] == 0 else v[0]

    def f(a, v):
        return jaxsearch.searchsorted(a, v, sorted_v=sorted_v)

    batched = jax.vmap(f, in_axes=in_axes)
    assert_cpu_kernel(batched, a1, v1)
    np.testing.assert_array_equal(batched(a1, v1), jax.vmap(jnp.searchsorted, in_axes)(a1, v1))


def test_short_rows_plan_threads_by_their_probes():
    """A short row's needle costs a probe per level, each a fresh row: the
    plan counts probes, so 80,000 rows of one needle use both threads where
    one row of 80,000 needles (a cache-friendly search each) does not, nor
    do a few short rows."""
    many = cpu.planned_threads(1, rows=80_000, n=9, threads=2, min_parallel=1 << 16)
    few = cpu.planned_threads(1, rows=1_000, n=9, threads=2, min_parallel=1 << 16)
    one_row = cpu.planned_threads(80_000, rows=1, n=9, threads=2, min_parallel=1 << 16)
    assert (many, few, one_row) == (2, 1, 1)


@pytest.mark.parametrize("rows, n, m, limit", [(30, 33, 100, 128), (40, 9, 8, 0), (40, 9, 8, 8),
                                               (40, 200, 8, 9)])
def test_short_row_needles_moves_the_edge(rows, n, m, limit):
    """`short_row_needles` in force decides which batches are searched
    across rows: rows of 100 needles with a limit of 128, rows of 8 with a
    limit of 9; row by row, rows of 8 with a limit of 0 or 8. jnp's answers
    either way, rows in order and out of order, on one thread and two."""
    rng = seeded("short_row_needles", rows, n, m, limit)
    a = rows_of_keys(rng, rows, n, "float32")
    v = row_needles(rng, a, m)
    for side in SIDES:
        want = like_jnp(a, v, side)
        for order, (threads, min_parallel) in zip(("check", "any"), THREADS):
            got = cpu_search(a, v, side, order, "merge", threads, min_parallel,
                             short_row_needles=limit)
            np.testing.assert_array_equal(got, want, err_msg=f"{side}, {order}")


def test_short_row_needles_reaches_the_call_and_the_plan():
    """The config's `short_row_needles` reaches the custom call as its
    `short_rows` attribute (the default: the extension's own limit, which
    a program lowered without it keeps), and the threads planned: 1,000
    rows of one needle, one part across rows, two parts row by row."""
    a, v = jnp.zeros((4, 9), jnp.float32), jnp.zeros((4, 1), jnp.float32)

    def lowered(config):
        with use_cpu_config(config):
            text = jax.jit(jax.vmap(jaxsearch.searchsorted)).lower(a, v).as_text()
        return int(re.search(r"short_rows = (\d+) : i32", text)[1])

    assert lowered(CpuConfig(short_row_needles=5)) == 5
    assert lowered(CpuConfig()) == CpuConfig().short_row_needles == SHORT
    plan = functools.partial(cpu.planned_threads, 1, rows=1_000, n=9, threads=2,
                             min_parallel=1 << 16)
    assert (plan(), plan(short_row_needles=0), plan(short_row_needles=2)) == (1, 2, 1)


# Rows of at most this many keys are counted (search_kernels.pxd), where the
# call has no `count_keys` of its own.
COUNT_KEYS = cpu._ext.COUNT_ROW_KEYS if cpu.AVAILABLE else 32


@pytest.mark.parametrize("threads, min_parallel", THREADS)
@pytest.mark.parametrize("dtype", ["float32", "int8", "uint32"])
@pytest.mark.parametrize("n", [2, 9, COUNT_KEYS, COUNT_KEYS + 1])
def test_short_row_counted_answers_as_jnp(n, dtype, threads, min_parallel):
    """Unsorted needles in one short row, sorted (counted) or not (probed),
    with NaN keys and needles: jnp's answers either side of COUNT_KEYS."""
    rng = seeded("count", n, dtype, threads)
    for a in rows_of_keys(rng, 3, n, dtype):
        v = row_needles(rng, a[None], 3000)[0]
        for side in SIDES:
            want = like_jnp(a, v, side)
            for order, kernel in (("check", "merge"), ("check", "runs"), ("any", "bisect")):
                np.testing.assert_array_equal(
                    cpu_search(a, v, side, order, kernel, threads, min_parallel), want,
                    err_msg=f"{side}, {order}, {kernel}, a sorted {bool(np.all(a[:-1] <= a[1:]))}")


@pytest.mark.parametrize("threads, min_parallel", THREADS)
@pytest.mark.parametrize("dtype", ["float32", "int32", "int8"])
@pytest.mark.parametrize("m", [1, 31, 32, 33, 95])
def test_counted_tiles_and_their_tail(m, dtype, threads, min_parallel):
    """The count takes 4-byte keys' needles 32 at a time, then the last few
    on their own: jnp's answers for every needle whatever m leaves over,
    the last needle a NaN, a key of the row, or neither."""
    rng = seeded("count tiles", m, dtype, threads)
    a = sort_keys(random_keys(rng, 20, dtype))
    for last in ("nan", "key", "any"):
        v = random_keys(rng, m, dtype)
        if last == "key":
            v[-1] = a[rng.integers(0, a.size)]
        elif last == "nan" and np.issubdtype(v.dtype, np.floating):
            v[-1] = np.nan
        for side in SIDES:
            np.testing.assert_array_equal(
                cpu_search(a, v, side, "any", "bisect", threads, min_parallel, count_keys=20),
                like_jnp(a, v, side), err_msg=f"{side}, last needle {last}")


@pytest.mark.parametrize("threads, min_parallel", THREADS)
@pytest.mark.parametrize("finite_keys", [0, 1, 2])
def test_counts_start_from_the_first_key(finite_keys, threads, min_parallel):
    """The count starts each needle's count from its compare with the
    first key that is not NaN, and a row of NaN keys alone counts none:
    rows of 9 float32 keys with none, one or two keys before their NaN,
    needles below, at, between and above them, and NaN; jnp's answers."""
    a = np.full(9, np.nan, np.float32)
    a[:finite_keys] = [-1.0, 2.0][:finite_keys]
    v = np.tile(np.array([-2, -1, 0, 2, 3, np.nan], np.float32), 11)  # 66: two tiles and a tail
    for side in SIDES:
        np.testing.assert_array_equal(
            cpu_search(a, v, side, "any", "bisect", threads, min_parallel), like_jnp(a, v, side),
            err_msg=side)


@pytest.mark.parametrize("n, count_keys", [(100, 128), (200, 200), (9, 0), (9, 8)])
def test_count_keys_moves_the_edge(n, count_keys):
    """`count_keys` in force decides which rows are counted: a row of 100 or
    200 keys counted with a limit at or above it, of 9 keys searched with a
    limit of 0 or 8. jnp's answers on both sides of each edge, rows sorted
    and out of order, every order asked for, on one thread and on two."""
    rng = seeded("count_keys", n, count_keys)
    for a in rows_of_keys(rng, 3, n, "float32"):
        v = row_needles(rng, a[None], 3000)[0]
        for side in SIDES:
            want = like_jnp(a, v, side)
            for (order, kernel), (threads, min_parallel) in zip(
                    [("check", "merge"), ("any", "bisect"), ("check", "runs")], THREADS * 2):
                np.testing.assert_array_equal(
                    cpu_search(a, v, side, order, kernel, threads, min_parallel,
                               count_keys=count_keys), want,
                    err_msg=f"{side}, {order}, {kernel}, a sorted {bool(np.all(a[:-1] <= a[1:]))}")


def test_count_keys_reaches_the_call():
    """The config's `count_keys` reaches the custom call as its attribute;
    the default is the extension's built-in limit, so a program of 4-byte
    keys lowered without the attribute (an exported artifact) counts the
    same rows."""
    def lowered(config):
        return int(re.search(r"count_keys = (\d+) : i32", lowered_unsorted_call(config))[1])

    assert lowered(CpuConfig(count_keys=48)) == 48
    assert lowered(CpuConfig()) == CpuConfig().count_keys == COUNT_KEYS


def test_eight_byte_keys_take_their_own_count_keys(x64):
    """Untuned, float64 keys reach the call with the built-in count_keys of
    8-byte keys, not the 4-byte keys' default."""
    a, v = jnp.linspace(0, 1, 1000, dtype=jnp.float64), jnp.linspace(1, 0, 100, dtype=jnp.float64)
    text = jax.jit(lambda a, v: jaxsearch.searchsorted(a, v, sorted_v=False)).lower(a, v).as_text()
    assert int(re.search(r"count_keys = (\d+) : i32", text)[1]) == tuning.BUILT_IN_COUNT_KEYS[8]


@pytest.mark.parametrize("sorted_v", [None, True, False])
def test_a_single_key_lowers_to_jnp(sorted_v):
    """One key is one compare per needle, which XLA fuses: the default call
    lowers to jnp's search, under vmap too."""
    a, v = jnp.array([0.5], jnp.float32), jnp.linspace(0.0, 1.0, 1000, dtype=jnp.float32)

    def f(a, v):
        return jaxsearch.searchsorted(a, v, sorted_v=sorted_v)

    assert_jnp(f, a, v)
    np.testing.assert_array_equal(f(a, v), jnp.searchsorted(a, v))
    rows = jnp.tile(a, (4, 1)), jnp.tile(v, (4, 1))
    assert_jnp(jax.vmap(f), *rows)
