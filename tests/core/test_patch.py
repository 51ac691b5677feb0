"""jaxsearch.patch(): the switch, what it serves, and what it guarantees.

Every site the patch claims is checked by what its compiled program runs
(helpers.served), so a jax upgrade that moves a name, or a replacement that
quietly answers through jax, fails here; and against jax unpatched, for
values, dtypes, shapes and errors.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.served import served
from jax.scipy.interpolate import RegularGridInterpolator

import jaxsearch
from jaxsearch.core import originals, patching


@pytest.fixture(autouse=True)
def no_patch_left():
    """Each test starts and ends unpatched."""
    jaxsearch.unpatch()
    yield
    jaxsearch.unpatch()


def _keys(n=4000, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return np.sort(rng.normal(size=n)).astype(dtype)


def _needles(m=3000, seed=1, dtype=np.float32, sort=False):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=m).astype(dtype)
    return np.sort(v) if sort else v


A, V = _keys(), _needles()
P = np.exp(A) / np.exp(A).sum()

# Every site inside jax that the patch serves, as a user calls it.
SITES = {
    "jnp.searchsorted": lambda a, v: jnp.searchsorted(a, v),
    "jnp.searchsorted right": lambda a, v: jnp.searchsorted(a, v, side="right"),
    "jnp.searchsorted sort": lambda a, v: jnp.searchsorted(a, v, method="sort"),
    "jnp.searchsorted compare_all": lambda a, v: jnp.searchsorted(a, v, method="compare_all"),
    "jnp.searchsorted scan_unrolled": lambda a, v: jnp.searchsorted(a, v, method="scan_unrolled"),
    "Array.searchsorted": lambda a, v: a.searchsorted(v),
    "jnp.digitize": lambda a, v: jnp.digitize(v, a),
    "jnp.digitize right": lambda a, v: jnp.digitize(v, a[::-1], right=True),
    "jnp.interp": lambda a, v: jnp.interp(v, a, jnp.cos(a)),
    "jnp.histogram": lambda a, v: jnp.histogram(v, bins=a[::40]),
    "jnp.histogram2d": lambda a, v: jnp.histogram2d(v, v[::-1], bins=[a[::40], a[::80]]),
    "jnp.histogramdd": lambda a, v: jnp.histogramdd(jnp.stack([v, -v], 1), bins=[a[::40], a[::50]]),
    "jnp.isin binary_search": lambda a, v: jnp.isin(v, a, method="binary_search"),
    "jax.random.choice p": lambda a, v: jax.random.choice(jax.random.key(0), a.shape[0],
                                                          v.shape, p=jnp.exp(a)),
    "RegularGridInterpolator": lambda a, v: RegularGridInterpolator((a,), jnp.sin(a))(v[:, None]),
}


def _same(x, y):
    """x and y equal, leaf by leaf: values (NaN where NaN), dtype and shape."""
    xs, ys = jax.tree.leaves(x), jax.tree.leaves(y)
    assert len(xs) == len(ys)
    for p, q in zip(xs, ys):
        p, q = np.asarray(p), np.asarray(q)
        assert p.dtype == q.dtype and p.shape == q.shape
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("site", SITES)
def test_each_site_served_and_exact(site):
    f = SITES[site]
    a, v = jnp.asarray(A), jnp.asarray(V)
    stock = jax.jit(f)(a, v)
    assert not served(f, a, v).by_jaxsearch
    with jaxsearch.patched():
        what = served(f, a, v)
        assert what.by_jaxsearch, f"{site} is not served under the patch: {what}"
        _same(jax.jit(f)(a, v), stock)
    assert not served(f, a, v).by_jaxsearch


def test_patch_twice_is_once_and_unpatch_restores_every_name():
    def snapshot():
        return {(name, key): value for name, module in list(sys.modules.items())
                if name == "jax" or name.startswith("jax.")
                for key, value in list(getattr(module, "__dict__", {}).items())
                if callable(value)}

    before = snapshot()
    jaxsearch.patch()
    once = snapshot()
    jaxsearch.patch()
    assert snapshot() == once
    assert jnp.searchsorted is not originals.searchsorted
    assert jaxsearch.is_patched()
    replaced = {k for k in before if once.get(k) is not before[k]}
    # jax.numpy's names, lax_numpy's globals and the scipy module's binding.
    assert {("jax.numpy", "searchsorted"), ("jax.numpy", "digitize"), ("jax.numpy", "interp"),
            ("jax._src.numpy.lax_numpy", "searchsorted"),
            ("jax._src.third_party.scipy.interpolate", "searchsorted")} <= replaced
    jaxsearch.unpatch()
    assert snapshot() == before
    assert not jaxsearch.is_patched()


def test_patched_block_restores_what_was_in_force():
    with jaxsearch.patched():
        assert jnp.searchsorted is not originals.searchsorted
        with jaxsearch.patched():
            pass
        assert jnp.searchsorted is not originals.searchsorted  # the outer block's
    assert jnp.searchsorted is originals.searchsorted
    jaxsearch.patch()
    with jaxsearch.patched():
        pass
    assert jaxsearch.is_patched()


def test_code_traced_before_the_patch_is_traced_anew():
    calls = []

    @jax.jit
    def f(a, v):
        calls.append(1)
        return jnp.searchsorted(a, v)

    a, v = jnp.asarray(A), jnp.asarray(V)
    stock = f(a, v)
    jaxsearch.patch()
    assert served(f, a, v).by_jaxsearch
    _same(f(a, v), stock)
    assert len(calls) >= 2  # traced again under the patch


def test_vmap_grad_and_batched_both_arguments():
    a = jnp.asarray(np.sort(np.random.default_rng(2).normal(size=(8, 500)), axis=1), jnp.float32)
    v = jnp.asarray(np.random.default_rng(3).normal(size=(8, 300)), jnp.float32)

    def f(a, v):
        return jax.vmap(jnp.searchsorted)(a, v)

    def g(x):
        return jnp.interp(x, a[0], jnp.cos(a[0])).sum()

    stock, stock_grad = f(a, v), jax.grad(g)(v[0])
    with jaxsearch.patched():
        assert served(f, a, v).by_jaxsearch
        _same(f(a, v), stock)
        _same(jax.grad(g)(v[0]), stock_grad)


@pytest.mark.parametrize("method", ["scan", "scan_unrolled", "sort", "compare_all"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_methods_keep_their_own_answers_on_an_unsorted_a(method, side):
    """jnp's "sort" and "compare_all" count the keys below each needle
    whatever a's order; "scan" and "scan_unrolled" answer where their probes
    land. The patch keeps each."""
    rng = np.random.default_rng(4)
    a = jnp.asarray(rng.integers(0, 50, 700), jnp.int32)  # unsorted, with ties
    v = jnp.asarray(rng.integers(-5, 55, 900), jnp.int32)
    f = jax.jit(lambda a, v: jnp.searchsorted(a, v, side=side, method=method))
    stock = f(a, v)
    with jaxsearch.patched():
        assert served(f, a, v).by_jaxsearch
        _same(f(a, v), stock)


def test_searchsorted_cumsum_of_weights_as_jnp():
    """The line every SMC library runs; at this size float32's cumsum need
    not be monotone, and the answers must not change."""
    w = jax.nn.softmax(jax.random.normal(jax.random.key(5), (300_000,)))
    u = (jnp.arange(300_000, dtype=jnp.float32) + 0.5) / 300_000

    def step(w, u):
        return jnp.clip(jnp.searchsorted(jnp.cumsum(w), u), 0, w.shape[0] - 1)

    stock = jax.jit(step)(w, u)
    with jaxsearch.patched():
        assert served(step, w, u).by_jaxsearch
        _same(jax.jit(step)(w, u), stock)


def test_named_method_reaches_jax_not_the_patch():
    a, v = jnp.asarray(A), jnp.asarray(V)
    with jaxsearch.patched():
        out = jaxsearch.searchsorted(a, v, method="sort")
        assert not served(lambda a, v: jaxsearch.searchsorted(a, v, method="sort"), a, v) \
            .by_jaxsearch
        out_d = jaxsearch.digitize(v, a, method="sort")
    _same(out, originals.searchsorted(a, v, method="sort"))
    _same(out_d, originals.digitize(v, a, method="sort"))


BAD = [
    ("searchsorted 2-D a", lambda: jnp.searchsorted(jnp.ones((2, 2)), 1.0)),
    ("searchsorted side", lambda: jnp.searchsorted(jnp.arange(3.0), 1.0, side="up")),
    ("searchsorted method", lambda: jnp.searchsorted(jnp.arange(3.0), 1.0, method="fast")),
    ("searchsorted list", lambda: jnp.searchsorted([1, 2, 3], 2)),
    ("searchsorted None", lambda: jnp.searchsorted(jnp.arange(3.0), None)),
    ("digitize 2-D bins", lambda: jnp.digitize(jnp.arange(3.0), jnp.ones((2, 2)))),
    ("interp 2-D xp", lambda: jnp.interp(1.0, jnp.ones((2, 2)), jnp.ones((2, 2)))),
    ("interp lengths", lambda: jnp.interp(1.0, jnp.arange(3.0), jnp.arange(4.0))),
]


@pytest.mark.parametrize("case", [name for name, _ in BAD])
def test_errors_as_unpatched(case):
    call = dict(BAD)[case]
    with pytest.raises(Exception) as stock:
        call()
    with jaxsearch.patched(), pytest.raises(Exception) as mine:
        call()
    assert type(mine.value) is type(stock.value)


def test_export_under_the_patch_needs_no_jaxsearch(tmp_path):
    a, v = jnp.asarray(A), jnp.asarray(V)

    def f(a, v):
        return jnp.searchsorted(a, v), jnp.digitize(v, a), jnp.interp(v, a, a)

    with jaxsearch.patched():
        assert served(f, a, v).by_jaxsearch  # jit runs jaxsearch's kernels
        exported = jax.export.export(jax.jit(f))(a, v)  # no disabled_checks
        by_name = jax.export.export(
            jax.jit(lambda a, v: jaxsearch.searchsorted(a, v)),
            disabled_checks=jaxsearch.export_disabled_checks())(a, v)
    assert "custom_call" not in exported.mlir_module()
    assert "custom_call" in by_name.mlir_module()  # asked for by name: jaxsearch's own
    (tmp_path / "f.bin").write_bytes(exported.serialize())
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "v.npy", V)
    script = textwrap.dedent(f"""
        import sys, jax, numpy as np
        exp = jax.export.deserialize(open({str(tmp_path / 'f.bin')!r}, 'rb').read())
        a, v = np.load({str(tmp_path / 'a.npy')!r}), np.load({str(tmp_path / 'v.npy')!r})
        out = exp.call(a, v)
        assert not any(m.startswith('jaxsearch') for m in sys.modules)
        np.save({str(tmp_path / 'out.npy')!r}, np.asarray(out[0]))
    """)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"),
                                  originals.searchsorted(a, v))


def test_verbose_says_what_was_served_and_why(caplog):
    a, v = jnp.asarray(A), jnp.asarray(V)
    with caplog.at_level(logging.INFO, logger="jaxsearch"), jaxsearch.patched():
        for _ in range(3):
            jnp.searchsorted(a, v)  # one site: reported once
        jnp.searchsorted(a.astype(jnp.complex64), v.astype(jnp.complex64))
        jnp.searchsorted(a, 0.5)
    lines = [r.getMessage() for r in caplog.records if r.name == "jaxsearch"]
    assert sum("served by jaxsearch" in line for line in lines) == 1, lines
    assert any("passed to jax (complex64 keys" in line for line in lines), lines
    assert any("passed to jax (1 needles in 4000 keys: too small" in line for line in lines), lines
    assert all("test_patch.py" in line for line in lines), lines


def test_small_calls_pass_to_jax():
    """Never slower: a search of a few needles runs jnp's inlined loop."""
    a = jnp.asarray(A)
    with jaxsearch.patched():
        assert not served(lambda a, t: jnp.searchsorted(a, t), a, jnp.float32(0.3)).by_jaxsearch
        assert served(lambda a, t: jnp.searchsorted(a, t), a, jnp.asarray(V)).by_jaxsearch
    assert patching.SMALLEST_SERVED > 12  # one needle in 4000 keys: 12 probes


