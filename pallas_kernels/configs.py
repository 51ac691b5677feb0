"""The kernel kinds (`KERNEL_KINDS`), their configurations and heuristic
defaults, and the tuning space.

Block and tile sizes are powers of two (Triton tensors must be). The
defaults are guesses from (N, M, dtype) until the autotuner has measured a
device; `tuning_space()` lists everything the autotuner may choose, and the
lowering tests check that each of them lowers to Triton.
"""

import dataclasses
from collections.abc import Callable
from typing import ClassVar

MERGE_METHODS = ("bisect", "compare", "serial")
MERGE_PARTITIONS = ("once", "per_program")


def _check_pow2(name, value):
    if not isinstance(value, int) or value < 1 or value & (value - 1):
        raise ValueError(f"{name} must be a power of two, got {value!r}")


def _check_launch(num_warps, num_stages):
    _check_pow2("num_warps", num_warps)
    if num_warps > 32:
        raise ValueError(f"num_warps must be at most 32, got {num_warps}")
    if not isinstance(num_stages, int) or num_stages < 1:
        raise ValueError(f"num_stages must be a positive int, got {num_stages!r}")


@dataclasses.dataclass(frozen=True)
class MergePathConfig:
    """Merge-path kernel (sorted needles).

    Attributes:
      tile: elements of the merged sequence (a and v together) per program.
      method: how a program resolves its needles against its slice of `a`:
        'bisect', a binary search per needle inside the slice (log2(tile)
        gathers per needle), or 'compare', a needles x chunk compare matrix per
        chunk of the slice (O(tile) compares per needle: for small tiles),
        or 'serial', the tile cut into runs of `items` merged elements, one
        lane each, which finds where its run starts (a search of log2(tile)
        steps) and merges it, one element per step: every
        lane busy whatever the mix of `a` and `v`, and O(1) work per
        element; a tile whose lanes' walks did not cover its needles once
        each (a broken promise) bisects them again. Pallas Triton's and
        native Triton's kernels: Mosaic GPU bisects where it says 'serial'.
      chunk: elements of `a` per compare step; 'compare' only (None otherwise).
      items: merged elements per lane; 'serial' only (None otherwise).
      num_warps: Triton warps per program.
      num_stages: Triton software-pipelining stages.
      partition: where each program's slices of `a` and `v` come from:
        'once', a pass before the merge finds every tile boundary's split,
        one lane per boundary, and each program reads its two; or
        'per_program', each program searches its own two boundaries (two
        lanes searching while the others wait; on Mosaic GPU, two scalar
        searches that every thread runs). Every backend honours it: native
        Triton launches the pass as a triton_call of its own, Mosaic GPU as
        a Mosaic GPU kernel of its own.
    """

    kind: ClassVar[str] = "merge_path"  # its `KernelKind`'s name

    tile: int = 1024
    method: str = "bisect"
    chunk: int | None = None
    num_warps: int = 4
    num_stages: int = 1
    partition: str = "once"
    items: int | None = None

    def __post_init__(self):
        _check_pow2("tile", self.tile)
        if self.method not in MERGE_METHODS:
            raise ValueError(f"method must be one of {MERGE_METHODS}, got {self.method!r}")
        if self.partition not in MERGE_PARTITIONS:
            raise ValueError(f"partition must be one of {MERGE_PARTITIONS}, "
                             f"got {self.partition!r}")
        if self.method == "compare":
            _check_pow2("chunk", self.chunk)
            if self.chunk > self.tile:
                raise ValueError(f"chunk {self.chunk} exceeds tile {self.tile}")
        elif self.chunk is not None:
            raise ValueError("chunk applies to method='compare' only")
        if self.method == "serial":
            _check_pow2("items", self.items)
            if self.items > self.tile:
                raise ValueError(f"items {self.items} exceeds tile {self.tile}")
        elif self.items is not None:
            raise ValueError("items applies to method='serial' only")
        _check_launch(self.num_warps, self.num_stages)


@dataclasses.dataclass(frozen=True)
class BinarySearchConfig:
    """Binary-search kernel (any needles).

    Attributes:
      block: needles per program, one lane each.
      num_warps: Triton warps per program.
      num_stages: Triton software-pipelining stages.
    """

    kind: ClassVar[str] = "binary_search"  # its `KernelKind`'s name

    block: int = 512
    num_warps: int = 4
    num_stages: int = 1

    def __post_init__(self):
        _check_pow2("block", self.block)
        _check_launch(self.num_warps, self.num_stages)


def _pow2_clip(x, lo, hi):
    """The power of two nearest above `x`, clipped to [lo, hi]."""
    return min(max(1 << max(int(x) - 1, 0).bit_length(), lo), hi)


# Enough programs to fill a large GPU (H200: 132 SMs) several times over.
_TARGET_PROGRAMS = 1024


