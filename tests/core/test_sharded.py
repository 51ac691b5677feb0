"""Sharded inputs, on 8 CPU devices in subprocesses (the device count is fixed
when JAX starts).

The plain drop-in `jaxsearch.searchsorted` under jit (tests/helpers/sharding_check.py
runs every case): answers equal the unsharded ones, the output is split like
`v`, and the compiled HLO holds no collective when only `v` is split and one
all-reduce (outside any loop) when `a` is split; never more collectives than
jnp.searchsorted on the same program. Two processes on this machine run the
multi-host recipe of docs/sharding.md (tests/helpers/multihost_check.py). And the explicit
form, `sharded_searchsorted`, inside one shard_map.
"""

import json
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.processes import run_python
from helpers.tiers import full

TESTS = Path(__file__).resolve().parents[1]  # where `helpers` is
HELPERS = TESTS / "helpers"
EIGHT_DEVICES = dict(XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")

# The collectives of each case in the compiled HLO (auto and explicit mode alike).
EXPECTED = {
    "v split, a whole": {},
    "v 2-D split on dim 0": {},
    "v 2-D split on dim 1": {},
    "v 3-D split on dims 0 and 2": {},
    "a split, v whole": {"all-reduce": 1},
    "a split, NaN tail over two pieces": {"all-reduce": 1},
    "a split, int32 keys": {"all-reduce": 1},
    "a split on x, v on y": {"all-reduce": 1},
    "a split on y, v 2-D on x": {"all-reduce": 1},
    # One all-gather of `a` along x, as jnp's would be: each device keeps its needles.
    "a and v split on the same axis": {"all-gather": 1},
    "vmap: a and v batched, batch split": {},
    "vmap: a shared, v's batch split": {},
    "vmap: batch on y, a's keys on x": {"all-reduce": 1},
    "a split unevenly (n % 8 != 0)": {"all-reduce": 1},
    "a split unevenly on x, v on y": {"all-reduce": 1},
}


@pytest.fixture(scope="module")
def report():
    """sharding_check.py's report; the run itself fails on any wrong answer
    or output sharding."""
    run = run_python(str(HELPERS / "sharding_check.py"), timeout=900, env=EIGHT_DEVICES)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_every_case_ran(report):
    """Every case, in auto mode and (where jax has it) explicit mode, gave
    jnp's answers with the output split as expected."""
    auto = {name for name in report if not name.endswith(" [explicit]")}
    assert auto == set(EXPECTED)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_collectives(report, case):
    for name in (case, f"{case} [explicit]"):
        if name not in report:
            continue
        ours = report[name]["jaxsearch"]
        assert ours["collectives"] == EXPECTED[case], name
        assert ours["in_loops"] == {}, name


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_no_more_collectives_than_jnp(report, case):
    """jnp on the same program (auto mode; jnp 0.10 to 0.12 refuses explicitly
    sharded inputs). Where `a` is split, jnp's all-reduce sits in its binary
    search's loop and runs once per step; ours runs once."""
    ours, theirs = report[case]["jaxsearch"], report[case]["jnp"]
    assert "error" not in theirs, theirs
    assert sum(ours["collectives"].values()) <= sum(theirs["collectives"].values())
    assert sum(ours["in_loops"].values()) <= sum(theirs["in_loops"].values())
    if "all-reduce" in ours["collectives"]:
        assert theirs["in_loops"], theirs


# What the coordinator's gRPC server says when its port was taken.
_PORT_TAKEN = re.compile(r"address already in use|no address added", re.IGNORECASE)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_two_processes(tmp_path, port):
    """The two processes of multihost_check.py on `port`: [(returncode, out, err)]."""
    procs = [subprocess.Popen([sys.executable, str(HELPERS / "multihost_check.py"), str(port),
                               str(i)], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    try:
        outs = [p.communicate(timeout=600) for p in procs]
    finally:
        for p in procs:
            p.kill()
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs)]


@full  # several processes (tests/conftest.py)
def test_two_processes_drop_in(tmp_path):
    """jax.distributed over gloo on localhost, 4 devices in each of two
    processes: the plain drop-in call on global arrays (answers checked in
    the processes); only the all-reduce crosses processes."""
    # The free port is released before the coordinator binds it, so another
    # program may take it in between: then the run starts again on another.
    for _ in range(3):
        runs = _run_two_processes(tmp_path, _free_port())
        if not any(code and _PORT_TAKEN.search(err) for code, _, err in runs):
            break
    for code, _, err in runs:
        assert code == 0, err[-4000:]
    report = json.loads(runs[0][1].strip().splitlines()[-1])
    print(report)
    assert report["v split over both processes"]["jaxsearch"]["collectives"] == {}
    for name in ("a split over both processes", "a split on x (across processes), v on y"):
        assert report[name]["jaxsearch"] == {"collectives": {"all-reduce": 1}, "in_loops": {}}
        assert report[name]["jnp"]["in_loops"], report[name]


CUDA_PARTITIONING = textwrap.dedent("""
    import json, re
    import jax, numpy as np
    from jax.sharding import AbstractMesh, AxisType, Mesh, NamedSharding, PartitionSpec as P
    import jaxsearch
    from jaxsearch.core import gpu, partitioning, primitive

    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))
    a = np.sort(np.random.default_rng(0).standard_normal(8000)).astype(np.float32)
    v = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    report = {"gpu kernels": gpu.choose(1000, 4096, np.dtype(np.float32))}
    cases = {"a split": (P(("x", "y")), P()), "v split on dim 1": (P(), P(None, ("x", "y"))),
             "a on x, v on y": (P("x"), P("y", None))}
    device = jax.sharding.AbstractDevice(device_kind="NVIDIA H200", num_cores=132,
                                         platform="gpu")
    gpu_mesh = AbstractMesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2,
                            abstract_device=device)
    params = dict(side="left", order="check", out_dtype=np.dtype(np.int32),
                  cpu_kernel="merge", cpu_threads=1, cpu_min_parallel=1 << 16,
                  cpu_bucket_min_bytes=1 << 24, needle_ndim=2,
                  implementation=None)
    for name, (a_spec, v_spec) in cases.items():
        shardings = NamedSharding(mesh, a_spec), NamedSharding(mesh, v_spec)
        ja, jv = (jax.device_put(x, s) for x, s in zip((a, v), shardings))
        # 1. The program lowered for cuda: one partitioning call, with Shardy's rule.
        text = jax.jit(jaxsearch.searchsorted).trace(ja, jv).lower(
            lowering_platforms=("cuda",)).as_text()
        calls = re.findall(r"custom_call @(\\w+)\\(", text)
        rule = re.search(r"sdy.sharding_rule = (#sdy.op_sharding_rule<.*?, custom>)",
                         text).group(1)
        # 2. What XLA's partitioner then compiles on each device: the partition
        # rule's per-device function for these shardings, lowered for cuda
        # inside a shard_map (jax lowers it the same way, for each device's pieces).
        specs = [jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s)
                 for x, s in zip((a, v), shardings)]
        out = jax.ShapeDtypeStruct(v.shape, np.int32, sharding=shardings[1])
        _, per_device, out_sharding, in_shardings = partitioning.partition(
            primitive.search_local, params, mesh, specs, out)
        body = jax.shard_map(per_device, mesh=gpu_mesh,
                             in_specs=tuple(s.spec for s in in_shardings),
                             out_specs=out_sharding.spec, check_vma=False)
        with jax.sharding.use_abstract_mesh(gpu_mesh):
            body_text = jax.jit(body).trace(*[jax.ShapeDtypeStruct(x.shape, x.dtype)
                                              for x in (a, v)]).lower(
                lowering_platforms=("cuda",)).as_text()
        kernels = re.findall(r'custom_call @__gpu\\$xla\\.gpu\\.triton\\((.*?)\\) .*?: '
                             r'\\((.*?)\\) ->', body_text)
        report[name] = dict(
            calls=calls, rule=rule,
            in_specs=[str(s.spec) for s in in_shardings], out_spec=str(out_sharding.spec),
            kernels=len(kernels), kernel_operand_types=sorted({t for _, t in kernels}),
            all_reduces=len(re.findall(r"stablehlo.all_reduce", body_text)),
            other_collectives=len(re.findall(r"stablehlo.(all_gather|all_to_all|"
                                             r"collective_permute)", body_text)),
            conds=len(re.findall(r"stablehlo.case", body_text)))
    print(json.dumps(report))
""")


def test_cuda_lowering_keeps_the_partitioning():
    """No GPU here: the sharded program lowered for cuda holds one
    custom_partitioning call with Shardy's rule (a's keys a reduction factor),
    and the per-device function the partition rule gives, lowered for cuda,
    runs the Triton kernels on each device's pieces (1000 keys of 8000 when
    `a` is split 8 ways; 8 x 64 needles when `v` is): the merge path's
    partition pass and one checked kernel per device (sorted_v=None: the
    device's sortedness test read by the kernel, no lax.cond), and no
    collective but the all-reduce when `a` is split."""
    run = run_python("-c", CUDA_PARTITIONING, timeout=600, env=EIGHT_DEVICES)
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    print(json.dumps(report, indent=1))
    if report.pop("gpu kernels") is None:
        pytest.skip("no GPU kernel can lower here (Pallas' Triton backend and jax-triton "
                    "both missing)")
    for name, r in report.items():
        assert r["calls"] == ["CustomSPMDPartitioning"], name
        assert r["rule"].startswith("#sdy.op_sharding_rule<([i], [j, k])->([j, k])"), r["rule"]
        assert "reduction={i}" in r["rule"], r["rule"]
        assert r["conds"] == 0 and r["other_collectives"] == 0, (name, r)
        assert r["kernels"] == 2, r  # the partition pass, then the checked kernel
    a_split, v_split, both = (report[k] for k in ("a split", "v split on dim 1",
                                                   "a on x, v on y"))
    assert a_split["all_reduces"] == 1 and both["all_reduces"] == 1
    assert v_split["all_reduces"] == 0
    assert all("tensor<1000xf32>, tensor<4096xf32>" in t
               for t in a_split["kernel_operand_types"]), a_split
    assert all("tensor<8000xf32>, tensor<512xf32>" in t
               for t in v_split["kernel_operand_types"]), v_split
    assert all("tensor<4000xf32>, tensor<1024xf32>" in t
               for t in both["kernel_operand_types"]), both


INSIDE_SHARD_MAP = textwrap.dedent("""
    import contextlib, json
    import jax, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import jaxsearch

    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))
    rng = np.random.default_rng(0)
    a = np.sort(rng.standard_normal(8000)).astype(np.float32)
    v = rng.standard_normal((2, 4096)).astype(np.float32)
    ja = jax.device_put(a, NamedSharding(mesh, P()))
    jv = jax.device_put(v, NamedSharding(mesh, P("x", "y")))
    ok = {}
    for context in ("no mesh", "jax.set_mesh"):
        for manual in (("x", "y"), ("x",)):  # every axis manual, or "y" left auto
            f = jax.jit(jax.shard_map(jaxsearch.searchsorted, mesh=mesh, in_specs=(P(), P(*manual)),
                                      out_specs=P(*manual), axis_names=set(manual)))
            with jax.set_mesh(mesh) if context != "no mesh" else contextlib.nullcontext():
                got = f(ja, jv)
            ok[f"{context}, manual {manual}"] = bool(np.array_equal(np.asarray(got),
                                                                   np.searchsorted(a, v)))
    print(json.dumps(ok))
""")


def test_inside_shard_map():
    """The drop-in inside a shard_map searches each device's pieces, with
    every mesh axis manual or some left to the partitioner, with and without
    jax.set_mesh."""
    run = run_python("-c", INSIDE_SHARD_MAP, timeout=600, env=EIGHT_DEVICES)
    assert run.returncode == 0, run.stderr[-4000:]
    ok = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(ok) == 4 and all(ok.values()), ok


# Each search under vmap inside a shard_map (a batch of rows per device,
# the keys replicated), as jax's own shard_map test of jnp.histogram calls
# it: jaxsearch's answers and dtypes are jnp's, eager and under jit. Before
# our primitives' outputs varied as their operands (check_vma), histogram's
# lax.cond raised there, and the patch passed the call to jax.
VMAP_INSIDE_SHARD_MAP = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, PartitionSpec as P
    import jaxsearch

    mesh = Mesh(np.array(jax.devices()), ("data",))
    rng = np.random.default_rng(0)
    rows = np.sort(rng.standard_normal((16, 40)).astype(np.float32), axis=1)
    shuffled = rng.standard_normal((16, 40)).astype(np.float32)
    edges = np.linspace(-3, 3, 11).astype(np.float32)
    xp = np.sort(rng.standard_normal(50)).astype(np.float32)
    fp = rng.standard_normal(50).astype(np.float32)
    # name: (the call of a row q and the edges e, given jaxsearch or jnp; rows)
    cases = {
        "histogram, sorted rows": (lambda m: lambda q, e: m.histogram(q, bins=e)[0], rows),
        "histogram, unsorted rows": (lambda m: lambda q, e: m.histogram(q, bins=e)[0],
                                     shuffled),
        "searchsorted, a shared": (lambda m: lambda q, e: m.searchsorted(e, q), shuffled),
        "searchsorted, sorted needles": (lambda m: lambda q, e: m.searchsorted(e, q), rows),
        "searchsorted, a batched": (lambda m: lambda q, e: m.searchsorted(q, e), rows),
        "digitize": (lambda m: lambda q, e: m.digitize(q, e), shuffled),
        "interp": (lambda m: lambda q, e: m.interp(q, xp, fp), shuffled),
    }
    ok = {}
    for name, (call, q) in cases.items():
        for jit in (False, True):
            outs = []
            for module in (jaxsearch, jnp):
                g = jax.shard_map(jax.vmap(call(module), in_axes=(0, None)), mesh=mesh,
                                  in_specs=(P("data"), P()), out_specs=P("data"))
                outs.append(np.asarray((jax.jit(g) if jit else g)(q, edges)))
            ok[name + (", jit" if jit else "")] = bool(
                outs[0].dtype == outs[1].dtype and np.array_equal(*outs, equal_nan=True))
    print(json.dumps(ok))
""")


def test_vmap_inside_shard_map():
    run = run_python("-c", VMAP_INSIDE_SHARD_MAP, timeout=600, env=EIGHT_DEVICES)
    assert run.returncode == 0, run.stderr[-4000:]
    ok = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(ok) == 14 and all(ok.values()), ok


SHARDED_SEARCHSORTED = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import jaxsearch
    from helpers.sharding_check import collectives

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
                report[name] = collectives(f.lower(ja, jv).compile().as_text())
    print(json.dumps(report))
""")


def test_sharded_searchsorted_matches_unsharded_without_all_gather():
    run = run_python("-c", f"import sys; sys.path.insert(0, {str(TESTS)!r})\n"
                     + SHARDED_SEARCHSORTED, timeout=600, env=EIGHT_DEVICES)
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["v split, a whole"] == {}
    assert report["a split, v whole"] == {"all-reduce": 1}
    assert report["a split on x, v on y"] == {"all-reduce": 1}


def test_axes_must_differ():
    import jax
    import numpy as np
    from jax.sharding import Mesh

    import jaxsearch
    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))
    with pytest.raises(ValueError, match="share"):
        jaxsearch.sharded_searchsorted(np.arange(4.0), np.arange(2.0), mesh=mesh,
                                       a_axis="x", v_axis="x")
