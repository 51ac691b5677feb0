"""Correctness of the Pallas kernels, Triton and Mosaic GPU backends, against
numpy and jnp.searchsorted; each backend's checked kernel runs every case
of the kind its flag picks (`checked_merge`, `mosaic_checked_binary`, ...).

Every case runs in the backends' interpreters on any backend and, marked
`gpu`, compiled on a GPU when there is one (`pytest -m gpu`; Mosaic GPU
needs compute capability 9.0 or above). Mosaic GPU's interpreter replaces
the kernels' two inline Mosaic GPU operations (per-lane gather, masked store)
by plain jnp, so only a GPU run checks those two; test_mosaic_compile.py
checks that they compile. Shapes are few and small: each new shape, dtype or
config costs a compile (about 0.3 s; several seconds in Mosaic GPU's
interpreter, which calls back to the host for every memory access).
"""

import contextlib
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import kernel_cases
from helpers.kernel_cases import X64_DTYPES, KernelCases, expected, sample
from helpers.tiers import tiered
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxsearch.pallas_kernels as pk
from jaxsearch.pallas_kernels import BACKENDS, BINARY_SEARCH, KERNEL_KINDS, MERGE_PATH

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*Pallas Triton backend is deprecated:DeprecationWarning"
)

ON_GPU = jax.default_backend() == "gpu"
gpu_only = [pytest.mark.gpu, pytest.mark.skipif(not ON_GPU, reason="needs a GPU backend")]


@pytest.fixture(params=[True, pytest.param(False, marks=gpu_only)], ids=["interpret", "device"])
def interpret(request):
    return request.param


# The Pallas backends this jax has (Mosaic GPU's needs compute capability 9.0
# on a device, but its interpreter runs anywhere it imports).
PALLAS = not BACKENDS["pallas"].import_error
MOSAIC = not BACKENDS["mosaic"].import_error


def backend_kernels(backend, **configs):
    """The backend's kernels by name, each at its config: the merge path for
    a MergePathConfig, binary search for a BinarySearchConfig."""
    kinds = {pk.MergePathConfig: MERGE_PATH, pk.BinarySearchConfig: BINARY_SEARCH}
    return {name: functools.partial(BACKENDS[backend].kernel(kinds[type(config)]), config=config)
            for name, config in configs.items()}


# Small tiles and blocks, so that small inputs span many programs; the
# "_wg2" Mosaic GPU kernels run two warpgroups per program.
KERNELS = {}
if PALLAS:
    KERNELS.update(backend_kernels(
        "pallas",
        merge_bisect=pk.MergePathConfig(tile=128),
        merge_per_program=pk.MergePathConfig(tile=128, partition="per_program"),
        merge_compare=pk.MergePathConfig(tile=128, method="compare", chunk=32),
        merge_serial=pk.MergePathConfig(tile=128, method="serial", items=8),
        binary=pk.BinarySearchConfig(block=128),
    ))
    # The checked kernel, its flag set each way: every case of its kind.
    checked = functools.partial(BACKENDS["pallas"].checked,
                                merge_config=pk.MergePathConfig(tile=128),
                                bisect_config=pk.BinarySearchConfig(block=128))
    KERNELS.update(checked_merge=functools.partial(checked, merging=1),
                   checked_binary=functools.partial(checked, merging=0))
if MOSAIC:
    KERNELS.update(backend_kernels(
        "mosaic",
        mosaic_merge=pk.MergePathConfig(tile=128),
        mosaic_merge_per_program=pk.MergePathConfig(tile=128, partition="per_program"),
        mosaic_merge_wg2=pk.MergePathConfig(tile=256, num_warps=8),
        mosaic_binary=pk.BinarySearchConfig(block=128),
        mosaic_binary_wg2=pk.BinarySearchConfig(block=256, num_warps=8),
    ))
    # Its checked kernel likewise, the two kinds in different warpgroups and
    # blocks of lanes (each pads `v` for its own): the merge's 128 needles
    # beside binary search's 512, and the reverse; the merge's 2 warpgroups
    # beside binary search's 1, and the reverse.
    def mosaic_checked(merging, merge_config, bisect_config):
        return functools.partial(BACKENDS["mosaic"].checked, merging=merging,
                                 merge_config=merge_config, bisect_config=bisect_config)

    KERNELS.update(
        mosaic_checked_merge=mosaic_checked(
            1, pk.MergePathConfig(tile=128), pk.BinarySearchConfig(block=512)
        ),
        mosaic_checked_binary=mosaic_checked(
            0, pk.MergePathConfig(tile=1024), pk.BinarySearchConfig(block=128)
        ),
        mosaic_checked_merge_wg2=mosaic_checked(
            1, pk.MergePathConfig(tile=256, num_warps=8), pk.BinarySearchConfig(block=128)
        ),
        mosaic_checked_binary_wg2=mosaic_checked(
            0, pk.MergePathConfig(tile=128), pk.BinarySearchConfig(block=256, num_warps=8)
        ),
    )
