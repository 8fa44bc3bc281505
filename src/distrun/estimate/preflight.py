"""Preflight over device memory: devices other processes already use, and whether the
planned per-device memory fits what is free. Pure: the caller samples the devices (NVML or
the vendor's tool, see distrun.monitor.devices) and names the processes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from distrun.model.plan import Finding

GIB = 2**30


@dataclass(frozen=True)
class DeviceMemory:
    """One device as its vendor tool reports it; ``processes``: "pid name" of each holder."""

    index: int
    name: str
    used_bytes: int | None
    total_bytes: int | None
    processes: tuple[str, ...] | None = None

    @property
    def free_bytes(self) -> int | None:
        if self.used_bytes is None or self.total_bytes is None:
            return None
        return self.total_bytes - self.used_bytes


def memory_findings(devices: Sequence[DeviceMemory], need_bytes: int | None,
                    what: str = "the job", fix: str = "") -> list[Finding]:
    """``device-busy`` (warning) per device another process holds, ``memory-unknown`` when
    a device cannot say, ``memory-insufficient`` (error) when ``need_bytes`` exceeds its
    free memory."""
    out: list[Finding] = []
    for dev in devices:
        label = f"device {dev.index} ({dev.name})" if dev.name else f"device {dev.index}"
        if dev.processes:
            used = "" if dev.used_bytes is None else f" {dev.used_bytes / GIB:.1f} GiB"
            out.append(Finding(
                id="device-busy", severity="warning",
                message=f"{label} already holds{used} for other processes: "
                        f"{', '.join(dev.processes)}",
                fix="stop those processes, or give the job other devices (visibility variable)"))
        free = dev.free_bytes
        if need_bytes is None:
            continue
        if free is None:
            out.append(Finding(id="memory-unknown", severity="info", status="unknown",
                               message=f"{label}: its free memory cannot be read",
                               fix="check it with the vendor's tool before launching"))
        elif free < need_bytes:
            out.append(Finding(
                id="memory-insufficient", severity="error",
                message=f"{label}: {free / GIB:.1f} GiB free, {what} needs "
                        f"{need_bytes / GIB:.1f} GiB per device by the estimate",
                fix=fix or "shard the model (--sharding zero3 or fsdp-full), lower the "
                           "batch size, or free the device"))
    return out
