"""NVIDIA: NVML through nvidia-ml-py first, ``nvidia-smi`` as the fallback.

NVML does not create a CUDA context. Equivalent query:
``nvidia-smi --query-gpu=index,name,memory.total,uuid,pci.bus_id,driver_version
--format=csv,noheader,nounits``
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from distrun.accelerators.inventory import Device
from distrun.accelerators.probes import (
    ProbeResult,
    Runner,
    absent,
    failed,
    parse_mib,
    run_and_parse,
)
from distrun.accelerators.sessions import NVML, session
from distrun.accelerators.vendors import VendorId

SMI_QUERY = (
    "nvidia-smi",
    "--query-gpu=index,name,memory.total,uuid,pci.bus_id,driver_version",
    "--format=csv,noheader,nounits",
)


def probe(env: Mapping[str, str], run: Runner) -> ProbeResult:
    via_nvml = probe_nvml()
    if via_nvml is not None and via_nvml.status == "found":
        return via_nvml
    via_smi = probe_smi(run)
    if via_smi.status == "absent" and via_nvml is not None:
        return via_nvml
    return via_smi


def probe_nvml() -> ProbeResult | None:
    """Devices through NVML; None when nvidia-ml-py is not importable."""
    with session(NVML) as nvml:
        if not nvml.importable:
            return None
        if nvml.lib is None:
            return absent(VendorId.NVIDIA, nvml.why)
        try:
            driver = _text(nvml.lib.nvmlSystemGetDriverVersion())
            count = nvml.lib.nvmlDeviceGetCount()
            devices = tuple(_nvml_device(nvml.lib, i) for i in range(count))
        except nvml.errors as exc:
            return failed(VendorId.NVIDIA, "nvml", f"NVML: {exc}")
    if not devices:
        return absent(VendorId.NVIDIA, "NVML reports 0 devices")
    return ProbeResult(VendorId.NVIDIA, "found", devices, "nvml", driver=driver)


def _nvml_device(pynvml: Any, index: int) -> Device:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total
    bus = pynvml.nvmlDeviceGetPciInfo(handle).busId
    return Device(
        VendorId.NVIDIA,
        index,
        _text(pynvml.nvmlDeviceGetName(handle)),
        int(memory),
        _text(pynvml.nvmlDeviceGetUUID(handle)),
        _text(bus),
    )


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def probe_smi(run: Runner) -> ProbeResult:
    return run_and_parse(VendorId.NVIDIA, SMI_QUERY, run, parse_smi_csv,
                         "no NVML library and no nvidia-smi on PATH")


def parse_smi_csv(out: str) -> ProbeResult:
    devices: list[Device] = []
    driver = None
    for row in csv.reader(io.StringIO(out)):
        if len(row) < 6:
            continue
        index, name, mem, uuid, bus, driver = (c.strip() for c in row[:6])
        devices.append(Device(VendorId.NVIDIA, int(index), name, parse_mib(mem), uuid, bus))
    if not devices:
        return absent(VendorId.NVIDIA, "nvidia-smi lists no GPU")
    return ProbeResult(VendorId.NVIDIA, "found", tuple(devices), "nvidia-smi", driver=driver)