MERGE_KERNELS = [k for k in KERNELS if "merge" in k]
BINARY_KERNELS = [k for k in KERNELS if "binary" in k]
# One kernel of each kind and backend, for the cases where more warpgroups
# change nothing (in Mosaic GPU's interpreter, every case costs seconds).
MATRIX_KERNELS = [k for k in KERNELS if "wg2" not in k]


# (merge path, binary search) wrappers of each Pallas backend this jax has.
WRAPPERS = {
    backend: tuple(BACKENDS[backend].kernel(kind) for kind in KERNEL_KINDS)
    for backend, ok in (("pallas", PALLAS), ("mosaic", MOSAIC))
    if ok
}
DEFAULT_WRAPPERS = [fn for pair in WRAPPERS.values() for fn in pair]


def run(kernel, a, v, side, interpret, out_dtype="int32"):
    """One of KERNELS on numpy arrays, with x64 on where the data needs it
    (never turned off: a caller's x64 mode stays in force)."""
    wide = a.dtype.name in X64_DTYPES or out_dtype == "int64"
    with jax.enable_x64(True) if wide else contextlib.nullcontext():
        return np.asarray(
            KERNELS[kernel](
                jnp.asarray(a),
                jnp.asarray(v),
                side=side,
                out_dtype=jnp.dtype(out_dtype),
                interpret=interpret,
            )
        )


class TestPallasKernels(KernelCases):
    """The cases every GPU implementation must pass (`KernelCases`), on the
    Pallas kernels of both backends."""

    KERNELS = tuple(KERNELS)
    MATRIX_KERNELS = tuple(MATRIX_KERNELS)
    BINARY_KERNELS = tuple(BINARY_KERNELS)
    # Each backend's merge path, binary search and checked kernel.
    SMOKE_KERNELS = ("merge_bisect", "binary", "checked_merge",
                     "mosaic_merge", "mosaic_binary", "mosaic_checked_merge")

    @pytest.fixture
    def case_search(self, interpret):
        return functools.partial(run, interpret=interpret)

    @pytest.fixture
    def vmap_search(self, interpret):
        def search(kernel, a, v, side, in_axes):
            fn = functools.partial(
                KERNELS[kernel], side=side, out_dtype=jnp.int32, interpret=interpret
            )
            return np.asarray(jax.jit(jax.vmap(fn, in_axes=in_axes))(a, v))

        return search


@pytest.mark.parametrize("kernel", MATRIX_KERNELS)
def test_empty(kernel):
    one = jnp.ones(1, jnp.float32)
    empty = jnp.ones(0, jnp.float32)
    for a, v, want in ((empty, one, [0]), (one, empty, []), (empty, empty, [])):
        result = KERNELS[kernel](a, v, side="left", out_dtype=jnp.int32, interpret=True)
        assert result.dtype == jnp.int32
        np.testing.assert_array_equal(result, want)
    batched = jax.vmap(
        lambda v: KERNELS[kernel](empty, v, side="right", out_dtype=jnp.int32, interpret=True)
    )
    np.testing.assert_array_equal(batched(jnp.ones((3, 4))), np.zeros((3, 4)))


