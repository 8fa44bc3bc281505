"""AMD ROCm: the ``amdsmi`` Python library first, ``rocm-smi --json`` as the fallback.

amdsmi reads the driver's sysfs/KFD data; it creates no HIP context. The CLI fallback is
``rocm-smi --showproductname --showmeminfo vram --showuniqueid --json``, whose JSON is
``{"card0": {"Card Series": ..., "VRAM Total Memory (B)": ..., "Unique ID": ...}, ...}`` (key
case varies between releases: ``Card series`` / ``Card Series``). The index is the N of
``cardN``, rocm-smi's device index.

``amd-smi static --json`` is not parsed: no verbatim real capture of it was found to test a
parser against (see tests/fixtures/tools/SOURCES.md).
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
from distrun.accelerators.sessions import AMDSMI, session
from distrun.accelerators.vendors import VendorId

ROCM_SMI = (
    "rocm-smi",
    "--showproductname",
    "--showmeminfo",
    "vram",
    "--showuniqueid",
    "--json",
)

_NAME_KEYS = ("card series", "device name", "card model")
_MEMORY_KEY = "vram total memory (b)"


def probe(env: Mapping[str, str], run: Runner) -> ProbeResult:
    via_lib = probe_amdsmi()
    if via_lib is not None and via_lib.status == "found":
        return via_lib
    via_cli = probe_rocm_smi(run)
    if via_cli.status == "absent" and via_lib is not None:
        return via_lib
    return via_cli


def probe_amdsmi() -> ProbeResult | None:
    """Devices through the amdsmi library; None when it is not importable."""
    with session(AMDSMI) as smi:
        if not smi.importable:
            return None
        if smi.lib is None:
            return absent(VendorId.AMD, smi.why)
        try:
            handles = smi.lib.amdsmi_get_processor_handles()
            devices = tuple(_amdsmi_device(smi.lib, i, h) for i, h in enumerate(handles))
        except smi.errors as exc:
            return failed(VendorId.AMD, "amdsmi", f"amdsmi: {exc}")
    if not devices:
        return absent(VendorId.AMD, "amdsmi reports 0 GPUs")
    return ProbeResult(VendorId.AMD, "found", devices, "amdsmi")


def _amdsmi_device(amdsmi: Any, index: int, handle: Any) -> Device:
    asic = amdsmi.amdsmi_get_gpu_asic_info(handle)
    vram = amdsmi.amdsmi_get_gpu_vram_info(handle)
    size_mb = vram.get("vram_size") if isinstance(vram, dict) else None
    return Device(
        VendorId.AMD,
        index,
        str(asic.get("market_name") or "AMD GPU"),
        int(size_mb) * 2**20 if isinstance(size_mb, int) and size_mb > 0 else None,
        str(amdsmi.amdsmi_get_gpu_device_uuid(handle)),
        str(amdsmi.amdsmi_get_gpu_device_bdf(handle)),
    )


def probe_rocm_smi(run: Runner) -> ProbeResult:
    return run_and_parse(VendorId.AMD, ROCM_SMI, run, parse_rocm_smi_json,
                         "no amdsmi library and no rocm-smi on PATH")


def parse_rocm_smi_json(out: str) -> ProbeResult:
    try:
        data: Any = json.loads(out)
    except ValueError as exc:
        return failed(VendorId.AMD, "rocm-smi", f"rocm-smi --json printed no JSON: {exc}")
    if not isinstance(data, dict):
        return failed(VendorId.AMD, "rocm-smi", "rocm-smi --json is not an object of cards")
    devices: list[Device] = []
    for key, fields in data.items():
        if not key.startswith("card"):
            continue
        if not key[4:].isdigit() or not isinstance(fields, dict):
            return failed(VendorId.AMD, "rocm-smi", f"unexpected entry {key!r}")
        devices.append(_card(int(key[4:]), fields))
    if not devices:
        return absent(VendorId.AMD, "rocm-smi lists no GPU")
    return ProbeResult(VendorId.AMD, "found", tuple(devices), "rocm-smi")


def _card(index: int, fields: dict[str, Any]) -> Device:
    lower = {k.lower(): str(v) for k, v in fields.items()}
    name = next((lower[k] for k in _NAME_KEYS if lower.get(k, "N/A") != "N/A"), "AMD GPU")
    total = lower.get(_MEMORY_KEY, "")
    return Device(
        VendorId.AMD,
        index,
        name,
        int(total) if total.isdigit() else None,
        _known(lower.get("unique id")),
        _known(lower.get("pci bus")),
    )


def _known(value: str | None) -> str | None:
    return value if value and value != "N/A" else None
