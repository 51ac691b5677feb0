"""The key sort (cpu_ext/key_sort.pxd, core/sorted_keys.py): each row of
`a` sorted as jnp.sort sorts it, which the patch searches for jnp's counting
methods ("sort", "compare_all").

Rows of every kind reach each of the kernel's two routes: sorted ones and
ones with a few small descents (a rounded running sum's) are mended by
insertion; shuffled and reversed ones overrun the mending's budget and are
merge-sorted, at lengths around the merge sort's first runs (16 keys). Each
is compared with numpy's sort (NaN last, as jnp's), -0.0 equal
to 0.0 and subnormals to zero (XLA compares them so).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.cpu_calls import seeded
from helpers.keys import DTYPES_32, DTYPES_64, random_keys, sort_keys
from helpers.served import served
from helpers.tiers import full, tiered
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxsearch
from jaxsearch.core import cpu
from jaxsearch.core.sorted_keys import sorted_keys

pytestmark = pytest.mark.skipif(not cpu.AVAILABLE, reason="the CPU extension is unavailable")

SORT = jax.jit(sorted_keys)
KINDS = ("sorted", "descents", "shuffled", "reversed")


def make_row(kind: str, n: int, dtype: str) -> np.ndarray:
    rng = seeded(kind, n, dtype)
    x = random_keys(rng, n, dtype)
    if kind == "shuffled":
        return x
    x = sort_keys(x)
    if kind == "reversed":
        return x[::-1].copy()
    if kind == "descents" and n >= 2:
        # A few neighbours swapped: descents of one step, as a rounded
        # running sum has.
        at = rng.integers(0, n - 1, max(1, n // 100))
        x[at], x[at + 1] = x[at + 1], x[at].copy()
    return x


def flushed(x: np.ndarray) -> np.ndarray:
    """x with subnormal floats as zero, as XLA compares them (bfloat16 as
    float32, whose numpy sort puts NaN last)."""
    if x.dtype == jnp.bfloat16:
        x = x.astype(np.float32)
    if not np.issubdtype(x.dtype, np.floating):
        return x
    return np.where(np.abs(x) < np.finfo(x.dtype).tiny, np.zeros_like(x), x)


def assert_rows_sorted(out, a: np.ndarray) -> None:
    """`out` holds each row of `a` sorted as jnp sorts it."""
    out = np.asarray(out)
    assert out.dtype == a.dtype and out.shape == a.shape
    want = np.sort(flushed(a), axis=-1)  # NaN last
    np.testing.assert_array_equal(flushed(out), want)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", tiered(DTYPES_32, lambda d: d in ("float32", "int8",
                                                                    "bfloat16", "bool")))
def test_rows_of_each_dtype(kind, dtype):
    a = make_row(kind, 1000, dtype)
    assert_rows_sorted(SORT(a), a)


@full
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES_64)
def test_rows_of_64_bit_keys(kind, dtype):
    with jax.enable_x64(True):
        a = make_row(kind, 1000, dtype)
        assert_rows_sorted(SORT(a), a)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [1, 2, 15, 16, 17, 33, 257, 40_000])
def test_lengths_around_the_merge_runs(kind, n):
    a = make_row(kind, n, "float32")
    assert_rows_sorted(SORT(a), a)


def test_batches_on_several_threads():
    """Rows of every kind in one call, each sorted on its own (a row's
    merge-sort scratch serves the thread's next rows)."""
    rows = [make_row(KINDS[k % 4], 3000, "float32") for k in range(12)]
    a = np.stack(rows).reshape(3, 4, 3000)
    assert_rows_sorted(jax.jit(lambda a: cpu.sort_keys(a, threads=2))(a), a)
    assert_rows_sorted(SORT(a), a)


def test_vmap_over_any_axis():
    a = np.stack([make_row(kind, 500, "float32") for kind in KINDS], axis=1)  # (500, 4)
    out = jax.vmap(sorted_keys, in_axes=1, out_axes=1)(a)
    assert_rows_sorted(np.asarray(out).T, a.T.copy())


@pytest.mark.parametrize("shape", [(4, 0), (0, 5), (0,)])
def test_empty(shape):
    a = np.zeros(shape, np.float32)
    assert_rows_sorted(SORT(a), a)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1,
                max_size=80))
