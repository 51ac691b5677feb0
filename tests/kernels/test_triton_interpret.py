"""Correctness of the native Triton kernels against numpy and jnp.

Every case runs in Triton's interpreter on the CPU and, marked `gpu`, compiled
through jax-triton on a GPU when there is one (`pytest -m gpu`).

Triton chooses its interpreter when it decorates a kernel, from
TRITON_INTERPRET, so the interpreter cases run in one worker process started
with TRITON_INTERPRET=1 (this file run as a script, answering requests on its
standard input), and this process keeps compiled kernels for
test_triton_compile.py. The interpreter wants torch tensors: the wrappers'
`interpret=True` path hands it torch CPU tensors from a `jax.pure_callback`,
so these cases exercise the whole wrapper (dtype handling, vmap, empty
inputs) around the kernels. Without triton or torch the interpreter cases
skip, saying which is missing.
"""

import functools
import importlib.util
import os
import pickle
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import kernel_cases
from helpers.kernel_cases import X64_DTYPES, KernelCases, expected, sample

import jaxsearch.pallas_kernels as pk
from jaxsearch.pallas_kernels.triton import searchsorted as triton_searchsorted
from jaxsearch.pallas_kernels.triton import (
    triton_available,
    triton_binary_search_searchsorted,
    triton_checked_searchsorted,
    triton_merge_path_searchsorted,
)

# Where `helpers` is, for the worker process (this file run as a script).
TESTS = Path(__file__).resolve().parents[1]

ON_GPU = jax.default_backend() == "gpu"

# Small tiles and blocks, so that small inputs span many programs. The merge
# configs run the partition kernel first, but for "merge_per_program".
CONFIGS = {
    "merge_bisect": pk.MergePathConfig(tile=128),
    "merge_compare": pk.MergePathConfig(tile=128, method="compare", chunk=32),
    # Few items per lane: in Triton's interpreter a walk costs a dozen numpy
    # calls per step, and the bisection after walks that missed (broken
    # promises) goes a lane per needle, tile / items needles at a time.
    "merge_serial": pk.MergePathConfig(tile=128, method="serial", items=4),
    "merge_per_program": pk.MergePathConfig(tile=128, partition="per_program"),
    "binary": pk.BinarySearchConfig(block=128),
}
KERNELS = list(CONFIGS)
MERGE_KERNELS = [k for k in KERNELS if k.startswith("merge")]
# One of each kernel the dtype matrix runs: the per-program kernel differs
# from "merge_bisect" only in where its splits come from, by the same
# search the partition kernel runs.
MATRIX_KERNELS = [k for k in KERNELS if k != "merge_per_program"]
# The serial merge at other (tile, items, partition): one lane per tile,
# one item per lane, and the per-program splits.
SERIAL_CONFIGS = [
    pk.MergePathConfig(tile=16, method="serial", items=16),
    pk.MergePathConfig(tile=32, method="serial", items=1),
    pk.MergePathConfig(tile=32, method="serial", items=4, partition="per_program"),
    pk.MergePathConfig(tile=64, method="serial", items=16),
]


# ---------------------------------------------------------------------------
# What runs the kernels: module-level functions, so that the worker process
# (this file run as a script) runs the same code with interpret=True.


def wrapper(kernel):
    """The wrapper of kernel `kernel` (None: a merge-path config's)."""
    if kernel == "binary":
        return triton_binary_search_searchsorted
    return triton_merge_path_searchsorted


def search(kernel, a, v, side, *, interpret, out_dtype="int32", config=None):
    """The wrapper's answers, as numpy; x64 on for 64-bit inputs or output."""
    wide = out_dtype == "int64" or str(np.asarray(a).dtype) in X64_DTYPES
    with jax.enable_x64(wide):
        return np.asarray(
            wrapper(kernel)(
                jnp.asarray(a),
                jnp.asarray(v),
                side=side,
                out_dtype=out_dtype,
                config=CONFIGS[kernel] if config is None else config,
                interpret=interpret,
            )
        )


def checked(merge, *, interpret):
    """The checked call, its merge path at merge kernel `merge`'s config and
    its binary search at "binary"'s."""
    return functools.partial(triton_checked_searchsorted, out_dtype=jnp.int32,
                             merge_config=CONFIGS[merge], bisect_config=CONFIGS["binary"],
                             interpret=interpret)


