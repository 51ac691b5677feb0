"""Differential tests of jaxsearch.searchsorted against jnp.searchsorted and numpy."""

from __future__ import annotations

import functools
import logging
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.cpu_calls import CPU_SEARCH
from helpers.keys import DTYPES_32, DTYPES_64, random_keys, sort_keys
from helpers.served import assert_cpu_kernel, assert_jnp
from helpers.tiers import tiered

import jaxsearch
from jaxsearch.core import cpu, cumsum, primitive, rows
from jaxsearch.core.order import ORDERS

SIDES = ["left", "right"]
SORTED_V = [None, True, False]

# (n, m): balanced, both skews, tiny, and sizes that leave ragged chunks.
SHAPES = [(1000, 1000), (50_000, 40), (37, 20_000), (1, 5), (257, 1031)]


def check_matches(a, v, side, sorter=None, **kwargs):
    """jaxsearch's answer equals jnp's: values, dtype and shape."""
    got = jaxsearch.searchsorted(a, v, side, sorter, **kwargs)
    want = jnp.searchsorted(a, v, side, sorter)
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    return got


def check_problem(rng, dtype, n, m, side, sorted_v, *, sort_v=True, **keys_kwargs):
    a = sort_keys(random_keys(rng, n, dtype, **keys_kwargs))
    v = random_keys(rng, m, dtype, **keys_kwargs)
    if sort_v:
        v = sort_keys(v)
    got = check_matches(jnp.asarray(a), jnp.asarray(v), side, sorted_v=sorted_v)
    if dtype != "bfloat16":  # numpy agrees on NaN last and -0.0 == 0.0 too
        np.testing.assert_array_equal(np.asarray(got), np.searchsorted(a, v, side))


@pytest.mark.parametrize("sorted_v", SORTED_V)
@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("dtype", DTYPES_32)
def test_dtypes_sides_and_orders(dtype, side, sorted_v):
    # A seed of the case's own, the same in every run (hash() of a str is
    # not: PYTHONHASHSEED salts it).
    rng = np.random.default_rng(zlib.crc32(f"{dtype}-{side}-{sorted_v}".encode()))
    for n, m in SHAPES:
        check_problem(rng, dtype, n, m, side, sorted_v)
    if sorted_v is not True:
        check_problem(rng, dtype, 3000, 2000, side, sorted_v, sort_v=False)


@pytest.mark.parametrize("sorted_v", SORTED_V)
@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("dtype", DTYPES_64)
def test_x64_dtypes(x64, dtype, side, sorted_v):
    rng = np.random.default_rng(7)
    for n, m in SHAPES[:3]:
        check_problem(rng, dtype, n, m, side, sorted_v)
    if sorted_v is not True:
        check_problem(rng, dtype, 3000, 2000, side, sorted_v, sort_v=False)


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("sorted_v", SORTED_V)
def test_heavy_duplicates(side, sorted_v):
    rng = np.random.default_rng(1)
    for dtype in ("float32", "int32", "uint8"):
        check_problem(rng, dtype, 5000, 5000, side, sorted_v, distinct=3)


def test_special_float_values():
    specials = [-np.inf, -1.0, -0.0, 0.0, 0.0, 1.0, np.inf, np.inf, np.nan, np.nan]
    a = jnp.array(specials, jnp.float32)
    v = jnp.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0, -2.0], jnp.float32)
    for side in SIDES:
        for sorted_v in SORTED_V:
            check_matches(a, jnp.sort(v), side, sorted_v=sorted_v)
        check_matches(a, v, side, sorted_v=None)
        check_matches(a, v, side, sorted_v=False)
    # All-NaN haystack and needles.
    check_matches(jnp.full(5, jnp.nan), jnp.full(3, jnp.nan), "left")
    check_matches(jnp.full(5, jnp.nan), jnp.full(3, jnp.nan), "right")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_subnormals_compare_as_jnp_does(dtype):
    """XLA:CPU flushes subnormals to zero in comparisons; so do we, on every thread."""
    tiny = float(jnp.finfo(dtype).smallest_subnormal)
    keys = np.array([-3 * tiny, -tiny, 0.0, tiny, 2 * tiny, 1.0] * 5000, dtype=jnp.dtype(dtype))
    a, v = jnp.sort(jnp.asarray(keys)), jnp.sort(jnp.asarray(keys[::-1]))
    for side in SIDES:
        for sorted_v in SORTED_V:
            check_matches(a, v, side, sorted_v=sorted_v)
    for kernel in cpu.KERNELS:
        want = jnp.searchsorted(a, v, "right")
        got = CPU_SEARCH(a.astype(jnp.float32), v.astype(jnp.float32), side="right",
                         order="sorted", kernel=kernel, out_dtype=np.dtype(np.int32), threads=2,
                         min_parallel=1000)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("v_shape", [(), (3, 4), (2, 0, 3), (1, 1, 7)])
