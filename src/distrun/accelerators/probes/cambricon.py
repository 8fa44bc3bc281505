"""Cambricon MLU: ``cnmon`` (its default table; ``cnmon info`` is a long per-card key/value
dump whose layout we have no real sample of, so it is not parsed here).

Each card takes two rows: ``| Card  VF  Name  Firmware | Bus-Id (or Inited  Driver) | ... |``
then ``| Fan  Temp  Pwr | used MiB/ total MiB | ... |``. cnmon 5.x prints the Bus-Id and the
driver in the banner; 4.x prints ``Inited  Driver`` per card and no Bus-Id. The index is the
Card number cnmon prints (the ordinal MLU_VISIBLE_DEVICES counts in).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from distrun.accelerators.inventory import Device
from distrun.accelerators.probes import (
    ProbeResult,
    Runner,
    ToolFailed,
    ToolMissing,
    absent,
    failed,
)
from distrun.accelerators.probes._table import cells, last_mib, leading_int
from distrun.accelerators.vendors import VendorId

CNMON = ("cnmon",)

_BUS = re.compile(r"\b[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\b")
_DRIVER = re.compile(r"Driver\s+v(\S+)")
_CARD_DRIVER = re.compile(r"\bv(\d+\.\d+\.\d+)\b")


def probe(env: Mapping[str, str], run: Runner) -> ProbeResult:
    try:
        out = run(CNMON)
    except ToolMissing:
        return absent(VendorId.CAMBRICON, "no cnmon on PATH")
    except ToolFailed as exc:
        return failed(VendorId.CAMBRICON, "cnmon", str(exc))
    return parse_cnmon(out)


def parse_cnmon(out: str) -> ProbeResult:
    if "CNMON" not in out or "Card" not in out:
        return failed(VendorId.CAMBRICON, "cnmon", "cnmon printed no card table")
    devices: list[Device] = []
    for line in out.splitlines():
        if "Processes:" in line:
            break
        row = cells(line)
        if row is None or len(row) < 3:
            continue
        if leading_int(row[0]) is not None:
            devices.append(_card(row))
        elif devices and "MiB" in row[1] and devices[-1].memory_bytes is None:
            last = devices[-1]
            devices[-1] = Device(last.vendor, last.index, last.name, last_mib(row[1]),
                                 last.uuid, last.bus_id)
    if not devices:
        return absent(VendorId.CAMBRICON, "cnmon lists no MLU")
    return ProbeResult(VendorId.CAMBRICON, "found", tuple(devices), "cnmon",
                       driver=_driver(out))


def _card(row: list[str]) -> Device:
    words = row[0].split()
    name = words[2] if len(words) >= 3 else words[-1]
    bus = _BUS.search(row[1])
    return Device(VendorId.CAMBRICON, int(words[0]), name, None, None,
                  bus.group(0) if bus else None)


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
