"""The Mosaic GPU kernels compile for an H200, without a GPU, and none spills.

The compile worker is `helpers/h200.py`'s (a compile-only CUDA topology, in a fresh
process), run as on a jax that has lost Pallas' Triton backend, so that the
dispatch chooses Mosaic GPU. Compiled: every config of the tuning space with
each Mosaic GPU kernel (float32 and int64 keys, under vmap, each on one
side, the two taken in turn; the merge path's partition pass where a config
says partition='once'; the merge path past int32 positions), the checked
kernel with each flag where its two kinds run different warpgroups, and the
public searchsorted for every key dtype, both sides, sorted_v True/False/None
(the checked kernel, with no conditional), vmapped, and both skews.
Mosaic GPU runs ptxas itself, so XLA's spill flag covers XLA's own kernels
only: each Mosaic kernel's ptxas report (MOSAIC_GPU_DUMP_PTXAS) is read
instead. Without the `h200-compile` extra the tests skip, saying what to
install.
"""

import pytest
from helpers import h200
from helpers.tiers import full

import jaxsearch.pallas_kernels as pk
from jaxsearch.pallas_kernels import BACKENDS

MISSING = BACKENDS["mosaic"].import_error or h200.missing_wheels()
pytestmark = full  # a compile tier (tests/conftest.py)
# Keys of one 32-bit and one 64-bit dtype: the registers a config needs.
CONFIG_CASES = h200.config_cases(pk.tuning_space(), dtypes=("float32", "int64"),
                                 implementations=("mosaic",), one_side_each=True)
# Two of its merge-path configs past int32 positions (N + M + tile > 2**31;
# answers still int32): 64-bit splits, written by the partition pass and
# read by the merge.
CONFIG_CASES += h200.config_cases(
    [pk.MergePathConfig(tile=1024),
     pk.MergePathConfig(tile=1024, num_warps=16, partition="per_program")],
    dtypes=("int64",), implementations=("mosaic",), one_side_each=True,
    shape=(2**31 - 5000, 4096), batch=None)
# The checked kernel, its flag set each way, where the two kinds run
# different warpgroups and blocks of lanes (those past a kind's own
# warpgroups idle in its programs): the merge's 4 warpgroups of 512 needles
# beside binary search's 1 of 128, binary search's 4 of 128 beside the
# merge's 1 of 256, and the merge without its partition pass.
CHECKED_CASES = h200.checked_cases(
    [(pk.MergePathConfig(tile=2048, num_warps=16), pk.BinarySearchConfig(block=128)),
     (pk.MergePathConfig(tile=256), pk.BinarySearchConfig(block=512, num_warps=16)),
     (pk.MergePathConfig(tile=1024, partition="per_program"), pk.BinarySearchConfig())],
    implementation="mosaic", dtypes=("float32", "int64"))
DISPATCH_CASES = h200.mosaic_dispatch_cases()
UNSIGNED_DTYPES = ("bool", "uint8", "uint16", "uint32", "uint64")


@pytest.fixture(scope="module")
def compiled():
    """Each case's result, by case id: everything compiled once."""
    if MISSING:
        pytest.skip(MISSING)
    cases = [h200.DEVICE_CASE, *CONFIG_CASES, *CHECKED_CASES, *DISPATCH_CASES]
    results = h200.run_worker(cases, verbose=True, pallas_triton=False)
    return {h200.case_id(r): r for r in results}


def _mosaic_kernels(result):
    """The Mosaic GPU kernels a case compiled (those with an IR dump); none
    where the worker had already compiled the same kernel (Mosaic GPU's
    cache: bool keys are uint8 ones to the kernel, say)."""
    return {name: k for name, k in result["kernels"].items() if "unsigned_compares" in k}


def test_every_variant_compiles_with_mosaic_kernels(compiled):
    device = compiled[h200.case_id(h200.DEVICE_CASE)]
    assert device["device"] == "NVIDIA H200"
    assert device["compute_capability"] == [9, 0]  # what the dispatch reads
    failed = {name: r["error"] for name, r in compiled.items() if not r["ok"]}
    assert not failed
    for case in CONFIG_CASES + CHECKED_CASES + DISPATCH_CASES:
        # The dispatch took Mosaic GPU, and each program holds its kernels.
        assert compiled[h200.case_id(case)]["kernel_calls"] >= 1, h200.case_id(case)


def test_no_kernel_spills_or_overflows_shared_memory(compiled):
    kernels = [(h200.case_id(case), name, k)
               for case in CONFIG_CASES + CHECKED_CASES + DISPATCH_CASES
               for name, k in _mosaic_kernels(compiled[h200.case_id(case)]).items()]
    assert kernels, "no ptxas report came back (MOSAIC_GPU_DUMP_PTXAS)"
    for case, name, k in kernels:
        assert k["spill_stores"] == 0 and k["spill_loads"] == 0, (case, name, k)
        assert k["registers"] <= 255, (case, name, k)
        assert max(k["static_smem"], k["shared_memory"]) <= 232448, (case, name, k)


def test_merge_path_partitions_as_its_config_says(compiled):
    """partition='once' compiles the partition pass and the merge kernel that
    reads its splits, 'per_program' the merge kernel alone; the pass's ptxas
    reports are among those the spill check reads."""
    partition_kernels = set()
    for case in CONFIG_CASES:
        if case["kind"] != "merge_path":
            continue
        result = compiled[h200.case_id(case)]
        once = case["config"]["partition"] == "once"
        assert result["kernel_calls"] == 1 + once, h200.case_id(case)
        names = {name for name in _mosaic_kernels(result) if "partition" in name}
        assert once or not names, h200.case_id(case)
        partition_kernels |= names
    assert partition_kernels


def test_checked_call_decides_on_the_device(compiled):
    """Every dispatch variant compiles to the kernels its route gives, and
    with sorted_v=None to Mosaic GPU's checked kernel (its partition pass
    before it where the merge partitions once): no conditional, whose
    predicate XLA would read back on the host. The checked kernel's own
    cases hold it, and the pass where their merge partitions once."""
    for case in DISPATCH_CASES:
        result = compiled[h200.case_id(case)]
        assert result["conditionals"] == 0, h200.case_id(case)
        assert result["kernel_calls"] == h200.search_kernels(case, default="mosaic")[0], \
            h200.case_id(case)
    for case in CHECKED_CASES:
        result = compiled[h200.case_id(case)]
        once = case["merge_config"]["partition"] == "once"
        assert (result["kernel_calls"], result["conditionals"]) == (1 + once, 0), \
            h200.case_id(case)


def test_keys_compare_with_their_dtypes_signedness(compiled):
    """Unsigned key dtypes compare unsigned, all others signed: a lost
    signedness would misorder negative keys on the GPU, where no test here
    runs (the interpreter computes with jnp)."""
    for case in DISPATCH_CASES:
        for name, k in _mosaic_kernels(compiled[h200.case_id(case)]).items():
            if case["dtype"] in UNSIGNED_DTYPES:
                assert k["unsigned_compares"] > 0, (h200.case_id(case), name, k)
            else:
                assert k["unsigned_compares"] == 0, (h200.case_id(case), name, k)


def test_the_whole_space_and_every_dtype_are_covered():
    configs = {(c["kind"], tuple(sorted(c["config"].items()))) for c in CONFIG_CASES}
    assert len(configs) == len(pk.tuning_space())
    covered = {(c["dtype"], c["side"], c["sorted_v"]) for c in DISPATCH_CASES}
    assert covered == {(dtype, side, sorted_v) for dtype in h200.DTYPES
                       for side in ("left", "right") for sorted_v in (True, False, None)}
