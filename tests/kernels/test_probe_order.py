"""The GPU implementations on an unsorted `a`: jnp's answers, as on CPU.

jnp's default search ("scan") answers where its probes land, and float32's
cumsum of positive weights (what particle filters search) need not be
monotone. The GPU binary-search kernels follow jnp's probes, and the
default call merges only where `a` is sorted too. Run here in each
backend's interpreter (native Triton's needs torch), on a few small shapes
(each shape is a compile).
"""

import jax.numpy as jnp
import numpy as np
import pytest
from helpers.served import served

import jaxsearch
from jaxsearch.core import gpu

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*Pallas Triton backend is deprecated:DeprecationWarning"
)

def _implementation(name):
    ok, reason = gpu.status(name, interpret=True)
    return pytest.param(name, marks=pytest.mark.skipif(
        not ok, reason=f"{name} cannot run in its interpreter here: {reason}"))


IMPLEMENTATIONS = [_implementation(name) for name in ("pallas", "mosaic", "triton")]


def _unsorted_cases():
    rng = np.random.default_rng(0)
    ints = rng.integers(0, 40, 150).astype(np.int32)  # ties
    nearly = np.sort(rng.normal(size=150)).astype(np.float32)
    nearly[[10, 75, 140]] = nearly[[100, 20, 5]]  # a few descents
    with_nan = rng.normal(size=150).astype(np.float32)
    with_nan[[3, 60, 120]] = np.nan
    zeros = np.array([0.0, -0.0, 1.0, -1.0, 0.0, 2.0] * 25, np.float32)
    return {"ints": (ints, rng.integers(-3, 43, 129).astype(np.int32)),
            "nearly_sorted": (nearly, np.sort(rng.normal(size=129)).astype(np.float32)),
            "nan_inside": (with_nan, np.append(rng.normal(size=128), np.nan).astype(np.float32)),
            "signed_zeros": (zeros, np.array([0.0, -0.0, 1.0, 0.5] * 32, np.float32))}


CASES = _unsorted_cases()


# Native Triton's interpreter is the slowest (numpy through torch, per
# program): the default call only, whose binary search sorted_v=False runs
# too where the needles are not sorted.
COMBINATIONS = [(impl, case, side, sorted_v) for impl in IMPLEMENTATIONS for case in CASES
                for side in ("left", "right") for sorted_v in (None, False)
                if not (impl.values[0] == "triton" and sorted_v is False)]


@pytest.mark.parametrize("implementation, case, side, sorted_v", [
    pytest.param(impl.values[0], case, side, sorted_v, marks=impl.marks)
    for impl, case, side, sorted_v in COMBINATIONS])
def test_unsorted_a_gives_jnps_answers(implementation, case, side, sorted_v):
    a, v = CASES[case]
    expected = jnp.searchsorted(a, v, side=side)
    found = jaxsearch.searchsorted(a, v, side=side, sorted_v=sorted_v,
                                   implementation=implementation)
    np.testing.assert_array_equal(np.asarray(found), np.asarray(expected))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_sorted_inputs_still_merge(implementation):
    """On sorted a and v the default call still takes the merge path: the
    order test lets it through (and it answers as jnp). The program runs
    the checked kernel, whose flag is the order test's."""
    rng = np.random.default_rng(1)
    a = np.sort(rng.normal(size=150)).astype(np.float32)
    v = np.sort(rng.normal(size=129)).astype(np.float32)
    found = jaxsearch.searchsorted(a, v, implementation=implementation)
    np.testing.assert_array_equal(np.asarray(found), np.asarray(jnp.searchsorted(a, v)))
    assert bool(gpu.both_sorted(jnp.asarray(a), jnp.asarray(v)))
    kinds = {kind for _, kind in served(
        lambda a, v: jaxsearch.searchsorted(a, v, implementation=implementation), a, v
    ).gpu_kernels}
    assert kinds == {"checked"}
