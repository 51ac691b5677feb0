"""The tuning cache's files: :class:`CacheEntry`, where a device kind's file
lies under a root, reading a file (each bad entry warned about and skipped)
and writing one. `cache` says which files a lookup reads, in what order, and
how it picks an entry; its docstring shows the format.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .cpu_config import cpu_config_from

OP = "searchsorted"
CACHE_VERSION = 1
CPU_KERNEL = "cpu"  # the kernel key of CpuConfig entries


@dataclasses.dataclass(frozen=True)
class CacheEntry:
    """One tuned result: the winning config for a kernel, dtype class and bucket."""

    kernel: str
    dtype: str
    bucket: Mapping[str, int]
    config: Mapping[str, Any]
    times: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    source: str = ""  # the file it came from; empty until written

    def to_json(self) -> dict[str, Any]:
        """The entry as stored in a cache file."""
        return {"kernel": self.kernel, "dtype": self.dtype, "bucket": dict(self.bucket),
                "config": dict(self.config), "times": dict(self.times)}


def cache_file(root: Path | str, kind: str) -> Path:
    """Where a cache for device kind `kind` lives under `root`."""
    return Path(root) / kind / f"{OP}.json"


_loaded: dict[Path, tuple[int, list[CacheEntry]]] = {}
_loading = threading.Lock()  # one read, and one set of warnings, per file change


def load_entries(path: Path) -> list[CacheEntry]:
    """The valid entries of one cache file; [] when missing or unreadable.

    Files are re-read only when their modification time changes. A bad cache
    must never break a search: a malformed file warns and is ignored, a
    malformed or out-of-range entry warns and is skipped.
    """
    mtime = _mtime(path)
    if mtime is None:
        return []
    with _loading:
        if path not in _loaded or _loaded[path][0] != mtime:
            _loaded[path] = (mtime, _read_entries(path))
        return _loaded[path][1]


def _mtime(path: Path) -> int | None:
    """A file's modification time in ns; None when it is missing."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def _read_entries(path: Path) -> list[CacheEntry]:
    """The entries of a cache file, warning about each one skipped (or the file)."""
    try:
        data = json.loads(path.read_text())
        if data.get("version") != CACHE_VERSION:
            raise ValueError(f"version {data.get('version')!r}, expected {CACHE_VERSION}")
        if not isinstance(data["entries"], list):
            raise TypeError(f"entries must be a list, got {data['entries']!r}")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        warnings.warn(f"jaxsearch: ignoring tuning cache {path}: {exc}", RuntimeWarning,
                      stacklevel=3)
        return []
    entries = []
    for e in data["entries"]:
        try:
            entries.append(_entry_from_json(e, str(path)))
        except (ValueError, KeyError, TypeError) as exc:
            warnings.warn(f"jaxsearch: ignoring entry ({_entry_key(e)}) of tuning cache "
                          f"{path}: {_field_error(exc)}", RuntimeWarning, stacklevel=3)
    return entries


def _entry_key(e: object) -> str:
    """An entry's key as far as it has one: kernel, dtype and bucket."""
    if not isinstance(e, dict):
        return repr(e)
    return ", ".join(f"{k}={e[k]!r}" for k in ("kernel", "dtype", "bucket") if k in e)


def _field_error(exc: Exception) -> str:
    """What is wrong, as readable for a missing key as for a bad value."""
    return f"no {exc.args[0]!r} field" if isinstance(exc, KeyError) else str(exc)


def _entry_from_json(e: Any, source: str) -> CacheEntry:
    """A cache entry from its JSON form, checked enough that lookups cannot
    fail; a CPU entry's config must make a valid :class:`CpuConfig`.

    Raises:
      KeyError: a field is missing.
      TypeError, ValueError: a field is of the wrong type or out of range.
    """
    if not isinstance(e, dict):
        raise TypeError(f"an entry must be an object, got {e!r}")
    entry = CacheEntry(kernel=e["kernel"], dtype=e["dtype"], bucket=e["bucket"],
                       config=e["config"], times=e.get("times", {}), source=source)
    for name in ("kernel", "dtype"):
        if not isinstance(getattr(entry, name), str):
            raise TypeError(f"{name} must be a string, got {getattr(entry, name)!r}")
    for name in ("bucket", "config", "times"):
        if not isinstance(getattr(entry, name), dict):
            raise TypeError(f"{name} must be an object, got {getattr(entry, name)!r}")
    for dim, size in entry.bucket.items():
        if isinstance(size, bool) or not isinstance(size, int | float) or not 0 < size < math.inf:
            raise ValueError(f"bucket {dim} must be a positive number, got {size!r}")
    if entry.kernel == CPU_KERNEL:
        cpu_config_from(entry.config)
    return entry


def write_cache(root: Path | str, kind: str, entries: Sequence[CacheEntry],
                meta: Mapping[str, Any]) -> Path:
    """Write `entries` into the cache for `kind` under `root` and return its path.

    Entries already in the file survive unless a new one has the same kernel,
    dtype class and bucket, so sweeps of different grids add up.
    """
    path = cache_file(root, kind)

    def key(e: CacheEntry) -> tuple:
        return e.kernel, e.dtype, tuple(sorted(e.bucket.items()))

    merged = {key(e): e for e in load_entries(path)}
    merged.update((key(e), e) for e in entries)
    data = {"version": CACHE_VERSION, "op": OP, "device_kind": kind, "meta": dict(meta),
            "entries": [merged[k].to_json() for k in sorted(merged)]}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)  # atomic: a concurrent reader never sees half a file
    return path


def read_meta(path: Path) -> dict[str, Any]:
    """The ``meta`` block of a cache file ({} when missing or unreadable)."""
    try:
        return dict(json.loads(path.read_text()).get("meta", {}))
    except (OSError, ValueError, AttributeError):
        return {}
