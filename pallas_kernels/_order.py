"""The total order of `jnp.searchsorted`, as integer keys.

Every NaN is equal and sorts after everything, -0.0 == 0.0, and +-inf are
ordinary values. Mapping each element to an integer key that follows this
order turns every comparison into one integer compare, inside a kernel (on
values already loaded) as well as in plain XLA.
"""

import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxsearch.keys import KEY_DTYPES


def sort_key(x):
    """Maps `x` to integers whose order is the searchsorted total order.

    Integers keep their own dtype (signed or unsigned compares follow it), bool
    becomes uint8, and a float becomes the signed integer of its width, by bit
    tests only: no float compare, so subnormals keep their IEEE order even
    where the hardware flushes them to zero in float compares (XLA:CPU does).
    """
    dtype = check_dtype(x.dtype)
    if dtype == jnp.bool_:
        return x.astype(jnp.uint8)
    if jnp.issubdtype(dtype, jnp.integer):
        return x
    return float_key(lax.bitcast_convert_type(x, bits_dtype(dtype)), dtype)


def bits_dtype(dtype):
    """The signed integer dtype as wide as float `dtype`."""
    return jnp.dtype(f"int{8 * jnp.dtype(dtype).itemsize}")


def float_key(bits, dtype):
    """`sort_key` of floats of `dtype`, given as their bits (`bits_dtype`)."""
    int_dtype = bits_dtype(dtype)
    int_max = jnp.iinfo(int_dtype).max
    inf_bits = int(np.array(np.inf, dtype).view(int_dtype))
    magnitude = bits & int_max
    # The array first in each select: jax 0.10's Mosaic GPU gives
    # where(mask, scalar, array) the mask's signedness, so that the keys would
    # compare unsigned.
    bits = jnp.where(magnitude != 0, bits, 0)  # -0.0 -> +0.0
    # Above +inf's bit pattern, so every NaN (of either sign) sorts last.
    bits = jnp.where(magnitude <= inf_bits, bits, int_max)
    # Sign-magnitude to two's complement: flip the magnitude of negatives.
    return bits ^ ((bits >> (8 * int_dtype.itemsize - 1)) & int_max)


def precedes(a_key, v_key, side):
    """Whether an element of `a` counts towards needle `v` for this side."""
    return a_key < v_key if side == "left" else a_key <= v_key


# The kernels take every key dtype jaxsearch serves.
SUPPORTED_DTYPES = KEY_DTYPES


def check_dtype(dtype):
    """Returns `dtype` as a numpy dtype; TypeError if the kernels lack it."""
    dtype = jnp.dtype(dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"unsupported dtype {dtype} (complex, float8, int4, ...)")
    return dtype
