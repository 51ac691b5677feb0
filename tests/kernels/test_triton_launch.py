"""The native Triton wrappers' jax-triton launch, on the CPU.

Only a GPU takes `searchsorted._launch`'s `jax_triton.triton_call` branch:
the interpreter tests (`test_triton_interpret.py`) call the kernel through
`_interpret_call` instead, and the compile tests build the launch arguments
themselves. Here a stand-in `jax_triton` records each call and answers as
the kernel would with those arguments: it reads each batch row at the row
strides it is given (0: every row shares the operand), runs the kernel's
fixed-step searches with the constexprs it is given (STEPS, DIAG_STEPS,
TILE, BLOCK, LEFT, BISECT, CHUNK) over the programs of the grid, and leaves
INT32_MIN where no program writes; a merge path that partitions first is
two calls, the partition's splits handed to the merge. The checked call's
kernels read their row's flag first: the merge path's programs or binary
search's (each past its own grid idle), and a partition only where it is
nonzero. So a wrong grid,
stride, step count or side, a lost bool->uint8 conversion, splits lost
between the calls, or a batch split past `_MAX_GRID_Y` that misorders its
parts, fails here. The kernels' parameter lists are read from their source
(no triton needed) to check the call's argument order and constexpr names.
A serial merge (SERIAL) is emulated by its bisection: on sorted inputs the
two give the same answers.
"""

import ast
import functools
import sys
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.tiers import tiered

import jaxsearch.pallas_kernels as pk
from jaxsearch.keys import INT32_MAX
from jaxsearch.pallas_kernels.triton import searchsorted as ts

UNWRITTEN = np.iinfo(np.int32).min
CONFIGS = {"merge_bisect": pk.MergePathConfig(tile=128, num_warps=4, num_stages=2),
           "merge_compare": pk.MergePathConfig(tile=128, method="compare", chunk=32),
           "merge_serial": pk.MergePathConfig(tile=128, method="serial", items=8),
           "merge_per_program": pk.MergePathConfig(tile=128, partition="per_program"),
           "binary": pk.BinarySearchConfig(block=128, num_warps=2, num_stages=3)}


def kernel_parameters(name):
    """(parameters, constexpr parameters) of the Triton kernel `name`, from its source."""
    path = Path(ts.__file__).with_name(f"{ts._KERNEL_MODULES[name]}.py")
    [kernel] = [node for node in ast.parse(path.read_text()).body
                if isinstance(node, ast.FunctionDef) and node.name == name]
    names = [arg.arg for arg in kernel.args.args]
    constexprs = [arg.arg for arg in kernel.args.args
                  if arg.annotation is not None and "constexpr" in ast.unparse(arg.annotation)]
    return names, constexprs


def _bisect(lo, hi, steps, goes_right):
    """`_common.bisect` on one lane."""
    for _ in range(steps):
        if lo < hi:
            mid = lo + ((hi - lo) >> 1)
            lo, hi = (mid + 1, hi) if goes_right(mid) else (lo, mid)
    return lo


def diagonal_split(a, v, n, m, d, c):
    """`_common.bisect` along diagonal d: elements of `a` in its first d."""
    return _bisect(max(d - m, 0), min(d, n), c["DIAG_STEPS"],
                   lambda i: precedes(a[i], v[d - 1 - i], c["LEFT"]))


def precedes(x, y, left):
    return x < y if left else x <= y


def emulate_partition(a, v, n, m, grid_x, c, count):
    """One batch row's splits, as the partition kernel writes them."""
    out = np.full(count, UNWRITTEN, np.int64)
    for k in range(min(grid_x * c["BLOCK"], count)):
        out[k] = diagonal_split(a, v, n, m, min(k * c["TILE"], n + m), c)
    return out


