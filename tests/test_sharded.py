"""sharded_searchsorted on an 8-device CPU mesh, in a subprocess (the device
count is fixed when JAX starts): answers equal the unsharded ones, and the
compiled HLO holds no all-gather (one all-reduce when `a` is split)."""

import textwrap

import pytest
from processes import run_python

CHECK = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import jaxsearch

    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))
    rng = np.random.default_rng(0)
    a = np.sort(rng.standard_normal(8000)).astype(np.float32)
    a[-50:] = np.nan
    v = rng.standard_normal(4096).astype(np.float32)
    v[::97] = np.nan
    report = {}
    cases = {
        "v split, a whole": (None, ("x", "y")),
        "a split, v whole": (("x", "y"), None),
        "a split on x, v on y": ("x", "y"),
    }
    for name, (a_axis, v_axis) in cases.items():
        for side in ("left", "right"):
            for vv, sorted_v in ((np.sort(v), True), (v, None)):
                ja = jax.device_put(a, NamedSharding(mesh, P(a_axis)))
                jv = jax.device_put(vv, NamedSharding(mesh, P(v_axis)))
                f = jax.jit(lambda a, v: jaxsearch.sharded_searchsorted(
                    a, v, side, mesh=mesh, a_axis=a_axis, v_axis=v_axis, sorted_v=sorted_v))
                got = f(ja, jv)
                want = jnp.searchsorted(a, vv, side)
                assert got.dtype == want.dtype, (name, got.dtype)
                np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=name)
                hlo = f.lower(ja, jv).compile().as_text()
                report[name] = sorted({op for op in ("all-gather", "all-reduce", "all-to-all",
                                                     "collective-permute") if op in hlo})
    print(json.dumps(report))
""")


def test_sharded_matches_unsharded_without_all_gather():
    run = run_python("-c", CHECK, timeout=600, env=dict(
        XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu"))
    assert run.returncode == 0, run.stderr[-4000:]
    report = __import__("json").loads(run.stdout.strip().splitlines()[-1])
    print(report)
    assert report["v split, a whole"] == []
    assert report["a split, v whole"] == ["all-reduce"]
    assert report["a split on x, v on y"] == ["all-reduce"]


def test_axes_must_differ():
    import jax
    import numpy as np
    from jax.sharding import Mesh

    import jaxsearch
    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))
    with pytest.raises(ValueError, match="share"):
        jaxsearch.sharded_searchsorted(np.arange(4.0), np.arange(2.0), mesh=mesh,
                                       a_axis="x", v_axis="x")
