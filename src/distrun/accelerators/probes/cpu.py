"""CPU: always present. Logical CPUs and memory from psutil."""

from __future__ import annotations

from collections.abc import Mapping

import psutil

from distrun.accelerators.inventory import Device
from distrun.accelerators.probes import ProbeResult, Runner
from distrun.accelerators.vendors import VendorId


def probe(env: Mapping[str, str], run: Runner) -> ProbeResult:
    memory = psutil.virtual_memory().total
    device = Device(VendorId.CPU, 0, cpu_name(), memory)
    return ProbeResult(VendorId.CPU, "found", (device,), "psutil")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu"