# The quick tier: each backend's merge path (in Mosaic GPU's interpreter,
# 60 examples take about 11 s a kernel).
@pytest.mark.parametrize("kernel", tiered([k for k in MERGE_KERNELS if k in MATRIX_KERNELS],
                                           lambda k: k in ("merge_bisect", "mosaic_merge")))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_merge_path_property(kernel, data):
    # Few shapes (a compile each), random contents with heavy ties; sometimes
    # unsorted, where only the range [0, N] is promised. The kernels here
    # take 128-element tiles of a and v together: 40 + 70 fit in one, the
    # larger sizes span two to three (and a merge diagonal across a tile).
    def draw_array(size, lo, hi):
        return np.array(
            data.draw(st.lists(st.integers(lo, hi), min_size=size, max_size=size)), np.int8
        )

    n, m = data.draw(st.sampled_from([40, 150])), data.draw(st.sampled_from([70, 200]))
    a, v = draw_array(n, 0, 8), draw_array(m, -1, 9)
    sort_a, sort_v = data.draw(st.booleans()), data.draw(st.booleans())
    a, v = np.sort(a) if sort_a else a, np.sort(v) if sort_v else v
    side = data.draw(st.sampled_from(["left", "right"]))
    kernel_cases.check_promise(run(kernel, a, v, side, True), a, v, side, sort_a and sort_v)


# One case per wrapper: where this jax has no Pallas backend the list is empty
# and pytest reports the test skipped, not passed.
@pytest.mark.parametrize("fn", DEFAULT_WRAPPERS, ids=lambda fn: fn.__name__)
def test_default_configs(fn, interpret):
    a, v = kernel_cases.default_config_inputs()
    result = fn(
        jnp.asarray(a), jnp.asarray(v), side="left", out_dtype=jnp.int32, interpret=interpret
    )
    np.testing.assert_array_equal(result, expected(a, v, "left"))


