"""What every public kernel wrapper shares, Pallas and native Triton: the
argument checks, the setup (empty inputs, the config), jit, and one
docstring for each kind of kernel."""


import jax
import jax.numpy as jnp

from jaxsearch.keys import INT32_MAX, SIDES, X64Required

from ._order import check_dtype
from .configs import BINARY_SEARCH, MERGE_PATH, KernelKind


def validate(a, v, side, out_dtype):
    """Checks the wrapper arguments; returns `out_dtype` as a numpy dtype."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"a and v must be 1-D, got shapes {a.shape}, {v.shape}")
    if a.dtype != v.dtype:
        raise TypeError(f"a and v must share a dtype, got {a.dtype}, {v.dtype}")
    check_dtype(a.dtype)
    out_dtype = jnp.dtype(out_dtype)
    if out_dtype not in (jnp.dtype(jnp.int32), jnp.dtype(jnp.int64)):
        raise TypeError(f"out_dtype must be int32 or int64, got {out_dtype}")
    if out_dtype == jnp.int64 and not jax.config.jax_enable_x64:
        raise X64Required("out_dtype int64 needs jax_enable_x64")
    if out_dtype == jnp.int32 and a.shape[0] > INT32_MAX:
        raise ValueError(f"answers up to {a.shape[0]} need out_dtype int64")
    return out_dtype


def resolve_config(kind: KernelKind, config, n, m, dtype, *, name="config"):
    """`config`, or the kind's default for (n, m, dtype) where it is None;
    TypeError, naming the argument `name`, where it is not of the kind's
    config class."""
    if config is None:
        return kind.default_config(n, m, dtype)
    if not isinstance(config, kind.config_cls):
        raise TypeError(f"{name} must be a {kind.config_cls.__name__}, got {config!r}")
    return config


def _public(call, search, doc, static_argnames):
    """`call`, a wrapper of `search`, under `search`'s name with `doc`,
    jitted with `static_argnames` static."""
    # Not functools.wraps: jit would read `search`'s signature through
    # __wrapped__, where the configs have no default.
    call.__name__, call.__qualname__ = search.__name__, search.__qualname__
    call.__module__, call.__doc__ = search.__module__, doc
    return jax.jit(call, static_argnames=static_argnames)


# What each kind asks of the needles, for its docstring: (in short, in full).
_NEEDLES_DOC = {
    True: ("sorted `v`", "1-D sorted array (NaNs last) of the same dtype, the needles"),
    False: ("any `v`", "1-D array of the same dtype, the needles, in any order"),
}

_DOC = """`jnp.searchsorted(a, v, side)` for sorted `a` and {needles}, by {kernel}.

Args:
  a: 1-D sorted array (NaNs last), the haystack.
  v: {v}.
  side: 'left' or 'right', as in `jnp.searchsorted`.
  out_dtype: int32 or int64 (int64 needs jax_enable_x64; answers past
    2**31 - 1 need int64).
  config: a {config}; None picks `{default}`.{config_note}
  interpret: run the kernel in {interpreter}.

