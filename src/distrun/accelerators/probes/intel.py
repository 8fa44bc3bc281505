"""Intel GPU: ``xpu-smi discovery -j``.

The JSON is ``{"device_list": [{"device_id", "device_name", "uuid", "pci_bdf_address", ...}]}``.
The list does not carry the memory size (only ``xpu-smi discovery -d N -j`` does), so memory is
None here. The index is ``device_id``, the ordinal xpu-smi reports.

For the monitor, ``parse_stats_json`` reads ``xpu-smi stats -d N -j``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from distrun.accelerators.inventory import Device
from distrun.accelerators.probes import (
    ProbeResult,
    Runner,
    absent,
    failed,
    run_and_parse,
)
from distrun.accelerators.vendors import VendorId

DISCOVERY = ("xpu-smi", "discovery", "-j")


def stats_argv(device_id: int) -> tuple[str, ...]:
    """``xpu-smi stats -d N -j``: one device's current metrics."""
    return ("xpu-smi", "stats", "-d", str(device_id), "-j")


def probe(env: Mapping[str, str], run: Runner) -> ProbeResult:
    return run_and_parse(VendorId.INTEL, DISCOVERY, run, parse_discovery_json)


def parse_discovery_json(out: str) -> ProbeResult:
    try:
        data: Any = json.loads(out)
    except ValueError as exc:
        return failed(VendorId.INTEL, "xpu-smi", f"xpu-smi discovery -j printed no JSON: {exc}")
    listed = data.get("device_list") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return failed(VendorId.INTEL, "xpu-smi", "xpu-smi discovery -j has no device_list")
    devices: list[Device] = []
    for entry in listed:
        device = _device(entry)
        if device is None:
            return failed(VendorId.INTEL, "xpu-smi", f"unexpected device entry: {entry!r}")
        devices.append(device)
    if not devices:
        return absent(VendorId.INTEL, "xpu-smi lists no GPU")
    return ProbeResult(VendorId.INTEL, "found", tuple(devices), "xpu-smi")


def _device(entry: Any) -> Device | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("device_id"), int):
        return None
    return Device(
        VendorId.INTEL,
        entry["device_id"],
        str(entry.get("device_name") or "Intel GPU"),
        _bytes(entry.get("memory_physical_size_byte")),
        _text(entry.get("uuid")),
        _text(entry.get("pci_bdf_address")),
    )


def _bytes(value: Any) -> int | None:
    text = str(value).strip() if value is not None else ""
    return int(text) if text.isdigit() and int(text) > 0 else None


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "", "N/A", "unknown") else None


def parse_stats_json(out: str) -> dict[str, float]:
    """``xpu-smi stats -d N -j``'s ``device_level`` as ``{metrics_type: value}``.

    A metric the device cannot give is left out by xpu-smi (an Arc Pro B70 lists no
    ``XPUM_STATS_GPU_UTILIZATION``); ``XPUM_STATS_MEMORY_USED`` is in MiB. Not JSON: empty.
    """
    try:
        data: Any = json.loads(out)
    except ValueError:
        return {}
    listed = data.get("device_level") if isinstance(data, dict) else None
    return {str(m["metrics_type"]): float(m["value"])
            for m in (listed if isinstance(listed, list) else [])
            if isinstance(m, dict) and isinstance(m.get("value"), int | float)
            and not isinstance(m.get("value"), bool) and "metrics_type" in m}