def search_checked(merge, a, v, side, merging, *, interpret):
    """The checked call's answers with flag `merging`, as numpy."""
    with jax.enable_x64(str(np.asarray(a).dtype) in X64_DTYPES):
        return np.asarray(checked(merge, interpret=interpret)(
            jnp.asarray(a), jnp.asarray(v), jnp.full(1, merging, jnp.int32), side=side))


def search_checked_vmap(merge, a, v, flags, *, interpret):
    """The checked call vmapped over rows of `a`, `v` and flags (B, 1)."""
    search = functools.partial(checked(merge, interpret=interpret), side="left")
    return np.asarray(jax.jit(jax.vmap(search))(a, v, flags))


def search_vmap(kernel, a, v, side, in_axes, *, interpret):
    fn = jax.jit(
        jax.vmap(
            functools.partial(
                wrapper(kernel),
                side=side,
                out_dtype=jnp.int32,
                config=CONFIGS[kernel],
                interpret=interpret,
            ),
            in_axes=in_axes,
        )
    )
    return np.asarray(fn(a, v))


def search_nested_vmap(kernel, a, v, *, interpret):
    """v: (S, B, M) searched in a: (B, N), vmapped over B inside S."""
    inner = jax.vmap(
        functools.partial(
            wrapper(kernel),
            side="left",
            out_dtype=jnp.int32,
            config=CONFIGS[kernel],
            interpret=interpret,
        )
    )
    return np.asarray(jax.jit(jax.vmap(inner, in_axes=(None, 0)))(a, v))


def search_vmap_split_grid(kernel, a, v, in_axes, *, interpret):
    """`search_vmap` with a grid limit of 2 batch rows per launch, so that a
    batch goes out in several launches (as one past 65535 rows would)."""
    module = triton_searchsorted
    saved, module._MAX_GRID_Y = module._MAX_GRID_Y, 2
    try:
        return search_vmap(kernel, a, v, "left", in_axes, interpret=interpret)
    finally:
        module._MAX_GRID_Y = saved


def search_grad(kernel, a, v, *, interpret):
    """Gradient of a float of the answers: zero, as for jnp.searchsorted."""
    def fn(a):
        return (
            wrapper(kernel)(
                a, v, side="left", out_dtype=jnp.int32, config=CONFIGS[kernel],
                interpret=interpret,
            )
            .sum()
            .astype(jnp.float32)
        )

    return np.asarray(jax.grad(fn)(jnp.asarray(a)))


# Answers' neighbours in memory in `launch_kernel`, which must stay unwritten.
GUARD = 64


def launch_kernel(kernel, a, v, side, *, wide, rows, interpret):
    """The kernels alone, launched on torch tensors in the interpreter (the
    worker only), as `searchsorted._launch` launches them: the partition
    kernel first where the config asks for it. WIDE (int64 positions) on
    small inputs, and a batch of `rows` that share `a` (stride 0) while
    each has its own `v`. Returns the answers with GUARD elements of -1
    either side of them, which no kernel may write."""
    import torch

    assert interpret, "torch CPU tensors run in the interpreter only"

    config = CONFIGS[kernel]
    spec = triton_searchsorted._Launch(pk.kernel_kind(config.kind), config, side,
                                       np.dtype(np.int64), interpret=True)
    n, m = a.shape[-1], v.shape[-1]
    scalars = (n, m, 0, m if rows > 1 else 0)
    operands = [torch.from_numpy(a.copy()), torch.from_numpy(v.copy())]
    if spec.partitioned:
        count, _, grid_x, constexprs = spec.partition(n, m)
        splits = torch.full((rows, count), -1, dtype=torch.int64 if wide else torch.int32)
        spec.kernel("partition_kernel")[(grid_x, rows)](
            *operands, *scalars, splits, **constexprs | {"WIDE": wide}
        )
        operands.insert(0, splits)
    grid_x, constexprs = spec.grid_and_constexprs(n, m)
    out = torch.full((rows * m + 2 * GUARD,), -1, dtype=torch.int64)
    spec.kernel()[(grid_x, rows)](
        *operands, *scalars, out[GUARD:-GUARD].view(rows, m), **constexprs | {"WIDE": wide}
    )
    return out.numpy()


