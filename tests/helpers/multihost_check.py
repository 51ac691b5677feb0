"""The multi-host recipe of docs/sharding.md, run for real: one of two processes on this
machine, each with 4 CPU devices, forming one 8-device mesh over gloo.

    python tests/helpers/multihost_check.py PORT PROCESS_ID   # in two processes, ids 0 and 1

tests/core/test_sharded.py starts both. Each process places global arrays on a
2 x 4 mesh (one row of 4 devices per process), calls the plain drop-in
`jaxsearch.searchsorted` under `jax.jit`, gathers the answer from both
processes and checks it against jnp.searchsorted on the whole arrays. Process
0 prints one JSON line: per case, the collectives in the compiled HLO, and
those of jnp.searchsorted on the same arrays.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    port, process_id = int(sys.argv[1]), int(sys.argv[2])
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process_id,
                               initialization_timeout=120)  # not 300 s when the other fails
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P
    from sharding_check import collectives, looped_collectives

    import jaxsearch

    assert jax.device_count() == 8 and jax.local_device_count() == 4, jax.devices()
    # Devices by process: mesh row i holds process i's four devices, so "x"
    # crosses the processes and "y" stays within one.
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    mesh = Mesh(np.array(devices).reshape(2, 4), ("x", "y"))
    rng = np.random.default_rng(0)  # the same arrays in both processes
    a = np.sort(np.round(rng.standard_normal(8000) * 8) / 4).astype(np.float32)
    a[-300:] = np.nan
    v = np.concatenate([rng.choice(a, 2048), rng.standard_normal(2048) * 3]).astype(np.float32)
    rng.shuffle(v)
    cases = {
        "v split over both processes": (P(), P(("x", "y"))),
        "a split over both processes": (P(("x", "y")), P()),
        "a split on x (across processes), v on y": (P("x"), P("y")),
    }
    report = {}
    for name, (a_spec, v_spec) in cases.items():
        for needles, sorted_v in ((np.sort(v), True), (v, None)):
            arrays = []
            for host, spec in ((a, a_spec), (needles, v_spec)):
                sharding = NamedSharding(mesh, spec)
                arrays.append(jax.make_array_from_callback(host.shape, sharding,
                                                           lambda index, h=host: h[index]))
            for side in ("left", "right"):
                f = jax.jit(lambda a, v, side=side, sorted_v=sorted_v:
                            jaxsearch.searchsorted(a, v, side, sorted_v=sorted_v))
                compiled = f.lower(*arrays).compile()
                out = compiled(*arrays)
                assert out.sharding.spec == NamedSharding(mesh, v_spec).spec, (name, out.sharding)
                got = multihost_utils.process_allgather(out, tiled=True)
                want = np.asarray(jnp.searchsorted(a, needles, side))
                np.testing.assert_array_equal(np.asarray(got), want,
                                              err_msg=f"{name} side={side} sorted_v={sorted_v}")
                text = compiled.as_text()
                jnp_text = jax.jit(lambda a, v, side=side: jnp.searchsorted(a, v, side)).lower(
                    *arrays).compile().as_text()
                report[name] = {
                    "jaxsearch": {"collectives": collectives(text),
                                  "in_loops": looped_collectives(text)},
                    "jnp": {"collectives": collectives(jnp_text),
                            "in_loops": looped_collectives(jnp_text)}}
    if process_id == 0:
        print(json.dumps(report))
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
