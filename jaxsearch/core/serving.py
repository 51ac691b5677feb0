"""Whether the search being traced serves a call that named jax, not
jaxsearch: `jaxsearch.patch()`'s replacements trace under `serving_patch()`.

Such a search lowers to jnp's own when it lowers for `jax.export` (the
primitive's `portable` parameter), so that an exported artifact is what it
would be unpatched: no custom call, no jaxsearch needed to run it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterable, Iterator

import jax

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


def jit(fn: Callable | None = None, *, static_argnames: Iterable[str] = ()) -> Callable:
    """`jax.jit(fn, static_argnames=...)` whose cache also keys on
    `for_patch()`: a drop-in traced once for a direct call and once for the
    patch, which export differently. (Usable as a decorator, with or
    without arguments.)"""
    if fn is None:
        return functools.partial(jit, static_argnames=static_argnames)

    def keyed(*args, for_patch, **kwargs):
        del for_patch  # a key of jit's cache only
        return fn(*args, **kwargs)

    jitted = jax.jit(keyed, static_argnames=(*static_argnames, "for_patch"))

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return jitted(*args, for_patch=for_patch(), **kwargs)
    return call