def serial_coverage(a, v, side, config, *, interpret):
    """The answers of a serial merge-path `config`, and per program whether
    the lanes' walks covered its needles (no bisection after them); the
    worker only, where Triton's interpreter runs the kernels as Python and
    looks `_serial_merge` up at each call."""
    from jaxsearch.pallas_kernels.triton import merge_path

    serial_merge = merge_path._serial_merge
    covered = []

    def spy(*args):
        result = serial_merge(*args)
        covered.append(bool(np.asarray(result.handle.data).item()))
        return result

    merge_path._serial_merge = spy
    try:
        answers = search(None, a, v, side, interpret=interpret, config=config)
    finally:
        merge_path._serial_merge = serial_merge
    return answers, covered


# ---------------------------------------------------------------------------
# The worker: requests (function name, args, kwargs) in, pickled answers out.


def _serve():
    reply = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # Library prints must not corrupt the replies.
    requests = sys.stdin.buffer
    while True:
        try:
            name, args, kwargs = pickle.load(requests)
        except EOFError:
            return
        try:
            result = ("ok", globals()[name](*args, interpret=True, **kwargs))
        except Exception:  # noqa: BLE001  (reported: the test fails on it)
            result = ("error", traceback.format_exc())
        pickle.dump(result, reply)
        reply.flush()


class Worker:
    """A process running this file with TRITON_INTERPRET=1."""

    def __init__(self):
        path = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, TRITON_INTERPRET="1", JAX_PLATFORMS="cpu", PYTHONPATH=path)
        # Outside the source tree, as tests/helpers/processes.py runs Python.
        self.scratch = tempfile.TemporaryDirectory()
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve"],
            env=env,
            cwd=self.scratch.name,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def __call__(self, name, *args, **kwargs):
        pickle.dump((name, args, kwargs), self.process.stdin)
        self.process.stdin.flush()
        try:
            status, value = pickle.load(self.process.stdout)
        except EOFError:
            raise AssertionError(f"the interpreter worker died (exit {self.process.wait()})")
        if status == "error":
            raise AssertionError(f"in the interpreter worker:\n{value}")
        return value

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.scratch.cleanup()


def interpreter_missing():
    """Why Triton's interpreter cannot run here, or None."""
    for module in ("triton", "torch"):
        if importlib.util.find_spec(module) is None:
            return (
                f"{module} is not installed: Triton's interpreter needs triton "
                "and torch (on Python 3.11: pip install torch==2.13.0 triton)"
            )
    return None


@pytest.fixture(scope="module")
def worker():
    reason = interpreter_missing()
    if reason:
        pytest.skip(reason)
    worker = Worker()
    yield worker
    worker.close()


def on_device(name, *args, **kwargs):
    return globals()[name](*args, interpret=False, **kwargs)


@pytest.fixture(
    params=[
        "interpret",
        pytest.param(
            "device",
            marks=[pytest.mark.gpu, pytest.mark.skipif(not ON_GPU, reason="needs a GPU backend")],
        ),
    ]
)
def run(request):
    """Calls a function above by name, in the interpreter or on the GPU."""
    if request.param == "interpret":
        return request.getfixturevalue("worker")
    available, reason = triton_available()
    if not available:
        pytest.skip(reason)
    return on_device


# ---------------------------------------------------------------------------
# The cases: those shared with test_pallas_interpret.py (`KernelCases`), then
# this file's own.


class TestTritonKernels(KernelCases):
    """The cases every GPU implementation must pass (`KernelCases`), on the
    native Triton kernels."""

    KERNELS = tuple(KERNELS)
    MATRIX_KERNELS = tuple(MATRIX_KERNELS)
    BINARY_KERNELS = ("binary",)
    SMOKE_KERNELS = ("merge_bisect", "binary")

    @pytest.fixture
    def case_search(self, run):
        def search(kernel, a, v, side, out_dtype="int32"):
            return run("search", kernel, a, v, side, out_dtype=out_dtype)

        return search

    @pytest.fixture
    def vmap_search(self, run):
        return functools.partial(run, "search_vmap")


