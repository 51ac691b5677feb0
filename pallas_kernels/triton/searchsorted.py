"""The native Triton kernels, called from JAX through `jax_triton.triton_call`.

`triton_merge_path_searchsorted` (sorted needles) and
`triton_binary_search_searchsorted` (any needles) have the semantics and the
configs of the Pallas wrappers: every real dtype, NaN last with all NaNs
equal, -0.0 == 0.0, both sides, int32 or int64 answers, answers in [0, N]
under a broken sortedness promise. The kernels themselves are in
`merge_path.py`, `partition.py` (the merge path's partition pass, launched
first where `config.partition` is 'once') and `binary_search.py` next to
this module. `triton_checked_searchsorted` (the checked call's, which reads
the sortedness test on the device) runs both kinds' programs in the kernels
of `checked.py`.

Nothing here imports triton, torch or jax-triton at import time: the kernel
modules and jax-triton load on the first call, so this module imports on any
machine, and `triton_available()` (in `probe.py`) says whether the kernels
can run. jax-triton imports only where jaxlib has GPU support;
`triton_available()` checks that before it tries. With `interpret=True` the
kernels run in Triton's own interpreter on the host (through
`jax.pure_callback`, on torch CPU tensors): exact and slow, for tests. That
needs TRITON_INTERPRET=1 in the environment before the kernel modules load,
since Triton picks the interpreter when it decorates a kernel.

This module needs nothing from the Pallas kernels, so it keeps working with
a jax whose Pallas lacks the Triton backend.
"""

from __future__ import annotations

import dataclasses
import importlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxsearch.keys import INT32_MAX, check_x64, index_dtype

from .._jax_private import triton_interpreted
from .._wrapper import checked_wrapper, searchsorted_wrapper
from ..configs import BINARY_SEARCH, MERGE_PATH, BinarySearchConfig, KernelKind, MergePathConfig
from .probe import out_argument, target_compute_capability

# CUDA limits grid axes y and z to 65535 programs; the batch runs on axis y.
_MAX_GRID_Y = 65535

# The row operands, one row per batch row: `a` and `v`, after the checked
# call's flags where its kernels read them.
_ROWS = ("a", "v")
_FLAGGED_ROWS = ("f", "a", "v")


@dataclasses.dataclass(frozen=True)
class _Kernel:
    """One kernel's place in the launch order, which its parameters follow
    (`_load_kernel` checks): the arrays (the partition's splits where it
    reads them, then a pointer per row operand), the scalars (n, m, then a
    row stride per row operand, 0 for one every row shares), the output,
    then the constexprs, by name."""

    module: str  # in this package
    rows: tuple[str, ...] = _ROWS
    splits: bool = False  # reads the partition's splits
    out: str = "o_ptr"

    def arguments(self):
        """(arrays, scalars, output): the names of the arguments, in order."""
        arrays = ("s_ptr",) * self.splits + tuple(f"{x}_ptr" for x in self.rows)
        return arrays, ("n", "m", *(f"{x}_stride" for x in self.rows)), self.out


_KERNELS = {
    "merge_path_kernel": _Kernel("merge_path"),
    "merge_path_partitioned_kernel": _Kernel("merge_path", splits=True),
    "partition_kernel": _Kernel("partition", out="s_ptr"),
    "binary_search_kernel": _Kernel("binary_search"),
    "checked_kernel": _Kernel("checked", _FLAGGED_ROWS),
    "checked_partitioned_kernel": _Kernel("checked", _FLAGGED_ROWS, splits=True),
    "checked_partition_kernel": _Kernel("checked", _FLAGGED_ROWS, out="s_ptr"),
}
_KERNEL_MODULES = {name: kernel.module for name, kernel in _KERNELS.items()}

# The partition pass's launch: boundaries per program (one lane each), warps.
_PARTITION_BLOCK = 128
_PARTITION_WARPS = 4


