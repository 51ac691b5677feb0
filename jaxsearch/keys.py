"""The facts every layer shares, platform-neutral: the key dtypes the
kernels serve, the sides, and the index width of the answers.

Everything else in jaxsearch, the kernels (`pallas_kernels/`, `cpu_ext/`)
included, reads these from here; this module imports nothing from jaxsearch,
so that the kernels stay leaves below the library.
"""

import jax
import jax.numpy as jnp
import numpy as np

SIDES = ("left", "right")

# The key dtypes jaxsearch's kernels search, on every platform; jnp serves
# the others (complex, float8, int4, ...). The CPU extension takes all but
# float16 and bfloat16 natively (`WIDENED_TO_FLOAT32`).
KEY_DTYPES = tuple(jnp.dtype(name) for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64"))
# Convert exactly, and in order, to float32.
WIDENED_TO_FLOAT32 = (jnp.dtype("float16"), jnp.dtype("bfloat16"))

INT32_MAX = int(np.iinfo(np.int32).max)


class X64Required(TypeError, ValueError):
    """An int64 index or position is needed and jax_enable_x64 is off.

    Both a TypeError (an index dtype this jax cannot give) and a ValueError
    (the inputs are too large for int32), as the places that raise it always
    said one or the other."""


def index_dtype(extent: int) -> np.dtype:
    """The dtype of positions up to `extent` (a static Python int): int32, or
    int64 past int32's range (which needs jax_enable_x64), as jnp gives
    searchsorted's answers."""
    return np.dtype(np.int32 if extent <= INT32_MAX else np.int64)


def check_x64(extent: int, what: str) -> None:
    """X64Required, saying `what` needs it, when positions up to `extent`
    need int64 and jax_enable_x64 is off."""
    if extent > INT32_MAX and not jax.config.jax_enable_x64:
        raise X64Required(f"{what} need jax_enable_x64 for 64-bit indices")
