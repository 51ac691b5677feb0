"""Every GPU kernel compiled by XLA for an NVIDIA H200 that is not here.

The lowering tests stop at Triton IR; these run XLA's whole GPU pipeline for
an H200 (a compile-only topology, see `helpers/h200.py`), Triton and ptxas included,
with register spills made fatal. A config that spills or overflows shared
memory fails to compile, and so fails its test. Compiled:

* every config of the tuning space, under vmap, for float64 keys (the most
  registers) and two other key dtypes taken in turn, each on one side, the
  two taken in turn so that every dtype meets both (the side changes one
  comparison, not the registers) and several configs of each kind;
* every dispatch variant of `jaxsearch.searchsorted`: the default, and each
  GPU implementation asked for by name (whose compiled program must hold its
  GPU kernels, not its interpreter), for every key dtype, sorted_v True,
  False and None, balanced and both skews, and vmapped, on both sides in
  turn as above;
* `jaxsearch.searchsorted_cumsum` for float32 and float64 weights, both
  sides, each sorted_v, balanced and vmapped.

Everything compiles in one worker process (`h200.run_worker`, about a third
of a second per case); each test checks its own case. The tier skips, saying
so, only where the compile wheels (the `h200-compile` extra) are missing.

All of it is the full tier (`pytest -m full`, tests/conftest.py) but one
compile of the default call, which the quick tier keeps.
"""

import dataclasses

import numpy as np
import pytest
from helpers import h200
from helpers.tiers import full

import jaxsearch.pallas_kernels as pk

MISSING = h200.missing_wheels()
needs_wheels = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")

CANARY_CASES = h200.canary_cases()
CONFIG_CASES = h200.config_cases(pk.tuning_space(), one_side_each=True, dtypes_each=3)
DISPATCH_CASES = h200.dispatch_cases()
CUMSUM_CASES = h200.cumsum_cases()
# The quick tier's one compile: the default call, float32, needles of
# unknown order (the checked kernel), balanced.
DEFAULT_CALL = next(c for c in DISPATCH_CASES if c["implementation"] is None
                    and c["dtype"] == "float32" and c["sorted_v"] is None
                    and c["shape"] == "balanced")


@pytest.fixture(scope="module")
def compiled():
    """Each case's result, by case id: everything compiled once."""
    cases = CANARY_CASES + CONFIG_CASES + DISPATCH_CASES + CUMSUM_CASES
    return {h200.case_id(r): r for r in h200.run_worker(cases)}


def _result(compiled, case):
    result = compiled[h200.case_id(case)]
    assert result["ok"], f"{h200.case_id(case)} did not compile for the H200:\n{result['error']}"
    return result


@needs_wheels
def test_default_call_compiles_to_gpu_kernels():
    """The default call compiles for the H200, with no spill, to the GPU
    kernels and no conditional: the quick tier's check of the whole tier."""
    (result,) = h200.run_worker([DEFAULT_CALL])
    assert result["ok"], f"the default call did not compile for the H200:\n{result['error']}"
    kernels, conditionals = h200.search_kernels(DEFAULT_CALL, default="pallas")
    assert (result["kernel_calls"], result["conditionals"]) == (kernels, conditionals), result


@full
@needs_wheels
def test_spills_fail_the_compile(compiled):
    """The tier has teeth: a kernel that needs more registers than a thread
    has is refused, and its smaller twin compiles."""
    fits, spills = (compiled[h200.case_id(c)] for c in CANARY_CASES)
    assert fits["ok"], fits["error"]
    assert not spills["ok"] and "spill" in spills["error"]


@full
@needs_wheels
@pytest.mark.parametrize("case", CONFIG_CASES, ids=h200.case_id)
def test_tuning_config_compiles_without_spilling(compiled, case):
    """No spill; a merge path that partitions first is two kernels."""
    config = case["config"]
    partitions = case["kind"] == "merge_path" and config["partition"] == "once"
    assert _result(compiled, case)["kernel_calls"] == 1 + partitions


@full
@needs_wheels
@pytest.mark.parametrize("case", DISPATCH_CASES, ids=h200.case_id)
def test_dispatch_compiles_to_gpu_kernels(compiled, case):
    """No spill, and the program runs GPU kernels: the merge path, the binary
    search, or for the checked call the checked kernel (both behind a flag
    read on the device; few sorted needles take binary search unchecked)."""
    result = _result(compiled, case)
    kernels, conditionals = h200.search_kernels(case, default="pallas")
    assert result["kernel_calls"] == kernels
    # The checked call decides on the device where the backend has a checked
    # kernel: no conditional, whose predicate XLA reads back on the host.
    assert result["conditionals"] == conditionals, result


@full
@needs_wheels
@pytest.mark.parametrize("case", CUMSUM_CASES, ids=h200.case_id)
def test_cumsum_compiles_to_gpu_kernels(compiled, case):
    """searchsorted_cumsum: its running sum, then the same GPU kernels; a
    float32 sum is compensated (a high and a low part), searched twice."""
    calls = _result(compiled, case)["kernel_calls"]
    searches = 2 if case["dtype"] == "float32" else 1
    assert calls == searches * h200.search_kernels(case, default="pallas")[0]


def test_every_config_meets_the_widest_keys_and_every_dtype_both_kinds_and_sides():
    """The tuning space's compiles cover it: each config with float64 keys,
    and each dtype with configs of both kinds, on both sides."""
    assert {h200.case_id(c) for c in CONFIG_CASES if c["dtype"] == "float64"} == {
        h200.case_id(c) for c in h200.config_cases(pk.tuning_space(), dtypes=("float64",),
                                                    one_side_each=True)}
    for dtype in h200.DTYPES:
        cases = [c for c in CONFIG_CASES if c["dtype"] == dtype]
        assert {c["kind"] for c in cases} == {"merge_path", "binary_search"}, dtype
        assert {c["side"] for c in cases} == {"left", "right"}, dtype


SIZES = [1, 100, 1000, 10**4, 10**5, 10**6, 10**7, 10**8, 2**31]


def test_every_default_config_is_in_the_tuning_space():
    """So that compiling the tuning space compiles every default too."""
    space = set(pk.tuning_space())
    for n in SIZES:
        for m in SIZES:
            for dtype in (np.int32, np.float64):
                for default in (pk.default_merge_path_config(n, m, np.dtype(dtype)),
                                pk.default_binary_search_config(n, m, np.dtype(dtype))):
                    assert default in space, (n, m, dataclasses.asdict(default))
