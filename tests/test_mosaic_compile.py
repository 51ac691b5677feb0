"""The Mosaic GPU kernels compile for an H200, without a GPU, and none spills.

Runs tests/mosaic_h200_check.py in a fresh process (the compile-only CUDA
topology needs JAX_PLATFORMS=cpu before jax starts). Needs the slim CUDA
compile set next to jaxlib (see that script); without it the test skips and
says what to install.
"""

import json
from pathlib import Path

import h200
import jax
import pytest
from processes import run_python

import jaxsearch.pallas_kernels as pk

CHECK = Path(__file__).resolve().parent / "mosaic_h200_check.py"


def _compile_set_missing() -> str | None:
    """Why the H200 compile of the Mosaic kernels cannot run here, or None."""
    if not pk.mosaic_available()[0]:
        return pk.mosaic_available()[1]
    return h200.missing_wheels()


@pytest.fixture(scope="module")
def report():
    missing = _compile_set_missing()
    if missing:
        pytest.skip(missing)
    done = run_python(str(CHECK), env={"JAX_PLATFORMS": "cpu",
                                       "PYTHONPATH": str(CHECK.parent)}, timeout=2400)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_variant_compiles_with_mosaic_kernels(report):
    assert report["device"] == "NVIDIA H200"
    assert report["compute_capability"] == [9, 0]  # what the dispatch reads
    failed = {name: entry["error"] for name, entry in report["variants"].items()
              if not entry["ok"]}
    assert not failed
    for name, entry in report["variants"].items():
        # The dispatch took Mosaic GPU, and each program holds its kernels.
        assert entry["mosaic_calls"] >= 1, name


def test_no_kernel_spills_or_overflows_shared_memory(report):
    kernels = [(name, k) for name, entry in report["variants"].items()
               for k in entry.get("kernels", [])]
    assert kernels, "no ptxas report came back (MOSAIC_GPU_DUMP_PTXAS)"
    for name, k in kernels:
        assert k["spill_stores"] == 0 and k["spill_loads"] == 0, (name, k)
        assert k["registers"] is not None and k["registers"] <= 255, (name, k)
        assert k["smem_bytes"] <= 232448, (name, k)


def test_keys_compare_with_their_dtypes_signedness(report):
    """Unsigned key dtypes compare unsigned, all others signed: a lost
    signedness would misorder negative keys on the GPU, where no test here
    runs (the interpreter computes with jnp)."""
    for name, entry in report["variants"].items():
        if not name.startswith("dispatch "):
            continue
        dtype = name.split()[1]
        for k in entry["kernels"]:
            if dtype in ("bool", "uint8", "uint16", "uint32", "uint64"):
                assert k["unsigned_compares"] > 0, (name, k)
            else:
                assert k["unsigned_compares"] == 0, (name, k)


def test_the_whole_space_and_every_dtype_are_covered(report):
    names = list(report["variants"])
    assert sum(name.startswith("config ") for name in names) == 2 * len(pk.tuning_space())
    for dtype in ("bool", "int8", "uint16", "bfloat16", "float64", "uint64"):
        for sorted_v in (True, False, None):
            assert any(f"dispatch {dtype} balanced" in n and f"sorted_v={sorted_v}" in n
                       for n in names)
    assert jax.__version__ == report["jax"]