@pytest.mark.parametrize("kernel", KERNELS)
def test_duplicates_nan_inf_signed_zero(kernel, run):
    # Long runs of equal values across tile boundaries, both zeros, NaNs.
    a = np.repeat(
        np.array([-np.inf, -1.0, -0.0, 0.0, 2.0, np.inf, np.nan], np.float32),
        [3, 150, 70, 70, 1, 40, 90],
    )
    v = np.repeat(
        np.array([-np.inf, -0.0, 0.0, 1.0, np.inf, np.nan], np.float32), [2, 100, 100, 5, 30, 60]
    )
    for side in ("left", "right"):
        np.testing.assert_array_equal(run("search", kernel, a, v, side), expected(a, v, side))


@pytest.mark.parametrize("kernel", KERNELS)
def test_extreme_integers(kernel, run):
    # Full-range keys, where signed and unsigned orders differ.
    for dtype in ("int8", "uint8", "int32", "uint32", "int64", "uint64"):
        info = np.iinfo(dtype)
        a = np.array([info.min, info.min, 0, 1, info.max - 1, info.max], dtype)
        v = np.array([info.min, 0, info.max // 2, info.max], dtype)
        out_dtype = "int64" if dtype in X64_DTYPES else "int32"
        for side in ("left", "right"):
            np.testing.assert_array_equal(
                run("search", kernel, a, v, side, out_dtype=out_dtype),
                np.searchsorted(a, v, side=side),
            )


@pytest.mark.parametrize("kernel", KERNELS)
def test_empty(kernel, run):
    one, empty = np.ones(1, np.float32), np.ones(0, np.float32)
    for a, v, want in ((empty, one, [0]), (one, empty, []), (empty, empty, [])):
        result = run("search", kernel, a, v, "left")
        assert result.dtype == np.int32
        np.testing.assert_array_equal(result, want)


@pytest.mark.parametrize("in_axes", [(0, 0), (None, 0), (0, None)], ids=["both", "v", "a"])
def test_batch_split_over_launches(in_axes, run):
    rng = np.random.default_rng(12)
    a = np.sort(rng.integers(0, 50, (5, 60)), axis=1).astype(np.int16)
    v = np.sort(rng.integers(0, 50, (5, 40)), axis=1).astype(np.int16)
    a_in = a[0] if in_axes[0] is None else a
    v_in = v[0] if in_axes[1] is None else v
    want = [
        expected(a[0 if in_axes[0] is None else b], v[0 if in_axes[1] is None else b], "left")
        for b in range(5)
    ]
    np.testing.assert_array_equal(
        run("search_vmap_split_grid", "merge_bisect", a_in, v_in, in_axes), np.stack(want)
    )


@pytest.mark.parametrize("kernel", ["merge_bisect", "merge_per_program", "binary"])
def test_nested_vmap(kernel, run):
    rng = np.random.default_rng(8)
    a = np.sort(rng.normal(size=(3, 100)), axis=1).astype(np.float32)
    v = np.sort(rng.normal(size=(2, 3, 70)), axis=2).astype(np.float32)
    want = [[expected(a[b], v[s, b], "left") for b in range(3)] for s in range(2)]
    np.testing.assert_array_equal(run("search_nested_vmap", kernel, a, v), np.array(want))


@pytest.mark.parametrize("kernel", ["merge_bisect", "binary"])
def test_grad_is_zero(kernel, run):
    rng = np.random.default_rng(9)
    a, v = sample(rng, "float32", 50), sample(rng, "float32", 40)
    np.testing.assert_array_equal(run("search_grad", kernel, a, v), np.zeros(50, np.float32))


@pytest.mark.parametrize("kernel", MERGE_KERNELS)
def test_merge_path_random_ties(kernel, run):
    # Random small-range contents (heavy ties), sometimes unsorted, where only
    # the range [0, N] is promised. Fixed shapes: one compile.
    rng = np.random.default_rng(10)
    for trial in range(24):
        a = rng.integers(0, 8, 40, dtype=np.int8)
        v = rng.integers(-1, 9, 70, dtype=np.int8)
        sort_a, sort_v = trial % 4 != 1, trial % 4 != 2
        a, v = np.sort(a) if sort_a else a, np.sort(v) if sort_v else v
        side = ("left", "right")[trial % 2]
        result = run("search", kernel, a, v, side)
        kernel_cases.check_promise(result, a, v, side, sort_a and sort_v)


def test_default_configs(run):
    a, v = kernel_cases.default_config_inputs()
    for kernel in ("merge_bisect", "binary"):
        result = run(
            "search",
            kernel,
            a,
            v,
            "left",
            config=(
                pk.default_merge_path_config
                if kernel != "binary"
                else pk.default_binary_search_config
            )(5000, 3000, np.float32),
        )
        np.testing.assert_array_equal(result, expected(a, v, "left"))


@pytest.mark.parametrize("kernel", ["merge_bisect", "merge_serial", "merge_per_program",
                                    "binary"])
def test_kernel_on_torch_tensors(kernel, worker):
    """The kernels called directly on torch tensors: the int64 positions
    (WIDE) of inputs past 2**31 elements, on small inputs, and a batch grid
    axis whose rows share `a`; sorted or not, nothing written outside the
    answers."""
    rng = np.random.default_rng(11)
    a = sample(rng, "float32", 300)
    v = np.stack([sample(rng, "float32", 201) for _ in range(3)])
    for wide in (False, True):
        for side in ("left", "right"):
            out = worker("launch_kernel", kernel, a, v, side, wide=wide, rows=3)
            np.testing.assert_array_equal(out[:GUARD], -1)
            np.testing.assert_array_equal(out[-GUARD:], -1)
            want = [expected(a, row, side) for row in v]
            np.testing.assert_array_equal(out[GUARD:-GUARD].reshape(3, -1), want)
    # Both operands out of order, rows of needles sorted downwards.
    out = worker("launch_kernel", kernel, rng.permutation(a), v[:, ::-1], "left", wide=False,
                 rows=3)
    np.testing.assert_array_equal(out[:GUARD], -1)
    np.testing.assert_array_equal(out[-GUARD:], -1)
    kernel_cases.assert_in_range(out[GUARD:-GUARD], len(a))


@pytest.mark.parametrize("config", SERIAL_CONFIGS, ids=str)
def test_serial_merge_covers_sorted_inputs(config, worker):
    """On sorted inputs the lanes' walks answer every needle once, with no
    bisection after them, and exactly; on unsorted inputs some tile's walks
    miss, and the bisection after them keeps every answer written and in
    range."""
    rng = np.random.default_rng(13)
    a, v = sample(rng, "float32", 70), sample(rng, "float32", 50)
    for side in ("left", "right"):
        answers, covered = worker("serial_coverage", a, v, side, config)
        np.testing.assert_array_equal(answers, expected(a, v, side))
        assert covered and all(covered)
    # A few needles and keys moved ahead of where they sort.
    a[20:30], v[10:15] = a[60:70], v[40:45]
    answers, covered = worker("serial_coverage", a, v, "left", config)
    kernel_cases.assert_in_range(answers, len(a))
    if config.items < config.tile:  # a lone lane walks its whole tile: it rarely misses
        assert not all(covered)


@pytest.mark.parametrize("method", ["bisect", "serial"])
def test_partition_once_matches_per_program(method, run):
    """The partition kernel finds each boundary's split by the search a
    per-program kernel runs itself: the same answers whatever the data,
    sorted or not."""
    rng = np.random.default_rng(14)
    configs = [pk.MergePathConfig(tile=32, method=method, items=4 if method == "serial" else None,
                                  partition=partition) for partition in ("once", "per_program")]
    for trial in range(4):
        a = rng.integers(0, 8, 90, dtype=np.int8)
        v = rng.integers(-1, 9, 70, dtype=np.int8)
        a, v = (a, np.sort(v)) if trial % 2 else (np.sort(a), v)
        side = ("left", "right")[trial // 2]
        once, per_program = (run("search", None, a, v, side, config=c) for c in configs)
        np.testing.assert_array_equal(once, per_program)
        kernel_cases.assert_in_range(once, len(a))


@pytest.mark.parametrize("merge, dtype, side", [
    ("merge_bisect", "float32", "left"),
    ("merge_per_program", "int8", "right"),
    ("merge_serial", "bfloat16", "right"),
    ("merge_compare", "uint64", "left"),
])
def test_checked_kernel_runs_the_kernel_its_flag_picks(merge, dtype, side, run):
    """On needles out of order, where the merge path's answers differ from
    binary search's, each flag gives its own kernel's answers exactly (the
    partition pass first, or not, as the merge config says)."""
    rng = np.random.default_rng(5)
    a = sample(rng, dtype, 300)
    v = rng.permutation(sample(rng, dtype, 200))
    merged, searched = (run("search", kernel, a, v, side) for kernel in (merge, "binary"))
    assert (merged != searched).any()  # the case tells the two apart
    np.testing.assert_array_equal(run("search_checked", merge, a, v, side, 1), merged)
    np.testing.assert_array_equal(run("search_checked", merge, a, v, side, 0), searched)


def test_checked_kernel_under_vmap(run):
    """A flag per row under vmap: each row gets its own flag's kernel."""
    rng = np.random.default_rng(6)
    a = np.stack([sample(rng, "float32", 200) for _ in range(3)])
    v = np.stack([rng.permutation(sample(rng, "float32", 150)) for _ in range(3)])
    v[0] = np.sort(v[0])
    flags = np.array([[1], [0], [1]], np.int32)
    got = run("search_checked_vmap", "merge_bisect", a, v, flags)
    np.testing.assert_array_equal(got[:2], [expected(a[r], v[r], "left") for r in range(2)])
    np.testing.assert_array_equal(got[2], run("search", "merge_bisect", a[2], v[2], "left"))


# ---------------------------------------------------------------------------
# In this process: what needs no kernel.


def test_argument_checks():
    kernel_cases.check_argument_errors(
        triton_merge_path_searchsorted,
        triton_binary_search_searchsorted,
        (pk.MergePathConfig, pk.BinarySearchConfig),
    )


def test_checked_argument_checks():
    x = jnp.ones(8, jnp.float32)
    call = functools.partial(triton_checked_searchsorted, x, out_dtype=jnp.int32, interpret=True)
    with pytest.raises(ValueError, match="side"):
        call(x, 1, side="middle")
    with pytest.raises(TypeError, match="share a dtype"):
        call(x.astype(jnp.int32), 1, side="left")
    with pytest.raises(TypeError, match="merge_config must be a MergePathConfig"):
        call(x, 1, side="left", merge_config=pk.BinarySearchConfig())
    with pytest.raises(TypeError, match="bisect_config must be a BinarySearchConfig"):
        call(x, 1, side="left", bisect_config=pk.MergePathConfig())
    assert call(x[:0], 1, side="left").shape == (0,)


def test_availability_is_explained():
    available, reason = triton_available()
    assert isinstance(available, bool) and reason
    try:
        from jax._src.lib import gpu_triton
    except ImportError:
        gpu_triton = None
    if not hasattr(gpu_triton, "get_compute_capability"):
        # jax-triton needs a jaxlib with GPU support (jax's CUDA plugin);
        # without one it must not even be imported.
        assert not available
        assert "jax_triton" not in sys.modules
    elif not available and "jax-triton" in reason and "cannot lower" in reason:
        # Installed, but its lowering fails with this jax: the reason says so.
        assert jax.__version__ in reason
    ok, why = triton_available(interpret=True)
    assert isinstance(ok, bool) and why


def test_package_import_loads_no_triton():
    from helpers.processes import run_python

    result = run_python(
        "-c",
        (
            "import sys, jaxsearch, jaxsearch.pallas_kernels; "
            "print(sorted(m for m in ('triton', 'torch', 'jax_triton') "
            "if m in sys.modules))"
        ),
        env={"JAX_PLATFORMS": "cpu"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_interpret_mode_needs_the_environment_variable():
    """Without TRITON_INTERPRET=1 the kernels are compiled ones: asking for the
    interpreter is a clear error, not a crash inside Triton."""
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed")
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("TRITON_INTERPRET=1 is set in this process")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        triton_merge_path_searchsorted(
            jnp.ones(4), jnp.ones(4), side="left", out_dtype=jnp.int32, interpret=True
        )


if __name__ == "__main__" and sys.argv[1:] == ["--serve"]:
    _serve()