def _load_kernel(name):
    """The Triton kernel called `name`, its module loaded on first use (it
    imports triton); its parameters must start in the launch order."""
    declared = _KERNELS[name]
    kernel = getattr(importlib.import_module(f".{declared.module}", __package__), name)
    arrays, scalars, out = declared.arguments()
    order = [*arrays, *scalars, out]
    if kernel.arg_names[:len(order)] != order:
        raise TypeError(f"{name}'s parameters {kernel.arg_names} do not start with the "
                        f"launch order {order}")
    return kernel


@dataclasses.dataclass(frozen=True)
class _Launch:
    """What one search's kernel launches need besides the operands."""

    kind: KernelKind
    config: MergePathConfig | BinarySearchConfig
    side: str
    out_dtype: np.dtype
    interpret: bool

    @property
    def partitioned(self) -> bool:
        """Whether the partition kernel runs before the merge path."""
        return self.kind is MERGE_PATH and self.config.partition == "once"

    @property
    def kernel_name(self) -> str:
        """The kernel that writes the answers."""
        if self.partitioned:
            return "merge_path_partitioned_kernel"
        return f"{self.kind.name}_kernel"

    # The kernel that writes the merge path's splits first.
    partition_kernel_name = "partition_kernel"

    @property
    def launch_options(self) -> dict:
        """The answering kernel's warps and pipeline stages."""
        return {"num_warps": self.config.num_warps, "num_stages": self.config.num_stages}

    def kernel(self, name=None):
        """The kernel `name` (by default the one that writes the answers): a
        triton JITFunction, or the interpreter's."""
        kernel = _load_kernel(name or self.kernel_name)
        interpreted = triton_interpreted(kernel)
        if self.interpret and not interpreted:
            raise RuntimeError(
                "interpret=True needs TRITON_INTERPRET=1 in the environment before "
                "jaxsearch's Triton kernels first load (Triton picks its "
                "interpreter when it decorates a kernel)"
            )
        if interpreted and not self.interpret:
            raise RuntimeError(
                "TRITON_INTERPRET=1 made the Triton kernels interpreter-only: pass "
                "interpret=True, or unset it before the kernels first load"
            )
        return kernel

    def grid_and_constexprs(self, n, m):
        """Programs along grid axis 0, and the constexpr arguments of the
        kernel that writes the answers."""
        config = self.config
        left = self.side == "left"
        if self.kind is MERGE_PATH:
            constexprs = {
                "TILE": config.tile,
                "BISECT": config.method != "compare",  # 'serial' falls back to it
                "CHUNK": config.chunk,
                "SERIAL": config.method == "serial",
                "ITEMS": config.items or 1,
                "LEFT": left,
                "WIDE": n + m + config.tile > INT32_MAX,
            }
            if not self.partitioned:
                constexprs["DIAG_STEPS"] = min(n, m).bit_length()
            return -(-(n + m) // config.tile), constexprs
        return -(-m // config.block), {
            "BLOCK": config.block,
            "STEPS": n.bit_length(),
            "LEFT": left,
            "WIDE": max(n, m + config.block) > INT32_MAX,
        }

    def partition(self, n, m):
        """The partition kernel's launch: (its splits per row, their dtype,
        its programs along grid axis 0, its constexprs)."""
        tile = self.config.tile
        count = -(-(n + m) // tile) + 1
        return count, index_dtype(n + m + tile), -(-count // _PARTITION_BLOCK), {
            "TILE": tile,
            "BLOCK": _PARTITION_BLOCK,
            "DIAG_STEPS": min(n, m).bit_length(),
            "LEFT": self.side == "left",
            "WIDE": n + m + tile > INT32_MAX,
        }


@dataclasses.dataclass(frozen=True)
class _CheckedLaunch:
    """The checked call's launches: `merge`'s program where the flag (an
    operand before `a`) is nonzero, `bisect`'s elsewhere, in one kernel."""

    merge: _Launch
    bisect: _Launch

    @property
    def partitioned(self) -> bool:
        return self.merge.partitioned

    @property
    def kernel_name(self) -> str:
        return "checked_partitioned_kernel" if self.partitioned else "checked_kernel"

    # The partition pass, skipped where the flag is 0.
    partition_kernel_name = "checked_partition_kernel"

    @property
    def interpret(self) -> bool:
        return self.merge.interpret

    @property
    def out_dtype(self) -> np.dtype:
        return self.merge.out_dtype

    @property
    def launch_options(self) -> dict:
        # The larger of the two: each program's body was laid out for its own.
        merge, bisect = self.merge.launch_options, self.bisect.launch_options
        return {key: max(merge[key], bisect[key]) for key in merge}

    def kernel(self, name=None):
        return self.merge.kernel(name or self.kernel_name)

    def grid_and_constexprs(self, n, m):
        """The larger grid, and both kernels' constexprs; int64 positions
        where either needs them."""
        merge_grid, merge = self.merge.grid_and_constexprs(n, m)
        bisect_grid, bisect = self.bisect.grid_and_constexprs(n, m)
        return max(merge_grid, bisect_grid), {**merge, **bisect,
                                              "WIDE": merge["WIDE"] or bisect["WIDE"]}

    def partition(self, n, m):
        return self.merge.partition(n, m)


def _launch(spec, *rows):
    """Answers for a batch: the 2-D operands `rows`, one per row operand of
    `spec`'s kernels (`_Kernel.rows`): the checked call's flags (Bf, 1), `a2`
    (Ba, N) and `v2` (Bv, M), each of Ba, Bv and Bf either 1 (shared by
    every row) or the batch size. Returns (batch, M)."""
    batch = max(x.shape[0] for x in rows)
    if batch > _MAX_GRID_Y:
        def part(x, r):
            return x[r : r + _MAX_GRID_Y] if x.shape[0] > 1 else x
        return jnp.concatenate(
            [_launch(spec, *(part(x, r) for x in rows)) for r in range(0, batch, _MAX_GRID_Y)]
        )
    rows = dict(zip(_KERNELS[spec.kernel_name].rows, rows, strict=True))
    n, m = rows["a"].shape[1], rows["v"].shape[1]
    # Every argument a kernel may take but the constexprs, by its name.
    values = {"n": n, "m": m}
    for x, row in rows.items():
        values[f"{x}_ptr"] = row
        values[f"{x}_stride"] = row.shape[1] if row.shape[0] > 1 else 0  # 0: shared
    if spec.partitioned:
        per_row, dtype, grid_x, constexprs = spec.partition(n, m)
        # The splits are positions: int64 past int32, which jax needs x64 for.
        check_x64(n + m + constexprs["TILE"], f"merge-path inputs of {n + m} elements")
        values["s_ptr"] = _call(spec, spec.partition_kernel_name, values,
                                jax.ShapeDtypeStruct((batch, per_row), dtype), (grid_x, batch),
                                constexprs, num_warps=_PARTITION_WARPS, num_stages=1)
    grid_x, constexprs = spec.grid_and_constexprs(n, m)
    return _call(spec, spec.kernel_name, values,
                 jax.ShapeDtypeStruct((batch, m), spec.out_dtype), (grid_x, batch), constexprs,
                 **spec.launch_options)


def _call(spec, name, values, out_shape, grid, constexprs, *, num_warps, num_stages):
    """One launch of kernel `name` on its arguments from `values` (by name,
    in the launch order), writing one output of `out_shape`: through
    jax-triton, or in the interpreter."""
    kernel = spec.kernel(name)
    arrays, scalars, _ = _KERNELS[name].arguments()
    operands, scalars = [values[x] for x in arrays], [values[x] for x in scalars]
    if spec.interpret:
        return _interpret_call(kernel, operands, scalars, out_shape, grid, constexprs)
    import jax_triton

    return jax_triton.triton_call(
        *operands,
        *scalars,
        kernel=kernel,
        grid=grid,
        num_warps=num_warps,
        num_stages=num_stages,
        compute_capability=target_compute_capability(),
        name=f"jaxsearch_triton_{name.removesuffix('_kernel')}",
        **out_argument(jax_triton, out_shape),
        **constexprs,
    )


def _to_torch(x):
    """A writable torch CPU tensor holding numpy array `x`."""
    import torch

    x = np.array(x)  # A copy: callback operands may be read-only.
    if x.dtype == jnp.bfloat16:  # numpy's bfloat16 is not torch's.
        return torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(x)


def _interpret_call(kernel, operands, scalars, out_shape, grid, constexprs):
    """Runs `kernel` in Triton's interpreter on the host."""

    def host(*operands):
        import torch

        dtype = getattr(torch, out_shape.dtype.name)
        # Unwritten answers would show as INT_MIN: out of every valid range.
        out = torch.full(out_shape.shape, torch.iinfo(dtype).min, dtype=dtype)
        kernel[grid](*map(_to_torch, operands), *scalars, out, **constexprs)
        return out.numpy()

    return jax.pure_callback(host, out_shape, *operands)


def _batched(spec):
    """`_launch` as a function of 2-D operands that `vmap` batches: a batch
    axis becomes more rows, so each batch level costs no extra launch."""

    @jax.custom_batching.custom_vmap
    def call(*operands):
        return _launch(spec, *operands)

    @call.def_vmap
    def _rule(axis_size, in_batched, *operands):
        rows = max(x.shape[-2] for x in operands)

        def flat(x, batched):
            if not batched and x.shape[0] == 1:
                return x  # One row for all: stride 0, no copy.
            # (axis_size, rows, length): broadcast only where another operand
            # has more rows than this one (nested vmap).
            x = jnp.broadcast_to(x, (axis_size, rows, x.shape[-1]))
            return x.reshape(axis_size * rows, x.shape[-1])

        out = call(*map(flat, operands, in_batched))
        return out.reshape(axis_size, rows, out.shape[-1]), True

    return call


def _search(spec, a, v, *flag):
    """Answers of `spec`'s launches for 1-D `a` and `v` (and the checked
    call's int32 flag of shape (1,))."""
    # Integer answers: zero cotangents, as jnp's; neither jax-triton's call
    # nor the callback has a derivative rule.
    a, v = lax.stop_gradient(a), lax.stop_gradient(v)
    if a.dtype == jnp.bool_:  # Stored as bytes; False < True as 0 < 1.
        a, v = a.astype(jnp.uint8), v.astype(jnp.uint8)
    return _batched(spec)(*(x[None] for x in (*flag, a, v)))[0]


_TRITON = dict(
    interpreter="Triton's interpreter on the host\n    (needs torch, and TRITON_INTERPRET=1 before "
                "the kernels first load)",
    raises="\nRaises:\n  ImportError: triton or jax-triton is missing (see `triton_available`).\n",
)


@searchsorted_wrapper(MERGE_PATH, kernel="the native Triton merge-path kernel", **_TRITON)
def triton_merge_path_searchsorted(a, v, *, side, out_dtype, config, interpret):
    return _search(_Launch(MERGE_PATH, config, side, out_dtype, interpret), a, v)


@searchsorted_wrapper(BINARY_SEARCH, kernel="the native Triton binary-search kernel", **_TRITON)
def triton_binary_search_searchsorted(a, v, *, side, out_dtype, config, interpret):
    return _search(_Launch(BINARY_SEARCH, config, side, out_dtype, interpret), a, v)


@checked_wrapper(kernels="the native Triton kernels", **_TRITON)
def triton_checked_searchsorted(a, v, merging, *, side, out_dtype, merge_config, bisect_config,
                                interpret):
    spec = _CheckedLaunch(_Launch(MERGE_PATH, merge_config, side, out_dtype, interpret),
                          _Launch(BINARY_SEARCH, bisect_config, side, out_dtype, interpret))
    return _search(spec, a, v, merging)