@pytest.mark.parametrize(
    "values, want",
    [
        ([], True),
        ([1.0], True),
        ([-np.inf, -1.0, -0.0, 0.0, -0.0, 2.0, np.inf, np.nan, np.nan], True),
        ([1.0, np.nan, 2.0], False),
        ([np.nan, -np.inf], False),
        ([2.0, 1.0], False),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_is_sorted_floats(values, want, dtype):
    assert bool(pk.is_sorted(jnp.asarray(values, dtype))) is want


def test_is_sorted_other_dtypes():
    assert bool(pk.is_sorted(jnp.array([False, False, True])))
    assert not bool(pk.is_sorted(jnp.array([True, False])))
    assert bool(pk.is_sorted(jnp.array([0, 1, 255], jnp.uint8)))
    assert not bool(pk.is_sorted(jnp.array([255, 0], jnp.uint8)))
    assert bool(pk.is_sorted(jnp.array([[-3, -1], [2, 2]], jnp.int16)))
    assert not bool(pk.is_sorted(jnp.array([[-3, 5], [2, 2]], jnp.int16)))
    with jax.enable_x64(True):
        big = np.iinfo(np.uint64).max
        assert bool(pk.is_sorted(jnp.array([0, big], jnp.uint64)))
        assert not bool(pk.is_sorted(jnp.array([big, 0], jnp.uint64)))
        assert bool(pk.is_sorted(jnp.array([-1e300, 5e-324, np.nan])))
    rows = jnp.array([[1, 2, 3], [3, 2, 1]])
    np.testing.assert_array_equal(jax.vmap(pk.is_sorted)(rows), [True, False])


def test_sort_key_total_order():
    x = np.array(
        [-np.inf, -1.5, -1e-45, -0.0, 0.0, 1e-45, 2.0, np.inf, np.nan, -np.nan], np.float32
    )
    key = np.asarray(pk.sort_key(jnp.asarray(x)))
    assert (np.diff(key[:-2]) > 0).sum() == 6 and key[3] == key[4]
    assert key[-1] == key[-2] > key[-3]


@pytest.mark.parametrize("backend", WRAPPERS)
def test_argument_checks(backend):
    kernel_cases.check_argument_errors(
        *WRAPPERS[backend], (pk.MergePathConfig, pk.BinarySearchConfig)
    )


# Each checked kernel of KERNELS and the kernel its flag picks, of the same config.
FLAG_PICKS = {"checked_merge": "merge_bisect", "checked_binary": "binary",
              "mosaic_checked_merge": "mosaic_merge", "mosaic_checked_binary": "mosaic_binary",
              "mosaic_checked_merge_wg2": "mosaic_merge_wg2",
              "mosaic_checked_binary_wg2": "mosaic_binary_wg2"}


@pytest.mark.parametrize("checked", tiered([k for k in FLAG_PICKS if k in KERNELS],
                                            lambda k: "wg2" not in k))
def test_checked_kernel_runs_the_kernel_its_flag_picks(checked):
    """On needles out of order, where the merge path's answers are not jnp's
    (binary search's are), each flag gives its own kernel's answers exactly."""
    rng = np.random.default_rng(5)
    a = sample(rng, "float32", 700)
    v = rng.permutation(sample(rng, "float32", 500))
    for side in ("left", "right"):
        want = run(FLAG_PICKS[checked], a, v, side, True)
        # The case tells the two kinds apart.
        assert (want != expected(a, v, side)).any() == ("merge" in checked)
        np.testing.assert_array_equal(run(checked, a, v, side, True), want)


@pytest.mark.skipif(not PALLAS, reason="this jax has no Pallas Triton backend")
def test_checked_kernel_merges_serially():
    """The default merge config past N + M of about 2**21 is the serial
    merge: the checked kernel runs it as the merge kernel does."""
    rng = np.random.default_rng(6)
    a, v = sample(rng, "float32", 700), sample(rng, "float32", 500)
    config = pk.MergePathConfig(tile=128, method="serial", items=8)
    for side in ("left", "right"):
        got = BACKENDS["pallas"].checked(jnp.asarray(a), jnp.asarray(v), 1, side=side,
                                         out_dtype=jnp.int32, merge_config=config,
                                         interpret=True)
        np.testing.assert_array_equal(np.asarray(got), expected(a, v, side))


def _pallas_splits(a, v, merging):
    """Pallas Triton's partition pass over `a` and `v` (tile 64, side left)."""
    from jaxsearch.pallas_kernels.pallas_triton import partition

    return partition.splits(a, v, tile=64, side="left", interpret=True, merging=merging)


def _mosaic_splits(a, v, merging):
    """Mosaic GPU's partition pass over `a` and `v` (tile 64, side left)."""
    from jaxsearch.pallas_kernels.mosaic_gpu import _common as mc
    from jaxsearch.pallas_kernels.mosaic_gpu import partition

    operands = mc.kernel_operands(a, v, mc.Lanes(128, a.dtype, interpret=True))
    return partition.splits(*operands, dtype=a.dtype, tile=64, side="left", interpret=True,
                            merging=merging)


# Each Pallas backend's partition pass and checked call, where this jax has it.
SPLITS = {backend: splits for backend, splits in (("pallas", _pallas_splits),
                                                  ("mosaic", _mosaic_splits))
          if backend in WRAPPERS}
CHECKED = {backend: BACKENDS[backend].checked for backend in WRAPPERS}


@pytest.mark.parametrize("backend", SPLITS)
def test_partition_pass_runs_where_the_flag_picks_the_merge(backend):
    """Before the checked kernel, the partition pass writes its splits where
    the flag picks the merge path (the same splits as without a flag) and
    nothing where it picks binary search, which never reads them."""
    rng = np.random.default_rng(8)
    a, v = (jnp.asarray(sample(rng, "float32", size)) for size in (700, 500))

    def splits(*flag):
        return np.asarray(SPLITS[backend](a, v, jnp.asarray(flag, jnp.int32) if flag else None))

    plain = splits()
    assert (np.diff(plain) > 0).any()
    np.testing.assert_array_equal(splits(1), plain)
    assert (splits(0)[1:] != plain[1:]).all()


@pytest.mark.parametrize("backend", CHECKED)
def test_checked_kernel_argument_checks(backend):
    checked = CHECKED[backend]
    x = jnp.ones(8, jnp.float32)
    with pytest.raises(ValueError, match="side"):
        checked(x, x, 1, side="middle", out_dtype=jnp.int32, interpret=True)
    with pytest.raises(TypeError, match="share a dtype"):
        checked(x, x.astype(jnp.int32), 1, side="left", out_dtype=jnp.int32, interpret=True)
    with pytest.raises(TypeError, match="merge_config must be a MergePathConfig"):
        checked(x, x, 1, side="left", out_dtype=jnp.int32, interpret=True,
                merge_config=pk.BinarySearchConfig())
    with pytest.raises(TypeError, match="bisect_config must be a BinarySearchConfig"):
        checked(x, x, 1, side="left", out_dtype=jnp.int32, interpret=True,
                bisect_config=pk.MergePathConfig())


@pytest.mark.skipif(not MOSAIC, reason="no Mosaic GPU in this jax")
@pytest.mark.parametrize("tile", [2, 64], ids=["two_blocks", "padded"])
def test_mosaic_partition_splits(tile):
    """Mosaic GPU's partition pass: on sorted inputs, each boundary's split
    is the merge's (ties ordered as each side orders them); on unsorted
    ones, each still lies in [max(d - M, 0), min(d, N)]. Past the last
    boundary (splits shorter than a block of 128 lanes), the last repeats;
    with more boundaries than a block, the last block moves back."""
    from jaxsearch.pallas_kernels.mosaic_gpu import _common as mc
    from jaxsearch.pallas_kernels.mosaic_gpu import partition

    rng = np.random.default_rng(10)
    n, m = 300, 201
    a, v = sample(rng, "float32", n), sample(rng, "float32", m)
    count = -(-(n + m) // tile) + 1
    diag = np.minimum(np.arange(max(count, 128)) * tile, n + m)
    from_a = np.arange(n + m) < n
    lanes = mc.Lanes(128, a.dtype, interpret=True)
    for side in ("left", "right"):
        for sort in (True, False):
            a_in, v_in = (jnp.asarray(x if sort else rng.permutation(x)) for x in (a, v))
            got = np.asarray(partition.splits(*mc.kernel_operands(a_in, v_in, lanes),
                                              dtype=a.dtype, tile=tile, side=side, interpret=True))
            assert got.shape == diag.shape and got.dtype == np.int32
            if sort:
                # A key of `a` goes first on a tie for side='right', a needle for 'left'.
                order = np.lexsort((from_a ^ (side == "right"), np.concatenate([a, v])))
                np.testing.assert_array_equal(got, np.cumsum(np.r_[0, from_a[order]])[diag])
            else:
                assert ((np.maximum(diag - m, 0) <= got) & (got <= np.minimum(diag, n))).all()


@pytest.mark.skipif(not MOSAIC, reason="no Mosaic GPU in this jax")
def test_mosaic_blocks_smaller_than_a_warpgroup_are_refused():
    f32 = jnp.ones(4, jnp.float32)
    with pytest.raises(ValueError, match="multiple of 128"):
        BACKENDS["mosaic"].kernel(BINARY_SEARCH)(
            f32, f32, side="left", out_dtype=jnp.int32, config=pk.BinarySearchConfig(block=64)
        )


@pytest.mark.parametrize(
    "bad",
    [
        dict(tile=100),
        dict(method="scan"),
        dict(chunk=16),
        dict(method="compare"),
        dict(method="compare", chunk=256, tile=128),
        dict(num_warps=3),
        dict(num_stages=0),
        dict(partition="twice"),
        dict(method="serial"),
        dict(items=8),
        dict(method="serial", items=256, tile=128),
    ],
)
def test_config_validation(bad):
    with pytest.raises(ValueError):
        pk.MergePathConfig(**bad)


def test_tuning_space_and_defaults_are_valid():
    space = pk.tuning_space()
    assert len(set(space)) == len(space)
    assert {c.kind for c in space} == {"merge_path", "binary_search"}
    for n, m in ((1, 1), (10**4, 10**8), (10**8, 10**8), (2**31, 1)):
        assert pk.default_merge_path_config(n, m, jnp.float32).tile >= 256
        assert pk.default_binary_search_config(n, m, jnp.float32).block >= 128


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a GPU backend")
@pytest.mark.parametrize("backend", WRAPPERS)
@pytest.mark.parametrize("index, config", list(enumerate(pk.tuning_space())), ids=str)
def test_tuning_space_on_device(backend, index, config):
    """Every config the autotuner may pick gives exact answers on the GPU."""
    rng = np.random.default_rng(7)
    a = sample(rng, "float32", 100_003)
    v = sample(rng, "float32", 70_001)
    fn = WRAPPERS[backend][config.kind != "merge_path"]
    side = ("left", "right")[index % 2]  # One compile per config, both sides.
    result = fn(jnp.asarray(a), jnp.asarray(v), side=side, out_dtype=jnp.int32, config=config)
    np.testing.assert_array_equal(result, expected(a, v, side))
