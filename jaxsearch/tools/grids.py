"""The quick and the full grid of each command that takes `--quick` (the
benchmark families and the autotuner), in one shape."""

from __future__ import annotations

import dataclasses
from typing import Generic, TypeVar

G = TypeVar("G")


@dataclasses.dataclass(frozen=True)
class Grids(Generic[G]):
    """A command's two grids: `quick` for `--quick`, `full` otherwise."""

    quick: G
    full: G

    def pick(self, quick: bool) -> G:
        """The grid `--quick` (or its absence) asks for."""
        return self.quick if quick else self.full
