"""One kernel's SASS, as nvdisasm prints it, read: its loops (backward
branches, nested by their addresses), the instructions in each body and
outside them, the widths of its global loads (LDG) and stores (STG), and
the loads before its first store. `gpu_cost.py` costs what it reads.
"""

from __future__ import annotations

import dataclasses
import re


@dataclasses.dataclass
class Loop:
    """A loop of the SASS: its first and last instruction's address."""

    start: int
    end: int
    depth: int = 0
    instructions: int = 0  # in its own body, not counting inner loops'
    loads: list[int] = dataclasses.field(default_factory=list)  # bytes per lane, each LDG
    stores: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Sass:
    """One kernel's SASS, read: its loops (in address order) and what lies
    outside them."""

    loops: list[Loop]
    instructions: int  # outside every loop
    loads: list[int]
    stores: list[int]
    rounds_before_store: list[int | None]  # per load before the first store: its loop, or None


_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
_LABEL = re.compile(r"^(\.L_x_\d+):", re.MULTILINE)
_TARGET = re.compile(r"`\((\.L_x_\d+)\)")
_WIDTH = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}


def _width(op: str) -> int:
    """Bytes per lane of an LDG or STG from its suffixes (32 bits by default)."""
    return next((_WIDTH[part] for part in op.split(".")[1:] if part in _WIDTH), 4)


def read_sass(text: str) -> Sass:
    """The loops, instructions, loads and stores of one kernel's SASS."""
    labels, instructions = {}, []
    position = 0
    for line in text.splitlines():
        if label := _LABEL.match(line):
            labels[label.group(1)] = position
        elif found := _INSTRUCTION.search(line):
            address, _, op, operands = found.groups()
            instructions.append((int(address, 16), op, operands))
            position = int(address, 16) + 16
    loops = []
    for address, op, operands in instructions:
        target = _TARGET.search(operands)
        if op.startswith("BRA") and target and labels.get(target.group(1), address + 1) < address:
            loops.append(Loop(labels[target.group(1)], address))
    loops.sort(key=lambda loop: (loop.start, -loop.end))
    for loop in loops:
        loop.depth = sum(1 for outer in loops if outer is not loop
                         and outer.start <= loop.start and loop.end <= outer.end)
    outside = Loop(-1, -1)
    first_store = min((a for a, op, _ in instructions if op.startswith("STG")), default=None)
    rounds = []
    for address, op, _ in instructions:
        inner = [lp for lp in loops if lp.start <= address <= lp.end]
        home = max(inner, key=lambda lp: lp.depth) if inner else outside
        home.instructions += 1
        if op.startswith("LDG"):
            home.loads.append(_width(op))
            if first_store is None or address < first_store:
                rounds.append(loops.index(home) if inner else None)
        elif op.startswith("STG"):
            home.stores.append(_width(op))
    return Sass(loops, outside.instructions, outside.loads, outside.stores, rounds)
