"""Device samplers, one per vendor: the vendor's library first, its tool parsed otherwise.

Every sampler answers ``read() -> DeviceReading`` and never raises: what it cannot get is
``None`` in the sample, or ``unavailable`` with the reason for the whole node.

NVIDIA, equivalent queries:
``nvidia-smi --query-gpu=index,name,utilization.gpu,memory.used,memory.total,uuid
--format=csv,noheader,nounits`` and
``nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits``.

Intel, Ascend, Enflame and Cambricon: their tools, parsed by the probes' parsers
(``tool_samplers.py``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from distrun.accelerators.probes import Runner, ToolFailed, ToolMissing, run_tool
from distrun.accelerators.sessions import AMDSMI, NVML, Importer, Session, import_or_none, open_session
from distrun.accelerators.vendors import SamplerKind, Vendor, vendor_named
from distrun.monitor.samples import DeviceReading, DeviceSample
from distrun.monitor.tool_samplers import TOOL_SAMPLERS

MIB = 2**20
SMI_GPUS = ("nvidia-smi",
            "--query-gpu=index,name,utilization.gpu,memory.used,memory.total,uuid",
            "--format=csv,noheader,nounits")
SMI_APPS = ("nvidia-smi", "--query-compute-apps=gpu_uuid,pid,used_memory",
            "--format=csv,noheader,nounits")


class Sampler(Protocol):
    def read(self) -> DeviceReading: ...

    def close(self) -> None: ...


class NoDevices:
    """CPU jobs, Apple, and vendors without a sampler: per-process CPU use stands in."""

    def __init__(self, why: str = "") -> None:
        self.why = why

    def read(self) -> DeviceReading:
        return DeviceReading(unavailable=self.why)

    def close(self) -> None:
        return None


def _guard(fn: Callable[[], Any], errors: tuple[type[BaseException], ...]) -> Any:
    """The value, or None where the device cannot give it (NotSupported and the like)."""
    try:
        return fn()
    except errors:
        return None


class NvmlSampler:
    """NVML through nvidia-ml-py, over one open session; ``close`` shuts it down."""

    def __init__(self, nvml: Session) -> None:
        self.session = nvml
        self.nvml = nvml.lib
        self.error = nvml.errors

    def read(self) -> DeviceReading:
        try:
            count = self.nvml.nvmlDeviceGetCount()
        except self.error as exc:
            return DeviceReading(source="nvml", unavailable=f"NVML: {exc}")
        return DeviceReading(tuple(self._device(i) for i in range(count)), "nvml")

    def _device(self, index: int) -> DeviceSample:
        nv, err = self.nvml, self.error
        handle = _guard(lambda: nv.nvmlDeviceGetHandleByIndex(index), err)
        if handle is None:
            return DeviceSample(index, source="nvml", note="NVML has no handle for it")
        util = _guard(lambda: nv.nvmlDeviceGetUtilizationRates(handle), err)
        mem = _guard(lambda: nv.nvmlDeviceGetMemoryInfo(handle), err)
        procs = _guard(lambda: nv.nvmlDeviceGetComputeRunningProcesses(handle), err)
        name = _guard(lambda: nv.nvmlDeviceGetName(handle), err) or ""
        return DeviceSample(
            index,
            name.decode() if isinstance(name, bytes) else str(name),
            float(util.gpu) if util is not None else None,
            int(mem.used) if mem is not None else None,
            int(mem.total) if mem is not None else None,
            tuple(int(p.pid) for p in procs) if procs is not None else None,
            "nvml",
        )

    def close(self) -> None:
        self.session.close()


def _number(text: str) -> float | None:
    """nvidia-smi's ``[N/A]`` / ``[Not Supported]`` / ``N/A`` are not available."""
    try:
        return float(text.strip())
    except ValueError:
        return None


def parse_smi(gpus: str, apps: str | None) -> DeviceReading:
    """The two nvidia-smi CSV queries above into samples."""
    pids: dict[str, list[int]] = {}
    for row in csv.reader(io.StringIO(apps or "")):
        if len(row) >= 2 and row[1].strip().isdigit():
            pids.setdefault(row[0].strip(), []).append(int(row[1]))
    out = []
    for row in csv.reader(io.StringIO(gpus)):
        if len(row) < 6 or not row[0].strip().isdigit():
            continue
        used, total = _number(row[3]), _number(row[4])
        out.append(DeviceSample(
            int(row[0]), row[1].strip(), _number(row[2]),
            int(used * MIB) if used is not None else None,
            int(total * MIB) if total is not None else None,
            tuple(pids.get(row[5].strip(), ())) if apps is not None else None,
            "nvidia-smi"))
    return DeviceReading(tuple(out), "nvidia-smi")


