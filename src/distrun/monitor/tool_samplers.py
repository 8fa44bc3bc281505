"""Device samplers that run a vendor's management tool each tick and parse its output with the
probe's own parser (Intel ``xpu-smi``, Ascend ``npu-smi``, Enflame ``efsmi``, Cambricon
``cnmon``). Like every sampler they never raise: what a tool does not show is ``None``.

What each tool gives (from the real outputs in tests/fixtures/tools):

- ``npu-smi info``: ``AICore(%)``, HBM (else DDR) used/total, the pids per NPU and chip.
- ``efsmi``: ``DUsed`` (%) and the memory size; no memory use, no process list.
- ``cnmon``: ``Util`` and ``Memory-Usage`` used/total; pids only as "none run".
- ``xpu-smi discovery -j`` then ``xpu-smi stats -d N -j``: ``XPUM_STATS_GPU_UTILIZATION``
  and ``XPUM_STATS_MEMORY_USED`` (MiB) where the device reports them; the memory size only
  where discovery lists it; no pids (``xpu-smi ps`` is not read).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from distrun.accelerators.inventory import Device
from distrun.accelerators.probes import Runner, ToolFailed, ToolMissing, ascend, cambricon, enflame, run_tool
from distrun.accelerators.probes import intel as xpu
from distrun.accelerators.probes._table import TableError
from distrun.monitor.samples import DeviceReading, DeviceSample

MIB = 2**20
Parse = Callable[[str], tuple[DeviceSample, ...]]


def _tool_output(run: Runner, argv: Sequence[str]) -> tuple[str, str]:
    """The tool's output and "", or "" and why there is none."""
    try:
        return run(argv), ""
    except ToolMissing:
        return "", f"{argv[0]} is not on PATH"
    except ToolFailed as exc:
        return "", f"{argv[0]}: {exc}"


class TableSampler:
    """One tool run per tick, its table parsed into samples."""

    def __init__(self, argv: Sequence[str], parse: Parse, run: Runner = run_tool) -> None:
        self.argv, self.parse, self.run = tuple(argv), parse, run

    def read(self) -> DeviceReading:
        name = self.argv[0]
        out, why = _tool_output(self.run, self.argv)
        if why:
            return DeviceReading(source=name, unavailable=why)
        try:
            samples = self.parse(out)
        except TableError as exc:
            return DeviceReading(source=name, unavailable=f"{name}: {exc}")
        if not samples:
            return DeviceReading(source=name, unavailable=f"{name} lists no device")
        return DeviceReading(samples, name)

    def close(self) -> None:
        return None


def npu_smi_samples(out: str) -> tuple[DeviceSample, ...]:
    procs = ascend.read_processes(out)
    return tuple(
        DeviceSample(c.device.index, c.device.name, c.aicore_percent, c.memory_used_bytes,
                     c.device.memory_bytes,
                     procs.get((c.npu_id, c.chip), ()) if procs is not None else None,
                     "npu-smi")
        for c in ascend.read_chips(out))


def efsmi_samples(out: str) -> tuple[DeviceSample, ...]:
    return tuple(
        DeviceSample(g.device.index, g.device.name, g.dused_percent, None,
                     g.device.memory_bytes, None, "efsmi")
        for g in enflame.read_gcus(out))


def cnmon_samples(out: str) -> tuple[DeviceSample, ...]:
    pids: tuple[int, ...] | None = () if cambricon.runs_no_process(out) else None
    return tuple(
        DeviceSample(c.device.index, c.device.name, c.util_percent, c.memory_used_bytes,
                     c.device.memory_bytes, pids, "cnmon")
        for c in cambricon.read_cards(out))


class XpuSmiSampler:
    """Intel: the device list from ``xpu-smi discovery -j`` (read once it lists devices), then
    ``xpu-smi stats -d N -j`` per device each tick."""

    def __init__(self, run: Runner = run_tool) -> None:
        self.run = run
        self.devices: tuple[Device, ...] = ()

    def read(self) -> DeviceReading:
        if not self.devices:
            out, why = _tool_output(self.run, xpu.DISCOVERY)
            if why:
                return DeviceReading(source="xpu-smi", unavailable=why)
            found = xpu.parse_discovery_json(out)
            if found.status != "found":
                return DeviceReading(source="xpu-smi", unavailable=f"xpu-smi: {found.detail}")
            self.devices = found.devices
        return DeviceReading(tuple(self._sample(d) for d in self.devices), "xpu-smi")

    def _sample(self, device: Device) -> DeviceSample:
        out, why = _tool_output(self.run, xpu.stats_argv(device.index))
        metrics = xpu.parse_stats_json(out) if not why else {}
        util = metrics.get("XPUM_STATS_GPU_UTILIZATION")
        used = metrics.get("XPUM_STATS_MEMORY_USED")
        return DeviceSample(device.index, device.name, util,
                            int(used * MIB) if used is not None else None,
                            device.memory_bytes, None, "xpu-smi", why)

    def close(self) -> None:
        return None


TOOL_SAMPLERS: dict[str, Callable[[Runner], TableSampler | XpuSmiSampler]] = {
    "intel": XpuSmiSampler,
    "ascend": lambda run: TableSampler(ascend.SMI_INFO, npu_smi_samples, run),
    "enflame": lambda run: TableSampler(enflame.EFSMI, efsmi_samples, run),
    "cambricon": lambda run: TableSampler(cambricon.CNMON, cnmon_samples, run),
}
