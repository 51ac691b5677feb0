"""Shared fixtures."""

from __future__ import annotations

import jax
import pytest


def pytest_configure(config):
    """Refuse to test a jaxsearch whose CPU extension is missing: every CPU
    test would quietly exercise the jnp fallback instead."""
    from jaxsearch import _cpu

    if not _cpu.AVAILABLE:
        raise pytest.UsageError(f"jaxsearch's CPU extension is unavailable: "
                                f"{_cpu.UNAVAILABLE_REASON}")


@pytest.fixture
def x64():
    """Run the test with jax_enable_x64 on."""
    with jax.enable_x64(True):
        yield
