"""Preflight over device memory: devices other processes already use, and whether the
planned per-device memory fits what is free. Pure: the caller samples the devices (NVML or
the vendor's tool, see distrun.monitor.devices) and names the processes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from distrun.model.plan import Finding

GIB = 2**30
HOST = "host memory"  # the name of the one "device" of a CPU node


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
        label = HOST if dev.name == HOST else label
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
                        f"{need_bytes / GIB:.1f} GiB"
                        f"{' in all' if dev.name == HOST else ' per device'} by the estimate",
                fix=fix or "shard the model (--sharding zero3 or fsdp-full), lower the "
                           "batch size, or free the device"))
    return out


@dataclass(frozen=True)
class StoredFit:
    """peak = intercept + slope x batch, as the last run of the script measured it on this
    device model (``ctx.estimate_memory`` or ``ctx.find_batch_size``'s trials, stored in the
    cache: distrun.runtime.batchcache), with when and how."""

    intercept: float
    slope: float
    sizes: tuple[int, ...] = ()
    source: str = ""
    time: str = ""

    def need(self, batch: int) -> int:
        return max(0, int(min(self.intercept + self.slope * batch + 0.999, 2.0**62)))


def planned_batch_findings(devices: Sequence[DeviceMemory], batch: int | None,
                           fit: StoredFit | None, *, script: str, per_device: int = 1
                           ) -> list[Finding]:
    """``distrun launch``'s memory preflight (pure): devices other processes hold, and an
    error when the planned per-device ``batch`` does not fit what is free by the ``fit`` the
    last run measured. ``per_device``: processes sharing one device (all ranks of a CPU node
    share its memory). Without a planned batch or a fit only the busy devices are reported,
    and an ``info`` finding says the batch was not checked."""
    if batch is None or fit is None:
        found = memory_findings(devices, None)
        if batch is not None:
            found.append(Finding(
                id="memory-estimate-unknown", severity="info", status="unknown",
                message=f"batch {batch} per device is not checked against memory: no fit "
                        f"of {script}'s memory was measured here yet",
                fix="call ctx.estimate_memory(step, make_batch) (or ctx.find_batch_size) in "
                    "the script once; the next launch checks the batch against that fit"))
        return found
    when = f" on {fit.time[:10]}" if fit.time else ""
    each = f"{per_device} processes x " if per_device > 1 else ""
    what = (f"batch {batch} ({each}{fit.need(batch) / GIB:.2f} GiB by the fit {fit.source} "
            f"measured for {script}{when})")
    free = [d.free_bytes for d in devices if d.free_bytes is not None]
    largest = int(min((min(free) / per_device - fit.intercept) // fit.slope, 2**31 - 1)) \
        if fit.slope > 0 and free else 0
    lower = f"lower the batch to {largest} or less, " if largest >= 1 else ""
    return memory_findings(devices, fit.need(batch) * per_device, what,
                           fix=f"{lower}free memory there, or pass --preset balanced and let "
                               "ctx.plan_batch find the batch")