def emulate(name, a, v, n, m, grid_x, c, splits=None):
    """One batch row's answers, as kernel `name` computes them from these
    constexprs `c` over `grid_x` programs (and the row's `splits`, for the
    partitioned merge)."""
    out = np.full(m, UNWRITTEN, np.int64)
    left = c["LEFT"]
    for program in range(grid_x):
        if name == "binary_search_kernel":
            for j in range(program * c["BLOCK"], min((program + 1) * c["BLOCK"], m)):
                out[j] = _bisect(0, n, c["STEPS"], lambda i, j=j: precedes(a[i], v[j], left))
            continue
        d0 = min(program * c["TILE"], n + m)
        d1 = min(d0 + c["TILE"], n + m)
        if splits is None:
            i0, i1 = (diagonal_split(a, v, n, m, d, c) for d in (d0, d1))
        else:
            i0, i1 = int(splits[program]), int(splits[program + 1])
        na, start = max(i1 - i0, 0), d0 - i0
        for j in range(start, max(d1 - i1, start)):
            if c["BISECT"]:
                out[j] = _bisect(i0, i0 + na, c["TILE"].bit_length(),
                                 lambda i, j=j: precedes(a[i], v[j], left))
            else:
                out[j] = i0 + int(np.sum(precedes(a[i0:i0 + na], v[j], left)))
    return out


