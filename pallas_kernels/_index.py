"""The index dtype rule, shared by the kernels and by jaxsearch's dispatch:
int32 positions up to int32's largest value, int64 past it (as jnp gives
searchsorted's answers)."""

import numpy as np

INT32_MAX = int(np.iinfo(np.int32).max)


def index_dtype(extent):
    """The dtype of positions up to `extent` (a static Python int): int32,
    or int64 past int32's range (which needs jax_enable_x64)."""
    return np.dtype(np.int32 if extent <= INT32_MAX else np.int64)
