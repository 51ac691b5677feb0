"""Compile the sharded drop-in for 8 H200s that are not there, with XLA's
whole GPU pipeline, and report what each device runs.

Needs jax's CUDA plugin next to jaxlib, no GPU (the slim compile set:
`pip install jax-cuda12-plugin==V jax-cuda12-pjrt==V nvidia-cuda-nvcc-cu12`,
V the installed jaxlib; 0.10's also wants absl-py). Run with
JAX_PLATFORMS=cpu:

    JAX_PLATFORMS=cpu python tests/helpers/cuda_topology_check.py

A compile-only topology of 8 GPUs (`jax.experimental.topologies`, with an
H200's description) makes a 2 x 4 mesh; every case compiles the plain drop-in
(and jnp.searchsorted) for sharded `a` and `v` of 80,000 and 65,536 float32,
so XLA's partitioner calls jaxsearch's partition rule and the Pallas kernels
become cubins for each device's pieces. Prints one JSON line: per case and
sorted_v, the per-device program's parameters, its collectives, its Triton
kernels and conditionals.
"""

from __future__ import annotations

import json
import os
import re
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

def main() -> int:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from h200 import H200_TARGET
    from jax.experimental import topologies
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P
    from sharding_check import collectives, looped_collectives

    import jaxsearch

    topology = topologies.get_topology_desc(platform="cuda", target_config=H200_TARGET,
                                            topology="1x1x8")
    mesh = topologies.make_mesh(topology, (2, 4), ("x", "y"))
    n, m = 80_000, 65_536
    cases = {"v split, a whole": (P(), P(("x", "y"))), "a split, v whole": (P(("x", "y")), P()),
             "a split on x, v on y": (P("x"), P("y")), "a and v split on x": (P("x"), P("x"))}
    report = {"jax": jax.__version__, "devices": [d.device_kind for d in topology.devices]}
    with jax.set_mesh(mesh):
        for name, (a_spec, v_spec) in cases.items():
            args = [jax.ShapeDtypeStruct((n,), np.float32, sharding=NamedSharding(mesh, a_spec)),
                    jax.ShapeDtypeStruct((m,), np.float32, sharding=NamedSharding(mesh, v_spec))]
            programs = {f"jaxsearch sorted_v={s}": (lambda a, v, s=s:
                                                     jaxsearch.searchsorted(a, v, sorted_v=s))
                        for s in (None, True, False)}
            programs["jnp"] = jnp.searchsorted
            for label, fn in programs.items():
                compiled = jax.jit(fn).lower(*args).compile()
                text = compiled.as_text()
                entry = re.search(r"ENTRY %\S+ \(([^)]*)\) -> (\S+)", text)
                report[f"{name}: {label}"] = {
                    "parameters": re.findall(r"\w+\[\d+\]", entry.group(1)),
                    "result": entry.group(2),
                    "collectives": collectives(text),
                    "in_loops": looped_collectives(text),
                    "triton_kernels": len(re.findall(r'custom_call_target="__gpu\$xla\.gpu\.'
                                                     r'triton"', text)),
                    "conditionals": len(re.findall(r" conditional\(", text)),
                    "output": str(compiled.output_shardings.spec
                                  if hasattr(compiled.output_shardings, "spec")
                                  else compiled.output_shardings),
                }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
