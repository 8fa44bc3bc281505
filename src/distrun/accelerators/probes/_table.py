"""Helpers shared by the parsers of box-drawn tool tables (npu-smi, cnmon, efsmi)."""

from __future__ import annotations

import re

_MIB = re.compile(r"(\d+)\s*MiB", re.IGNORECASE)


def cells(line: str) -> list[str] | None:
    """The stripped cells of one ``| a | b |`` table row; None for borders and other lines."""
    text = line.strip()
    if not text.startswith("|") or set(text) <= set("|-=+ "):
        return None
    return [c.strip() for c in text.strip("|").split("|")]


def leading_int(cell: str) -> int | None:
    """The cell's first word as an integer, or None."""
    words = cell.split()
    return int(words[0]) if words and words[0].isdigit() else None


def last_mib(cell: str) -> int | None:
    """Bytes of the last ``<n> MiB`` in the cell (the total of ``used MiB/ total MiB``)."""
    found = _MIB.findall(cell)
    return int(found[-1]) * 2**20 if found else None
