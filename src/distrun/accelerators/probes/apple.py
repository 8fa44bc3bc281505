"""Apple silicon: one ``mps`` device when running on macOS arm64. No tool needed."""

from __future__ import annotations

import platform
from collections.abc import Mapping

import psutil

from distrun.accelerators.inventory import Device
from distrun.accelerators.probes import ProbeResult, Runner, absent
from distrun.accelerators.vendors import VendorId


def probe(env: Mapping[str, str], run: Runner) -> ProbeResult:
    return probe_platform(platform.system(), platform.machine())


def probe_platform(system: str, machine: str) -> ProbeResult:
    if system != "Darwin" or machine != "arm64":
        return absent(VendorId.APPLE, f"not macOS on Apple silicon ({system} {machine})")
    memory = psutil.virtual_memory().total  # unified memory, shared with the CPU
    return ProbeResult(VendorId.APPLE, "found", (Device(VendorId.APPLE, 0, "Apple GPU", memory),),
                       "platform")
