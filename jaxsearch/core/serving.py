"""Whether the search being traced serves a call that named jax, not
jaxsearch: `jaxsearch.patch()`'s replacements trace under `serving_patch()`.

Such a search lowers to jnp's own when it lowers for `jax.export` (the
primitive's `portable` parameter), so that an exported artifact is what it
would be unpatched: no custom call, no jaxsearch needed to run it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_SERVING_PATCH = contextvars.ContextVar("jaxsearch_serving_patch", default=False)


def for_patch() -> bool:
    """Whether this thread traces a call that the patch serves."""
    return _SERVING_PATCH.get()


@contextlib.contextmanager
def serving_patch() -> Iterator[None]:
    """Marks the searches traced inside as the patch's."""
    token = _SERVING_PATCH.set(True)
    try:
        yield
    finally:
        _SERVING_PATCH.reset(token)
