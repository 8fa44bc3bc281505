"""Cambricon MLU: ``cnmon`` (its default table; ``cnmon info`` is a long per-card key/value
dump whose layout we have no real sample of, so it is not parsed here).

Each card takes two rows: ``| Card  VF  Name  Firmware | Bus-Id (or Inited  Driver) | ... |``
then ``| Fan  Temp  Pwr | used MiB/ total MiB | ... |``. cnmon 5.x prints the Bus-Id and the
driver in the banner; 4.x prints ``Inited  Driver`` per card and no Bus-Id. The index is the
Card number cnmon prints (the ordinal MLU_VISIBLE_DEVICES counts in).

For the monitor, ``read_cards`` also keeps ``Util`` and the used MiB. The ``Processes:`` table is
read only for ``No running processes found``: no real capture of a process row was found, so
a listed process is not parsed (its pids are not available).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from distrun.accelerators.inventory import Device
from distrun.accelerators.probes import (
    ProbeResult,
    Runner,
    run_and_parse,
)
from distrun.accelerators.probes._table import (
    TableError,
    cells,
    first_mib,
    last_mib,
    leading_int,
    percent,
    table_result,
)
from distrun.accelerators.vendors import VendorId

CNMON = ("cnmon",)

_BUS = re.compile(r"\b[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\b")
_DRIVER = re.compile(r"Driver\s+v(\S+)")
_CARD_DRIVER = re.compile(r"\bv(\d+\.\d+\.\d+)\b")


@dataclass(frozen=True)
class Card:
    """One MLU with its ``Util`` and the used part of ``Memory-Usage``."""

    device: Device
    util_percent: float | None = None
    memory_used_bytes: int | None = None


def probe(env: Mapping[str, str], run: Runner) -> ProbeResult:
    return run_and_parse(VendorId.CAMBRICON, CNMON, run, parse_cnmon)


def parse_cnmon(out: str) -> ProbeResult:
    return table_result(VendorId.CAMBRICON, "cnmon", lambda: [c.device for c in read_cards(out)],
                        "cnmon lists no MLU", _driver(out))


def read_cards(out: str) -> list[Card]:
    """Every card of the table, both of its rows read; TableError when there is no table."""
    if "CNMON" not in out or "Card" not in out:
        raise TableError("cnmon printed no card table")
    cards: list[Card] = []
    for line in out.splitlines():
        if "Processes:" in line:
            break
        row = cells(line)
        if row is None or len(row) < 3:
            continue
        if leading_int(row[0]) is not None:
            cards.append(_card(row))
        elif cards and "MiB" in row[1] and cards[-1].device.memory_bytes is None:
            last = cards[-1]
            cards[-1] = Card(replace(last.device, memory_bytes=last_mib(row[1])),
                             last.util_percent, first_mib(row[1]))
    return cards


def runs_no_process(out: str) -> bool:
    """cnmon's process table says ``No running processes found``."""
    return "No running processes found" in out.partition("Processes:")[2]


def _card(row: list[str]) -> Card:
    words = row[0].split()
    name = words[2] if len(words) >= 3 else words[-1]
    bus = _BUS.search(row[1])
    return Card(Device(VendorId.CAMBRICON, int(words[0]), name, None, None,
                       bus.group(0) if bus else None), percent(row[2]))


def _driver(out: str) -> str | None:
    banner = _DRIVER.search(out)
    if banner:
        return banner.group(1)
    for line in out.splitlines():
        row = cells(line)
        if row and len(row) >= 2 and leading_int(row[0]) is not None:
            card = _CARD_DRIVER.search(row[1])
            return card.group(1) if card else None
    return None
