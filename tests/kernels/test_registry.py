"""The registries say what the kernels really do: the key dtypes every GPU
backend (each kernel and its checked call) and the CPU extension take (`jaxsearch.keys`,
`pallas_kernels.SUPPORTED_DTYPES`), and the orders and CPU kernels the
extension numbers (`core.order.ORDERS`, `core.cpu.KERNELS`)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.cpu_calls import CPU_SEARCH

from jaxsearch import _cpu_ext, keys
from jaxsearch.core import cpu
from jaxsearch.core.order import ORDERS
from jaxsearch.pallas_kernels import BACKENDS, KERNEL_KINDS, SUPPORTED_DTYPES


def wide(dtype) -> bool:
    """Whether keys of `dtype` need jax_enable_x64."""
    return jnp.dtype(dtype).itemsize == 8


def test_the_gpu_kernels_serve_the_key_dtypes():
    assert SUPPORTED_DTYPES == keys.KEY_DTYPES
    assert len(set(keys.KEY_DTYPES)) == len(keys.KEY_DTYPES)
    assert set(keys.WIDENED_TO_FLOAT32) < set(keys.KEY_DTYPES)


@pytest.mark.parametrize("kind", [*KERNEL_KINDS, "checked"],
                         ids=lambda kind: getattr(kind, "name", kind))
@pytest.mark.parametrize("implementation", BACKENDS)
def test_each_gpu_backend_takes_every_key_dtype(implementation, kind):
    """Each wrapper's checks, and those of each backend's checked call
    (every backend has one: the sortedness test read on the device, no
    lax.cond), pass every key dtype and refuse one outside the registry (an
    empty `a`: checked, never launched, so no GPU and no triton is needed)."""
    backend = BACKENDS[implementation]
    if backend.import_error:
        pytest.skip(backend.import_error)
    if kind == "checked":
        assert backend.checked is not None, f"{backend.label} has no checked kernel"
        kernel = functools.partial(backend.checked, merging=1)
    else:
        kernel = backend.kernel(kind)
    for dtype in keys.KEY_DTYPES:
        with jax.enable_x64(wide(dtype)):
            out_dtype = jnp.int64 if wide(dtype) else jnp.int32
            got = kernel(jnp.zeros(0, dtype), jnp.zeros(3, dtype), side="left",
                         out_dtype=out_dtype)
            assert got.dtype == out_dtype, dtype
            np.testing.assert_array_equal(got, [0, 0, 0])
    complex64 = jnp.zeros(3, jnp.complex64)
    with pytest.raises(TypeError, match="unsupported dtype"):
        kernel(complex64[:0], complex64, side="left", out_dtype=jnp.int32)


@pytest.mark.parametrize("dtype", keys.KEY_DTYPES, ids=str)
def test_the_cpu_extension_takes_every_key_dtype_but_the_widened(dtype):
    """The FFI handler searches keys of every dtype but those the library
    widens to float32 first, which it refuses."""
    a = np.array([0, 0, 1, 1, 1], dtype)
    v = np.array([0, 1, 1], dtype)
    with jax.enable_x64(wide(dtype)):
        def call():
            return CPU_SEARCH(jnp.asarray(a), jnp.asarray(v), side="right", order="sorted",
                              kernel="merge", out_dtype=np.dtype(np.int32), threads=1,
                              min_parallel=1 << 16)

        if dtype in keys.WIDENED_TO_FLOAT32:
            with pytest.raises(jax.errors.JaxRuntimeError, match="supported key dtype"):
                call()
        else:
            np.testing.assert_array_equal(call(), [2, 5, 5])


def test_orders_and_cpu_kernels_are_the_extensions():
    assert len(ORDERS) == len(set(ORDERS)) and set(ORDERS) == set(_cpu_ext.ORDER_NAMES)
    assert len(cpu.KERNELS) == len(set(cpu.KERNELS))
    assert set(cpu.KERNELS) == set(_cpu_ext.KERNEL_NAMES)
