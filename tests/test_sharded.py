"""Sharded inputs, on 8 CPU devices in subprocesses (the device count is fixed
when JAX starts).

The plain drop-in `jaxsearch.searchsorted` under jit (tests/sharding_check.py
runs every case): answers equal the unsharded ones, the output is split like
`v`, and the compiled HLO holds no collective when only `v` is split and one
all-reduce (outside any loop) when `a` is split; never more collectives than
jnp.searchsorted on the same program. Two processes on this machine run the
README's multi-host recipe (tests/multihost_check.py). And the explicit
form, `sharded_searchsorted`, inside one shard_map.
"""

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from processes import run_python

TESTS = Path(__file__).parent
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
    run = run_python(str(TESTS / "sharding_check.py"), timeout=900, env=EIGHT_DEVICES)
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_drop_in(tmp_path):
    """jax.distributed over gloo on localhost, 4 devices in each of two
    processes: the plain drop-in call on global arrays (answers checked in
    the processes); only the all-reduce crosses processes."""
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, str(TESTS / "multihost_check.py"), str(port),
                               str(i)], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    try:
        outs = [p.communicate(timeout=600) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-4000:]
    report = json.loads(outs[0][0].strip().splitlines()[-1])
    print(report)
    assert report["v split over both processes"]["jaxsearch"]["collectives"] == {}
    for name in ("a split over both processes", "a split on x (across processes), v on y"):
        assert report[name]["jaxsearch"] == {"collectives": {"all-reduce": 1}, "in_loops": {}}
        assert report[name]["jnp"]["in_loops"], report[name]


SHARDED_SEARCHSORTED = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import jaxsearch
    from sharding_check import collectives

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
