"""`jaxsearch.patch()`: jax's own searches, served by jaxsearch.

jax looks its search functions up by name in several modules: `jax.numpy`,
lax_numpy's module globals (which its histograms, `interp`, `digitize`,
`isin` and `Array.searchsorted` call), and names that other modules bound
at import (`jax.scipy.interpolate`'s). `patch()` replaces every one of them
that holds jax's function, in every jax module loaded, with jaxsearch's
(`SERVED`); a module imported later binds the replacement from there.
`unpatch()` puts jax's functions back wherever a replacement is found.

Each replacement keeps jax's signature and answers as jax does: values,
dtypes, shapes and errors. It passes a call to jax's own function where no
kernel of ours serves it (complex keys, a platform without kernels, an
explicit method jaxsearch does not serve), where a search is too small to
gain, and for any input jaxsearch refuses (jax then raises its own error).
Searches it serves lower to jnp's own when lowered for `jax.export`.

jax caches what it traced: `patch()` and `unpatch()` clear jax's caches, so
that code traced before is traced anew, with the search now in force.
A name bound before `patch()` outside jax (`from jax.numpy import
searchsorted` in a module already imported, or a closure made at import)
keeps jax's function; `python -m jaxsearch.autopatch` patches before the
script imports anything.

With `patch(verbose=True)`, or the "jaxsearch" logger at INFO, each call
site logs once whether jaxsearch served it or passed it to jax, and why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import os
import sys
import threading
from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from ..keys import KEY_DTYPES
from . import originals
from .api import searchsorted as _searchsorted
from .digitize import digitize as _digitize
from .histogram import histogram as _histogram
from .histogram import histogram2d as _histogram2d
from .histogram import histogramdd as _histogramdd
from .interp import interp as _interp
from .serving import serving_patch
from .sorted_keys import sorted_keys

log = logging.getLogger("jaxsearch")

# Below this many probes (needles times levels of a binary search) jnp's
# search, inlined in the program, is faster than a call into our kernels,
# and the patch passes the call to jax. Measured inside a jitted loop (2
# cores, float32): 1 needle in 1e2, 1e4 or 1e6 keys (7-20 probes) and 4 in
# 1e2 (28) ran 1.8-4x faster in jnp; 4 in 1e4 (56) and 16 in 1e2 (112)
# 2-3.5x faster in jaxsearch.
SMALLEST_SERVED = 48

_SERVED_PLATFORMS = ("cpu", "gpu", "cuda", "rocm")
_JAX_DIR = os.path.dirname(jax.__file__) + os.sep
_OWN_DIR = os.path.dirname(os.path.dirname(__file__)) + os.sep


@dataclasses.dataclass(frozen=True)
class Served:
    """One jax function the patch replaces: its `jax.numpy` name, jax's
    function and jaxsearch's replacement."""

    name: str
    original: Callable
    replacement: Callable


class _Decline(Exception):
    """The replacement passes this call to jax, for the reason given."""


_lock = threading.RLock()
_state = {"patched": False}
_reported: set[tuple] = set()


def _call_site() -> str:
    """file:line of the innermost frame outside jax, jaxsearch and the
    standard library's wrappers: the code that called jax's function."""
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if not (path.startswith(_JAX_DIR) or path.startswith(_OWN_DIR)
                or path.endswith(("functools.py", "contextlib.py"))):
            return f"{path}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def _report(name: str, served: bool, why: str, level: int = logging.INFO) -> None:
    """Logs, once per call site, function and outcome, what happened."""
    if not log.isEnabledFor(level):
        return
    site = _call_site()
    key = (site, name, served, why)
    if key in _reported:
        return
    _reported.add(key)
    verdict = "served by jaxsearch" if served else "passed to jax"
    log.log(level, "jnp.%s at %s: %s (%s)", name, site, verdict, why)


