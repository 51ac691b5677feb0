"""The CPU bin table (cpu_ext/bin_table.pxd): needles in any order, each
searched in the window of `a` that its bin's table entry gives, answer as
jnp's default method does.

The table serves rows of `a` of at least 2 KiB that are sorted, or sorted
but for a few descents, whose needles are out of order. Rows in a core's L2
take a bin per key (stride 1), longer ones a bin per 8 keys: the float32
cases run at both. Each case differs from the table's easy one (evenly
spread keys) in a way its exactness argument has to cover: crowded and
empty bins, keys equal over whole bins, a NaN tail, infinite ends (no
table), needles outside the keys' range, signed zeros, integers beyond a
double's precision, and descents, whose needles take jnp's probes where
they could mislead.
"""

from __future__ import annotations

import functools
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.cpu_calls import CPU_SEARCH, SIDES, cpu_search, like_jnp, lowered_unsorted_call, seeded

from jaxsearch.core import cpu
from jaxsearch.tuning import CpuConfig

# Keys of a row, enough for a table of stride 8 at every key width tested.
N_FLOAT32 = 40_000  # 160 KB
# Keys of a row whose table takes stride 1.
N_FINE = 4_000  # 16 KB
# Needles: blocks of 128 and a tail of 77 past them.
M = 4_813
# One thread with one part; two threads with parts of 700 needles, so that
# several parts wait on one row's table while another builds it.
THREADS = [(1, 1 << 16), (2, 700)]