def test_needle_shapes(v_shape):
    a = jnp.arange(10, dtype=jnp.float32)
    v = jax.random.uniform(jax.random.key(0), v_shape, minval=-1, maxval=11)
    check_matches(a, v, "left", sorted_v=None)
    check_matches(a, v, "right", sorted_v=False)
    # The promise covers the flattened needles.
    check_matches(a, jnp.sort(v.ravel()).reshape(v_shape), "left", sorted_v=True)


def test_empty_haystack():
    for v in (jnp.arange(4.0), jnp.float32(1.0), jnp.zeros((0,))):
        check_matches(jnp.zeros((0,), jnp.float32), v, "left")
        check_matches(jnp.zeros((0,), jnp.float32), v, "right")


def test_python_scalars_and_promotion():
    a = jnp.array([1, 2, 3], jnp.int32)
    check_matches(a, 2.5, "left")
    check_matches(a, 2, "right")
    check_matches(jnp.array([1.0, 2.0], jnp.float16), jnp.array([1, 2], jnp.int32), "left")
    check_matches(np.array([1, 5, 9], np.uint8), np.array([-1, 5], np.int8), "left")
    check_matches(jnp.array([False, True]), jnp.array([True, False]), "right")


def test_sorter():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(500).astype(np.float32)
    sorter = jnp.argsort(a)
    v = np.sort(rng.standard_normal(200).astype(np.float32))
    for side in SIDES:
        got = check_matches(jnp.asarray(a), jnp.asarray(v), side, sorter)
        np.testing.assert_array_equal(np.asarray(got),
                                      np.searchsorted(a, v, side, np.asarray(sorter)))


def test_dtypes_without_kernels_fall_back_to_jnp():
    a = jnp.array([1 + 1j, 2 + 0j, 3 - 1j])
    check_matches(a, jnp.array([2 + 0j, 0j]), "left")
    f8 = jnp.array([-2.0, 0.5, 1.0, 4.0], jnp.float8_e4m3fn)
    check_matches(f8, jnp.array([0.5, 3.0], jnp.float8_e4m3fn), "right")


@pytest.mark.parametrize("method", jaxsearch.JNP_METHODS)
def test_jnp_methods_forwarded(method):
    a = jnp.arange(20.0)
    v = jnp.array([3.5, -1.0, 25.0])
    got = jaxsearch.searchsorted(a, v, method=method)
    np.testing.assert_array_equal(got, jnp.searchsorted(a, v, method=method))
    assert_jnp(lambda a, v: jaxsearch.searchsorted(a, v, method=method), a, v)