def _serve(name: str, original: Callable, serve: Callable, *args, **kwargs):
    """serve(*args, **kwargs) under the patch's mark, or jax's own function
    when `serve` declines or refuses the input (jax then answers, or raises
    its own error)."""
    backend = jax.default_backend()
    if backend not in _SERVED_PLATFORMS:
        _report(name, False, f"no jaxsearch kernels on {backend}")
        return original(*args, **kwargs)
    try:
        # What jnp converts (objects with __jax_array__), converted as jnp does.
        served_args = [jnp.asarray(x) if hasattr(x, "__jax_array__") else x for x in args]
        with serving_patch():
            out = serve(*served_args, **kwargs)
    except _Decline as why:
        _report(name, False, str(why))
        return original(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - jax's own answer or error decides
        out = original(*args, **kwargs)
        _report(name, False, f"jaxsearch raised {type(error).__name__}: {error}; jax answers",
                level=logging.WARNING)
        return out
    _report(name, True, f"on {backend}")
    return out


def _search_size(a, v) -> tuple[int, int, np.dtype]:
    """(keys, needles, key dtype) of a searchsorted call; raises on input jax
    refuses, so that jax raises its own error."""
    dtype = jnp.result_type(a, v)
    return int(np.shape(a)[0]), math.prod(np.shape(v)), np.dtype(dtype)


def _check_worth(n: int, m: int, dtype: np.dtype) -> None:
    if dtype not in KEY_DTYPES:
        raise _Decline(f"{dtype} keys: no jaxsearch kernel")
    if m * max(1, math.ceil(math.log2(n + 1))) < SMALLEST_SERVED:
        raise _Decline(f"{m} needles in {n} keys: too small to gain")


@functools.wraps(originals.searchsorted)
def _served_searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    def serve(a, v, side, sorter, method):
        n, m, dtype = _search_size(a, v)
        if method not in ("scan", "scan_unrolled", "sort", "compare_all"):
            raise _Decline(f"method={method!r}")
        _check_worth(n, m, dtype)
        if method in ("sort", "compare_all"):
            # These count the keys before each needle whatever a's order:
            # the search of the sorted keys.
            a = jnp.asarray(a, dtype)
            a = sorted_keys(a if sorter is None else a[sorter])
            sorter = None
        # "scan" and "scan_unrolled" follow one probe sequence, which
        # jaxsearch's search follows too, on any `a`.
        return _searchsorted(a, v, side, sorter)

    return _serve("searchsorted", originals.searchsorted, serve, a, v, side, sorter,
                  method=method)


@functools.wraps(originals.digitize)
def _served_digitize(x, bins, right=False, *, method=None):
    def serve(x, bins, right, method):
        if method is not None:
            raise _Decline(f"method={method!r}")
        _check_worth(*_search_size(bins, x))
        return _digitize(x, bins, right)

    return _serve("digitize", originals.digitize, serve, x, bins, right, method=method)


@functools.wraps(originals.interp)
def _served_interp(x, xp, fp, left=None, right=None, period=None):
    def serve(*args):
        _check_worth(*_search_size(args[1], args[0]))
        return _interp(*args)

    return _serve("interp", originals.interp, serve, x, xp, fp, left, right, period)


def _served_histogram_of(name: str, original: Callable, drop_in: Callable) -> Callable:
    """The replacement of a jnp histogram: jaxsearch's drop-in, which
    searches the edges of each dimension for the values of its first
    argument."""
    @functools.wraps(original)
    def served(*args, **kwargs):
        def serve(*args, **kwargs):
            n = math.prod(np.shape(_first(*args, **kwargs)))
            if n < SMALLEST_SERVED:
                raise _Decline(f"{n} values: too small to gain")
            return drop_in(*args, **kwargs)

        return _serve(name, original, serve, *args, **kwargs)
    return served


def _first(x, *args, **kwargs):
    return x


SERVED = (
    Served("searchsorted", originals.searchsorted, _served_searchsorted),
    Served("digitize", originals.digitize, _served_digitize),
    Served("interp", originals.interp, _served_interp),
    *(Served(name, original, _served_histogram_of(name, original, drop_in))
      for name, original, drop_in in (
          ("histogram", originals.histogram, _histogram),
          ("histogram2d", originals.histogram2d, _histogram2d),
          ("histogramdd", originals.histogramdd, _histogramdd))),
)


def _jax_modules() -> list:
    return [module for name, module in list(sys.modules.items())
            if (name == "jax" or name.startswith("jax.")) and module is not None]


def _swap(old_to_new: dict[int, tuple[Callable, Callable]]) -> int:
    """Replaces, in every loaded jax module, each global that is one of the
    keys' functions by its counterpart; returns how many it replaced."""
    swapped = 0
    for module in _jax_modules():
        names = getattr(module, "__dict__", {})
        for name, value in list(names.items()):
            pair = old_to_new.get(id(value))
            if pair is not None and pair[0] is value:
                setattr(module, name, pair[1])
                swapped += 1
    return swapped


def patch(verbose: bool = False) -> None:
    """Serves jax's searches by jaxsearch, in this process, until :func:`unpatch`:
    `jnp.searchsorted`, `digitize`, `interp`, `histogram`, `histogram2d` and
    `histogramdd`, and every place inside jax that calls them
    (`jax.random.choice` with `p`, `RegularGridInterpolator`,
    `isin(method="binary_search")`, `Array.searchsorted`). Each call answers
    as jax does (weighted histograms of sorted data: up to rounding, see
    :func:`jaxsearch.histogram`). Calling it again changes nothing.

    Args:
      verbose: log each call site once (the "jaxsearch" logger at INFO, to
        stderr unless it has a handler), saying whether jaxsearch served it
        or passed it to jax, and why.
    """
    if verbose:
        log.setLevel(logging.INFO)
        if not log.handlers:
            log.addHandler(logging.StreamHandler())
    with _lock:
        swapped = _swap({id(s.original): (s.original, s.replacement) for s in SERVED})
        _state["patched"] = True
    if swapped:
        jax.clear_caches()  # so that code traced before traces anew


def unpatch() -> None:
    """Puts jax's own functions back wherever :func:`patch` put jaxsearch's (in
    modules loaded since too), exactly as they were. Without a patch in
    force it changes nothing."""
    with _lock:
        swapped = _swap({id(s.replacement): (s.replacement, s.original) for s in SERVED})
        _state["patched"] = False
    if swapped:
        jax.clear_caches()


def is_patched() -> bool:
    """Whether :func:`patch` is in force in this process."""
    return _state["patched"]


@contextlib.contextmanager
def patched(verbose: bool = False) -> Iterator[None]:
    """:func:`patch` for the block, then back to what was in force before it."""
    was = is_patched()
    patch(verbose=verbose)
    try:
        yield
    finally:
        if not was:
            unpatch()
