"""Huawei Ascend: ``npu-smi info`` (the text table; there is no machine-readable mode).

Each device takes two rows: ``| NPU  Name | Health | ...`` then ``| Chip [Device] | Bus-Id |
AICore  Memory-Usage [HBM-Usage] |``. Layouts seen in real output:

- 910B (``Chip`` only): one chip per NPU; the NPU id is the device id.
- Atlas A3 / 910_93 (``Chip  Phy-ID``): two chips per NPU; Phy-ID is the device id.
- 310P (``Chip  Device``): NPU ids are card ids (0, 32, 32768...); Device is the device id.

The index is the device id the tool prints for the chip (the ordinal ASCEND_RT_VISIBLE_DEVICES
counts in), falling back to the NPU id. Memory is the HBM total when the HBM column holds one,
else the Memory-Usage total (310P has DDR only). MB in npu-smi are MiB.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from distrun.accelerators.inventory import Device
from distrun.accelerators.probes import (
    ProbeResult,
    Runner,
    ToolFailed,
    ToolMissing,
    absent,
    failed,
)
from distrun.accelerators.probes._table import cells, leading_int
from distrun.accelerators.vendors import VendorId

SMI_INFO = ("npu-smi", "info")

_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")
_VERSION = re.compile(r"Version:\s*(\S+)")


@dataclass(frozen=True)
class _Npu:
    npu_id: int
    name: str


def probe(env: Mapping[str, str], run: Runner) -> ProbeResult:
    try:
        out = run(SMI_INFO)
    except ToolMissing:
        return absent(VendorId.ASCEND, "no npu-smi on PATH")
    except ToolFailed as exc:
        return failed(VendorId.ASCEND, "npu-smi", str(exc))
    return parse_npu_smi_info(out)


def parse_npu_smi_info(out: str) -> ProbeResult:
    if "NPU" not in out or "Bus-Id" not in out:
        return failed(VendorId.ASCEND, "npu-smi", "npu-smi info printed no device table")
    devices: list[Device] = []
    npu: _Npu | None = None
    for line in out.splitlines():
        if "Process id" in line:
            break
        row = cells(line)
        if row is None or len(row) < 3 or leading_int(row[0]) is None:
            continue
        words = row[0].split()
        if len(words) >= 2 and not words[1].isdigit():
            npu = _Npu(int(words[0]), " ".join(words[1:]))
        elif npu is None:
            return failed(VendorId.ASCEND, "npu-smi", f"chip row before any NPU row: {line!r}")
        else:
            devices.append(_chip(npu, words, row))
    if not devices:
        return absent(VendorId.ASCEND, "npu-smi lists no NPU")
    version = _VERSION.search(out)
    driver = version.group(1) if version else None
    return ProbeResult(VendorId.ASCEND, "found", tuple(devices), "npu-smi", driver=driver)


def _chip(npu: _Npu, words: list[str], row: list[str]) -> Device:
    index = int(words[1]) if len(words) >= 2 else npu.npu_id
    bus = row[1] if row[1] and row[1] != "NA" else None
    return Device(VendorId.ASCEND, index, npu.name, _memory(row[2]), None, bus)


def _memory(cell: str) -> int | None:
    """Total of the last ``used / total`` pair with a non-zero total (HBM, else DDR)."""
    totals = [int(total) for _, total in _PAIR.findall(cell) if int(total) > 0]
    return totals[-1] * 2**20 if totals else None