class SmiSampler:
    """nvidia-smi, where NVML is not importable."""

    def __init__(self, run: Runner = run_tool) -> None:
        self.run = run

    def read(self) -> DeviceReading:
        try:
            gpus = self.run(SMI_GPUS)
        except (ToolMissing, ToolFailed) as exc:
            return DeviceReading(source="nvidia-smi", unavailable=f"nvidia-smi: {exc}")
        try:
            apps: str | None = self.run(SMI_APPS)
        except (ToolMissing, ToolFailed):
            apps = None
        return parse_smi(gpus, apps)

    def close(self) -> None:
        return None


class AmdSmiSampler:
    """AMD through the ``amdsmi`` library (ROCm), over one open session. VRAM is in MiB."""

    def __init__(self, amdsmi: Session) -> None:
        self.session = amdsmi
        self.lib = amdsmi.lib
        self.error = amdsmi.errors

    def read(self) -> DeviceReading:
        try:
            handles = self.lib.amdsmi_get_processor_handles()
        except self.error as exc:
            return DeviceReading(source="amdsmi", unavailable=f"amdsmi: {exc}")
        return DeviceReading(tuple(self._device(i, h) for i, h in enumerate(handles)), "amdsmi")

    def _device(self, index: int, handle: Any) -> DeviceSample:
        lib, err = self.lib, self.error
        activity = _guard(lambda: lib.amdsmi_get_gpu_activity(handle), err) or {}
        vram = _guard(lambda: lib.amdsmi_get_gpu_vram_usage(handle), err) or {}
        procs = _guard(lambda: lib.amdsmi_get_gpu_process_list(handle), err)
        info = _guard(lambda: lib.amdsmi_get_gpu_asic_info(handle), err) or {}
        return DeviceSample(
            index, str(info.get("market_name", "")), _amd_value(activity.get("gfx_activity")),
            _mib(vram.get("vram_used")), _mib(vram.get("vram_total")),
            tuple(int(p["pid"]) for p in procs if isinstance(p, dict) and "pid" in p)
            if procs is not None else None, "amdsmi")

    def close(self) -> None:
        self.session.close()


def _amd_value(value: Any) -> float | None:
    """amdsmi reports what a device cannot give as the string ``N/A``."""
    return float(value) if isinstance(value, int | float) else None


def _mib(value: Any) -> int | None:
    number = _amd_value(value)
    return int(number * MIB) if number is not None else None


def _nvidia(run: Runner, importer: Importer) -> Sampler:
    nvml = open_session(NVML, importer)
    return NvmlSampler(nvml) if nvml.lib is not None else SmiSampler(run)


def _amd(run: Runner, importer: Importer) -> Sampler:
    amdsmi = open_session(AMDSMI, importer)
    return AmdSmiSampler(amdsmi) if amdsmi.lib is not None else NoDevices(amdsmi.why)


def _tool(vendor: Vendor) -> Callable[[Runner, Importer], Sampler]:
    return lambda run, importer: TOOL_SAMPLERS[vendor.id.value](run)


_BY_KIND: dict[SamplerKind, Callable[[Vendor], Callable[[Runner, Importer], Sampler]]] = {
    SamplerKind.NVML: lambda vendor: _nvidia,
    SamplerKind.AMDSMI: lambda vendor: _amd,
    SamplerKind.XPU_SMI: _tool,
    SamplerKind.TABLE: _tool,
    SamplerKind.NONE: lambda vendor: lambda run, importer: NoDevices(""),
}


def for_vendor(vendor: str, run: Runner = run_tool,
               importer: Importer = import_or_none) -> Sampler:
    """The best sampler this machine offers for ``vendor`` (the vendor table's sampler kind);
    NoDevices with the reason else."""
    row = vendor_named(vendor)
    if row is None:
        return NoDevices(f"no device sampler for {vendor} yet: per-process CPU use stands in")
    return _BY_KIND[row.sampler](row)(run, importer)


def physical(visible: Sequence[int], ordinal: int) -> int | None:
    """The physical index of the ``ordinal``-th visible device (``cuda:1`` -> visible[1])."""
    return visible[ordinal] if 0 <= ordinal < len(visible) else None
