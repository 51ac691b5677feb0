"""`implementation="mosaic"` through the public searchsorted, in Mosaic GPU's
interpreter on a CPU backend (the kernels' own cases are in
tests/kernels/test_pallas_interpret.py, the dispatch's in test_gpu_dispatch.py)."""

import jax.numpy as jnp
import numpy as np
import pytest
from helpers.kernel_cases import sample

import jaxsearch
from jaxsearch.pallas_kernels import BACKENDS

MOSAIC_IMPORT_ERROR = BACKENDS["mosaic"].import_error
pytestmark = pytest.mark.skipif(bool(MOSAIC_IMPORT_ERROR), reason=MOSAIC_IMPORT_ERROR)


@pytest.mark.parametrize("sorted_v", [None, True, False])
def test_nan_signed_zeros_duplicates_2d_needles(sorted_v):
    rng = np.random.default_rng(8)
    a = sample(rng, "float32", 400)
    v = sample(rng, "float32", 6 * 50)
    if sorted_v is not True:  # sorted_v=None: in order or not, exact either way
        v = rng.permutation(v)
    v = v.reshape(6, 50)
    if sorted_v is True:
        v = np.sort(v.reshape(-1)).reshape(6, 50)
    for side in ("left", "right"):
        got = jaxsearch.searchsorted(a, v, side=side, sorted_v=sorted_v, implementation="mosaic")
        want = jnp.searchsorted(jnp.asarray(a), jnp.asarray(v), side=side)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_mixed_dtypes_promote_as_jnp_does():
    a = np.array([-np.inf, -2.0, -0.0, 0.0, 1.0, 1.0, np.nan], np.float32)
    v = np.array([1, -2, 0, 3, -128, 127], np.int8)
    for side in ("left", "right"):
        got = jaxsearch.searchsorted(a, v, side=side, implementation="mosaic")
        np.testing.assert_array_equal(got, jnp.searchsorted(a, v, side=side))


def test_empty_inputs():
    for a, v in ((np.zeros(0, np.int16), np.arange(3, dtype=np.int16)),
                 (np.arange(3, dtype=np.int16), np.zeros((2, 0), np.int16))):
        got = jaxsearch.searchsorted(a, v, implementation="mosaic")
        want = jnp.searchsorted(a, v)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_broken_promise_stays_in_bounds():
    rng = np.random.default_rng(9)
    a = np.sort(rng.integers(0, 100, 300)).astype(np.uint16)
    v = rng.integers(0, 100, 700).astype(np.uint16)  # promised sorted, it is not
    got = np.asarray(jaxsearch.searchsorted(a, v, sorted_v=True, implementation="mosaic"))
    assert got.min() >= 0 and got.max() <= len(a)