@pytest.mark.parametrize("implementation", ["cython", "xla", None])
def test_implementations(implementation):
    rng = np.random.default_rng(4)
    a = jnp.asarray(np.sort(rng.standard_normal(999).astype(np.float32)))
    v = jnp.asarray(np.sort(rng.standard_normal(1234).astype(np.float32)))
    check_matches(a, v, "right", implementation=implementation)


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("dtype", tiered(DTYPES_32 + DTYPES_64, lambda dtype: dtype == "float32"))
def test_pallas_interpret_matches_jnp(dtype, side):
    """implementation="pallas" on a CPU backend: the GPU kernels in interpret
    mode, checked (sorted_v=None compiles both kernels under lax.cond)."""
    rng = np.random.default_rng(10)
    with jax.enable_x64(dtype in DTYPES_64):
        a = jnp.asarray(sort_keys(random_keys(rng, 100, dtype)))
        for v in (sort_keys(random_keys(rng, 64, dtype)), random_keys(rng, 64, dtype)):
            check_matches(a, jnp.asarray(v), side, sorted_v=None, implementation="pallas")


def test_jit_and_platform_dispatch_uses_custom_call():
    a, v = jnp.arange(100.0), jnp.linspace(-1, 101, 50)
    f = jax.jit(lambda a, v: jaxsearch.searchsorted(a, v, sorted_v=True))
    np.testing.assert_array_equal(f(a, v), jnp.searchsorted(a, v))
    hlo = f.lower(a, v).as_text()
    assert cpu.TARGET_NAME in hlo
    assert_cpu_kernel(f, a, v, order="sorted")


def test_vmap_batched_a_v_and_both():
    rng = np.random.default_rng(5)
    a = jnp.asarray(np.sort(rng.standard_normal((4, 300)), axis=1).astype(np.float32))
    v = jnp.asarray(np.sort(rng.standard_normal((4, 200)), axis=1).astype(np.float32))
    want_both = jnp.stack([jnp.searchsorted(a[i], v[i]) for i in range(4)])
    for sorted_v in SORTED_V:
        f = lambda a, v: jaxsearch.searchsorted(a, v, sorted_v=sorted_v)  # noqa: E731
        np.testing.assert_array_equal(jax.vmap(f)(a, v), want_both)
        np.testing.assert_array_equal(jax.vmap(f, (0, None))(a, v[0]),
                                      jnp.stack([jnp.searchsorted(a[i], v[0]) for i in range(4)]))
        np.testing.assert_array_equal(jax.vmap(f, (None, 0))(a[1], v),
                                      jnp.stack([jnp.searchsorted(a[1], v[i]) for i in range(4)]))


def test_nested_vmap_broadcasts_batch_dims():
    rng = np.random.default_rng(6)
    a = jnp.asarray(np.sort(rng.integers(0, 50, (3, 40)), axis=1).astype(np.int32))
    v = jnp.asarray(np.sort(rng.integers(0, 50, (5, 30)), axis=1).astype(np.int32))
    f = jax.vmap(jax.vmap(jaxsearch.searchsorted, (None, 0)), (0, None))
    want = jnp.stack([jnp.stack([jnp.searchsorted(a[i], v[j]) for j in range(5)])
                      for i in range(3)])
    np.testing.assert_array_equal(f(a, v), want)


PRIMITIVE_PARAMS = {"side": "left", "order": "check", "out_dtype": np.int32,
                    "cpu_kernel": "merge", "cpu_threads": 1, "cpu_min_parallel": 1 << 16,
                    "cpu_bucket_min_bytes": 1 << 24}


@pytest.mark.parametrize("search", [
    jaxsearch.searchsorted,
    functools.partial(primitive.bind_search, **PRIMITIVE_PARAMS),
    functools.partial(cumsum.search, side="left", order="check", out_dtype=np.int32),
], ids=["searchsorted", "primitive", "cumsum_primitive"])
def test_jvp_through_jit_and_vmap_gives_float0_tangents(search):
    """The primitives' own derivative rule: symbolic zero tangents (float0,
    as for any integer output), under jit and vmap, with the primal equal to
    the search's answer."""
    a = jnp.linspace(0.5, 20.0, 40)
    v = jnp.stack([jnp.linspace(0.0, 25.0, 9), jnp.linspace(25.0, 0.0, 9)])
    f = jax.jit(jax.vmap(search, in_axes=(None, 0)))
    out, tangent = jax.jvp(f, (a, v), (jnp.ones_like(a), jnp.ones_like(v)))
    np.testing.assert_array_equal(out, jax.vmap(search, in_axes=(None, 0))(a, v))
    assert tangent.dtype == jax.dtypes.float0 and tangent.shape == out.shape


