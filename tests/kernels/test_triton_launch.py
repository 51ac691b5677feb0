"""The native Triton wrappers' jax-triton launch, on the CPU.

Only a GPU takes `searchsorted._launch`'s `jax_triton.triton_call` branch:
the interpreter tests (`test_triton_interpret.py`) call the kernel through
`_interpret_call` instead, and the compile tests build the launch arguments
themselves. Here a stand-in `jax_triton` records each call and answers as
the kernel would with those arguments: it reads each batch row at the row
strides it is given (0: every row shares the operand), runs the kernel's
fixed-step searches with the constexprs it is given (STEPS, DIAG_STEPS,
TILE, BLOCK, LEFT, BISECT, CHUNK) over the programs of the grid, and leaves
INT32_MIN where no program writes. So a wrong grid, stride, step count or
side, a lost bool->uint8 conversion, or a batch split past `_MAX_GRID_Y`
that misorders its parts, fails here. The kernels' parameter lists are read
from their source (no triton needed) to check the call's argument order
and constexpr names.
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

import jaxsearch.pallas_kernels as pk
from jaxsearch.keys import INT32_MAX
from jaxsearch.pallas_kernels.triton import searchsorted as ts

UNWRITTEN = np.iinfo(np.int32).min
KERNEL_SOURCES = {pk.MERGE_PATH: "merge_path.py", pk.BINARY_SEARCH: "binary_search.py"}
CONFIGS = {"merge_bisect": pk.MergePathConfig(tile=128, num_warps=4, num_stages=2),
           "merge_compare": pk.MergePathConfig(tile=128, method="compare", chunk=32),
           "binary": pk.BinarySearchConfig(block=128, num_warps=2, num_stages=3)}


def kernel_parameters(kind):
    """(parameters, constexpr parameters) of the kind's Triton kernel, from its source."""
    path = Path(ts.__file__).with_name(KERNEL_SOURCES[kind])
    [kernel] = [node for node in ast.parse(path.read_text()).body
                if isinstance(node, ast.FunctionDef) and node.name == f"{kind.name}_kernel"]
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


def emulate(kind, a, v, n, m, grid_x, c):
    """One batch row's answers, as the kernel computes them from these
    constexprs `c` over `grid_x` programs."""
    out = np.full(m, UNWRITTEN, np.int64)

    def precedes(x, y):
        return x < y if c["LEFT"] else x <= y

    for program in range(grid_x):
        if kind is pk.BINARY_SEARCH:
            for j in range(program * c["BLOCK"], min((program + 1) * c["BLOCK"], m)):
                out[j] = _bisect(0, n, c["STEPS"], lambda i, j=j: precedes(a[i], v[j]))
            continue
        d0 = min(program * c["TILE"], n + m)
        d1 = min(d0 + c["TILE"], n + m)
        i0, i1 = (_bisect(max(d - m, 0), min(d, n), c["DIAG_STEPS"],
                          lambda i, d=d: precedes(a[i], v[d - 1 - i])) for d in (d0, d1))
        na, start = max(i1 - i0, 0), d0 - i0
        for j in range(start, max(d1 - i1, start)):
            if c["BISECT"]:
                out[j] = _bisect(i0, i0 + na, c["TILE"].bit_length(),
                                 lambda i, j=j: precedes(a[i], v[j]))
            else:
                out[j] = i0 + int(np.sum(precedes(a[i0:i0 + na], v[j])))
    return out


class FakeJaxTriton:
    """A stand-in for `jax_triton`: records each `triton_call` and answers
    with `emulate`, reading rows at the strides the call passes."""

    def __init__(self):
        self.calls = []
        self.__version__ = "fake"

    def triton_call(self, *args, kernel, grid, num_warps, num_stages, compute_capability, name,
                    out_type, **constexprs):
        a2, v2, n, m, a_stride, v_stride = args
        names, constexpr_names = kernel_parameters(kernel.kind)
        # Inputs, then the output, then the constexprs: the kernel's order.
        assert names == ["a_ptr", "v_ptr", "n", "m", "a_stride", "v_stride", "o_ptr",
                         *constexpr_names]
        assert sorted(constexprs) == sorted(constexpr_names)
        assert out_type.shape == (grid[1], m)

        def host(a2, v2):
            # Recorded when the launch runs: a trace that never runs is no launch.
            self.calls.append(dict(kind=kernel.kind, grid=grid, rows=(a2.shape[0], v2.shape[0]),
                                   dtypes=(a2.dtype, v2.dtype), scalars=(n, m, a_stride, v_stride),
                                   num_warps=num_warps, num_stages=num_stages,
                                   compute_capability=compute_capability, name=name,
                                   constexprs=constexprs, out_type=out_type))
            a_flat, v_flat = a2.reshape(-1), v2.reshape(-1)
            rows = []
            for row in range(grid[1]):
                a_row = a_flat[row * a_stride:row * a_stride + n]
                v_row = v_flat[row * v_stride:row * v_stride + m]
                assert (a_row.size, v_row.size) == (n, m), "a row read past its operand"
                rows.append(emulate(kernel.kind, a_row, v_row, n, m, grid[0], constexprs))
            return np.array(rows, out_type.dtype).reshape(out_type.shape)

        return jax.pure_callback(host, out_type, a2, v2)


@pytest.fixture
def fake(monkeypatch):
    """The stand-in in place of jax-triton, and kernels that import no triton."""
    fake = FakeJaxTriton()
    jax.clear_caches()  # The jitted wrappers must trace again, with the stand-in.
    monkeypatch.setitem(sys.modules, "jax_triton", fake)
    monkeypatch.setattr(ts, "_load_kernel", lambda kind: types.SimpleNamespace(kind=kind))
    return fake


def call(kernel, a, v, side="left", **kwargs):
    search = (ts.triton_binary_search_searchsorted if kernel == "binary"
              else ts.triton_merge_path_searchsorted)
    return search(a, v, side=side, out_dtype=jnp.int32, config=CONFIGS[kernel], **kwargs)


@pytest.mark.parametrize("kernel", list(CONFIGS))
@pytest.mark.parametrize("dtype", ["bool", "uint32", "float32"])
@pytest.mark.parametrize("n, m", [(1, 1), (127, 129), (300, 64), (64, 300)])
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
    [left, right] = fake.calls
    config = CONFIGS[kernel]
    assert left["constexprs"]["LEFT"] and not right["constexprs"]["LEFT"]
    assert left["scalars"] == (n, m, 0, 0)  # One row: shared, stride 0.
    assert left["rows"] == (1, 1) and left["grid"][1] == 1
    assert left["dtypes"] == 2 * (np.dtype("uint8" if dtype == "bool" else dtype),)
    assert (left["num_warps"], left["num_stages"]) == (config.num_warps, config.num_stages)
    assert left["compute_capability"] == ts.target_compute_capability() == 90
    assert left["name"] == f"jaxsearch_triton_{config.kind}"
    assert not left["constexprs"]["WIDE"]


@pytest.mark.parametrize("kernel", ["merge_bisect", "binary"])
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
    # The callbacks may run in any order; the answers show the concatenation's.
    calls = sorted(fake.calls, key=lambda c: -c["grid"][1])
    assert [c["grid"][1] for c in calls] == parts
    for c, rows in zip(calls, parts):
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
            assert constexprs["DIAG_STEPS"] == m.bit_length()
        else:
            assert grid_x == -(-m // size)
            assert constexprs["STEPS"] == (n + extra).bit_length()
