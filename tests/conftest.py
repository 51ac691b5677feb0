"""Shared fixtures."""

from __future__ import annotations

import jax
import pytest


@pytest.fixture
def x64():
    """Run the test with jax_enable_x64 on."""
    with jax.enable_x64(True):
        yield
