"""Test data, and the cases every GPU kernel backend must pass (`KernelCases`),
shared by the kernels' tests: Pallas Triton, Mosaic GPU and native Triton."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers.tiers import tiered
from jaxsearch.pallas_kernels import BinarySearchConfig, MergePathConfig

X64_DTYPES = ["int64", "uint64", "float64"]
DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "uint8",
    "uint16",
    "uint32",
    "float16",
    "bfloat16",
    "float32",
] + X64_DTYPES


# One config of each kernel and method, for the compile and lowering tests.
SAMPLE_CONFIGS = [
    MergePathConfig(tile=1024),
    MergePathConfig(tile=256, method="compare", chunk=32),
    MergePathConfig(tile=1024, method="serial", items=8),
    BinarySearchConfig(block=256),
]


def sample(rng, dtype, size):
    """Sorted values with many duplicates; floats add +-inf, +-0.0 and NaN."""
    dtype = jnp.dtype(dtype)
    if dtype == jnp.bool_:
        return np.sort(rng.integers(0, 2, size).astype(bool))
    if jnp.issubdtype(dtype, jnp.integer):
        info = np.iinfo(dtype)
        x = rng.integers(-20 if info.min < 0 else 0, 20, size).astype(dtype)
        x = np.where(rng.random(size) < 0.05, info.max, x)
        return np.sort(np.where(rng.random(size) < 0.05, info.min, x))
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -1.5])
    x = np.where(
        rng.random(size) < 0.4, rng.choice(specials, size), np.round(rng.normal(size=size) * 4, 1)
    )
    # Sort before the cast: numpy misplaces NaN when sorting bfloat16.
    return np.sort(x).astype(dtype)


def expected(a, v, side):
    """numpy's answer; floats compared in float64 (exact for every float)."""
    if jnp.issubdtype(a.dtype, jnp.floating):
        a, v = a.astype(np.float64), v.astype(np.float64)
    return np.searchsorted(a, v, side=side)


def assert_in_range(result, n):
    # An unwritten answer would hold garbage (the interpreters fill INT_MIN).
    assert result.min(initial=0) >= 0 and result.max(initial=0) <= n


def check_promise(result, a, v, side, promise_kept):
    """Exact answers where `a` and `v` are sorted as promised; else the only
    guarantee left, answers in [0, len(a)]."""
    if promise_kept:
        np.testing.assert_array_equal(result, expected(a, v, side))
    else:
        assert_in_range(result, len(a))


def default_config_inputs():
    """Sorted float inputs large enough for the default configs' tiles."""
    rng = np.random.default_rng(5)
    return sample(rng, "float32", 5000), sample(rng, "float32", 3000)


def unsorted_cases(rng):
    """Inputs that break the sortedness promise, each way it can be broken."""
    sorted_a = np.sort(rng.normal(size=300)).astype(np.float32)
    random_a = rng.normal(size=300).astype(np.float32)
    sorted_v = np.sort(rng.normal(size=500)).astype(np.float32)
    random_v = rng.normal(size=500).astype(np.float32)
    nan_v = np.where(rng.random(500) < 0.2, np.nan, sorted_v).astype(np.float32)
    return [
        (sorted_a, random_v),
        (sorted_a, sorted_v[::-1]),
        (random_a, random_v),
        (random_a, sorted_v),
        (sorted_a[::-1], sorted_v),
        (sorted_a, nan_v),
    ]


SIDES = ("left", "right")

# Tile edges, both skews, single elements (tiles are 128 in the tests).
SIZES = [(1, 1), (1, 300), (300, 1), (128, 128), (129, 127), (3000, 5), (5, 3000)]

# The quick tier's share of the matrix (tests/conftest.py): the subclass's
# SMOKE_KERNELS at these dtypes and sizes; the rest is the full tier.
QUICK_DTYPES = ("float32", "uint64")
QUICK_SIZES = ((1, 1), (129, 127))
# The sizes that span more than a few tiles: skews that only MATRIX_KERNELS
# (one kernel of each kind and backend) run.
LONG_SIZES = [(n, m) for n, m in SIZES if max(n, m) > 300]


