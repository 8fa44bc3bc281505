"""Enflame GCU: ``efsmi`` (its default table).

Each device takes two rows: ``| DEV  NAME | FW VER | BUS-ID  ECC |`` then
``| TEMP  Dpm/Lpm  Pwr | <n>MiB  GCU Virt | DUsed  SN |``. The NAME is ``S60`` in efsmi 1.2 and
``Enflame S60G`` in 1.6; the BUS-ID is kept as printed (``00:01:00.0``). The index is the DEV
number efsmi prints (the ordinal TOPS_VISIBLE_DEVICES counts in).

``efsmi -q`` (a per-device key/value dump) is not parsed: no verbatim real sample was found.
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

EFSMI = ("efsmi",)

_BUS = re.compile(r"\b(?:[0-9a-fA-F]{2,4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\b")
_DRIVER = re.compile(r"Driver Ver:\s*(\S+)")


def probe(env: Mapping[str, str], run: Runner) -> ProbeResult:
    try:
        out = run(EFSMI)
    except ToolMissing:
        return absent(VendorId.ENFLAME, "no efsmi on PATH")
    except ToolFailed as exc:
        return failed(VendorId.ENFLAME, "efsmi", str(exc))
    return parse_efsmi(out)


def parse_efsmi(out: str) -> ProbeResult:
    if "EFSMI" not in out or "DEV" not in out:
        return failed(VendorId.ENFLAME, "efsmi", "efsmi printed no device table")
    devices: list[Device] = []
    for line in out.splitlines():
        row = cells(line)
        if row is None or len(row) < 3:
            continue
        if leading_int(row[0]) is not None and _BUS.search(row[2]):
            devices.append(_device(row))
        elif devices and "MiB" in row[1] and devices[-1].memory_bytes is None:
            last = devices[-1]
            devices[-1] = Device(last.vendor, last.index, last.name, last_mib(row[1]),
                                 last.uuid, last.bus_id)
    if not devices:
        return absent(VendorId.ENFLAME, "efsmi lists no GCU")
    driver = _DRIVER.search(out)
    return ProbeResult(VendorId.ENFLAME, "found", tuple(devices), "efsmi",
                       driver=driver.group(1) if driver else None)


def _device(row: list[str]) -> Device:
    words = row[0].split()
    name = " ".join(words[1:]) or "GCU"
    bus = _BUS.search(row[2])
    return Device(VendorId.ENFLAME, int(words[0]), name, None, None,
                  bus.group(0) if bus else None)
