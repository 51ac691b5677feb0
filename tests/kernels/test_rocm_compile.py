"""The Pallas Triton kernels compile for AMD's MI300X (gfx942) without a
GPU, with no scratch memory and within its LDS.

jax lowers each kernel for ROCm, and the triton wheel's AMD backend compiles
the Triton IR the lowering holds (`helpers/gfx942.py` says why not XLA's
ROCm backend). Spills are fatal: a kernel with scratch memory or spilled
vector registers fails its case. SGPR spills go to lanes of vector
registers, not to memory: they are allowed, and `bench/gpu_resources.py
--gfx942` reports them. Without triton the file skips.
"""

import os

import jax
import jax.numpy as jnp
import pytest

import jaxsearch
import jaxsearch.pallas_kernels as pk
from jaxsearch.pallas_kernels import BACKENDS, MERGE_PATH, kernel_kind

pytest.importorskip("triton", reason="triton is not installed (pip install triton): "
                    "nothing to compile the Triton IR for gfx942 with")
if os.environ.get("TRITON_INTERPRET") == "1":
    pytest.skip("TRITON_INTERPRET=1: Triton would not compile", allow_module_level=True)
if not BACKENDS["pallas"].kernels:
    pytest.skip("this jax has no Pallas Triton backend", allow_module_level=True)

from helpers import gfx942  # noqa: E402  (imports triton's backends when compiling)
from helpers.h200 import DTYPES, X64_DTYPES  # noqa: E402
from helpers.tiers import full  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings(
        "ignore:.*Pallas Triton backend is deprecated:DeprecationWarning",
        "ignore:TRITON_DEFAULT_FP_FUSION is unset",
    ),
    pytest.mark.usefixtures("fresh_triton_cache"),
    full,  # a compile tier (tests/conftest.py)
]

LARGE = 10**8  # N = M: the default merge config is the serial merge there


def compiled(fn, n, m, dtype="float32"):
    """The kernels of `fn(a, v)` for n keys and m needles, compiled for
    gfx942, each checked against spills and the LDS."""
    a, v = (jax.ShapeDtypeStruct((size,), jnp.dtype(dtype)) for size in (n, m))
    with jax.enable_x64(dtype in X64_DTYPES):
        kernels = gfx942.compile_for_gfx942(fn, a, v)
    for kernel in kernels:
        assert not kernel.spills, kernel
        assert kernel.lds <= gfx942.LDS_BYTES, kernel
    return kernels


@pytest.mark.parametrize("index, config", list(enumerate(pk.tuning_space())), ids=str)
def test_tuning_space_compiles_for_gfx942(index, config):
    side = ("left", "right")[index % 2]

    def search(a, v):
        return BACKENDS["pallas"].kernel(kernel_kind(config.kind))(
            a, v, side=side, out_dtype=jnp.int32, config=config)

    names = [k.kernel for k in compiled(search, LARGE, LARGE)]
    partitions = config.kind == "merge_path" and config.partition == "once"
    assert names == ["merge_path_partition"] * partitions + [f"{config.kind}_searchsorted"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_checked_call_compiles_for_gfx942_for_every_dtype(dtype):
    """The default call's kernels (the partition pass and the checked kernel,
    with the serial merge and the binary search) for every key dtype."""

    def checked(a, v):
        return BACKENDS["pallas"].checked(a, v, jnp.ones(1, jnp.int32), side="right",
                                          out_dtype=jnp.int32)

    names = [k.kernel for k in compiled(checked, LARGE, LARGE, dtype)]
    assert names == ["merge_path_partition", "checked_searchsorted"]


@pytest.mark.parametrize("sorted_v, kernel", [(None, "checked_searchsorted"),
                                              (True, "merge_path_searchsorted"),
                                              (False, "binary_search_searchsorted")])
def test_the_dispatch_fits_default_configs_to_64_lane_wavefronts(sorted_v, kernel):
    """Lowered for rocm, the default configs keep the threads per program
    they were sized for on 32-lane warps: half the warps, so that the serial
    merge's 128 runs of a tile are one per thread, not each walked twice."""
    merge, bisect = (pk.default_merge_path_config(LARGE, LARGE, jnp.float32),
                     pk.default_binary_search_config(LARGE, LARGE, jnp.float32))
    assert merge.method == "serial" and merge.tile // merge.items == 32 * merge.num_warps
    warps = {"checked_searchsorted": max(merge.num_warps, bisect.num_warps),
             "merge_path_searchsorted": merge.num_warps,
             "binary_search_searchsorted": bisect.num_warps}[kernel]

    def search(a, v):
        return jaxsearch.searchsorted(a, v, sorted_v=sorted_v, implementation="pallas")

    [found] = [k for k in compiled(search, LARGE, LARGE) if k.kernel == kernel]
    assert found.num_warps * 64 == warps * 32, found


def test_spills_fail_the_compile():
    """A compare matrix far too large for one wavefront's registers: the
    check that every case above passes must refuse it."""
    config = pk.MergePathConfig(tile=512, method="compare", chunk=256, num_warps=1)

    def search(a, v):
        return BACKENDS["pallas"].kernel(MERGE_PATH)(a, v, side="left", out_dtype=jnp.int32,
                                                     config=config)

    with pytest.raises(AssertionError, match="scratch"):
        compiled(search, 10**6, 10**6)