def _run(args, cwd, **kwargs):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, **kwargs)


def test_autopatch_runs_a_script_with_names_bound_at_import_served(tmp_path):
    (tmp_path / "helper.py").write_text("VALUE = 7\n")
    (tmp_path / "script.py").write_text(textwrap.dedent("""
        import sys
        import numpy as np
        from jax.numpy import searchsorted          # bound before any call
        import helper                               # the script's folder is on sys.path
        import jaxsearch
        from jaxsearch.core import originals
        assert searchsorted is not originals.searchsorted
        assert jaxsearch.is_patched()
        print("argv", sys.argv[1:], helper.VALUE, int(searchsorted(np.arange(1, 4), 2)))
    """))
    out = _run(["-m", "jaxsearch.autopatch", "script.py", "x", "--y"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "argv ['x', '--y'] 7 1" in out.stdout
    bad = _run(["-m", "jaxsearch.autopatch"], cwd=tmp_path)
    assert bad.returncode == 2 and "name a script" in bad.stderr


def test_pytest_plugin_runs_a_suite_under_the_patch(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        import jax.numpy as jnp
        from jaxsearch.core import originals

        def test_searchsorted_is_jaxsearch():
            assert jnp.searchsorted is not originals.searchsorted
            assert int(jnp.searchsorted(jnp.arange(3.0), 1.5)) == 2
    """))
    out = _run(["-m", "pytest", "-p", "jaxsearch.autopatch", "-p", "no:randomly", "-q",
                "-p", "no:cacheprovider", "test_user.py"], cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout


def test_info_says_whether_the_patch_is_in_force():
    from jaxsearch.tools.cli.info import info_report

    assert "patch:           not in force" in info_report(1000, 1000, "float32")
    with jaxsearch.patched():
        assert "patch:           in force" in info_report(1000, 1000, "float32")