class KernelCases:
    """The cases every GPU implementation must pass, written once: a test
    file subclasses this (`class TestPallasKernels(KernelCases)`) and says
    what to run them on.

    Class attributes, names of the subclass's kernels (each test takes one
    of them as `kernel`, `matrix_kernel` or `binary_kernel`):
      KERNELS: all of them;
      MATRIX_KERNELS: one of each kind and backend (where more warpgroups
        change nothing, and the only ones `test_sizes` runs at LONG_SIZES);
      BINARY_KERNELS: those that take needles in any order.

      SMOKE_KERNELS: those the quick tier runs these cases on (at
        QUICK_DTYPES and QUICK_SIZES); the others run in the full tier.

    Fixtures, overridden by the subclass:
      case_search: `search(kernel, a, v, side, out_dtype="int32")`, one
        kernel on numpy arrays, in the interpreter or on the device, answers
        as numpy;
      vmap_search: `search(kernel, a, v, side, in_axes)`, the same under
        jax.vmap.
    """

    KERNELS: tuple = ()
    MATRIX_KERNELS: tuple = ()
    BINARY_KERNELS: tuple = ()
    SMOKE_KERNELS: tuple = ()

    def pytest_generate_tests(self, metafunc):
        """Each case on each of the subclass's kernels it takes."""
        smoke = self.SMOKE_KERNELS
        if metafunc.function.__name__ == "test_sizes":
            # Mosaic GPU's second warpgroup took 90 s on the long skews alone.
            metafunc.parametrize("kernel, n, m", tiered(
                [(kernel, n, m) for kernel in self.KERNELS for n, m in SIZES
                 if kernel in self.MATRIX_KERNELS or (n, m) not in LONG_SIZES],
                lambda case: case[0] in smoke and case[1:] in QUICK_SIZES))
            return
        for name, kernels in (("kernel", self.KERNELS), ("matrix_kernel", self.MATRIX_KERNELS),
                              ("binary_kernel", self.BINARY_KERNELS)):
            if name in metafunc.fixturenames:
                metafunc.parametrize(name, tiered(kernels, lambda kernel: kernel in smoke))

    @pytest.fixture
    def case_search(self):
        raise NotImplementedError("a KernelCases subclass defines the case_search fixture")

    @pytest.fixture
    def vmap_search(self):
        raise NotImplementedError("a KernelCases subclass defines the vmap_search fixture")

    @pytest.mark.parametrize("dtype", tiered(DTYPES, lambda dtype: dtype in QUICK_DTYPES))
    def test_dtypes(self, matrix_kernel, dtype, case_search):
        rng = np.random.default_rng(0)
        a, v = sample(rng, dtype, 300), sample(rng, dtype, 201)
        out_dtype = "int64" if dtype in X64_DTYPES else "int32"
        for side in SIDES:
            result = case_search(matrix_kernel, a, v, side, out_dtype=out_dtype)
            assert result.dtype == out_dtype
            np.testing.assert_array_equal(result, expected(a, v, side))
            with jax.enable_x64(dtype in X64_DTYPES):
                np.testing.assert_array_equal(
                    result, jnp.searchsorted(jnp.asarray(a), jnp.asarray(v), side=side)
                )

    def test_sizes(self, kernel, n, m, case_search):
        rng = np.random.default_rng(n * 10_000 + m)
        a = np.sort(rng.integers(0, 1000, n)).astype(np.int32)
        v = np.sort(rng.integers(-10, 1010, m)).astype(np.int32)
        for side in SIDES:
            np.testing.assert_array_equal(case_search(kernel, a, v, side), expected(a, v, side))

    def test_subnormals_keep_ieee_order(self, matrix_kernel, case_search):
        # The kernels compare bits, as numpy does; XLA:CPU flushes subnormals in
        # float compares, so jnp.searchsorted there treats them as zero.
        tiny = np.float32(1e-45)
        a = np.array([-tiny, -0.0, 0.0, tiny, 2 * tiny], np.float32)
        v = np.array([-2 * tiny, -tiny, 0.0, tiny, 1.0], np.float32)
        for side in SIDES:
            np.testing.assert_array_equal(
                case_search(matrix_kernel, a, v, side), np.searchsorted(a, v, side=side)
            )

    def test_int32_inputs_both_answer_widths(self, matrix_kernel, case_search):
        # Under x64 Python ints become int64: the kernels must not care.
        rng = np.random.default_rng(2)
        a = np.sort(rng.integers(0, 100, 300)).astype(np.int32)
        v = np.sort(rng.integers(0, 100, 200)).astype(np.int32)
        with jax.enable_x64(True):
            for out_dtype in ("int32", "int64"):
                result = case_search(matrix_kernel, a, v, "left", out_dtype=out_dtype)
                assert result.dtype == out_dtype
                np.testing.assert_array_equal(result, expected(a, v, "left"))

    def test_broken_promises_stay_in_range(self, matrix_kernel, case_search):
        # The clamps are the kernel's, whatever its warpgroups: one of each
        # kind (a second warpgroup cost 90 s more in Mosaic's interpreter).
        rng = np.random.default_rng(3)
        for a, v in unsorted_cases(rng):
            for side in SIDES:
                assert_in_range(case_search(matrix_kernel, a, v, side), len(a))

    def test_binary_search_any_needles(self, binary_kernel, case_search):
        rng = np.random.default_rng(4)
        a = sample(rng, "float32", 300)
        v = rng.permutation(sample(rng, "float32", 500))
        for side in SIDES:
            np.testing.assert_array_equal(case_search(binary_kernel, a, v, side),
                                          expected(a, v, side))

    @pytest.mark.parametrize(
        "in_axes", [(0, 0), (None, 0), (0, None), (1, 0)], ids=["both", "v", "a", "a_axis1"]
    )
    def test_vmap(self, matrix_kernel, in_axes, vmap_search):
        rng = np.random.default_rng(1)
        batch = 3
        a = np.sort(rng.normal(size=(batch, 200)), axis=1).astype(np.float32)
        v = np.sort(rng.normal(size=(batch, 150)), axis=1).astype(np.float32)
        a_in = a[0] if in_axes[0] is None else (a.T if in_axes[0] == 1 else a)
        v_in = v[0] if in_axes[1] is None else v
        want = [
            expected(a[0 if in_axes[0] is None else b], v[0 if in_axes[1] is None else b], "right")
            for b in range(batch)
        ]
        np.testing.assert_array_equal(
            vmap_search(matrix_kernel, a_in, v_in, "right", in_axes), np.stack(want)
        )


