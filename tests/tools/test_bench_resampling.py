"""The resampling benchmark family: inputs, peers, accuracy column, CLI (no timing asserts)."""

import dataclasses

import numpy as np
import pytest

from jaxsearch.__main__ import main
from jaxsearch.tools.bench import resampling as rs
from jaxsearch.tools.bench import resampling_accuracy as accuracy


@pytest.mark.parametrize("scheme", rs.SCHEMES)
def test_sorted_uniforms(scheme):
    u = rs.sorted_uniforms(scheme, 1000, np.random.default_rng(0))
    assert u.dtype == np.float32 and u.shape == (1000,)
    assert np.all(np.diff(u) >= 0) and u.min() >= 0 and u.max() < 1
    # One per stratum for systematic and stratified; spread out for multinomial.
    k = np.floor(u.astype(np.float64) * 1000)
    if scheme != "multinomial":
        np.testing.assert_array_equal(k, np.arange(1000))
    assert u[:100].max() < 0.2 and u[-100:].min() > 0.8


def test_make_inputs_are_normalised_weights_and_sorted_uniforms():
    w, u = rs.make_inputs(rs.ResamplingProblem("stratified", 500, filters=3))
    assert w.shape == u.shape == (3, 500) and w.dtype == u.dtype == np.float32
    np.testing.assert_allclose(w.sum(axis=1), 1, rtol=1e-5)
    assert np.all(w >= 0) and np.all(np.diff(u, axis=1) >= 0)


def test_beyond_contract_allows_only_near_ties():
    prefix = np.array([1.0, 2.0, 3.0, 4.0])
    v = np.array([2.0, 2.5, 3.0])
    ref = np.searchsorted(prefix, v)
    tol = np.full(4, 1e-9)
    assert accuracy.beyond_contract(prefix, v, ref, ref, tol) == 0
    # Needle 2.0 equals prefix[1]: 1 or 2 are both allowed; 2.5 is no tie.
    assert accuracy.beyond_contract(prefix, v, ref + np.array([1, 0, 0]), ref, tol) == 0
    assert accuracy.beyond_contract(prefix, v, ref + np.array([0, 1, 0]), ref, tol) == 1
    assert accuracy.beyond_contract(prefix, v, ref + np.array([0, 0, 2]), ref, tol) == 1
    assert accuracy.beyond_contract(prefix, v, np.array([1, 9, 2]), ref, tol) == 1  # out of range


def test_run_reports_times_and_accuracy():
    impls = {i.name: i for i in rs.impls()}
    chosen = [impls[rs.HEADLINE], impls["jnp default"], impls["numpy"], impls[rs.FLOOR]]
    if rs.NUMBA in impls:
        chosen.append(impls[rs.NUMBA])
    problems = [rs.ResamplingProblem("systematic", 3000),
                rs.ResamplingProblem("multinomial", 200, filters=4)]
    results = rs.run(problems, chosen, repeats=2, budget_s=0.01)
    assert len(results) == len(problems) * len(chosen)
    for r in results:
        assert r.skipped is None and r.timing.median > 0, r
        # The floor computes no ancestors: timed, never compared.
        assert (r.max_index_error is None) == (r.impl == rs.FLOOR), r
    # searchsorted_cumsum keeps its contract; the others are only measured.
    assert all(r.beyond_contract == 0 for r in results if r.impl == rs.HEADLINE)
    text = rs.table(results)
    for name in [i.name for i in chosen] + ["x over numba", "x floor", "Legend", "beyond"]:
        assert name in text
    errors = text.split("Largest index error")[1].split("Legend")[0]
    assert rs.FLOOR not in errors.splitlines()[2]  # the error table's header


def test_numba_peer_matches_a_float32_running_sum():
    """The callback peer is the loop libraries ship: a float32 running sum."""
    peer = rs.numba_impl()
    if peer is None:
        pytest.skip("numba is not installed")
    w, u = rs.make_inputs(rs.ResamplingProblem("systematic", 2000, filters=2))
    out = np.asarray(peer.build(2000, True)(w, u))
    expected = [np.minimum(np.searchsorted(np.cumsum(wr), ur), 1999) for wr, ur in zip(w, u)]
    assert np.abs(out - np.array(expected)).max() <= 1


def test_cli_resampling_family(tmp_path, capsys, monkeypatch, family_run):
    monkeypatch.setattr(rs, "GRIDS", dataclasses.replace(
        rs.GRIDS, quick=rs.ResamplingGrid(sizes=(300,), batch=(2, 100))))
    out, saved, data = family_run.quick("resampling")
    assert "Resampling: median ms per call" in out and "systematic 2x100 vmap" in out
    assert {r["impl"] for r in data["results"]} >= {rs.HEADLINE, "numpy"}
    assert len(data["results"]) == 6 * len(rs.impls())
    family_run.assert_replot_prints("resampling", saved, out, "--output", str(tmp_path / "replot"))
    # Without --family the file is not taken for a searchsorted run.
    assert main(["bench", "--replot", str(saved)]) == 2
    assert "--family resampling" in capsys.readouterr().err