Returns:
  Array of shape (len(v),) and dtype `out_dtype`: for each needle the
  number of elements of `a` before it (side='left': a < v; side='right':
  a <= v) in the total order where NaNs are equal and last and -0.0 == 0.0.
  Under a broken promise ({unsorted} not sorted) the values are unspecified
  but lie in [0, len(a)].
{raises}"""


def searchsorted_wrapper(kind: KernelKind, *, kernel, interpreter, config_note="", raises=""):
    """Makes a kernel's public wrapper from `search(a, v, *, side, out_dtype,
    config, interpret)`, which sees checked arguments, non-empty inputs and a
    config of the kind's class (the default when the caller gave none).

    Args:
      kind: the kernel's `KernelKind` (`configs.MERGE_PATH` or `configs.BINARY_SEARCH`).
      kernel: the kernel's name in the docstring ("the Pallas Triton merge-path kernel").
      interpreter: what `interpret=True` runs the kernel in.
      config_note: what this kernel makes of the config, indented for the docstring.
      raises: the docstring's "Raises:" section, if any.

    Returns:
      A decorator; the wrapper it makes is jitted, with every argument but
      `a` and `v` static.
    """
    config_cls, default = kind.config_cls, kind.default_config
    needles, v_doc = _NEEDLES_DOC[kind.sorted_needles]

    def decorate(search):
        def wrapper(a, v, *, side, out_dtype, config=None, interpret=False):
            out_dtype = validate(a, v, side, out_dtype)
            n, m = a.shape[0], v.shape[0]
            if n == 0 or m == 0:
                return jnp.zeros((m,), out_dtype)
            return search(a, v, side=side, out_dtype=out_dtype,
                          config=resolve_config(kind, config, n, m, a.dtype),
                          interpret=interpret)

        return _public(wrapper, search, _DOC.format(
            needles=needles, kernel=kernel, v=v_doc, config=config_cls.__name__,
            default=default.__name__, config_note=config_note, interpreter=interpreter,
            unsorted="`a` or `v`" if kind.sorted_needles else "`a`", raises=raises),
            ("side", "out_dtype", "config", "interpret"))

    return decorate


_CHECKED_DOC = """`jnp.searchsorted(a, v, side)` by {kernels}: the merge path where
`merging` holds and binary search where it does not, decided by each
program on the device (no conditional in the program, no wait on the host).

Args:
  a: 1-D array, the haystack; sorted wherever `merging` holds.
  v: 1-D array of the same dtype, the needles; sorted wherever `merging`
    holds.
  merging: int32 array of shape (1,): nonzero for the merge path (both `a`
    and `v` sorted), 0 for binary search (jnp's probes: jnp's answers on any
    `a`). Under `vmap` it may differ between rows.
  side: 'left' or 'right'.
  out_dtype: int32 or int64 (int64 needs jax_enable_x64).
  merge_config: a MergePathConfig; None picks `default_merge_path_config`.
  bisect_config: a BinarySearchConfig; None picks
    `default_binary_search_config`.
  interpret: run the kernels in {interpreter}.

Returns:
  Array of shape (len(v),) and dtype `out_dtype`, as the kernel `merging`
  picks answers.
{raises}"""


def checked_wrapper(*, kernels, interpreter, raises=""):
    """Makes a backend's public checked call from `search(a, v, merging, *,
    side, out_dtype, merge_config, bisect_config, interpret)`, which sees
    checked arguments, non-empty inputs, `merging` as int32 of shape (1,) and
    configs of their classes (the defaults where the caller gave none).

    Args:
      kernels: the kernels' name in the docstring ("the Pallas Triton kernels").
      interpreter: what `interpret=True` runs the kernels in.
      raises: the docstring's "Raises:" section, if any.

    Returns:
      A decorator; the call it makes is jitted, with every argument but `a`,
      `v` and `merging` static.
    """
    def decorate(search):
        def checked(a, v, merging, *, side, out_dtype, merge_config=None, bisect_config=None,
                    interpret=False):
            out_dtype = validate(a, v, side, out_dtype)
            n, m = a.shape[0], v.shape[0]
            if n == 0 or m == 0:
                return jnp.zeros((m,), out_dtype)
            return search(
                a, v, jnp.asarray(merging, jnp.int32).reshape(1), side=side,
                out_dtype=out_dtype,
                merge_config=resolve_config(MERGE_PATH, merge_config, n, m, a.dtype,
                                            name="merge_config"),
                bisect_config=resolve_config(BINARY_SEARCH, bisect_config, n, m, a.dtype,
                                             name="bisect_config"),
                interpret=interpret)

        return _public(checked, search, _CHECKED_DOC.format(
            kernels=kernels, interpreter=interpreter, raises=raises),
            ("side", "out_dtype", "merge_config", "bisect_config", "interpret"))

    return decorate
