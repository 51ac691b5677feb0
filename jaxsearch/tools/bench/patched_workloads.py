"""The patched benchmark's workloads: unchanged jax code as a user writes it,
each with its host arguments at a size (and stacked into rows under
jax.vmap), its speed-up target and its numpy peer."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.interpolate
import numpy as np

from .format import batch_label
from .resampling import ResamplingProblem, make_inputs


@dataclasses.dataclass(frozen=True)
class Workload:
    """One piece of unchanged jax code.

    `make(n, rng)` gives the function as a user writes it (not jitted) and its
    host arguments for one problem of size n; under vmap the family stacks
    the arguments of `rows` such problems and maps the function over them.
    `numpy` is a host peer on the same arguments, timed next to it.
    """

    name: str
    code: str  # what the legend shows
    make: Callable[[int, np.random.Generator], tuple[Callable[..., Any], tuple[Any, ...]]]
    target: float | None = None  # the speed-up the patch should reach here
    vmapped: bool = False  # also run as `rows` rows under jax.vmap
    numpy: Callable[..., Any] | None = None
    largest: int | None = None  # sizes past this are left out (stock takes seconds)
    vmap_target: float | None = None  # the target under vmap, where it is not `target`

    def target_for(self, rows: int) -> float | None:
        """The speed-up target of a problem of `rows` rows (> 1: under vmap)."""
        return self.vmap_target if rows > 1 and self.vmap_target is not None else self.target


def _histogram(sort: bool) -> Callable[[int, np.random.Generator], tuple[Callable, tuple]]:
    def make(n: int, rng: np.random.Generator) -> tuple[Callable, tuple]:
        x = rng.standard_normal(n, dtype=np.float32)
        return (lambda x: jnp.histogram(x, bins=100)), (np.sort(x) if sort else x,)
    return make


def _choice(n: int, rng: np.random.Generator) -> tuple[Callable, tuple]:
    p, _ = _softmax_and_systematic(n, rng)
    return (lambda key, p: jax.random.choice(key, n, (n,), p=p)), (
        jax.random.key(int(rng.integers(2**31))), p)


def _interp_inputs(n: int, rng: np.random.Generator, sort: bool) -> tuple[np.ndarray, ...]:
    """Needles x (a tenth of them outside xp's range), sorted xp, and fp."""
    x = (rng.random(n, dtype=np.float32) * 1.2 - 0.1).astype(np.float32)
    xp = np.sort(rng.random(n, dtype=np.float32))
    return np.sort(x) if sort else x, xp, rng.standard_normal(n, dtype=np.float32)


def _interp(sort: bool) -> Callable[[int, np.random.Generator], tuple[Callable, tuple]]:
    def make(n: int, rng: np.random.Generator) -> tuple[Callable, tuple]:
        # Looked up when traced, as in a user's function: `jnp.interp` itself,
        # taken here before the patch, would keep jax's interp, of which the
        # patch serves only the search inside.
        return (lambda x, xp, fp: jnp.interp(x, xp, fp)), _interp_inputs(n, rng, sort)
    return make


def _grid_interpolator(ndim: int) -> Callable[[int, np.random.Generator],
                                              tuple[Callable, tuple]]:
    """n query points on a grid of about n values (n ** (1 / ndim) a side)."""
    def make(n: int, rng: np.random.Generator) -> tuple[Callable, tuple]:
        side = round(n ** (1 / ndim))
        points = tuple(np.sort(rng.random(side, dtype=np.float32)) for _ in range(ndim))
        values = rng.standard_normal((side,) * ndim, dtype=np.float32)
        xi = rng.random((n, ndim), dtype=np.float32)

        def interpolate(points, values, xi):
            return jax.scipy.interpolate.RegularGridInterpolator(points, values)(xi)

        return interpolate, (points, values, xi)
    return make


def _softmax_and_systematic(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Softmax weights and systematic uniforms (i + U) / n, from the
    resampling family's inputs."""
    w, u = make_inputs(ResamplingProblem("systematic", n), seed=int(rng.integers(2**31)))
    return w[0], u[0]


def _resampling_step(method: str) -> Callable[[int, np.random.Generator], tuple[Callable, tuple]]:
    def make(n: int, rng: np.random.Generator) -> tuple[Callable, tuple]:
        def step(w, u):
            idx = jnp.searchsorted(jnp.cumsum(w), u, method=method)
            return jnp.clip(idx, 0, n - 1)

        return step, _softmax_and_systematic(n, rng)
    return make


WORKLOADS = (
    Workload("histogram unsorted", "jnp.histogram(x, bins=100), x float32 normal",
             _histogram(False), 5.0, numpy=lambda x: np.histogram(x, bins=100)),
    Workload("histogram sorted", "the same on x sorted", _histogram(True), 20.0,
             vmapped=True, numpy=lambda x: np.histogram(x, bins=100), vmap_target=10.0),
    Workload("random.choice", "jax.random.choice(key, n, (n,), p=p), p softmax weights",
             _choice, 3.0),
    Workload("interp unsorted x", "jnp.interp(x, xp, fp): n sorted xp, n float32 x (a tenth "
             "outside xp's range)", _interp(False), 5.0, vmapped=True, vmap_target=3.0),
    Workload("interp sorted x", "the same on x sorted", _interp(True), 5.0),
    Workload("RegularGridInterpolator 1-D", "jax.scipy.interpolate.RegularGridInterpolator("
             "points, values)(xi): n grid values, n points", _grid_interpolator(1)),
    Workload("RegularGridInterpolator 2-D", "the same on a sqrt(n) x sqrt(n) grid, n points",
             _grid_interpolator(2)),
    Workload("resampling step", "idx = jnp.searchsorted(jnp.cumsum(w), u); jnp.clip(idx, 0, "
             "n - 1): w softmax weights, u systematic uniforms (i + U) / n",
             _resampling_step("scan"), 3.0, vmapped=True),
    Workload("resampling step by sort", "the same with method=\"sort\" (as written for GPUs): "
             "it counts the sums below each needle, a running sum's rounding descents "
             "included", _resampling_step("sort"), 10.0, vmapped=True, largest=10**6),
)
WORKLOADS_BY_NAME = {w.name: w for w in WORKLOADS}


@dataclasses.dataclass(frozen=True)
class PatchedProblem:
    """A workload at size n (rows > 1: that many rows of n under jax.vmap)."""

    workload: str
    n: int
    rows: int = 1

    @property
    def label(self) -> str:
        return batch_label(self.workload, self.n, self.rows)


def build(problem: PatchedProblem, seed: int = 0) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """The problem's function (vmapped over rows where rows > 1, not jitted)
    and its host arguments."""
    make = WORKLOADS_BY_NAME[problem.workload].make
    rng = np.random.default_rng(seed)
    if problem.rows == 1:
        return make(problem.n, rng)
    made = [make(problem.n, rng) for _ in range(problem.rows)]
    stacked = jax.tree.map(lambda *rows: np.stack(rows), *(args for _, args in made))
    return jax.vmap(made[0][0]), stacked
