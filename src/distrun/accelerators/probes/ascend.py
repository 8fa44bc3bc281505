"""Huawei Ascend: ``npu-smi info`` (the text table; there is no machine-readable mode).

Each device takes two rows: ``| NPU  Name | Health | ...`` then ``| Chip [Device] | Bus-Id |
AICore  Memory-Usage [HBM-Usage] |``. Layouts seen in real output:

- 910B (``Chip`` only): one chip per NPU; the NPU id is the device id.
- Atlas A3 / 910_93 (``Chip  Phy-ID``): two chips per NPU; Phy-ID is the device id.
- 310P (``Chip  Device``): NPU ids are card ids (0, 32, 32768...); Device is the device id.

The index is the device id the tool prints for the chip (the ordinal ASCEND_RT_VISIBLE_DEVICES
counts in), falling back to the NPU id. Memory is the HBM total when the HBM column holds one,
else the Memory-Usage total (310P has DDR only). MB in npu-smi are MiB.

For the monitor, ``read_chips`` also keeps each chip's ``AICore(%)`` and the used MiB of the
same pair, and ``read_processes`` reads the ``NPU  Chip | Process id`` table below the devices.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from distrun.accelerators.inventory import Device
from distrun.accelerators.probes import (
    ProbeResult,
    Runner,
    run_and_parse,
)
from distrun.accelerators.probes._table import TableError, cells, leading_int, percent, table_result
from distrun.accelerators.vendors import VendorId

SMI_INFO = ("npu-smi", "info")

_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")
_VERSION = re.compile(r"Version:\s*(\S+)")


@dataclass(frozen=True)
class _Npu:
    npu_id: int
    name: str


@dataclass(frozen=True)
class Chip:
    """One chip row: the device, where it sits (NPU id, chip in the NPU) and what it is doing
    (``AICore(%)``; the used part of the memory pair the total came from)."""

    device: Device
    npu_id: int
    chip: int
    aicore_percent: float | None
    memory_used_bytes: int | None


def probe(env: Mapping[str, str], run: Runner) -> ProbeResult:
    return run_and_parse(VendorId.ASCEND, SMI_INFO, run, parse_npu_smi_info)


def parse_npu_smi_info(out: str) -> ProbeResult:
    version = _VERSION.search(out)
    return table_result(VendorId.ASCEND, "npu-smi", lambda: [c.device for c in read_chips(out)],
                        "npu-smi lists no NPU", version.group(1) if version else None)


def read_chips(out: str) -> list[Chip]:
    """Every chip row of the device table; TableError when there is no such table."""
    if "NPU" not in out or "Bus-Id" not in out:
        raise TableError("npu-smi info printed no device table")
    chips: list[Chip] = []
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
            raise TableError(f"chip row before any NPU row: {line!r}")
        else:
            chips.append(_chip(npu, words, row))
    return chips


def read_processes(out: str) -> dict[tuple[int, int], tuple[int, ...]] | None:
    """Process ids per (NPU id, chip) from the table below the devices; None without one.

    ``| 0       1                 | 929405        |  | 58780 |`` is NPU 0, chip 1, pid 929405;
    ``No running processes found in NPU 8`` adds nothing (its chips run none).
    """
    at = out.find("Process id")
    if at < 0:
        return None
    found: dict[tuple[int, int], list[int]] = {}
    for line in out[at:].splitlines()[1:]:
        row = cells(line)
        if row is None or len(row) < 2 or not row[1].isdigit():
            continue
        words = row[0].split()
        if len(words) == 2 and words[0].isdigit() and words[1].isdigit():
            found.setdefault((int(words[0]), int(words[1])), []).append(int(row[1]))
    return {key: tuple(pids) for key, pids in found.items()}


def _chip(npu: _Npu, words: list[str], row: list[str]) -> Chip:
    index = int(words[1]) if len(words) >= 2 else npu.npu_id
    bus = row[1] if row[1] and row[1] != "NA" else None
    used, total = _memory(row[2])
    return Chip(Device(VendorId.ASCEND, index, npu.name, total, None, bus), npu.npu_id,
                int(words[0]), percent(row[2]), used)


def _memory(cell: str) -> tuple[int | None, int | None]:
    """Used and total of the last ``used / total`` pair with a non-zero total (HBM, else DDR)."""
    pairs = [(int(used), int(total)) for used, total in _PAIR.findall(cell) if int(total) > 0]
    if not pairs:
        return None, None
    used, total = pairs[-1]
    return used * 2**20, total * 2**20
