"""Tuning cache entries and files for the tests (the `caches` fixture of
tests/conftest.py gives them an empty user and shipped cache)."""

from __future__ import annotations

import dataclasses

from jaxsearch import tuning
from jaxsearch.tuning import CacheEntry, CpuConfig


def cpu_entry(dtype="float32", size=10**6, **config):
    return CacheEntry(tuning.CPU_KERNEL, dtype, {"size": size},
                      dataclasses.asdict(CpuConfig(**config)), {"note": "test"})


def write(root, *entries, kind="cpu"):
    return tuning.write_cache(root, kind, list(entries), {"test": True})