def float_rows(rng: np.random.Generator, n: int, dtype: str) -> dict[str, np.ndarray]:
    """Rows of `a`, sorted (NaN last) but for the descents of the last three."""
    normal = np.sort(rng.standard_normal(n)).astype(dtype)
    crowded = np.sort(rng.lognormal(0, 3, n)).astype(dtype)  # most keys in a few bins
    steps = np.repeat(np.sort(rng.standard_normal(n // 2000)), 2000).astype(dtype)
    nan_tail = normal.copy()
    nan_tail[-n // 10:] = np.nan
    zeros = np.sort(np.concatenate([rng.standard_normal(n - n // 4),
                                    rng.choice([0.0, -0.0], n // 4)])).astype(dtype)
    inf_ends = normal.copy()
    inf_ends[[0, -1]] = -np.inf, np.inf
    descents = normal.copy()
    at = rng.choice(np.arange(1, n), 30, replace=False)
    descents[at] = np.nextafter(descents[at - 1], -np.inf)  # steps down of an ulp
    first_bin = normal.copy()
    first_bin[1] = np.nextafter(first_bin[0], -np.inf)  # marks bin 0, where NaN needles go
    wide = normal.copy()
    wide[n // 3:n // 2] -= 1  # a descent whose interval spans many bins
    return {"normal": normal, "crowded bins": crowded, "equal over whole bins": steps,
            "NaN tail": nan_tail, "signed zeros": zeros, "infinite ends": inf_ends,
            "descents of an ulp": descents, "a descent in the first bin": first_bin,
            "wide descents": wide}


def needles_for(rng: np.random.Generator, a: np.ndarray, m: int) -> np.ndarray:
    """Unsorted needles: keys of `a` and their neighbours, values inside and
    outside its range, NaN, +-inf and +-0.0."""
    keys = rng.choice(a, m // 3)
    finite = a[np.isfinite(a)]
    spread = np.ptp(finite) if finite.size else 1.0
    v = np.concatenate([
        keys, np.nextafter(keys, np.inf), np.nextafter(keys, -np.inf),
        rng.uniform(np.min(finite) - spread / 4, np.max(finite) + spread / 4, m),
        [np.nan, np.inf, -np.inf, 0.0, -0.0]]).astype(a.dtype)
    return rng.permutation(v)[:m]


def assert_like_jnp(a: np.ndarray, v: np.ndarray, what: str) -> None:
    for side in SIDES:
        want = like_jnp(a, v, side)
        for kernel, order in [("bisect", "any"), ("bisect", "check"), ("merge", "check")]:
            for threads, min_parallel in THREADS:
                got = cpu_search(a, v, side, order, kernel, threads, min_parallel)
                np.testing.assert_array_equal(
                    got, want, err_msg=f"{what}, {side}, {kernel}/{order}, {threads} threads")


@pytest.mark.parametrize("n", [N_FLOAT32, N_FINE])
@pytest.mark.parametrize("case", list(float_rows(seeded("names"), 4000, "float32")))
def test_float32_rows(case, n):
    rng = seeded("float32", case, n)
    a = float_rows(rng, n, "float32")[case]
    assert_like_jnp(a, needles_for(rng, a, M), f"{case}, {n} keys")


def test_the_rows_take_both_strides():
    """The rows above lie on either side of the stride's threshold."""
    assert 4 * N_FINE < cpu._ext.TABLE_FINE_ROW_BYTES <= 4 * N_FLOAT32
    assert 4 * N_FINE >= cpu._ext.TABLE_ROW_MIN_BYTES


@pytest.mark.parametrize("case", ["normal", "crowded bins", "NaN tail", "descents of an ulp"])
def test_float64_rows(x64, case):
    rng = seeded("float64", case)
    a = float_rows(rng, N_FLOAT32 // 2, "float64")[case]
    assert_like_jnp(a, needles_for(rng, a, M), case)


def test_the_descents_mislead_a_plain_search():
    """The control for the descents: a search that takes `a` sorted (the
    merge, promised sorted needles; jaxsearch's lower-bound search runs
    jnp's probes where they run in gathers) answers otherwise than jnp on
    this row, so the table's answers being jnp's shows the descents' bins
    probed as jnp probes."""
    rng = seeded("control")
    a = float_rows(rng, N_FLOAT32, "float32")["descents of an ulp"]
    v = np.sort(needles_for(rng, a, M))
    assert (cpu_search(a, v, "left", "sorted", "merge", 1, 1 << 16)
            != like_jnp(a, v, "left")).any()


@pytest.mark.parametrize("dtype, n", [("int8", 140_000), ("uint16", 70_000), ("int32", 40_000),
                                      ("uint32", 40_000), ("int64", 20_000), ("uint64", 20_000),
                                      ("int32", N_FINE), ("uint32", N_FINE)])
def test_integer_rows(x64, dtype, n):
    """Sorted integers over the dtype's whole range (keys a double cannot
    tell apart share a bin) and over a narrow one (many equal keys)."""
    rng = seeded("int", dtype)
    info = np.iinfo(dtype)
    wide = np.sort(rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype))
    wide[[0, -1]] = info.min, info.max
    near_max = np.sort(rng.integers(max(info.min, info.max - 5000), info.max, n, endpoint=True,
                                    dtype=dtype))
    narrow = np.sort(rng.integers(0, 100, n, dtype=dtype))
    # Neighbours swapped: descents whose keys, past 2^53, a double rounds.
    swapped = wide.copy()
    at = rng.choice(np.arange(1, n), 30, replace=False)
    swapped[at], swapped[at - 1] = wide[at - 1], wide[at]
    for name, a in {"whole range": wide, "next to the maximum": near_max,
                    "narrow": narrow, "neighbours swapped": swapped}.items():
        v = np.concatenate([rng.choice(a, M // 2),
                            rng.integers(info.min, info.max, M - M // 2, endpoint=True,
                                         dtype=dtype)])
        assert_like_jnp(a, rng.permutation(v), f"{dtype}, {name}")


def test_rows_of_a_each_with_its_table():
    """Batched: rows of `a` (one with descents) against rows of needles, and
    one row of `a` broadcast over many rows of needles (one table, shared)."""
    rng = seeded("rows")
    rows = float_rows(rng, N_FLOAT32, "float32")
    a = np.stack([rows["normal"], rows["descents of an ulp"], rows["crowded bins"]])
    v = np.stack([needles_for(rng, row, M) for row in a])
    for a_rows, v_rows in [(a, v), (a[:1], v), (a[1:2], v)]:
        for side in SIDES:
            want = like_jnp(a_rows, v_rows, side)
            for threads, min_parallel in THREADS:
                got = cpu_search(a_rows, v_rows, side, "check", "merge", threads, min_parallel)
                np.testing.assert_array_equal(got, want, err_msg=f"{a_rows.shape}, {side}")


def test_many_descents():
    """A row with as many descents as are listed (one per 64 keys), an
    eighth of its bins marked: only the needles inside a descent's interval
    take jnp's probes, the others of a marked bin their window; sorted, the
    same needles are merged around the descents. Needles on, next to and
    between the two keys of each descent, and anywhere; a search that takes
    the row sorted (the merge, promised sorted needles) answers some of the
    sorted ones otherwise."""
    rng = seeded("many descents")
    n = 64 * 40_000
    a = np.sort(rng.standard_normal(n)).astype(np.float32)
    at = rng.choice(np.arange(1, n // 64), 39_000, replace=False) * 64
    a[at] = np.nextafter(a[at - 1], -np.inf)
    ends = np.concatenate([a[at], a[at - 1]])
    v = np.concatenate([ends, np.nextafter(ends, np.inf), np.nextafter(ends, -np.inf),
                        rng.standard_normal(20_000).astype(np.float32)])
    v = rng.permutation(v.astype(np.float32))
    for side in SIDES:
        assert (cpu_search(a, np.sort(v), side, "sorted", "merge", 1, 1 << 16)
                != like_jnp(a, np.sort(v), side)).any()
    for needles, what in [(v, "any order"), (np.sort(v), "sorted")]:
        for side in SIDES:
            want = like_jnp(a, needles, side)
            for kernel, order in [("bisect", "any"), ("merge", "check")]:
                for threads, min_parallel in THREADS:
                    got = cpu_search(a, needles, side, order, kernel, threads, min_parallel)
                    np.testing.assert_array_equal(
                        got, want, err_msg=f"{what}, {side}, {kernel}/{order}, {threads} threads")


def test_a_promised_sorted_takes_its_table():
    """A binary-searched call that promised sorted needles checks a row of
    2 MiB or more, with a needle per 8 keys or more, for its bin table where
    the gathers would search it (the x86-64-v3 module), and phase 0 fills the
    table block by block as it checks: jnp's answers on a sorted row and one
    with a NaN tail. On one with descents (a broken promise) the check finds
    them, so the answers are jnp's there too; the baseline module checks
    nothing, and its answers need only lie within [0, n]."""
    rng = seeded("promised")
    n = 600_000  # 2.4 MB of float32 keys
    rows = float_rows(rng, n, "float32")
    for case in ["normal", "NaN tail", "descents of an ulp"]:
        a = rows[case]
        v = np.sort(needles_for(rng, a, n // 6))
        for side in SIDES:
            want = like_jnp(a, v, side)
            for threads, min_parallel in THREADS:
                got = cpu_search(a, v, side, "sorted", "bisect", threads, min_parallel)
                what = f"{case}, {side}, {threads} threads, {cpu.ISA}"
                if case == "descents of an ulp" and cpu.ISA != "x86-64-v3":
                    assert ((got >= 0) & (got <= n)).all(), what
                else:
                    np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("ratio", [0.0, math.inf])
def test_the_tuned_table_check(ratio):
    """`CpuConfig.table_check_ratio` in place of the built-in rule where the
    gathers serve: inf checks every row of 128 KiB or more for its table, 0
    none (the gathers alone); jnp's answers either way, descents included."""
    rng = seeded("tuned", ratio)
    rows = float_rows(rng, N_FLOAT32, "float32")
    for case in ["normal", "NaN tail", "descents of an ulp"]:
        a = rows[case]
        v = needles_for(rng, a, M)
        for side in SIDES:
            got = CPU_SEARCH(jnp.asarray(a), jnp.asarray(v), side=side, order="any",
                             kernel="bisect", out_dtype=np.dtype(np.int32), threads=2,
                             min_parallel=700, table_check_ratio=ratio)
            np.testing.assert_array_equal(np.asarray(got), like_jnp(a, v, side),
                                          err_msg=f"{case}, {side}")


@pytest.mark.skipif(not cpu.gathers_search(np.float32, N_FLOAT32),
                    reason="the gathers serve the x86-64-v3 build only")
@pytest.mark.parametrize("n, fewest_needles", [
    (250_000, 1_000_000),    # 1 MB: four needles per key
    (1_000_000, 62_500),     # 4 MB: 16 keys per needle
    (4_194_303, 262_144),    # a key under 16 MiB: 16
    (4_194_304, 87_382),     # 16 MiB: 48
    (10_000_000, 208_334),   # 40 MB: 48
])
def test_the_built_in_table_check(n, fewest_needles):
    """Where the gathers serve, a binary-searched row of 4-byte keys takes
    its bin table (and the check of `a` it needs) from these many needles
    under the built-in rule: four needles per key under 2 MiB, a needle
    per 16 keys under 16 MiB, per 48 keys from there."""
    checked = functools.partial(cpu._ext.table_checked, 4, n)
    assert checked(fewest_needles) and not checked(fewest_needles - 1)


@pytest.mark.parametrize("field, attribute, default", [
    ("table_check_ratio", "table_check", -1),  # the built-in rule
    ("bucket_keys_per_needle", "bucket_density",
     16 * (cpu._ext.BUCKET_KEYS_PER_NEEDLE if cpu.AVAILABLE else 16)),
])
def test_the_config_reaches_the_call(field, attribute, default):
    """A ratio of keys per needle in force reaches the custom call as its
    attribute, in sixteenths of a key per needle (inf: the int32 limit);
    the default config passes the extension's built-in value."""
    def lowered(**fields):
        return re.search(rf"{attribute} = (-?\d+) : i32",
                         lowered_unsorted_call(CpuConfig(**fields))).group(1)

    assert lowered(**{field: 2.5}) == "40"
    assert lowered(**{field: math.inf}) == str(2**31 - 1)
    assert lowered() == str(default)


def test_a_call_without_table_check():
    """A program lowered before the `table_check` and `bucket_density`
    attributes existed (an exported artifact) still runs: both are optional,
    and the built-in rules answer."""
    rng = seeded("older call")
    a = float_rows(rng, N_FLOAT32, "float32")["descents of an ulp"]
    v = needles_for(rng, a, M)
    call = jax.ffi.ffi_call(cpu.TARGET_NAME, jax.ShapeDtypeStruct(v.shape, np.int32))
    got = call(jnp.asarray(a), jnp.asarray(v), bucket_min_bytes=np.int32(1 << 24),
               right=np.int32(0), order=np.int32(cpu.ORDER_NAMES["any"]),
               kernel=np.int32(cpu.KERNEL_NAMES["bisect"]), threads=np.int32(2),
               min_parallel=np.int32(700))
    np.testing.assert_array_equal(np.asarray(got), like_jnp(a, v, "left"))
