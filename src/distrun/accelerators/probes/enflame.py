"""Enflame GCU: ``efsmi`` (its default table).

Each device takes two rows: ``| DEV  NAME | FW VER | BUS-ID  ECC |`` then
``| TEMP  Dpm/Lpm  Pwr | <n>MiB  GCU Virt | DUsed  SN |``. The NAME is ``S60`` in efsmi 1.2 and
``Enflame S60G`` in 1.6; the BUS-ID is kept as printed (``00:01:00.0``). The index is the DEV
number efsmi prints (the ordinal TOPS_VISIBLE_DEVICES counts in).

For the monitor, ``read_gcus`` also keeps ``DUsed``, the device utilisation. The ``Mem`` column
is the memory size, not its use, and the table lists no processes: neither is available here.

``efsmi -q`` (a per-device key/value dump) is not parsed: no verbatim real sample was found.
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
    last_mib,
    leading_int,
    percent,
    table_result,
)
from distrun.accelerators.vendors import VendorId

EFSMI = ("efsmi",)

_BUS = re.compile(r"\b(?:[0-9a-fA-F]{2,4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\b")
_DRIVER = re.compile(r"Driver Ver:\s*(\S+)")


@dataclass(frozen=True)
class Gcu:
    """One GCU and its ``DUsed`` (device utilisation, %) from the second row."""

    device: Device
    dused_percent: float | None = None


def probe(env: Mapping[str, str], run: Runner) -> ProbeResult:
    return run_and_parse(VendorId.ENFLAME, EFSMI, run, parse_efsmi)


def parse_efsmi(out: str) -> ProbeResult:
    driver = _DRIVER.search(out)
    return table_result(VendorId.ENFLAME, "efsmi", lambda: [g.device for g in read_gcus(out)],
                        "efsmi lists no GCU", driver.group(1) if driver else None)


def read_gcus(out: str) -> list[Gcu]:
    """Every GCU of the table, both of its rows read; TableError when there is no table."""
    if "EFSMI" not in out or "DEV" not in out:
        raise TableError("efsmi printed no device table")
    gcus: list[Gcu] = []
    for line in out.splitlines():
        row = cells(line)
        if row is None or len(row) < 3:
            continue
        if leading_int(row[0]) is not None and _BUS.search(row[2]):
            gcus.append(Gcu(_device(row)))
        elif gcus and "MiB" in row[1] and gcus[-1].device.memory_bytes is None:
            last = gcus[-1]
            gcus[-1] = Gcu(replace(last.device, memory_bytes=last_mib(row[1])), percent(row[2]))
    return gcus


def _device(row: list[str]) -> Device:
    words = row[0].split()
    name = " ".join(words[1:]) or "GCU"
    bus = _BUS.search(row[2])
    return Device(VendorId.ENFLAME, int(words[0]), name, None, None,
                  bus.group(0) if bus else None)
