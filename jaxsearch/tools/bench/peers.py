"""What the searchsorted benchmarks measure against what: the problems (sorted
keys and needles of a size, dtype and order) and the peers timed on them
(jaxsearch, jnp's methods, numpy, torch, cupy and the memory floors)."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...core.api import JNP_METHODS, searchsorted
from .format import fmt_count

# ---------------------------------------------------------------- problems


@dataclasses.dataclass(frozen=True)
class Problem:
    """A searchsorted problem: m needles in n sorted keys."""

    n: int
    m: int
    dtype: str = "float32"
    sorted_v: bool = True

    @property
    def label(self) -> str:
        order = "sorted" if self.sorted_v else "unsorted"
        return f"N={fmt_count(self.n)} M={fmt_count(self.m)} {self.dtype} {order}"

    @property
    def nbytes(self) -> int:
        """Bytes of a and v and of m int32 indices: what a search reads and
        writes when it must read all of a (see :attr:`reads_all`)."""
        return (self.n + self.m) * np.dtype(self.dtype).itemsize + 4 * self.m

    @property
    def reads_all(self) -> bool:
        """Whether any search must read all of a and v: when N <= M.

        The needles spread over a's range (:func:`make_arrays`), so with at
        least one needle per key every cache line of a holds some needle's
        insertion point. With N > M a search may skip most of a (a binary
        search reads about M * log2(N) keys), and nbytes / time would be no
        bandwidth: 1e7 keys and 1e3 needles read "10x faster than a copy".
        """
        return self.n <= self.m


def uniform_order_statistics(rng: np.random.Generator, k: int) -> np.ndarray:
    """k sorted uniform samples in [0, 1), in O(k) (order statistics, no sort)."""
    gaps = rng.standard_exponential(k + 1)
    return (np.cumsum(gaps)[:-1] / gaps.sum()).clip(0.0, np.nextafter(1.0, 0.0))


def make_arrays(problem: Problem, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sorted keys `a` and needles `v` (sorted when the problem says so).

    Both are drawn from the same range (needles a little wider, so some fall
    off each end); integer keys have duplicates and gaps. `problem.dtype` is
    any float or integer dtype.
    """
    rng = np.random.default_rng(seed)
    dt = np.dtype(problem.dtype)
    a = uniform_order_statistics(rng, problem.n)
    v = uniform_order_statistics(rng, problem.m) if problem.sorted_v else rng.random(problem.m)
    if np.issubdtype(dt, np.floating):
        return a.astype(dt), (v * 1.02 - 0.01).astype(dt)
    span = min(2 * max(problem.n, problem.m), int(np.iinfo(dt).max) // 2)
    # Keys in [1, span], needles in [0, span + 1]: no negatives for unsigned types.
    return (np.floor(a * span) + 1).astype(dt), np.floor(v * (span + 2)).astype(dt)


# ---------------------------------------------------------------- peers


@dataclasses.dataclass(frozen=True)
class Inputs:
    """A problem's arrays on the host (numpy) and on the default device (jax)."""

    a: np.ndarray
    v: np.ndarray
    ja: jax.Array
    jv: jax.Array


def make_inputs(problem: Problem, seed: int = 0) -> Inputs:
    """:func:`make_arrays`'s arrays, on the host and on the default device."""
    a, v = make_arrays(problem, seed)
    return Inputs(a, v, jnp.asarray(a), jnp.asarray(v))


@dataclasses.dataclass(frozen=True)
class Impl:
    """One thing to time on each problem.

    Attributes:
      name: shown in tables and plots.
      group: "jaxsearch", "jnp", "numpy", "torch", "cupy" or "floor"; ratios
        are taken against the best of each peer group.
      build: makes the zero-argument call to time from a problem's inputs.
      applies: whether the impl makes sense for a problem (e.g. sorted only).
      needs: what `applies` asks of a problem, in words: the reason recorded
        for the problems it does not apply to.
      cost: estimated (seconds per call on a 2-core CPU, bytes of temporaries),
        to skip peers that would not fit in the time or memory allowed.
      checked: whether its output is compared with numpy's.
    """

    name: str
    group: str
    build: Callable[[Inputs], Callable[[], Any]]
    applies: Callable[[Problem], bool] = lambda p: True
    needs: str = ""
    cost: Callable[[int, int], tuple[float, float]] | None = None
    checked: bool = True


def log2_size(x: int) -> float:
    """log2 of a size, at least 1: a binary search's depth, for cost estimates."""
    return math.log2(max(x, 2))


def jaxsearch_impl(sorted_v: bool | None) -> Impl:
    """jaxsearch.searchsorted under jit with the given `sorted_v`."""
    name = "jaxsearch" if sorted_v is None else f"jaxsearch sorted_v={sorted_v}"

    def build(x: Inputs) -> Callable[[], Any]:
        f = jax.jit(functools.partial(searchsorted, sorted_v=sorted_v))
        return lambda: f(x.ja, x.jv)

    if sorted_v:
        return Impl(name, "jaxsearch", build, applies=lambda p: p.sorted_v,
                    needs="sorted needles")
    return Impl(name, "jaxsearch", build)


# Rough per-element costs of jnp's methods on this kind of 2-core CPU,
# measured once; they only decide what to skip on a CPU backend, never what
# is reported. (Accelerators are far faster: only memory limits them.)
_JNP_COSTS: dict[str, Callable[[int, int], tuple[float, float]]] = {
    "scan": lambda n, m: (6e-9 * m * log2_size(n + 1), 0.0),
    "scan_unrolled": lambda n, m: (1.3e-8 * m * log2_size(n + 1), 0.0),
    "sort": lambda n, m: (1.8e-8 * (n + m) * log2_size(n + m), 16.0 * (n + m)),
    "compare_all": lambda n, m: (1.5e-9 * n * m, float(n * m)),
}


def jnp_impl(method: str) -> Impl:
    """jnp.searchsorted under jit with one of its methods."""

    def build(x: Inputs) -> Callable[[], Any]:
        f = jax.jit(functools.partial(jnp.searchsorted, method=method))
        return lambda: f(x.ja, x.jv)

    return Impl(f"jnp {method}", "jnp", build, cost=_JNP_COSTS[method])

def numpy_impl() -> Impl:
    """numpy.searchsorted on host arrays."""
    return Impl("numpy", "numpy", lambda x: functools.partial(np.searchsorted, x.a, x.v))


def numpy_on_jax_buffers_impl() -> Impl:
    """numpy.searchsorted reading the jax arrays' own buffers (zero-copy on CPU).

    numpy allocates its large arrays on 2 MiB pages where the OS allows, XLA
    on 4 KiB pages; a binary search over a large haystack is bound by TLB
    misses, so the same search is faster over numpy's copy than over XLA's.
    This peer reads the very bytes jaxsearch reads. Its group is its own:
    ratios against "numpy" stay against numpy's own arrays.
    """
    return Impl("numpy on jax buffers", "numpy on jax buffers",
                lambda x: functools.partial(np.searchsorted, np.asarray(x.ja), np.asarray(x.jv)),
                applies=lambda p: jax.default_backend() == "cpu", needs="the CPU backend")


def torch_impl() -> Impl | None:
    """torch.searchsorted (on CUDA when jax runs on a GPU), if torch imports."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return None
    cuda = jax.default_backend() == "gpu" and torch.cuda.is_available()

    def build(x: Inputs) -> Callable[[], Any]:
        ta, tv = torch.from_numpy(x.a), torch.from_numpy(x.v)
        if not cuda:
            return lambda: torch.searchsorted(ta, tv, out_int32=True)
        ta, tv = ta.cuda(), tv.cuda()

        def call() -> Any:
            out = torch.searchsorted(ta, tv, out_int32=True)
            torch.cuda.synchronize()
            return out

        return call

    return Impl("torch (cuda)" if cuda else "torch", "torch", build)


def cupy_impl() -> Impl | None:
    """cupy.searchsorted, if cupy imports and a CUDA device is there."""
    if jax.default_backend() != "gpu":
        return None
    try:
        cp = importlib.import_module("cupy")
    except ImportError:
        return None

    def build(x: Inputs) -> Callable[[], Any]:
        ca, cv = cp.asarray(x.a), cp.asarray(x.v)

        def call() -> Any:
            out = cp.searchsorted(ca, cv)
            cp.cuda.Device().synchronize()
            return out

        return call

    return Impl("cupy", "cupy", build)


COPY_NAME = "copy floor"
JAX_FLOOR_NAME = "jax floor"


def copy_impl() -> Impl:
    """A plain copy of the bytes of `a` and `v`: the memory floor.

    On CPU a numpy copy into a fresh buffer (as a search's fresh output); on an
    accelerator one jitted elementwise pass (read and write) on the device.
    """

    def build(x: Inputs) -> Callable[[], Any]:
        src = np.concatenate([x.a.view(np.uint8), x.v.view(np.uint8)])
        if jax.default_backend() == "cpu":
            return src.copy
        f, dsrc = jax.jit(jnp.bitwise_not), jax.device_put(src)
        return lambda: f(dsrc)

    return Impl(COPY_NAME, "floor", build, checked=False)


def jax_floor_impl() -> Impl:
    """The floor through JAX: one fused jitted pass reading a and v, writing int32.

    ``(v > a).astype(int32)`` needs N == M. (``(v > a.sum())`` is no floor:
    XLA runs it several times slower.)
    """
    f = jax.jit(lambda a, v: (v > a).astype(jnp.int32))
    return Impl(JAX_FLOOR_NAME, "floor", lambda x: functools.partial(f, x.ja, x.jv),
                applies=lambda p: p.n == p.m, needs="N == M", checked=False)


def peer_impls() -> list[Impl]:
    """The full line-up: jaxsearch variants, every jnp method, numpy, torch and
    cupy where they import, and the floors."""
    impls = [jaxsearch_impl(None), jaxsearch_impl(True), jaxsearch_impl(False)]
    impls += [jnp_impl(m) for m in JNP_METHODS]
    impls.append(numpy_impl())
    impls += [i for i in (torch_impl(), cupy_impl()) if i is not None]
    return impls + [copy_impl(), jax_floor_impl()]

