"""The patched benchmark family: stock against jaxsearch.patch(), identical
answers, served by jaxsearch, CLI and saved runs (no timing asserts)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsearch import patched as patched_block
from jaxsearch.__main__ import main
from jaxsearch.core import patching as patching_module
from jaxsearch.tools.bench import patched as bench_patched


def test_compare_is_bit_for_bit():
    a = (np.array([0.0, 1.0, np.nan], np.float32), np.arange(3))
    assert bench_patched.compare(a, a).identical  # NaN is NaN, bit for bit
    b = (np.array([-0.0, 1.0, np.nan], np.float32), np.arange(3))
    d = bench_patched.compare(a, b)
    assert (d.differing, d.elements, d.max_abs) == (1, 6, 0.0)  # -0.0 is not 0.0
    d = bench_patched.compare(a, (a[0], np.arange(3, dtype=np.int8)))
    assert d.differing == 3 and d.max_abs is None  # another dtype differs throughout


def test_served_reads_the_lowering():
    x = jnp.linspace(0, 1, 1000)

    def f(x):
        return jnp.searchsorted(x, x)

    assert not bench_patched.served_by_jaxsearch(jax.jit(f).lower(x))
    with patched_block():
        assert bench_patched.served_by_jaxsearch(jax.jit(f).lower(x))


def test_build_stacks_rows_under_vmap():
    fn, args = bench_patched.build(bench_patched.PatchedProblem("resampling step", 100, rows=3))
    w, u = args
    assert w.shape == u.shape == (3, 100) and np.all(np.diff(u, axis=1) > 0)
    assert np.asarray(fn(w, u)).shape == (3, 100)


@pytest.mark.parametrize("workload", ["interp unsorted x", "interp sorted x"])
def test_interp_is_served_whole(workload, monkeypatch):
    # jnp.interp looked up when traced, as in user code: the patch hands the
    # whole call to jaxsearch.interp, not only the search inside jax's interp.
    calls, interp = [], patching_module._interp

    def drop_in(*args):
        calls.append(args)
        return interp(*args)

    monkeypatch.setattr(patching_module, "_interp", drop_in, raising=True)
    fn, args = bench_patched.build(bench_patched.PatchedProblem(workload, 1000))
    with patched_block():
        lowered = jax.jit(fn).lower(*args)
    assert len(calls) == 1 and bench_patched.served_by_jaxsearch(lowered)


def test_a_vmap_target_holds_under_vmap_only():
    w = dataclasses.replace(bench_patched.WORKLOADS[0], target=5.0, vmap_target=3.0)
    assert (w.target_for(1), w.target_for(64)) == (5.0, 3.0)
    w = dataclasses.replace(w, vmap_target=None)
    assert (w.target_for(1), w.target_for(64)) == (5.0, 5.0)


def test_run_refuses_under_the_patch():
    with patched_block(), pytest.raises(RuntimeError, match="patch is in force"):
        bench_patched.run([bench_patched.PatchedProblem("histogram sorted", 1000)])


def test_cli_patched_family(family_run):
    out, saved, data = family_run.quick("patched")
    assert "stock against jaxsearch.patch()" in out and "resampling step 4x1e3 vmap" in out
    rows = data["results"]
    want = [w.name for w in bench_patched.WORKLOADS]
    assert [r["problem"]["workload"] for r in rows] == want + [
        w.name for w in bench_patched.WORKLOADS if w.vmapped]
    for row in rows:
        # Served by jaxsearch, with stock's very answer, and timed both ways.
        assert row["served"] and row["identical"] and row["error"] is None, row
        assert row["stock"]["median_s"] > 0 and row["patched"]["median_s"] > 0, row
        # numpy's histogram is the peer of single rows only.
        peer = row["problem"]["workload"].startswith("histogram") and row["problem"]["rows"] == 1
        assert (row["numpy"]["median_s"] is not None) == peer, row
    family_run.assert_replot_prints("patched", saved, out)


def test_cli_fails_where_the_patch_did_not_serve(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench_patched, "WORKLOADS", (bench_patched.WORKLOADS[1],))
    monkeypatch.setattr(bench_patched, "GRIDS", dataclasses.replace(
        bench_patched.GRIDS, quick=bench_patched.PatchedGrid(sizes=(1000,), batch=(2, 100))))
    monkeypatch.setattr(bench_patched, "served_by_jaxsearch", lambda lowered: False)
    assert main(["bench", "--family", "patched", "--quick", "--repeats", "2",
                 "--output", str(tmp_path)]) == 1
    row = capsys.readouterr().out.split("histogram sorted 1e3")[1].splitlines()[0]
    assert row.split()[-3] == "NO"  # the served column
