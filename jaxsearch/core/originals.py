"""jax's own functions that `jaxsearch.patch()` replaces, as they were when
jaxsearch was imported.

jaxsearch hands some calls to jax on purpose (complex keys, an explicit
`method=`, a platform without kernels of ours, an export). Under the patch
`jax.numpy.searchsorted` and its kin are jaxsearch's own, so those hand-offs
call these instead: never the patched name, which would call back into
jaxsearch.
"""

import jax.numpy as jnp

searchsorted = jnp.searchsorted
digitize = jnp.digitize
interp = jnp.interp
histogram = jnp.histogram
histogram2d = jnp.histogram2d
histogramdd = jnp.histogramdd
