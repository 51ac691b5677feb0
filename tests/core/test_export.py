"""jax.export of a function that uses jaxsearch, for CPU and CUDA in one artifact."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.lowering import (
    backend_config,
    on_abstract_gpu_if_needed,
    triton_calls_in,
    triton_dialect,
    verified_triton_module,
)
from jax._src.lib.mlir import ir

import jaxsearch
from jaxsearch.core import cpu

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*Pallas Triton backend is deprecated:DeprecationWarning")


def export_cpu_and_cuda(fn, *args):
    """Exports `fn` for cpu and cuda in one artifact."""
    return on_abstract_gpu_if_needed(lambda: jax.export.export(
        jax.jit(fn), platforms=["cpu", "cuda"],
        disabled_checks=jaxsearch.export_disabled_checks())(*args))


@pytest.mark.parametrize("sorted_v", [True, None])
def test_export_round_trip_cpu_and_cuda(sorted_v):
    rng = np.random.default_rng(0)
    a = jnp.asarray(np.sort(rng.standard_normal(1000)).astype(np.float32))
    v = jnp.asarray(np.sort(rng.standard_normal(300)).astype(np.float32))

    def f(a, v):
        return jaxsearch.searchsorted(a, v, "right", sorted_v=sorted_v)

    exported = export_cpu_and_cuda(f, a, v)
    assert exported.platforms == ("cpu", "cuda")
    # Serialized, deserialized and run here on CPU: the same answers.
    restored = jax.export.deserialize(exported.serialize())
    np.testing.assert_array_equal(restored.call(a, v), jnp.searchsorted(a, v, "right"))
    # The artifact carries the CPU custom call and verified Triton kernels.
    text = exported.mlir_module()
    assert cpu.TARGET_NAME in text
    with jax._src.interpreters.mlir.make_ir_context():
        module = ir.Module.parse(text)
        calls = triton_calls_in(module.operation)
        assert calls, "no Triton kernel in the cuda branch"
        if triton_dialect is None:
            pytest.skip("jaxlib has no Triton dialect bindings to verify the IR")
        for call in calls:
            verified_triton_module(ir.StringAttr(backend_config(call)["ir"]).value_bytes)


def test_export_under_vmap():
    a = jnp.sort(jax.random.normal(jax.random.key(1), (4, 50)), axis=1)
    v = jnp.sort(jax.random.normal(jax.random.key(2), (4, 20)), axis=1)
    f = jax.vmap(lambda a, v: jaxsearch.searchsorted(a, v, sorted_v=True))
    restored = jax.export.deserialize(export_cpu_and_cuda(f, a, v).serialize())
    want = jnp.stack([jnp.searchsorted(a[i], v[i]) for i in range(4)])
    np.testing.assert_array_equal(restored.call(a, v), want)