def test_eager_calls_of_the_primitive_compile_once():
    """Called outside jit, the primitive goes through jax's dispatch, which
    compiles it once per shapes and parameters."""
    a, v = jnp.arange(100.0), jnp.linspace(-1.0, 101.0, 7)
    compiles = []

    class Counter(logging.Handler):
        def emit(self, record):
            compiles.append("ompil" in record.getMessage())

    counter = Counter()
    logger = logging.getLogger("jax")
    logger.addHandler(counter)
    try:
        with jax.log_compiles():
            first = primitive.bind_search(a, v, **PRIMITIVE_PARAMS)
            compiled = sum(compiles)
            again = primitive.bind_search(a, v, **PRIMITIVE_PARAMS)
    finally:
        logger.removeHandler(counter)
    assert compiled > 0 and sum(compiles) == compiled
    np.testing.assert_array_equal(first, jnp.searchsorted(a, v))
    np.testing.assert_array_equal(again, first)


def test_grad_is_zero_and_does_not_raise():
    a = jnp.linspace(0.0, 1.0, 11)
    table = jnp.arange(12.0)

    def loss(a, v):
        idx = jaxsearch.searchsorted(a, v)
        return jnp.sum(table[idx] * v) + jnp.sum(a)

    ga, gv = jax.grad(loss, argnums=(0, 1))(a, jnp.array([0.25, 0.75]))
    np.testing.assert_array_equal(ga, jnp.ones_like(a))
    np.testing.assert_array_equal(gv, table[jnp.searchsorted(a, jnp.array([0.25, 0.75]))])


@pytest.mark.parametrize("kernel", cpu.KERNELS)
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("threads, min_parallel", [(1, 1 << 16), (3, 7)])
def test_every_cpu_kernel(kernel, order, threads, min_parallel):
    """Each kernel, reached directly rather than through the selector, on one
    thread and cut into parts of 7 needles over three threads."""
    rng = np.random.default_rng(8)
    for n, m in SHAPES + [(10, 0), (5000, 5000)]:
        for dtype in ("float32", "int16", "uint32"):
            a = sort_keys(random_keys(rng, n, dtype))
            v = sort_keys(random_keys(rng, m, dtype))
            for side in SIDES:
                for out_dtype in (np.int32, np.int64) if dtype == "int16" else (np.int32,):
                    got = CPU_SEARCH(jnp.asarray(a), jnp.asarray(v), side=side, order=order,
                                     kernel=kernel, out_dtype=np.dtype(out_dtype),
                                     threads=threads, min_parallel=min_parallel)
                    assert got.dtype == np.dtype(out_dtype)
                    np.testing.assert_array_equal(np.asarray(got), np.searchsorted(a, v, side))


@pytest.mark.parametrize("kernel", cpu.KERNELS)
def test_outputs_over_several_huge_pages(kernel):
    """Outputs of several MiB (the handler advises huge pages under them),
    in rows of a batch that start mid-page, over two threads."""
    rng = np.random.default_rng(10)
    a = np.sort(rng.standard_normal(3000)).astype(np.float32)
    v = np.sort(rng.standard_normal((2, (3 << 20) + 5)), axis=-1).astype(np.float32)
    want = np.stack([np.searchsorted(a, row, "right") for row in v])
    for out_dtype in (np.int32, np.int64):
        got = CPU_SEARCH(jnp.asarray(a)[None], jnp.asarray(v), side="right", order="sorted",
                         kernel=kernel, out_dtype=np.dtype(out_dtype), threads=2,
                         min_parallel=1 << 16)
        np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("kernel", cpu.KERNELS)