def test_any_float32_row(values):
    a = np.array(values, np.float32)
    assert_rows_sorted(SORT(a), a)


def test_lowers_to_the_custom_call_and_exports_as_jnp():
    a = make_row("descents", 1000, "float32")
    what = served(sorted_keys, a)
    assert cpu.SORT_TARGET_NAME in what.targets and "stablehlo.sort" not in what.text, what
    # jax.export takes jnp's sort: the artifact needs no jaxsearch.
    exported = jax.export.export(SORT)(a)
    assert cpu.SORT_TARGET_NAME not in exported.mlir_module()
    assert_rows_sorted(exported.call(a), a)


@pytest.mark.parametrize("shape", [(3, 0), (0, 5), (1,), (2, 3, 1), (4, 700)])
@pytest.mark.parametrize("order", ["sorted", "last row shuffled"])
def test_the_export_sorts_any_shape(shape, order):
    """The export's lowering (jnp's sort, skipped where every row is
    sorted) on rows of 0 and 1 keys, no rows, and rows sorted but one."""
    rng = seeded(f"{shape}{order}")
    a = np.sort(rng.standard_normal(shape).astype(np.float32), axis=-1)
    if order == "last row shuffled" and a.size:
        a.reshape(-1, shape[-1])[-1] = rng.permutation(a.reshape(-1, shape[-1])[-1])
    exported = jax.export.export(SORT)(a)
    np.testing.assert_array_equal(exported.call(a), np.sort(a, axis=-1))


def running_sums(rows: int, n: int) -> np.ndarray:
    """Rows of float32 running sums of softmax weights (descents where
    float32's rounding makes them), as the resampling step searches."""
    w = jax.nn.softmax(jax.random.normal(jax.random.key(7), (rows, n)), axis=-1)
    sums = np.array(jnp.cumsum(w, axis=-1))
    # Where this jax's cumsum happens to be sorted, descents of one ulp.
    sums[:, 1::97] = np.nextafter(sums[:, :-1:97], np.float32(-np.inf))
    return sums


@pytest.mark.parametrize("method", ["sort", "compare_all"])
def test_patched_counting_methods_under_vmap(method):
    """The counting methods on rows with descents, under vmap: the patch's
    answers are stock's, from the key sort, and no row is sorted by XLA."""
    a = running_sums(6, 2000)
    v = np.sort(seeded(method).random((6, 1500), dtype=np.float32), axis=-1)

    def f(a, v):
        return jax.vmap(lambda a, v: jnp.searchsorted(a, v, method=method))(a, v)

    stock = np.asarray(jax.jit(f)(a, v))
    with jaxsearch.patched():
        what = served(f, a, v)
        assert cpu.SORT_TARGET_NAME in what.targets and "stablehlo.sort" not in what.text, what
        out = np.asarray(jax.jit(f)(a, v))
    np.testing.assert_array_equal(out, stock)


def test_patched_sort_method_differentiates_as_stock():
    """A tangent for `a` reaches no derivative rule of the key sort."""
    a, v = running_sums(1, 3000)[0], np.linspace(0, 1, 2000, dtype=np.float32)

    def f(a):
        return jnp.searchsorted(a, v, method="sort")

    stock = jax.jvp(f, (a,), (np.ones_like(a),))
    with jaxsearch.patched():
        out = jax.jvp(f, (a,), (np.ones_like(a),))
    np.testing.assert_array_equal(out[0], stock[0])
    assert out[1].dtype == stock[1].dtype and out[1].shape == stock[1].shape
