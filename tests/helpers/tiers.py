"""The two test tiers (tests/conftest.py): what marks a case for the full tier."""

import pytest

full = pytest.mark.full


def tiered(values, quick):
    """`values` as pytest params (a tuple is one case of several arguments),
    each marked for the full tier unless `quick(value)`."""
    return [pytest.param(*(v if isinstance(v, tuple) else (v,)), marks=() if quick(v) else full)
            for v in values]
