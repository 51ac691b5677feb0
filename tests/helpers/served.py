"""What a compiled search runs: jaxsearch's kernels, or jnp's.

A jaxsearch function that quietly answered through jnp would still give
jnp's answers, so the tests that care read the lowered program instead:

- on CPU, the Cython kernels are XLA custom calls (`cpu.TARGET_NAME`,
  `cpu.CUMSUM_TARGET_NAME`, `cpu.HISTOGRAM_TARGET_NAME`, and `cpu.SORT_TARGET_NAME`
  for the key sort the counting methods search); the searchsorted
  one carries the kernel it runs for sorted needles as its `kernel`
  attribute (numbered as
  `jaxsearch._cpu_ext.KERNEL_NAMES`) and the needles' order as `order`;
- the GPU kernels on a CPU backend run in an interpreter (Pallas', Mosaic
  GPU's), which leaves no custom call; but each kernel's public wrapper is a
  jit of its own, named after the kernel (`merge_path_searchsorted`,
  `mosaic_binary_search_searchsorted`...), and the program's debug
  locations keep that name stack (``jit(merge_path_searchsorted)/...``).
  The names come from the registry (`pallas_kernels.BACKENDS`), so the check
  names the backend and the kind (merge path, binary search) of what ran,
  for every interpreter, and for a lowering for a GPU too. A spy on the
  wrappers would see only what was traced this time (jit caches traces),
  and a count of loops or gathers would follow jax's version.

jnp's searchsorted lowers to a while loop (a sort for method="sort", plain
compares for "compare_all"), none of it from those files and no custom call
of ours: `assert_jnp` checks that.
"""

from __future__ import annotations

import dataclasses
import re

import jax

from helpers.lowering import on_abstract_gpu_if_needed
from jaxsearch._cpu_ext import KERNEL_NAMES, ORDER_NAMES
from jaxsearch.core import cpu
from jaxsearch.pallas_kernels import BACKENDS

OURS = frozenset({cpu.TARGET_NAME, cpu.CUMSUM_TARGET_NAME, cpu.HISTOGRAM_TARGET_NAME,
                  cpu.SORT_TARGET_NAME, cpu.INTERP_TARGET_NAME})
KERNEL_OF = {number: name for name, number in KERNEL_NAMES.items()}
ORDER_OF = {number: name for name, number in ORDER_NAMES.items()}
# A custom call and its attributes, on one line of StableHLO text.
_CALL = re.compile(r"stablehlo\.custom_call @([\w$.]+)\(.*$", re.MULTILINE)
# Each GPU kernel's wrapper by its name: (backend, kind), as
# ("pallas", "merge_path"); a backend's checked kernel (both kinds behind a
# flag read on the device) as (backend, "checked").
GPU_KERNELS = {fn.__name__: (backend.name, kind) for backend in BACKENDS.values()
               for kind, fn in backend.kernels.items()}
GPU_KERNELS |= {backend.checked.__name__: (backend.name, "checked")
                for backend in BACKENDS.values() if backend.checked is not None}
_GPU_KERNEL = re.compile(r"\bjit\((" + "|".join(map(re.escape, GPU_KERNELS)) + r")\)")


@dataclasses.dataclass(frozen=True)
class Call:
    """One custom call: its target, and for jaxsearch's CPU search the
    kernel for sorted needles and the order ("any", "sorted", "check")."""

    target: str
    kernel: str | None = None
    order: str | None = None


@dataclasses.dataclass(frozen=True)
class Served:
    """What one lowered program runs."""

    calls: frozenset[Call]
    gpu_kernels: frozenset[tuple[str, str]]  # (backend, kind) of the GPU kernels traced
    text: str

    @property
    def targets(self) -> frozenset[str]:
        return frozenset(c.target for c in self.calls)

    @property
    def cpu_kernels(self) -> frozenset[str]:
        """The kernels of jaxsearch's CPU searchsorted calls."""
        return frozenset(c.kernel for c in self.calls if c.kernel is not None)

    @property
    def by_jaxsearch(self) -> bool:
        return bool(self.targets & OURS) or bool(self.gpu_kernels)

    def __str__(self) -> str:
        return (f"custom calls {sorted(map(str, self.calls))}, "
                f"GPU kernels {sorted(self.gpu_kernels)}")


def _attribute(line: str, name: str) -> int | None:
    found = re.search(rf"\b{name} = (-?\d+) : i32", line)
    return None if found is None else int(found.group(1))


def served(f, *args, platform: str | None = None) -> Served:
    """What `jax.jit(f)(*args)` runs, read from its lowering (for `platform`
    when given: "tpu", "cuda"... lower on this machine without one)."""
    if platform:  # traced and lowered on an abstract GPU where jax wants one
        lowered = on_abstract_gpu_if_needed(
            lambda: jax.jit(f).trace(*args).lower(lowering_platforms=(platform,)))
    else:
        lowered = jax.jit(f).trace(*args).lower()
    text = lowered.as_text(debug_info=True)
    calls = set()
    for match in _CALL.finditer(text):
        target, line = match.group(1), match.group(0)
        if target in (cpu.TARGET_NAME, cpu.INTERP_TARGET_NAME):
            calls.add(Call(target, KERNEL_OF[_attribute(line, "kernel")],
                           ORDER_OF[_attribute(line, "order")]))
        elif target == cpu.CUMSUM_TARGET_NAME:
            calls.add(Call(target, order=ORDER_OF[_attribute(line, "order")]))
        else:
            calls.add(Call(target))
    gpu_kernels = frozenset(GPU_KERNELS[name] for name in _GPU_KERNEL.findall(text))
    return Served(frozenset(calls), gpu_kernels, text)


def custom_calls(f, *args, platform: str | None = None) -> frozenset[Call]:
    """The custom calls of `jax.jit(f)(*args)`, with their kernel attribute."""
    return served(f, *args, platform=platform).calls


def assert_cpu_kernel(f, *args, target: str = cpu.TARGET_NAME, kernel: str | None = None,
                      order: str | None = None) -> Served:
    """`f(*args)` runs jaxsearch's CPU custom call `target` (with this kernel
    and order, where given), and nothing of jnp's search."""
    s = served(f, *args)
    mine = [c for c in s.calls if c.target == target]
    assert mine, f"no {target} call: the search fell back to jnp? ({s})"
    if kernel is not None:
        assert {c.kernel for c in mine} == {kernel}, f"want kernel {kernel}: {s}"
    if order is not None:
        assert {c.order for c in mine} == {order}, f"want order {order}: {s}"
    assert "stablehlo.while" not in s.text, f"a while loop next to our call (jnp's?): {s}"
    return s


def assert_gpu_kernels(f, *args, kinds: set[str], backend: str) -> Served:
    """`f(*args)` runs jaxsearch's GPU kernels of `kinds` in `backend`'s
    subpackage (in their interpreter on a CPU backend)."""
    s = served(f, *args)
    want = {(backend, kind) for kind in kinds}
    assert s.gpu_kernels == want, f"want {sorted(want)}: {s}"
    assert not s.targets & OURS, s
    return s


def assert_jnp(f, *args, platform: str | None = None) -> Served:
    """`f(*args)` runs none of jaxsearch's kernels: jnp answers."""
    s = served(f, *args, platform=platform)
    assert not s.by_jaxsearch, f"jaxsearch's kernels where jnp should answer: {s}"
    return s