def default_merge_path_config(n, m, dtype):
    """Heuristic merge-path config for len(a) = n, len(v) = m.

    Small inputs take small tiles so that every SM still gets programs,
    and bisect each needle in its tile: two elements of the tile per thread
    keep registers low and occupancy high. Inputs that fill the largest
    tiles (N + M past about 2**21) merge serially, 8 elements per lane at
    tile 1024 and 4 warps: by `bench/gpu_cost.py`'s estimate from the
    H200's machine code, 0.66 ms at N = M = 1e8 float32 where bisecting at
    tile 2048 takes 1.6 ms (issue-bound); more elements per lane issue less
    but touch more L1 lines per access.
    """
    bisect = default_bisect_config(n, m, dtype)
    if bisect.tile == 2048:
        return MergePathConfig(tile=1024, method="serial", items=8, num_warps=4)
    return bisect


def for_warp_lanes(config, lanes):
    """`config` for a GPU whose warps hold `lanes` threads (64: AMD's
    CDNA wavefronts, gfx90a to gfx950), with the threads per program of the
    32-lane warps the heuristics were sized for, so that each thread holds
    the elements it was meant to: the serial merge's 128 runs of a 1024
    tile are one per thread on 4 warps of 32, and on 4 of 64 every run
    would be walked twice."""
    return dataclasses.replace(config, num_warps=max(1, config.num_warps * 32 // lanes))


def default_bisect_config(n, m, dtype):
    """Heuristic merge-path config with method 'bisect' for len(a) = n,
    len(v) = m: the default below N + M of about 2**21."""
    del dtype  # Keys are at most 64 bits; the tile bounds registers enough.
    tile = _pow2_clip((n + m) / _TARGET_PROGRAMS, 256, 2048)
    return MergePathConfig(tile=tile, method="bisect", num_warps=min(tile // 64, 16))


def default_binary_search_config(n, m, dtype):
    """Heuristic binary-search config for len(a) = n, len(v) = m."""
    del n, dtype  # Each lane's work is log2(n) whatever the block.
    block = _pow2_clip(m / _TARGET_PROGRAMS, 128, 512)
    return BinarySearchConfig(block=block, num_warps=4)


@dataclasses.dataclass(frozen=True)
class KernelKind:
    """One kind of kernel, which every backend writes: its config class, the
    heuristic default of that config, and what it asks of the needles.

    Attributes:
      config_cls: the frozen config dataclass; its `kind` is this kind's name.
      default_config: `default_config(n, m, dtype)`, the heuristic config.
      sorted_needles: whether it needs sorted needles (the merge path) or
        takes any (the binary search).
    """

    config_cls: type
    default_config: Callable
    sorted_needles: bool

    @property
    def name(self) -> str:
        """"merge_path" or "binary_search": the key of tuning caches and configs."""
        return self.config_cls.kind


MERGE_PATH = KernelKind(MergePathConfig, default_merge_path_config, sorted_needles=True)
BINARY_SEARCH = KernelKind(BinarySearchConfig, default_binary_search_config,
                           sorted_needles=False)
# Every kind, in the order a backend's kernels are listed.
KERNEL_KINDS = (MERGE_PATH, BINARY_SEARCH)


def kernel_kind(name: str) -> KernelKind:
    """The kind called `name`; KeyError for any other name."""
    return {k.name: k for k in KERNEL_KINDS}[name]


# (tile, num_warps) of the merge path's 'bisect' configs. Left out: those
# that spill registers on an H200 for some key dtype, as compiled by XLA from
# jax 0.10.2 (tile 512 with 4 warps, 1024 and 2048 with 8: 8 bytes for 16-
# and 32-bit integer keys under vmap; 4096 with 4 for 64-bit keys) or 0.12
# (64 elements per thread and more). tests/kernels/test_h200_compile.py compiles
# every config to keep it so.
_MERGE_BISECT_LAUNCHES = ((256, 4), (256, 8), (512, 8), (1024, 4), (1024, 16), (2048, 4),
                          (2048, 16), (4096, 8))


def tuning_space():
    """Every config the autotuner may choose (both kinds), each of them free
    of register spills on an H200; the heuristic defaults are among them."""
    space = [
        MergePathConfig(tile=tile, method="bisect", num_warps=warps)
        for tile, warps in _MERGE_BISECT_LAUNCHES
    ]
    # The kernel before the partition pass, at the defaults' launches, so
    # that a GPU's autotune races the two.
    space += [
        MergePathConfig(tile=tile, method="bisect", num_warps=min(tile // 64, 16),
                        partition="per_program")
        for tile in (256, 512, 1024, 2048)
    ]
    # The serial merge, one lane per thread (on a 32-lane warp), at (tile,
    # num_warps) launches of the list above: Mosaic GPU bisects where it
    # says 'serial'.
    space += [
        MergePathConfig(tile=tile, method="serial", items=items, num_warps=warps)
        for tile, items, warps in ((1024, 8, 4), (2048, 16, 4), (4096, 16, 8))
    ]
    space += [
        MergePathConfig(
            tile=tile, method="compare", chunk=chunk, num_warps=warps, num_stages=stages
        )
        for tile, chunk in ((128, 32), (256, 16), (256, 32), (512, 16))
        for warps in (4, 8)
        for stages in (1, 3)
    ]
    space += [
        BinarySearchConfig(block=block, num_warps=warps)
        for block in (128, 256, 512, 1024)
        for warps in (4, 8)
    ]
    return space
