"""Helpers shared by the parsers of box-drawn tool tables (npu-smi, cnmon, efsmi)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from distrun.accelerators.inventory import Device
from distrun.accelerators.probes import ProbeResult, absent, failed
from distrun.accelerators.vendors import VendorId

_MIB = re.compile(r"(\d+)\s*MiB", re.IGNORECASE)
_PERCENT = re.compile(r"^(\d+(?:\.\d+)?)%?$")


class TableError(ValueError):
    """The tool printed something other than the table it prints (the message says what)."""


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


def first_mib(cell: str) -> int | None:
    """Bytes of the first ``<n> MiB`` in the cell (the used part of ``used MiB/ total MiB``)."""
    found = _MIB.findall(cell)
    return int(found[0]) * 2**20 if found else None


def percent(cell: str) -> float | None:
    """The cell's first word as a percentage (``0%``, ``0.0%``, ``7``); None for ``NA``, ``-``."""
    words = cell.split()
    found = _PERCENT.match(words[0]) if words else None
    return float(found.group(1)) if found else None


def table_result(vendor: VendorId, tool: str, devices: Callable[[], Sequence[Device]],
                 nothing: str, driver: str | None) -> ProbeResult:
    """The probe's answer from a table reader: found, absent (``nothing``) or failed."""
    try:
        found = devices()
    except TableError as exc:
        return failed(vendor, tool, str(exc))
    if not found:
        return absent(vendor, nothing)
    return ProbeResult(vendor, "found", tuple(found), tool, driver=driver)
