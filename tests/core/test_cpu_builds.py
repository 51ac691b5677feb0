"""The extension's builds (meson.build): `_cpu_ext` for any CPU of its
architecture and, on x86-64, `_cpu_ext_x86_64_v3`, which core/cpu.py imports
instead where the CPU runs it, or as JAXSEARCH_CPU_ISA says. The suite runs
on whichever build serves this machine; here the other one gives jnp's
answers too, in a process of its own."""

import importlib.util
import json
import os
import platform
from pathlib import Path

import pytest
from helpers.processes import run_python

from jaxsearch import _cpu_ext
from jaxsearch.core import cpu

X86_64 = platform.machine() in ("x86_64", "AMD64")
# x86-64-v3 as Linux's /proc/cpuinfo names its features (lzcnt is "abm";
# "avx" is listed only where the OS saves the AVX registers).
V3_CPUINFO_FLAGS = {"pni", "ssse3", "sse4_1", "sse4_2", "popcnt", "cx16", "lahf_lm", "abm",
                    "movbe", "xsave", "avx", "avx2", "bmi1", "bmi2", "fma", "f16c"}


def cpuinfo_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        pytest.skip("no /proc/cpuinfo")
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    pytest.skip("/proc/cpuinfo lists no flags")


def runs_v3() -> bool:
    return X86_64 and V3_CPUINFO_FLAGS <= cpuinfo_flags()


def test_the_cpu_check_agrees_with_the_kernel():
    """The extension's own cpuid check, against what Linux says the CPU has."""
    assert _cpu_ext.runs_x86_64_v3() == runs_v3()


@pytest.mark.skipif(not X86_64, reason="the x86-64-v3 build exists on x86-64 only")
def test_x86_64_builds_hold_both_modules():
    assert importlib.util.find_spec("jaxsearch._cpu_ext_x86_64_v3") is not None


@pytest.mark.skipif(os.environ.get(cpu.ISA_ENV, "auto") != "auto",
                    reason=f"{cpu.ISA_ENV} chooses the build")
def test_the_fastest_build_the_cpu_runs_serves_by_default():
    expected = "x86-64-v3" if runs_v3() else "baseline"
    assert (cpu.ISA, cpu.EXTENSION_MODULE) == (
        expected, "jaxsearch._cpu_ext" + ("_x86_64_v3" if expected != "baseline" else ""))


# Run in a process of its own, whose import chose the build by
# JAXSEARCH_CPU_ISA: every kernel, order and side of the search, 32- and
# 64-bit keys, two threads, the cumsum and the histogram, against numpy.
SWEEP = r"""
import json
import jax, jax.numpy as jnp, numpy as np
import jaxsearch
from jaxsearch.core import cpu
jax.config.update("jax_enable_x64", True)
rng = np.random.default_rng(0)
wrong = []
search = jax.jit(cpu.search, static_argnames=("side", "order", "kernel", "out_dtype",
                                               "threads", "min_parallel"))
for dtype in ("float32", "int32", "float64", "int64"):
    a = np.sort(rng.integers(-500, 500, 3000)).astype(dtype)
    for v in (np.sort(rng.integers(-600, 600, 5000)).astype(dtype),
              rng.integers(-600, 600, 5000).astype(dtype)):
        in_order = bool(np.all(v[1:] >= v[:-1]))
        for side in ("left", "right"):
            want = np.searchsorted(a, v, side)
            orders = ("sorted", "check", "any") if in_order else ("check", "any")
            for order in orders:
                for kernel in cpu.KERNELS:
                    got = search(a, v, side=side, order=order, kernel=kernel,
                                 out_dtype=np.dtype(np.int32), threads=2, min_parallel=512)
                    if not np.array_equal(np.asarray(got), want):
                        wrong.append(f"search {dtype} {side} {order} {kernel}")
            got = jaxsearch.searchsorted(a, v, side, sorted_v=in_order or None)
            if not np.array_equal(np.asarray(got), want):
                wrong.append(f"searchsorted {dtype} {side}")
w = rng.random(4000)
u = np.sort(rng.random(6000)) * w.sum()
if not np.array_equal(np.asarray(jaxsearch.searchsorted_cumsum(w, u)),
                      np.searchsorted(np.cumsum(w), u)):
    wrong.append("searchsorted_cumsum")
x = rng.normal(size=20000)
if not np.array_equal(np.asarray(jaxsearch.histogram(x, 50)[0]), np.histogram(x, 50)[0]):
    wrong.append("histogram")
print(json.dumps({"isa": cpu.ISA, "module": cpu.EXTENSION_MODULE, "wrong": wrong}))
"""


@pytest.mark.parametrize("wanted", ["baseline", "x86-64-v3", "no-such-isa"])
def test_each_build_gives_numpys_answers(wanted):
    proc = run_python("-c", SWEEP, env={cpu.ISA_ENV: wanted}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    v3_here = runs_v3()
    expected = {"baseline": "baseline",
                "x86-64-v3": "x86-64-v3" if v3_here else "baseline",
                "no-such-isa": "x86-64-v3" if v3_here else "baseline"}[wanted]
    assert result["isa"] == expected
    assert result["module"].endswith("_x86_64_v3") == (expected == "x86-64-v3")
    assert result["wrong"] == []
    if wanted == "no-such-isa" or (wanted == "x86-64-v3" and not v3_here):
        assert f"{cpu.ISA_ENV}=" in proc.stderr  # the one warning says why