def check_argument_errors(merge_path, binary_search, config_types):
    """Bad arguments to the two wrappers raise, naming what is wrong.

    `config_types` is (MergePathConfig, BinarySearchConfig).
    """
    merge_config, binary_config = config_types
    f32 = jnp.ones(4, jnp.float32)
    call = functools.partial(merge_path, out_dtype=jnp.int32)
    with pytest.raises(ValueError, match="side"):
        call(f32, f32, side="middle")
    with pytest.raises(TypeError, match="share a dtype"):
        call(f32, f32.astype(jnp.int32), side="left")
    with pytest.raises(ValueError, match="1-D"):
        call(f32[None], f32, side="left")
    with pytest.raises(TypeError, match="unsupported dtype"):
        call(f32.astype(jnp.complex64), f32.astype(jnp.complex64), side="left")
    with pytest.raises(TypeError, match="out_dtype"):
        call(f32, f32, side="left", out_dtype=jnp.float32)
    # Answers up to len(a) past 2**31 - 1: traced only, never allocated.
    huge, few = (jax.ShapeDtypeStruct((size,), jnp.int8) for size in (2**31, 4))
    with pytest.raises(ValueError, match="need out_dtype int64"):
        jax.eval_shape(functools.partial(call, side="left"), huge, few)
    with pytest.raises(TypeError, match="MergePathConfig"):
        call(f32, f32, side="left", config=binary_config())
    with pytest.raises(TypeError, match="BinarySearchConfig"):
        binary_search(f32, f32, side="left", out_dtype=jnp.int32, config=merge_config())