class FakeJaxTriton:
    """A stand-in for `jax_triton`: records each `triton_call` and answers
    with `emulate`, reading rows at the strides the call passes."""

    def __init__(self):
        self.calls = []
        self.__version__ = "fake"

    def triton_call(self, *args, kernel, grid, num_warps, num_stages, compute_capability, name,
                    out_type, **constexprs):
        checked = kernel.name.startswith("checked_")
        # The array inputs (the splits, the checked call's flags, a, v), then
        # n, m and a row stride per input but the splits.
        inputs = (["s_ptr"] if kernel.name.endswith("partitioned_kernel") else []) + \
            (["f_ptr"] if checked else []) + ["a_ptr", "v_ptr"]
        strides = [f"{x[0]}_stride" for x in inputs if x != "s_ptr"]
        arrays = dict(zip(inputs, args))
        n, m, *stride_values = args[len(inputs):]
        stride = dict(zip(strides, stride_values))
        names, constexpr_names = kernel_parameters(kernel.name)
        # Inputs, then the output, then the constexprs: the kernel's order.
        output = "s_ptr" if kernel.name.endswith("partition_kernel") else "o_ptr"
        assert names == [*inputs, "n", "m", *strides, output, *constexpr_names]
        assert sorted(constexprs) == sorted(constexpr_names)
        boundaries = -(-(n + m) // constexprs.get("TILE", 1)) + 1
        assert out_type.shape == (grid[1], m if output == "o_ptr" else boundaries)

        def host(*operands):
            operands = dict(zip(inputs, operands))
            a2, v2 = operands["a_ptr"], operands["v_ptr"]
            # Recorded when the launch runs: a trace that never runs is no launch.
            self.calls.append(dict(kernel=kernel.name, grid=grid, rows=(a2.shape[0], v2.shape[0]),
                                   dtypes=(a2.dtype, v2.dtype), scalars=(n, m, *stride_values),
                                   num_warps=num_warps, num_stages=num_stages,
                                   compute_capability=compute_capability, name=name,
                                   constexprs=constexprs, out_type=out_type))

            def row_of(x, row, length):
                data = operands[x].reshape(-1)[row * stride[f"{x[0]}_stride"]:][:length]
                assert data.size == length, "a row read past its operand"
                return data

            rows = []
            for row in range(grid[1]):
                a_row, v_row = row_of("a_ptr", row, n), row_of("v_ptr", row, m)
                merging = not checked or row_of("f_ptr", row, 1)[0] != 0
                if output == "s_ptr":
                    rows.append(emulate_partition(a_row, v_row, n, m, grid[0], constexprs,
                                                  out_type.shape[1]) if merging
                                else np.full(out_type.shape[1], UNWRITTEN))
                else:
                    emulated, programs = kernel.name, grid[0]
                    if checked:  # The flag's kernel over its own programs; the rest idle.
                        emulated, programs = (
                            ("merge_path_kernel", boundaries - 1) if merging
                            else ("binary_search_kernel", -(-m // constexprs["BLOCK"])))
                        assert grid[0] >= programs
                    rows.append(emulate(emulated, a_row, v_row, n, m, programs, constexprs,
                                        operands["s_ptr"][row] if "s_ptr" in operands else None))
            return np.array(rows, out_type.dtype).reshape(out_type.shape)

        return jax.pure_callback(host, out_type, *arrays.values())


@pytest.fixture
def fake(monkeypatch):
    """The stand-in in place of jax-triton, and kernels that import no triton."""
    fake = FakeJaxTriton()
    jax.clear_caches()  # The jitted wrappers must trace again, with the stand-in.
    monkeypatch.setitem(sys.modules, "jax_triton", fake)
    monkeypatch.setattr(ts, "_load_kernel", lambda name: types.SimpleNamespace(name=name))
    return fake


def call(kernel, a, v, side="left", **kwargs):
    search = (ts.triton_binary_search_searchsorted if kernel == "binary"
              else ts.triton_merge_path_searchsorted)
    return search(a, v, side=side, out_dtype=jnp.int32, config=CONFIGS[kernel], **kwargs)


@pytest.mark.parametrize("kernel", list(CONFIGS))
@pytest.mark.parametrize("dtype", tiered(["bool", "uint32", "float32"], lambda d: d == "float32"))
@pytest.mark.parametrize("n, m", tiered([(1, 1), (127, 129), (300, 64), (64, 300)],
                                        lambda size: size in ((1, 1), (127, 129))))
def test_launch(fake, kernel, dtype, n, m):
    """One launch: the grid covers every needle, the constexprs resolve every
    search, scalars and launch options are the config's, bool goes as uint8."""
    rng = np.random.default_rng(n * 1000 + m)
    a = np.sort(rng.integers(0, 40, n)).astype(dtype)
    v = rng.integers(-2, 42, m).astype(dtype)
    if kernel != "binary":
        v = np.sort(v)
    for side in ("left", "right"):
        result = np.asarray(call(kernel, jnp.asarray(a), jnp.asarray(v), side))
        np.testing.assert_array_equal(result, np.searchsorted(a, v, side=side))
    config = CONFIGS[kernel]
    spec = ts._Launch(pk.kernel_kind(config.kind), config, "left", np.dtype("int32"), False)
    # Per side, the partition first where the config asks for it.
    kernels = (["partition_kernel"] if spec.partitioned else []) + [spec.kernel_name]
    assert [c["kernel"] for c in fake.calls] == 2 * kernels
    left, right = fake.calls[len(kernels) - 1], fake.calls[-1]
    assert left["constexprs"]["LEFT"] and not right["constexprs"]["LEFT"]
    assert left["scalars"] == (n, m, 0, 0)  # One row: shared, stride 0.
    assert left["rows"] == (1, 1) and left["grid"][1] == 1
    assert left["dtypes"] == 2 * (np.dtype("uint8" if dtype == "bool" else dtype),)
    assert (left["num_warps"], left["num_stages"]) == (config.num_warps, config.num_stages)
    assert left["compute_capability"] == ts.target_compute_capability() == 90
    assert left["name"] == f"jaxsearch_triton_{spec.kernel_name.removesuffix('_kernel')}"
    assert not left["constexprs"]["WIDE"]
    if spec.partitioned:
        partition = fake.calls[0]
        assert partition["constexprs"]["TILE"] == config.tile
        assert partition["out_type"].dtype == np.int32
        assert partition["scalars"] == left["scalars"]


@pytest.mark.parametrize("kernel", ["merge_bisect", "merge_per_program", "binary"])
@pytest.mark.parametrize("in_axes", [(0, 0), (None, 0), (0, None)], ids=["both", "v", "a"])
@pytest.mark.parametrize("max_rows", [65535, 2])
def test_batched_launch_strides_and_split(fake, monkeypatch, kernel, in_axes, max_rows):
    """Under vmap: a row stride of the row's length for a batched operand and
    0 for a shared one; with `_MAX_GRID_Y` = 2, a batch of 5 goes out in
    launches of 2, 2 and 1 rows, a shared operand whole each time, and the
    parts come back in order."""
    monkeypatch.setattr(ts, "_MAX_GRID_Y", max_rows)
    rng = np.random.default_rng(5)
    batch, n, m = 5, 90, 70
    a = np.sort(rng.integers(0, 60, (batch, n)), axis=1).astype(np.int32)
    v = np.sort(rng.integers(0, 60, (batch, m)), axis=1).astype(np.int32)
    a_in = a[0] if in_axes[0] is None else a
    v_in = v[0] if in_axes[1] is None else v
    result = jax.jit(jax.vmap(functools.partial(call, kernel), in_axes=in_axes))(a_in, v_in)
    want = [np.searchsorted(a[0 if in_axes[0] is None else b], v[0 if in_axes[1] is None else b])
            for b in range(batch)]
    np.testing.assert_array_equal(result, np.stack(want))
    parts = [batch] if max_rows > batch else [2, 2, 1]
    # Per part, the partition and then the merge where the config partitions.
    launches = 2 if kernel == "merge_bisect" else 1
    # The callbacks may run in any order; the answers show the concatenation's.
    calls = sorted(fake.calls, key=lambda c: (-c["grid"][1], c["kernel"]))
    assert [c["grid"][1] for c in calls] == [rows for rows in parts for _ in range(launches)]
    for c, rows in zip(calls, [rows for rows in parts for _ in range(launches)]):
        a_rows = 1 if in_axes[0] is None else rows
        v_rows = 1 if in_axes[1] is None else rows
        assert c["rows"] == (a_rows, v_rows)
        assert c["scalars"] == (n, m, n if a_rows > 1 else 0, m if v_rows > 1 else 0)


@pytest.mark.parametrize("kind, size", [(pk.MERGE_PATH, 256), (pk.BINARY_SEARCH, 512)])
def test_wide_from_the_first_position_past_int32(kind, size):
    """WIDE (int64 positions) exactly where the merge path's n + m + tile, or
    binary search's n or m + block, passes 2**31 - 1, and the step counts as
    the kernels need them."""
    config = (pk.MergePathConfig(tile=size) if kind is pk.MERGE_PATH
              else pk.BinarySearchConfig(block=size))
    spec = ts._Launch(kind, config, "left", np.dtype(np.int64), interpret=False)
    if kind is pk.BINARY_SEARCH:  # `v` alone
        for extra, wide in ((0, False), (1, True)):
            assert spec.grid_and_constexprs(5, INT32_MAX - size + extra)[1]["WIDE"] is wide
    m = 1000
    n = INT32_MAX - m - size if kind is pk.MERGE_PATH else INT32_MAX  # the longest int32 `a`
    for extra, wide in ((0, False), (1, True)):
        grid_x, constexprs = spec.grid_and_constexprs(n + extra, m)
        assert constexprs["WIDE"] is wide
        assert constexprs["LEFT"] is True
        if kind is pk.MERGE_PATH:
            assert grid_x == -(-(n + extra + m) // size)
            count, dtype, _, partition = spec.partition(n + extra, m)
            assert count == grid_x + 1
            assert dtype == np.dtype(np.int64 if wide else np.int32)
            assert partition["WIDE"] is wide
            assert partition["DIAG_STEPS"] == m.bit_length()
        else:
            assert grid_x == -(-m // size)
            assert constexprs["STEPS"] == (n + extra).bit_length()


def checked(merge, a, v, merging, side="left"):
    return ts.triton_checked_searchsorted(a, v, merging, side=side, out_dtype=jnp.int32,
                                          merge_config=CONFIGS[merge],
                                          bisect_config=CONFIGS["binary"])


@pytest.mark.parametrize("merge", ["merge_bisect", "merge_serial", "merge_per_program"])
@pytest.mark.parametrize("n, m", [(1, 1), (300, 64), (64, 300)])
def test_checked_launch(fake, merge, n, m):
    """The checked call on needles out of order: flag 1 gives the merge
    kernel's answers, 0 binary search's, from one kernel over the larger
    grid with both kernels' constexprs and the larger launch options; the
    partition pass, where the config asks for it, reads the flag too."""
    rng = np.random.default_rng(n * 1000 + m)
    a = jnp.asarray(np.sort(rng.integers(0, 40, n)).astype(np.float32))
    v = jnp.asarray(rng.integers(-2, 42, m).astype(np.float32))
    for side in ("left", "right"):
        merged, searched = call(merge, a, v, side), call("binary", a, v, side)
        fake.calls.clear()
        np.testing.assert_array_equal(checked(merge, a, v, jnp.ones(1, jnp.int32), side), merged)
        np.testing.assert_array_equal(checked(merge, a, v, jnp.zeros(1, jnp.int32), side),
                                      searched)
    config, bisect = CONFIGS[merge], CONFIGS["binary"]
    spec = ts._CheckedLaunch(*(ts._Launch(pk.kernel_kind(c.kind), c, "right", np.dtype("int32"),
                                          False) for c in (config, bisect)))
    kernels = (["checked_partition_kernel"] if spec.partitioned else []) + [spec.kernel_name]
    assert spec.kernel_name == ("checked_kernel" if merge == "merge_per_program"
                                else "checked_partitioned_kernel")
    assert [c["kernel"] for c in fake.calls] == 2 * kernels
    last = fake.calls[-1]
    assert last["grid"] == (max(-(-(n + m) // config.tile), -(-m // bisect.block)), 1)
    assert last["scalars"] == (n, m, 0, 0, 0)  # One row: flag, a and v shared.
    assert last["constexprs"]["TILE"] == config.tile
    assert last["constexprs"]["BLOCK"] == bisect.block
    assert not last["constexprs"]["LEFT"]
    assert (last["num_warps"], last["num_stages"]) == (
        max(config.num_warps, bisect.num_warps), max(config.num_stages, bisect.num_stages))


@pytest.mark.parametrize("merge", ["merge_bisect", "merge_per_program"])
@pytest.mark.parametrize("max_rows", [65535, 2])
def test_checked_batched_flags(fake, monkeypatch, merge, max_rows):
    """Under vmap a flag per row (stride 1) picks each row's kernel, through
    a batch split over launches; a flag every row shares goes with stride 0."""
    monkeypatch.setattr(ts, "_MAX_GRID_Y", max_rows)
    rng = np.random.default_rng(9)
    batch, n, m = 5, 90, 70
    a = np.sort(rng.integers(0, 60, (batch, n)), axis=1).astype(np.int32)
    v = rng.integers(0, 60, (batch, m)).astype(np.int32)
    flags = np.array([[1], [0], [1], [1], [0]], np.int32)
    result = jax.jit(jax.vmap(functools.partial(checked, merge)))(a, v, flags)
    for row, flag in enumerate(flags[:, 0]):
        want = call(merge if flag else "binary", jnp.asarray(a[row]), jnp.asarray(v[row]))
        np.testing.assert_array_equal(result[row], want)
    answers = [c for c in fake.calls if c["kernel"].startswith("checked_") and
               not c["kernel"].endswith("partition_kernel")]
    parts = [batch] if max_rows > batch else [2, 2, 1]
    assert sorted(c["grid"][1] for c in answers) == sorted(parts)
    for c in answers:  # A part of one row shares it: strides 0.
        assert c["scalars"] == ((n, m, 1, n, m) if c["grid"][1] > 1 else (n, m, 0, 0, 0))
    fake.calls.clear()
    shared = jax.jit(jax.vmap(functools.partial(checked, merge), in_axes=(0, 0, None)))
    np.testing.assert_array_equal(shared(a, v, flags[1]), np.stack(
        [call("binary", jnp.asarray(a[row]), jnp.asarray(v[row])) for row in range(batch)]))
    assert {c["scalars"][2] for c in fake.calls if c["kernel"].startswith("checked_")} == {0}