def test_broken_promise_stays_in_bounds(kernel):
    rng = np.random.default_rng(9)
    n = 777
    cases = {
        "unsorted v": (np.sort(rng.standard_normal(n)), rng.standard_normal(2000)),
        "reversed v": (np.sort(rng.standard_normal(n)), np.sort(rng.standard_normal(2000))[::-1]),
        "NaN inside v": (np.sort(rng.standard_normal(n)),
                         np.where(rng.random(2000) < 0.1, np.nan,
                                  np.sort(rng.standard_normal(2000)))),
        "unsorted a": (rng.standard_normal(n), np.sort(rng.standard_normal(2000))),
        "NaN inside a": (np.where(rng.random(n) < 0.2, np.nan, np.sort(rng.standard_normal(n))),
                         np.sort(rng.standard_normal(2000))),
    }
    for name, (a, v) in cases.items():
        for side in SIDES:
            got = np.asarray(CPU_SEARCH(jnp.asarray(a, jnp.float32), jnp.asarray(v, jnp.float32),
                                        side=side, order="sorted", kernel=kernel,
                                        out_dtype=np.dtype(np.int32), threads=2, min_parallel=100))
            assert got.min() >= 0 and got.max() <= n, name
    # Through the public API too: the promise is the caller's, bounds are ours.
    a, v = cases["unsorted v"]
    got = jaxsearch.searchsorted(a.astype(np.float32), v.astype(np.float32), sorted_v=True)
    assert int(got.min()) >= 0 and int(got.max()) <= n


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(side="middle"), ValueError, "side"),
    (dict(sorted_v="yes"), TypeError, "sorted_v"),
    (dict(sorted_v=1), TypeError, "sorted_v"),
    (dict(method="fast"), ValueError, "method"),
    (dict(implementation="cuda"), ValueError, "implementation"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        jaxsearch.searchsorted(jnp.arange(3.0), 1.0, **kwargs)


@pytest.mark.parametrize("name, call", [
    ("sorted_v", lambda a, v, s: jaxsearch.searchsorted(a, v, sorted_v=s)),
    ("sorted_v", lambda a, v, s: jaxsearch.searchsorted_cumsum(a, v, sorted_v=s)),
    ("sorted_x", lambda a, v, s: jaxsearch.digitize(v, a, sorted_x=s)),
    ("sorted_x", lambda a, v, s: jaxsearch.interp(v, a, a, sorted_x=s)),
])
def test_a_traced_promise_is_named_as_such(name, call):
    """The promise chooses the kernel at trace time: passed through jit as an
    argument, it is refused with a message saying what it must be."""
    a, v = jnp.arange(5.0), jnp.arange(3.0)
    with pytest.raises(TypeError, match=f"{name} must be a Python bool or None, not a traced "
                                        "value.*static_argnames"):
        jax.jit(call)(a, v, True)
    jax.jit(call, static_argnums=2)(a, v, True)  # static, it is a Python bool again


def test_bad_inputs():
    with pytest.raises(ValueError, match="1-dimensional"):
        jaxsearch.searchsorted(jnp.ones((2, 2)), 1.0)
    with pytest.raises(ValueError, match="1-dimensional"):
        jaxsearch.searchsorted(jnp.float32(1.0), 1.0)
    with pytest.raises(TypeError, match="array"):
        jaxsearch.searchsorted([1, 2, 3], 2)


def test_search_rows_refuses_a_parameter_no_route_reads():
    """The rows' routes read the primitive's `cpu_` parameters by name
    (cpu.search_arguments), so a misspelt or new one must not pass unread."""
    a, v = jnp.arange(8, dtype=jnp.float32), jnp.arange(3, dtype=jnp.float32)
    with pytest.raises(TypeError, match=r"unexpected parameters \['kernel'\]"):
        rows.search_rows(a, v, platform="cpu", implementation=None, side="left", order="any",
                         out_dtype=np.int32, kernel="merge")
    np.testing.assert_array_equal(
        rows.search_rows(a, v, platform="cpu", implementation=None, side="left", order="any",
                         out_dtype=np.int32, cpu_kernel="merge", cpu_threads=1,
                         cpu_min_parallel=1),
        np.searchsorted(np.arange(8), np.arange(3)))
